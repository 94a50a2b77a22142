// Segmentation (U²-Net) on the CPU: Lucent vs ONNX Runtime, same machine, same threads, alternating
// run by run so both see the same load. Prints figures, not pass/fail.
//
//   npm run bench:segment            (= node bench/segmentation/run.mjs)
//   node bench/segmentation/run.mjs [--threads 2] [--rounds 7] [--e2e-rounds 5] [--models u2netp,u2net]
//                                   [--model-dir DIR] [--only map|e2e]
//
// 1. Network only, 320x320: Lucent's network_map (normalisation + the network, native/engine
//    examples/seg_bench.rs in a child process) vs onnxruntime-node's session.run on the same input
//    (bench/onnx/ort-lib.mjs: CPU EP, intra-op threads = --threads, sequential, optimisation 'all').
//    The two maps must agree (max abs difference printed; <= 1e-3 expected).
// 2. End to end on a 12 MP photo (bench-out/segmentation/photo-12mp.jpg, made once: OST_009.png of
//    ../shared/data/photos upscaled to 2900x4143 with Lanczos, a fixed-seed grain of sigma 2 so
//    that it codes like a photo, JPEG q92): bytes in -> matted RGBA PNG + grey mask PNG out.
//    Lucent: lucent_engine::segment::segment (what the addon's segment() and `lucent segment` run;
//    decode, network, bilinear back, guided-filter refinement, two PNGs). ORT: rembg's pipeline in
//    Python (bench/segmentation/rembg_side.py: Pillow decode, Lanczos to 320, onnxruntime, Lanczos
//    back, composite, two PNGs at zlib level 3 with adaptive filters as Lucent's encoder).
// Each case: one warm-up of each, then `rounds` runs A B A B ...; medians and the ratio ORT / Lucent
// (> 1: Lucent faster). Models: u2netp always, u2net where its file is in the model dir.
//
// Needs: onnxruntime-node (ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix bench-out/ort
// onnxruntime-node@1.30.0) and a Python with onnxruntime, pillow and numpy (python3 -m venv
// bench-out/venv && bench-out/venv/bin/pip install onnxruntime pillow numpy; else $PYTHON or
// python3). Model dir: --model-dir, else $LUCENT_MODEL_DIR, else data/test-models.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { loadOrt, median, ortSession } from '../onnx/ort-lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const threads = Number(opt('--threads', '2'));
const rounds = Number(opt('--rounds', '7'));
const e2eRounds = Number(opt('--e2e-rounds', '5'));
const only = opt('--only', null);
const modelDir = opt('--model-dir', process.env.LUCENT_MODEL_DIR ?? 'data/test-models');
const models = opt('--models', 'u2netp,u2net').split(',').filter((m) => existsSync(`${modelDir}/seg/${m}.onnx`));
const out = 'bench-out/segmentation';
const python = process.env.PYTHON ?? (existsSync('bench-out/venv/bin/python') ? 'bench-out/venv/bin/python' : 'python3');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

if (models.length === 0) throw new Error(`no seg/u2netp.onnx in ${modelDir} (npm ci, or lucent models fetch seg/u2netp.onnx)`);
mkdirSync(out, { recursive: true });
let flags = [];
try {
  flags = (readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/);
} catch {}
const simd = ['avx2', 'fma', 'avx512f', 'avx512_bf16', 'amx_bf16'].filter((f) => flags.includes(f)).join(' ') || 'none of avx2/avx512/amx';
console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.availableParallelism()} cores; CPU flags: ${simd}`);
console.log(`threads: ${threads} each; load average at start: ${load()}`);

const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-engine', '--example', 'seg_bench'], { stdio: 'inherit' });
if (build.status !== 0) throw new Error('cargo build failed');

const photo = `${out}/photo-12mp.jpg`;
if (!existsSync(photo)) {
  const code = `
import numpy as np
from PIL import Image
im = Image.open('../shared/data/photos/OST_009.png').convert('RGB').resize((2900, 4143), Image.LANCZOS)
a = np.asarray(im, dtype=np.float32) + np.random.default_rng(7).normal(0, 2, (4143, 2900, 3)).astype(np.float32)
Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8)).save('${photo}', quality=92)
`;
  const r = spawnSync(python, ['-c', code], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`making ${photo} failed (${python} with pillow + numpy?)`);
}

/** A child speaking the one-request-per-line protocol; resolves once it printed `ready`. */
async function child(cmd, args, env = {}) {
  const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${cmd} ended early`);
    return value;
  };
  const first = await next();
  if (!first.startsWith('ready')) throw new Error(`${cmd}: ${first}`);
  return {
    banner: first,
    async ask(req) {
      p.stdin.write(`${req}\n`);
      const a = await next();
      if (!a.startsWith('ms ')) throw new Error(`${cmd}: ${a}`);
      const [, ms, ...rest] = a.split(' ');
      return { ms: Number(ms), rest: rest.map(Number) };
    },
    quit() {
      p.stdin.end('quit\n');
    },
  };
}

