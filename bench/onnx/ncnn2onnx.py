#!/usr/bin/env python3
"""Convert an ncnn model (.param + .bin) to ONNX, for benchmarking the CPU backend against ONNX Runtime.

Usage: python3 bench/onnx/ncnn2onnx.py MODEL_STEM OUT.onnx
  e.g. python3 bench/onnx/ncnn2onnx.py ../shared/models/sr/realesr-general-x4v3 bench-out/realesr-general-x4v3.onnx

Supports the layers of the Real-ESRGAN family: Input, Split, Convolution (with fused relu / leaky relu),
PReLU, ReLU, PixelShuffle, Interp (nearest), BinaryOp add, Eltwise sum (with coefficients), Concat.
The graph input is named "data", float32 [1, C, H, W] with symbolic H, W; the output is "output".
A benchmark tool only: the weights stay in the ncnn files; the .onnx goes to a git-ignored folder.
"""
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TAG_F16 = 0x01306B47
TAG_F32 = 0x0002C056


def parse_value(s):
    if any(ch in s for ch in ".eE") and not s.lstrip("-").isdigit():
        return float(s)
    return int(s)


def parse_param(path):
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    if lines[0] != "7767517":
        raise SystemExit(f"{path}: bad magic {lines[0]!r}")
    layers = []
    for ln in lines[2:]:
        tok = ln.split()
        kind, name, nb, nt = tok[0], tok[1], int(tok[2]), int(tok[3])
        bottoms = tok[4:4 + nb]
        tops = tok[4 + nb:4 + nb + nt]
        params = {}
        for kv in tok[4 + nb + nt:]:
            k, v = kv.split("=", 1)
            k = int(k)
            if k <= -23300:  # array: -233KK=count,v1,v2,...
                vals = v.split(",")
                params[-k - 23300] = [parse_value(x) for x in vals[1:1 + int(vals[0])]]
            else:
                params[k] = parse_value(v)
        layers.append((kind, name, bottoms, tops, params))
    return layers


class Bin:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.b = f.read()
        self.pos = 0

    def raw(self, n):
        a = np.frombuffer(self.b, dtype="<f4", count=n, offset=self.pos).astype(np.float32)
        self.pos += 4 * n
        return a

    def tagged(self, n):
        (tag,) = struct.unpack_from("<I", self.b, self.pos)
        self.pos += 4
        if tag == TAG_F16:
            a = np.frombuffer(self.b, dtype="<f2", count=n, offset=self.pos).astype(np.float32)
            self.pos += (2 * n + 3) & ~3
            return a
        if tag in (0, TAG_F32):
            return self.raw(n)
        raise SystemExit(f"unsupported weight storage tag {tag:#x} at offset {self.pos - 4}")


