// Side by side: the Lucent CPU backend vs ONNX Runtime (onnxruntime-node, CPU EP) on the same model,
// input and thread count, alternating run by run so both see the same machine load.
//
//   npm run bench:cpu-vs-ort            (= node bench/onnx/side-by-side.mjs)
//   node bench/onnx/side-by-side.mjs [--threads 2] [--rounds 5] [--x4plus] [--only x4plus]
//
// For each model: converts the ncnn model to ONNX (bench/onnx/ncnn2onnx.py, python3 + `onnx`) unless
// bench-out/<name>.onnx exists, builds and starts `cpu_bench --serve` (our engine, in its own process),
// loads the ONNX model in this process, checks that both outputs agree (PSNR >= 45 dB), then times
// one warm-up and `rounds` runs of each, A B A B ..., with a pause between runs so neither engine's
// idle-spinning threads eat into the other's run. Prints both medians, GFLOP/s (direct-conv FLOPs),
// and the ratio.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadOrt, median, ortRun, ortSession, psnr, readF32 } from './ort-lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const threads = Number(opt('--threads', '2'));
const rounds = Number(opt('--rounds', '5'));
const out = 'bench-out';
const models = [
  { stem: 'sr/realesr-general-x4v3', size: 276 }, // 256 + 10 px reflect pad per side
];
if (argv.includes('--x4plus')) models.push({ stem: 'sr/realesrgan-x4plus', size: 84 }); // 64 + 10 + 10
const only = opt('--only', null);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

mkdirSync(out, { recursive: true });
const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-core', '--example', 'cpu_bench'], { stdio: 'inherit' });
if (build.status !== 0) throw new Error('cargo build failed');
const ort = await loadOrt();

for (const { stem, size } of models.filter((m) => !only || m.stem.includes(only))) {
  const name = stem.split('/').pop();
  const onnxPath = `${out}/${name}.onnx`;
  if (!existsSync(onnxPath)) {
    const r = spawnSync('python3', ['bench/onnx/ncnn2onnx.py', `../shared/models/${stem}`, onnxPath], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('ncnn2onnx failed (pip install onnx?)');
  }
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
  const oursRun = async () => {
    child.stdin.write('run\n');
    const r = await next();
    return Number(r[1]);
  };

  const input = readF32(`${out}/${name}.${size}.in.f32`);
  const ours = readF32(`${out}/${name}.${size}.out.f32`);
  const session = await ortSession(ort, onnxPath, threads);
  const [, ortOut] = await ortRun(ort, session, input, size); // warm-up + check
  const db = psnr(ortOut, ours);
  console.log(`\n${name} ${size}x${size} (${gflop.toFixed(1)} GFLOP direct conv), ${threads} threads; onnxruntime-node ${ort.env.versions.node}`);
  console.log(`output agreement: PSNR ${db.toFixed(1)} dB ${db >= 45 ? 'OK' : 'MISMATCH'}`);
  await oursRun(); // second warm-up of ours (first was the dump run)

  const a = [], b = [];
  for (let i = 0; i < rounds; i++) {
    await sleep(300);
    a.push(await oursRun());
    await sleep(300);
    b.push((await ortRun(ort, session, input, size))[0]);
    console.log(`round ${i + 1}: lucent ${a[i].toFixed(0)} ms, ort ${b[i].toFixed(0)} ms, ratio ${(a[i] / b[i]).toFixed(2)}`);
  }
  child.stdin.end('quit\n');
  const ma = median(a), mb = median(b);
  const ratios = a.map((x, i) => x / b[i]);
  console.log(`lucent cpu : median ${ma.toFixed(0)} ms  ${(gflop / (ma / 1e3)).toFixed(1)} GFLOP/s`);
  console.log(`onnxruntime: median ${mb.toFixed(0)} ms  ${(gflop / (mb / 1e3)).toFixed(1)} GFLOP/s`);
  console.log(`lucent/ort time ratio: median of pairs ${median(ratios).toFixed(2)} (${ma < mb ? 'lucent faster' : 'ort faster'})`);
  if (db < 45) process.exitCode = 1;
}
