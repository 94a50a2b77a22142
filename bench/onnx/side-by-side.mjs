// Side by side: the Lucent CPU backend vs ONNX Runtime (onnxruntime-node, CPU EP) and OpenVINO (CPU
// plugin) on the same model, input and thread count, per precision, alternating run by run so all
// see the same machine load.
//
//   npm run bench:cpu-vs-ort            (= node bench/onnx/side-by-side.mjs)
//   node bench/onnx/side-by-side.mjs [--threads 2] [--rounds 5] [--sizes 64,128,256] [--only x4plus]
//        [--precision fp32,bf16] [--image ../shared/data/photos/OST_009.png] [--openvino PYTHON | --no-openvino]
//
// For realesr-general-x4v3 and RealESRGAN_x4plus at each input size (the network's input, no tile
// padding): converts the ncnn model to ONNX (bench/onnx/ncnn2onnx.py, python3 + `onnx`) unless
// bench-out/<name>.onnx exists, builds `cpu_bench` and starts one `cpu_bench --serve --precision P`
// per precision (our engine, each in its own process; its prepare includes the per-layer
// Winograd/im2col and bf16-vs-fp32 calibration, reported on its stderr), loads the ONNX model into ORT
// in this process (fp32: ORT's CPU EP has no bf16 convolutions) and starts one OpenVINO server per
// precision (bench/onnx/ov-serve.py, INFERENCE_PRECISION_HINT f32 / bf16; its default for this CPU
// is printed), all on the same input (a centre crop of `--image`, else cpu_bench's pseudo-random
// tensor). Every output is compared with our fp32 one as 8-bit images (PSNR, largest level
// difference; ORT must agree with it at >= 45 dB), then one warm-up and `rounds` runs of each,
// A B C ..., with a pause between runs so no engine's idle-spinning threads eat into another's run
// (runs over 5 s: 3 rounds). Prints the machine's ISA (from its CPU flags), the load average before
// and after, the medians of wall time and of CPU time (all the engine's threads, /proc schedstat: on a
// busy machine it follows the work better; spin-waiting counts), GFLOP/s (direct-conv FLOPs), then a
// table per network, size, engine and
// precision with the speed-up over our fp32 and the issue-31 targets (ORT / lucent fp32: x4v3 >= 1.5,
// x4plus >= 1.2).
//
// OpenVINO: `python3 -m venv bench-out/venv && bench-out/venv/bin/pip install openvino numpy onnx`;
// `--openvino` names the Python with it (default bench-out/venv/bin/python where it imports openvino).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { loadOrt, median, ortRun, ortSession, psnr8, readF32 } from './ort-lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const threads = Number(opt('--threads', '2'));
const rounds = Number(opt('--rounds', '5'));
const sizes = opt('--sizes', '64,128,256').split(',').map(Number);
const only = opt('--only', null);
const precisions = opt('--precision', 'fp32,bf16').split(',').map((p) => p.trim()).filter(Boolean);
for (const p of precisions) if (!['fp32', 'bf16', 'int8'].includes(p)) throw new Error(`--precision ${p}: fp32, bf16 or int8`);
const defaultImage = '../shared/data/photos/OST_009.png';
const image = opt('--image', existsSync(defaultImage) ? defaultImage : null);
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
  const amx = flags.filter((f) => f.startsWith('amx'));
  const level = has('avx512f') ? 'AVX-512' : has('avx2') && has('fma') ? 'AVX2+FMA' : 'pre-AVX2';
  return { level, model, detail: [has('avx2') && 'avx2', has('fma') && 'fma', ...avx512, ...amx].filter(Boolean).join(' ') || 'none' };
}

/** A Python that imports openvino, or null (then the OpenVINO columns are left out, with the reason). */
function openvinoPython() {
  if (argv.includes('--no-openvino')) return null;
  const py = opt('--openvino', `${out}/venv/bin/python`);
  const r = spawnSync(py, ['-c', 'import openvino, numpy; print(openvino.get_version())'], { encoding: 'utf8' });
  if (r.status !== 0) {
    console.log(`OpenVINO: not run (${py} cannot import openvino: ${out}/venv/bin/pip install openvino numpy)`);
    return null;
  }
  console.log(`OpenVINO ${r.stdout.trim()} (${py}; CPU plugin, ${threads} inference threads, LATENCY hint, 1 stream)`);
  return py;
}

