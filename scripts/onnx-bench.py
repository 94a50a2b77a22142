#!/usr/bin/env python3
"""onnxruntime's time for an ONNX model at a thread count, to set beside
`cargo run --release -p lucent-models --example onnx_bench -- MODEL THREADS RUNS SIDE`.
Usage: onnx-bench.py MODEL.onnx [THREADS] [RUNS] [SIDE]  (a venv with onnxruntime numpy)."""
import sys
import time

import numpy as np
import onnxruntime as ort

path = sys.argv[1]
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
side = int(sys.argv[4]) if len(sys.argv) > 4 else 320
o = ort.SessionOptions()
o.intra_op_num_threads = threads
o.inter_op_num_threads = 1
s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
inp = s.get_inputs()[0]
shape = [d if isinstance(d, int) else side for d in inp.shape]
shape[0] = 1
x = np.full(shape, 0.5, dtype=np.float32)
times = []
for r in range(runs + 1):
    t = time.perf_counter()
    s.run(None, {inp.name: x})
    dt = time.perf_counter() - t
    print(f"run {r}{' (warm-up)' if r == 0 else ''} {dt:.3f} s")
    if r:
        times.append(dt)
times.sort()
print(f"onnxruntime {ort.__version__}, {threads} threads, {shape[3]}x{shape[2]}: median {times[len(times) // 2]:.3f} s")