/** Alternating timed runs: one warm-up each, then `n` rounds of a() b(). */
async function alternate(n, a, b, pause) {
  await a();
  await b();
  const ta = [];
  const tb = [];
  for (let i = 0; i < n; i++) {
    await sleep(pause);
    ta.push(await a());
    await sleep(pause);
    tb.push(await b());
  }
  return [median(ta), median(tb), ta, tb];
}

const table = [];
const ort = only === 'e2e' ? null : await loadOrt();
if (ort) console.log(`onnxruntime-node ${ort.env.versions.node} (CPU EP, intra-op threads ${threads}, graph optimisation 'all')`);
for (const model of models) {
  const onnx = `${modelDir}/seg/${model}.onnx`;
  const lucent = await child('target/release/examples/seg_bench', ['--model-dir', modelDir, '--model', model, '--threads', String(threads), '--photo', photo, '--dump', out]);
  if (only !== 'e2e') {
    const session = await ortSession(ort, onnx, threads);
    // The same 320x320 photo, normalised as rembg does (x / max, ImageNet mean/std), planar.
    const rgb = readFileSync(`${out}/${model}.rgb320`);
    const n = 320 * 320;
    const max = Math.max(1, rgb.reduce((m, v) => Math.max(m, v), 0)) / 255;
    const mean = [0.485, 0.456, 0.406];
    const std = [0.229, 0.224, 0.225];
    const input = new Float32Array(3 * n);
    for (let i = 0; i < n; i++) for (let c = 0; c < 3; c++) input[c * n + i] = (rgb[i * 3 + c] / 255 / max - mean[c]) / std[c];
    const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input, [1, 3, 320, 320]) };
    const ortOut = (await session.run(feeds))[session.outputNames[0]].data;
    const mine = new Float32Array(readFileSync(`${out}/${model}.map.f32`).buffer.slice(0));
    let diff = 0;
    for (let i = 0; i < n; i++) diff = Math.max(diff, Math.abs(mine[i] - ortOut[i]));
    console.log(`${model} 320x320: Lucent's map vs ORT's: max abs difference ${diff.toExponential(2)}`);
    const l0 = load();
    const [lm, om] = await alternate(
      rounds,
      async () => (await lucent.ask('map')).ms,
      async () => {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        return Number(process.hrtime.bigint() - t0) / 1e6;
      },
      200,
    );
    console.log(`${model} 320x320 network: Lucent ${fmt(lm)}, ORT ${fmt(om)}, ORT/Lucent ${(om / lm).toFixed(2)} (load ${l0} -> ${load()})`);
    table.push([model, '320x320 network only', lm, om]);
    await session.release?.();
  }
  if (only !== 'map') {
    const py = await child(python, ['bench/segmentation/rembg_side.py', onnx, String(threads), out, model]);
    if (model === models[0]) console.log(`ORT side: ${py.banner.slice(6)}`);
    const l0 = load();
    let sizes = '';
    const [lm, om] = await alternate(
      e2eRounds,
      async () => {
        const r = await lucent.ask(`e2e ${photo}`);
        sizes = `Lucent PNGs ${(r.rest[0] / 1e6).toFixed(1)} + ${(r.rest[1] / 1e6).toFixed(2)} MB`;
        return r.ms;
      },
      async () => {
        const r = await py.ask(`e2e ${photo}`);
        sizes += `, ORT ${(r.rest[0] / 1e6).toFixed(1)} + ${(r.rest[1] / 1e6).toFixed(2)} MB`;
        return r.ms;
      },
      500,
    );
    console.log(`${model} 12 MP end to end: Lucent ${fmt(lm)}, ORT (rembg pipeline) ${fmt(om)}, ORT/Lucent ${(om / lm).toFixed(2)} (${sizes}; load ${l0} -> ${load()})`);
    table.push([model, '12 MP photo end to end', lm, om]);
    py.quit();
  }
  lucent.quit();
}

console.log(`\nload average at end: ${load()}`);
console.log('| model | case | Lucent | ONNX Runtime | ORT / Lucent |');
console.log('|---|---|---|---|---|');
for (const [m, c, l, o] of table) console.log(`| ${m} | ${c} | ${fmt(l)} | ${fmt(o)} | ${(o / l).toFixed(2)} |`);