/**
 * CPU time (ms) of all threads of process `pid` so far, from /proc/PID/task/TID/schedstat (ns): on a
 * busy machine it tracks an engine's work better than wall time (a spin-waiting thread counts too).
 */
function cpuMs(pid) {
  let ns = 0;
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
      } catch {}
    }
  } catch {}
  return ns / 1e6;
}

/** A child speaking the `ready ...` / `run` -> `ms X` line protocol (cpu_bench --serve, ov-serve.py). */
async function serveChild(cmd, args) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${cmd} exited`);
    return value.trim().split(/\s+/);
  };
  const ready = await next();
  if (ready[0] !== 'ready') throw new Error(`${cmd}: ${ready.join(' ')}`);
  return {
    ready,
    pid: child.pid,
    run: async () => {
      child.stdin.write('run\n');
      return Number((await next())[1]);
    },
    close: () => child.stdin.end('quit\n'),
  };
}

const isa = machineIsa();
console.log(`machine: ${isa.model}, ${os.availableParallelism()} cores; ISA from CPU flags: ${isa.level} (${isa.detail})`);
console.log(`threads: ${threads} each; precisions: ${precisions.join(', ')}; input: ${image ? `centre crops of ${image}` : 'pseudo-random'}; load average at start: ${load()}`);

mkdirSync(out, { recursive: true });
const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-core', '--example', 'cpu_bench'], { stdio: 'inherit' });
if (build.status !== 0) throw new Error('cargo build failed');
const ort = await loadOrt();
console.log(`onnxruntime-node ${ort.env.versions.node} (CPU execution provider, intra-op threads ${threads}, graph optimisation 'all'; fp32 only)`);
const ovPython = openvinoPython();

const table = [];
for (const { stem, target } of models) {
  const name = stem.split('/').pop();
  const onnxPath = `${out}/${name}.onnx`;
  if (!existsSync(onnxPath)) {
    const r = spawnSync(ovPython ?? 'python3', ['bench/onnx/ncnn2onnx.py', `../shared/models/${stem}`, onnxPath], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('ncnn2onnx failed (pip install onnx numpy?)');
  }
  const session = await ortSession(ort, onnxPath, threads);
  for (const size of sizes) {
    const engines = [];
    let gflop = 0;
    // Ours, one child per precision (its warm-up run dumps the input and its output: read at once).
    for (const p of precisions) {
      const args = ['--stem', stem, '--size', String(size), '--threads', String(threads), '--dump', out, '--serve', '--precision', p];
      if (image) args.push('--image', image);
      const c = await serveChild('target/release/examples/cpu_bench', args);
      gflop = Number(c.ready[1]);
      engines.push({ engine: 'lucent', precision: p, what: `${c.ready[5] ?? '?'}`, pid: c.pid, run: c.run, close: c.close, out: readF32(`${out}/${name}.${size}.out.f32`) });
    }
    const inPath = `${out}/${name}.${size}.in.f32`;
    const input = readF32(inPath);
    const [, ortOut] = await ortRun(ort, session, input, size); // warm-up + check
    engines.push({ engine: 'onnxruntime', precision: 'fp32', what: 'cpu ep', pid: process.pid, run: async () => (await ortRun(ort, session, input, size))[0], close: () => {}, out: ortOut });
    if (ovPython) {
      for (const p of precisions.filter((q) => q !== 'int8')) {
        const hint = p === 'fp32' ? 'f32' : p;
        const dump = `${out}/${name}.${size}.ov-${hint}.f32`;
        const c = await serveChild(ovPython, ['bench/onnx/ov-serve.py', '--onnx', onnxPath, '--size', String(size), '--threads', String(threads), '--precision', hint, '--input', inPath, '--dump', dump]);
        engines.push({ engine: `openvino ${c.ready[1]}`, precision: p, what: `hint ${c.ready[2]}`, pid: c.pid, run: c.run, close: c.close, out: readF32(dump) });
      }
    }
    const ref = engines.find((e) => e.engine === 'lucent' && e.precision === 'fp32') ?? engines.find((e) => e.engine === 'onnxruntime');
    console.log(`\n${name} ${size}x${size} (${gflop.toFixed(1)} GFLOP direct conv); quality against ${ref.engine} ${ref.precision} (8-bit):`);
    for (const e of engines) {
      e.q = psnr8(ref.out, e.out);
      console.log(`  ${e.engine} ${e.precision} (${e.what}): ${Number.isFinite(e.q.db) ? `PSNR ${e.q.db.toFixed(2)} dB` : 'identical'}, max ${e.q.max} levels`);
    }
    const ortQ = engines.find((e) => e.engine === 'onnxruntime').q;
    if (ortQ.db < 45) {
      console.log(`output agreement ORT vs ours: PSNR ${ortQ.db.toFixed(1)} dB MISMATCH`);
      process.exitCode = 1;
    }
    for (const e of engines) await e.run(); // second warm-up of each
    const firstMs = await engines[0].run();
    const n = firstMs > 5000 ? Math.min(rounds, 3) : rounds;
    for (const e of engines) [e.ms, e.cpu] = [[], []];
    for (let i = 0; i < n; i++) {
      for (const e of engines) {
        await sleep(300);
        const c0 = cpuMs(e.pid);
        e.ms.push(await e.run());
        e.cpu.push(cpuMs(e.pid) - c0);
      }
      console.log(`round ${i + 1}: ${engines.map((e) => `${e.engine.split(' ')[0]} ${e.precision} ${e.ms[i].toFixed(0)} ms (cpu ${e.cpu[i].toFixed(0)})`).join(', ')}`);
    }
    for (const e of engines) e.close();
    const base = engines.find((e) => e.engine === 'lucent' && e.precision === 'fp32');
    for (const e of engines) {
      [e.med, e.medCpu] = [median(e.ms), median(e.cpu)];
      console.log(`${(e.engine + ' ' + e.precision).padEnd(28)} median ${e.med.toFixed(0)} ms (cpu ${e.medCpu.toFixed(0)} ms)  ${(gflop / (e.med / 1e3)).toFixed(1)} GFLOP/s`);
    }
    // Per-round ratios (same load within a round) against our fp32.
    const speedup = (e) => (base ? median(e.ms.map((x, i) => base.ms[i] / x)) : NaN);
    const ortE = engines.find((e) => e.engine === 'onnxruntime');
    const ortRatio = base ? median(ortE.ms.map((x, i) => x / base.ms[i])) : NaN;
    if (base) console.log(`ORT time / lucent fp32 time: median of pairs ${ortRatio.toFixed(2)} (target >= ${target}) load ${load()}`);
    const cpuSpeedup = (e) => (base ? median(e.cpu.map((x, i) => base.cpu[i] / x)) : NaN);
    for (const e of engines) table.push({ name, size, engine: e.engine, precision: e.precision, what: e.what, med: e.med, medCpu: e.medCpu, speedup: speedup(e), cpuSpeedup: cpuSpeedup(e), q: e.q, n, target, ortRatio: e === ortE ? ortRatio : null });
  }
}

console.log(`\nISA from CPU flags: ${isa.level} (${isa.detail}); ${threads} threads each; load average at end: ${load()}`);
console.log('| network | input | engine | precision | median wall / cpu | speed-up vs lucent fp32 (wall / cpu) | PSNR vs lucent fp32 | max diff | runs |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of table) {
  const db = Number.isFinite(r.q.db) ? `${r.q.db.toFixed(1)} dB` : 'identical';
  const tgt = r.ortRatio !== null ? ` (ORT / lucent fp32 ${r.ortRatio.toFixed(2)}, target >= ${r.target}: ${r.ortRatio >= r.target ? 'met' : 'NOT met'})` : '';
  console.log(`| ${r.name} | ${r.size}x${r.size} | ${r.engine} | ${r.precision} (${r.what}) | ${r.med.toFixed(0)} / ${r.medCpu.toFixed(0)} ms | ${r.speedup.toFixed(2)} / ${r.cpuSpeedup.toFixed(2)}${tgt} | ${db} | ${r.q.max} | ${r.n} |`);
}
