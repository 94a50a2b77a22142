// Side by side: the Lucent CPU backend vs ONNX Runtime (onnxruntime-node, CPU EP) on the same model,
// input and thread count, alternating run by run so both see the same machine load.
//
//   npm run bench:cpu-vs-ort            (= node bench/onnx/side-by-side.mjs)
//   node bench/onnx/side-by-side.mjs [--threads 2] [--rounds 5] [--sizes 64,128,256] [--only x4plus]
//
// For realesr-general-x4v3 and RealESRGAN_x4plus at each input size (the network's input, no tile
// padding): converts the ncnn model to ONNX (bench/onnx/ncnn2onnx.py, python3 + `onnx`) unless
// bench-out/<name>.onnx exists, builds and starts `cpu_bench --serve` (our engine, in its own process;
// its prepare includes the per-layer Winograd/im2col calibration, reported on its stderr), loads the
// ONNX model in this process, checks that both outputs agree (PSNR >= 45 dB), then times one warm-up
// and `rounds` runs of each, A B A B ..., with a pause between runs so neither engine's idle-spinning
// threads eat into the other's run (runs over 5 s: 3 rounds). Prints the machine's ISA (from its CPU
// flags), the load average before and after, both medians, GFLOP/s (direct-conv FLOPs) and the
// ratio ORT time / ours (> 1: ours faster), then a table with the targets (x4v3 >= 1.5,
// x4plus >= 1.2).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { loadOrt, median, ortRun, ortSession, psnr, readF32 } from './ort-lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const threads = Number(opt('--threads', '2'));
const rounds = Number(opt('--rounds', '5'));
const sizes = opt('--sizes', '64,128,256').split(',').map(Number);
const only = opt('--only', null);
const out = 'bench-out';
const models = [
  { stem: 'sr/realesr-general-x4v3', target: 1.5 },
  { stem: 'sr/realesrgan-x4plus', target: 1.2 },
].filter((m) => !only || m.stem.includes(only));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');

/** The SIMD level of this machine from its CPU flags (what /proc/cpuinfo says, not what we use). */
function machineIsa() {
  let flags = [];
  let model = os.cpus()[0]?.model ?? 'unknown CPU';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    flags = (info.match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/);
  } catch {}
  const has = (f) => flags.includes(f);
  const avx512 = flags.filter((f) => f.startsWith('avx512'));
  const level = has('avx512f') ? 'AVX-512' : has('avx2') && has('fma') ? 'AVX2+FMA' : 'pre-AVX2';
  return { level, model, detail: [has('avx2') && 'avx2', has('fma') && 'fma', ...avx512].filter(Boolean).join(' ') || 'none' };
}

const isa = machineIsa();
console.log(`machine: ${isa.model}, ${os.availableParallelism()} cores; ISA from CPU flags: ${isa.level} (${isa.detail})`);
console.log(`threads: ${threads} each; load average at start: ${load()}`);

mkdirSync(out, { recursive: true });
const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-core', '--example', 'cpu_bench'], { stdio: 'inherit' });
if (build.status !== 0) throw new Error('cargo build failed');
const ort = await loadOrt();
console.log(`onnxruntime-node ${ort.env.versions.node} (CPU execution provider, intra-op threads ${threads}, graph optimisation 'all')`);

const table = [];
for (const { stem, target } of models) {
  const name = stem.split('/').pop();
  const onnxPath = `${out}/${name}.onnx`;
  if (!existsSync(onnxPath)) {
    const r = spawnSync('python3', ['bench/onnx/ncnn2onnx.py', `../shared/models/${stem}`, onnxPath], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('ncnn2onnx failed (pip install onnx numpy?)');
  }
  const session = await ortSession(ort, onnxPath, threads);
  for (const size of sizes) {
    // Our engine, as a child serving `run` requests (its warm-up run dumps the input and output).
    const child = spawn('target/release/examples/cpu_bench', ['--stem', stem, '--size', String(size), '--threads', String(threads), '--dump', out, '--serve'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async () => {
      const { value, done } = await lines.next();
      if (done) throw new Error('cpu_bench exited');
      return value.trim().split(/\s+/);
    };
    const ready = await next();
    if (ready[0] !== 'ready') throw new Error(`cpu_bench: ${ready.join(' ')}`);
    const gflop = Number(ready[1]);
    const ourIsa = ready[5] ?? '?';
    const oursRun = async () => {
      child.stdin.write('run\n');
      const r = await next();
      return Number(r[1]);
    };
    const input = readF32(`${out}/${name}.${size}.in.f32`);
    const ours = readF32(`${out}/${name}.${size}.out.f32`);
    const [, ortOut] = await ortRun(ort, session, input, size); // warm-up + check
    const db = psnr(ortOut, ours);
    console.log(`\n${name} ${size}x${size} (${gflop.toFixed(1)} GFLOP direct conv); lucent on ${ourIsa}`);
    console.log(`output agreement: PSNR ${db.toFixed(1)} dB ${db >= 45 ? 'OK' : 'MISMATCH'}`);
    const first = await oursRun(); // second warm-up of ours (first was the dump run)
    const n = first > 5000 ? Math.min(rounds, 3) : rounds;
    const a = [], b = [];
    for (let i = 0; i < n; i++) {
      await sleep(300);
      a.push(await oursRun());
      await sleep(300);
      b.push((await ortRun(ort, session, input, size))[0]);
      console.log(`round ${i + 1}: lucent ${a[i].toFixed(0)} ms, ort ${b[i].toFixed(0)} ms, ort/lucent ${(b[i] / a[i]).toFixed(2)}`);
    }
    child.stdin.end('quit\n');
    const ma = median(a), mb = median(b);
    const ratio = median(a.map((x, i) => b[i] / x));
    console.log(`lucent cpu : median ${ma.toFixed(0)} ms  ${(gflop / (ma / 1e3)).toFixed(1)} GFLOP/s`);
    console.log(`onnxruntime: median ${mb.toFixed(0)} ms  ${(gflop / (mb / 1e3)).toFixed(1)} GFLOP/s`);
    console.log(`ORT time / lucent time: median of pairs ${ratio.toFixed(2)} (target >= ${target}) load ${load()}`);
    table.push({ name, size, ma, mb, ratio, target, n, db });
    if (db < 45) process.exitCode = 1;
  }
}

console.log(`\nISA from CPU flags: ${isa.level} (${isa.detail}); ${threads} threads each; load average at end: ${load()}`);
console.log('| network | input | lucent median | ORT median | ORT / lucent | target | runs |');
console.log('|---|---|---|---|---|---|---|');
for (const r of table) {
  const ok = r.ratio >= r.target ? 'met' : 'NOT met';
  console.log(`| ${r.name} | ${r.size}x${r.size} | ${r.ma.toFixed(0)} ms | ${r.mb.toFixed(0)} ms | ${r.ratio.toFixed(2)} | >= ${r.target} ${ok} | ${r.n} |`);
}