def convert(stem, out_path):
    layers = parse_param(stem + ".param")
    wb = Bin(stem + ".bin")
    nodes, inits = [], []
    alias = {}  # ncnn blob name -> onnx value name (Split outputs)
    graph_inputs, produced, consumed = [], [], set()
    uid = [0]

    def fresh(prefix):
        uid[0] += 1
        return f"{prefix}_{uid[0]}"

    def inp(b):
        name = alias.get(b, b)
        consumed.add(name)
        return name

    def const(prefix, arr):
        n = fresh(prefix)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), n))
        return n

    def act_node(kind, params, x, y):
        a = params.get(9, 0)
        ap = params.get(10, [])
        if a == 0:
            return False
        if a == 1:
            nodes.append(helper.make_node("Relu", [x], [y]))
        elif a == 2:
            nodes.append(helper.make_node("LeakyRelu", [x], [y], alpha=float(ap[0])))
        elif a == 4:
            nodes.append(helper.make_node("Sigmoid", [x], [y]))
        else:
            raise SystemExit(f"activation type {a} is not supported")
        return True

    for kind, name, bottoms, tops, p in layers:
        if kind == "Input":
            graph_inputs.append(helper.make_tensor_value_info(tops[0], TensorProto.FLOAT, [1, 3, "H", "W"]))
        elif kind == "Split":
            for t in tops:
                alias[t] = inp(bottoms[0])
        elif kind == "Convolution":
            nout = p[0]
            kw = p.get(1, 0)
            kh = p.get(11, kw)
            dw = p.get(2, 1)
            dh = p.get(12, dw)
            sw = p.get(3, 1)
            sh = p.get(13, sw)
            pl = p.get(4, 0)
            pt = p.get(14, pl)
            pr = p.get(15, pl)
            pb = p.get(16, pt)
            if min(pl, pt, pr, pb) < 0:
                raise SystemExit(f"{name}: 'same' padding is not supported")
            if p.get(18, 0.0) != 0.0:
                raise SystemExit(f"{name}: non-zero pad value is not supported")
            wsize = p[6]
            nin = wsize // (nout * kw * kh)
            w = wb.tagged(wsize).reshape(nout, nin, kh, kw)
            ins = [inp(bottoms[0]), const(name + "_w", w)]
            if p.get(5, 0):
                ins.append(const(name + "_b", wb.raw(nout)))
            has_act = p.get(9, 0) != 0
            y = fresh(name) if has_act else tops[0]
            nodes.append(helper.make_node("Conv", ins, [y], kernel_shape=[kh, kw], strides=[sh, sw],
                                          dilations=[dh, dw], pads=[pt, pl, pb, pr], name=name))
            if has_act:
                act_node(kind, p, y, tops[0])
        elif kind == "PReLU":
            n = p.get(0, 1)
            s = wb.raw(n).reshape(n, 1, 1) if n > 1 else wb.raw(1)
            nodes.append(helper.make_node("PRelu", [inp(bottoms[0]), const(name + "_s", s)], tops, name=name))
        elif kind == "ReLU":
            slope = float(p.get(0, 0.0))
            if slope == 0.0:
                nodes.append(helper.make_node("Relu", [inp(bottoms[0])], tops, name=name))
            else:
                nodes.append(helper.make_node("LeakyRelu", [inp(bottoms[0])], tops, alpha=slope, name=name))
        elif kind == "PixelShuffle":
            if p.get(1, 0) != 0:
                raise SystemExit(f"{name}: PixelShuffle mode {p.get(1)} is not supported")
            nodes.append(helper.make_node("DepthToSpace", [inp(bottoms[0])], tops, blocksize=p[0], mode="CRD", name=name))
        elif kind == "Interp":
            if p.get(0, 0) != 1 or p.get(3, 0) or p.get(4, 0):
                raise SystemExit(f"{name}: only scale-factor nearest Interp is supported")
            scales = np.array([1.0, 1.0, p[1], p[2]], dtype=np.float32)
            # ncnn nearest: source index = floor(dst * (in / out)) -> asymmetric + floor
            nodes.append(helper.make_node("Resize", [inp(bottoms[0]), "", const(name + "_scales", scales)], tops,
                                          mode="nearest", coordinate_transformation_mode="asymmetric",
                                          nearest_mode="floor", name=name))
        elif kind == "BinaryOp":
            if p.get(0, 0) != 0 or p.get(1, 0) != 0:
                raise SystemExit(f"{name}: only tensor + tensor BinaryOp is supported")
            nodes.append(helper.make_node("Add", [inp(bottoms[0]), inp(bottoms[1])], tops, name=name))
        elif kind == "Eltwise":
            if p.get(0, 1) != 1:
                raise SystemExit(f"{name}: only Eltwise sum is supported")
            coeffs = p.get(1, [])
            terms = []
            for i, b in enumerate(bottoms):
                x = inp(b)
                c = float(coeffs[i]) if i < len(coeffs) else 1.0
                if c != 1.0:
                    y = fresh(name + "_scaled")
                    nodes.append(helper.make_node("Mul", [x, const(name + "_c", np.array(c, dtype=np.float32))], [y]))
                    x = y
                terms.append(x)
            acc = terms[0]
            for i, t in enumerate(terms[1:]):
                y = tops[0] if i == len(terms) - 2 else fresh(name + "_acc")
                nodes.append(helper.make_node("Add", [acc, t], [y]))
                acc = y
        elif kind == "Concat":
            axis = p.get(0, 0)
            nodes.append(helper.make_node("Concat", [inp(b) for b in bottoms], tops, axis=axis + 1 if axis >= 0 else axis, name=name))
        else:
            raise SystemExit(f"layer type {kind} ({name}) is not supported")
        produced.extend(tops)

    if wb.pos != len(wb.b):
        raise SystemExit(f"{len(wb.b) - wb.pos} bytes of weights left over: the layer list does not match the .bin")
    outs = [t for t in produced if t not in alias and alias.get(t, t) not in consumed and t not in consumed]
    graph = helper.make_graph(nodes, "ncnn:" + stem.split("/")[-1], graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, "C_out", "H_out", "W_out"]) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lucent-ncnn2onnx")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    print(f"{out_path}: {len(nodes)} nodes, outputs {outs}, {sum(i.ByteSize() for i in inits) / 1e6:.1f} MB of weights")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(sys.argv[1], sys.argv[2])
