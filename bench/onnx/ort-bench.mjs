// ONNX Runtime (onnxruntime-node, CPU EP) on a converted ncnn model, on the exact input our CPU
// backend benchmark dumped; checks the output against ours and prints the median time.
//
//   node bench/onnx/ort-bench.mjs [--model bench-out/realesr-general-x4v3.onnx] [--size 276]
//        [--threads 2] [--runs 5] [--dump bench-out]
// Needs: python3 bench/onnx/ncnn2onnx.py ../shared/models/sr/realesr-general-x4v3 bench-out/realesr-general-x4v3.onnx
//        cargo run --release -p lucent-core --example cpu_bench -- --dump bench-out --runs 1
import { basename } from 'node:path';
import { loadOrt, ortRun, ortSession, psnr, readF32, median } from './ort-lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const model = opt('--model', 'bench-out/realesr-general-x4v3.onnx');
const size = Number(opt('--size', '276'));
const threads = Number(opt('--threads', '2'));
const runs = Number(opt('--runs', '5'));
const dump = opt('--dump', 'bench-out');
const name = basename(model, '.onnx');

const ort = await loadOrt();
const input = readF32(`${dump}/${name}.${size}.in.f32`);
const ours = readF32(`${dump}/${name}.${size}.out.f32`);
const session = await ortSession(ort, model, threads);
const [, first] = await ortRun(ort, session, input, size);
const db = psnr(first, ours);
console.log(`onnxruntime-node ${ort.env.versions.node}: PSNR vs lucent CPU output ${db.toFixed(1)} dB ${db >= 45 ? 'OK' : 'MISMATCH'}`);
const times = [];
for (let i = 0; i < runs; i++) {
  const [ms] = await ortRun(ort, session, input, size);
  times.push(ms);
  console.log(`run: ${ms.toFixed(1)} ms`);
}
console.log(`${name} ${size}x${size}, ${threads} threads: median ${median(times).toFixed(1)} ms of ${runs}`);
if (db < 45) process.exitCode = 1;
