#!/usr/bin/env python3
"""OpenVINO peer of `cpu_bench --serve` for bench/onnx/side-by-side.mjs (same line protocol).

    bench-out/venv/bin/python bench/onnx/ov-serve.py --onnx bench-out/realesr-general-x4v3.onnx \
        --size 128 --threads 2 --precision f32|bf16|default --input IN.f32 --dump OUT.f32

Reads the ONNX model (symbolic H/W, made static at 1x3xSIZExSIZE before compiling), compiles it for the
CPU plugin with `--threads` inference threads, the LATENCY performance hint and the given
INFERENCE_PRECISION_HINT (`default`: none given, OpenVINO's own choice for this CPU: bf16 where the CPU has
AMX or AVX512-BF16), runs the raw little-endian f32 input once (warm-up; its output goes to `--dump`), then
prints `ready <version> <precision the compiled model reports>` and answers each `run` line on stdin with
`ms <milliseconds>`; `quit` or EOF ends it. Needs `pip install openvino numpy` (a venv under bench-out/).
"""
import argparse
import sys
import time

import numpy as np
import openvino as ov


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16", "default"])
    ap.add_argument("--input", required=True)
    ap.add_argument("--dump")
    a = ap.parse_args()

    core = ov.Core()
    model = core.read_model(a.onnx)
    model.reshape({model.inputs[0].get_any_name(): [1, 3, a.size, a.size]})
    config = {"INFERENCE_NUM_THREADS": a.threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    if a.precision != "default":
        config["INFERENCE_PRECISION_HINT"] = a.precision
    compiled = core.compile_model(model, "CPU", config)
    hint = compiled.get_property("INFERENCE_PRECISION_HINT")
    got = hint.to_string() if hasattr(hint, "to_string") else str(hint)
    req = compiled.create_infer_request()
    x = np.fromfile(a.input, dtype="<f4").reshape(1, 3, a.size, a.size)

    def once():
        t = time.perf_counter()
        req.infer({0: x})
        ms = (time.perf_counter() - t) * 1e3
        return ms, req.get_output_tensor(0).data

    _, out = once()
    if a.dump:
        np.ascontiguousarray(out, dtype="<f4").tofile(a.dump)
    print(f"ready {ov.get_version().split('-')[0]} {got}", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            ms, _ = once()
            print(f"ms {ms:.3f}", flush=True)
        elif cmd in ("quit", ""):
            break
        else:
            print(f"unknown command {cmd!r}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
