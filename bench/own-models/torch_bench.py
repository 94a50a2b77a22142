#!/usr/bin/env python3
"""torch + spandrel side of `npm run bench:own-models` (bench/own-models/run.mjs): one model file
(made by `cargo run --release -p lucent-models --example own_models_bench -- --make DIR`), loaded with
spandrel's ModelLoader as a user's file would be, run on CPU in float32 under
torch.inference_mode() with torch.set_num_threads(--threads), on DIR/input.<size>.f32 (planar RGB,
the same input the Lucent side reads).

    python torch_bench.py --model bench-out/own-models/span.safetensors --size 128 --threads 2 [--runs 5]
    python torch_bench.py --model FILE --size 128 --threads 2 --dump OUT.f32 --serve

Without --serve: one warm-up, --runs runs, prints the median ms per run and per output megapixel.
With --serve (what run.mjs uses): a warm-up run (its output to --dump), then `ready ...` on stdout;
each `run` line on stdin is answered with `ms <time>`; `quit` ends it.

Needs torch and spandrel (PyPI): python3 -m venv /tmp/byom-venv && /tmp/byom-venv/bin/pip install torch spandrel
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

import spandrel
from spandrel import ModelLoader


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dump")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    desc = ModelLoader(device="cpu").load_from_file(a.model)
    # The files are float32 already. No `.float()`: on this torch 2.15 + spandrel 0.4.2 that no-op
    # cast made SPAN ~5x slower (2.5-3 s instead of ~0.5 s per 128x128 run).
    model = desc.model.eval()
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.float32}, f"parameters are {dtypes}, not float32"
    inp = os.path.join(os.path.dirname(a.model), f"input.{a.size}.f32")
    x = torch.from_numpy(np.fromfile(inp, dtype="<f4").reshape(1, 3, a.size, a.size).copy())
    out_px = a.size * desc.scale * a.size * desc.scale

    def run() -> tuple[float, torch.Tensor]:
        with torch.inference_mode():
            t0 = time.perf_counter()
            y = model(x)
            return (time.perf_counter() - t0) * 1e3, y

    _, y = run()
    if a.dump:
        y[0].contiguous().numpy().astype("<f4").tofile(a.dump)
    info = f"torch {torch.__version__} spandrel {spandrel.__version__} {desc.architecture.name} x{desc.scale}"
    if a.serve:
        print(f"ready {out_px} threads {torch.get_num_threads()} {info}", flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "run":
                print(f"ms {run()[0]:.3f}", flush=True)
            elif cmd in ("quit", ""):
                break
            else:
                raise SystemExit(f"unknown command {cmd!r}")
        return 0
    t = [run()[0] for _ in range(a.runs)]
    med = statistics.median(t)
    print(f"{info}: {a.size}x{a.size}: median {med:.1f} ms, {med / (out_px / 1e6):.1f} ms/MP ({torch.get_num_threads()} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
