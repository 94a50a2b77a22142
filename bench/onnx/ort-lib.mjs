// Shared helpers for the ONNX Runtime side of the CPU benchmark.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

/**
 * onnxruntime-node from the project's node_modules, or else from a private install under
 * bench-out/ort (ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix bench-out/ort onnxruntime-node@1.30.0),
 * which a plain `npm install` of the project does not prune.
 */
export async function loadOrt() {
  try {
    return await import('onnxruntime-node');
  } catch (e) {
    try {
      return createRequire(resolve('bench-out/ort/package.json'))('onnxruntime-node');
    } catch {
      throw new Error(`onnxruntime-node is not installed (ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix bench-out/ort onnxruntime-node@1.30.0): ${e.message}`);
    }
  }
}

export function readF32(path) {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** PSNR in dB of two outputs in 0..1 (each value clamped first, as the pipeline does). */
export function psnr(a, b) {
  if (a.length !== b.length) throw new Error(`length mismatch ${a.length} vs ${b.length}`);
  let se = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.min(1, Math.max(0, a[i])) - Math.min(1, Math.max(0, b[i]));
    se += d * d;
  }
  const mse = se / a.length;
  return mse === 0 ? Infinity : 10 * Math.log10(1 / mse);
}

export function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
}

/** An ORT session like the reference: CPU EP, `threads` intra-op threads, sequential, all graph optimisations. */
export async function ortSession(ort, modelPath, threads) {
  return ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
}

/** One timed run; returns [ms, output data]. */
export async function ortRun(ort, session, input, size) {
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input, [1, 3, size, size]) };
  const t0 = process.hrtime.bigint();
  const out = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return [ms, out[session.outputNames[0]].data];
}

/** PSNR in dB and the largest level difference of two outputs in 0..1 as 8-bit images (clamped, rounded to 1/255). */
export function psnr8(a, b) {
  if (a.length !== b.length) throw new Error(`length mismatch ${a.length} vs ${b.length}`);
  const q = (v) => Math.round(Math.min(1, Math.max(0, v)) * 255);
  let se = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(q(a[i]) - q(b[i]));
    se += d * d;
    if (d > max) max = d;
  }
  const mse = se / a.length;
  return { db: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse), max };
}
