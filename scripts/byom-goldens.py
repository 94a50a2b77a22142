#!/usr/bin/env python3
"""Goldens for "bring your own model" (native/models): small random-initialised models of each
supported architecture (ESRGAN/RRDBNet incl. ESRGAN+ and the pixel-unshuffle variants, Real-ESRGAN
Compact, SPAN, RealPLKSR, SwinIR, DAT, SAFMN, HAT), built with spandrel's own architecture classes, saved by torch in each
checkpoint format (zip, legacy, safetensors; f32/f16/bf16; params_ema/params/module. wrappers;
old and new RRDBNet key styles), with torch's outputs on a fixed random input and a real image
crop, and what spandrel detects when it loads each saved file (index.json). detect.json holds the
keys and shapes of real-size models (Real-ESRGAN x4plus/x2plus, realesr-general-x4v3, SPAN 48,
RealPLKSR 64, SwinIR-M/S/L ...) with spandrel's detection, no weights (DAT is left out: its
window size is read from the values of a buffer, not from a shape).

Needs torch, spandrel, safetensors, numpy and pillow (all from PyPI):
    python3 -m venv /tmp/byom-venv && /tmp/byom-venv/bin/pip install torch spandrel numpy safetensors
    /tmp/byom-venv/bin/python scripts/byom-goldens.py
    /tmp/byom-venv/bin/python scripts/byom-goldens.py --only safmn_x2_d16_nb2 safmn_x4_d8_nb1_h12

Rewrites native/models/tests/goldens/ (index.json, detect.json, *.pth, *.safetensors, *.f32);
with --only NAME..., writes only those configs' files and replaces (or appends) their entries in
the existing index.json, leaving every other file as it is (the same torch and spandrel versions
only). The Rust tests (cargo test -p lucent-models) compare against them without torch. Seeded: a rerun
with the same torch and spandrel versions gives the same files, except the legacy-format .pth
ones, whose storage keys torch takes from memory addresses (same tensors, other key strings).
"""
from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file

import spandrel
from spandrel import ModelLoader
from spandrel.architectures.Compact import Compact
from spandrel.architectures.DAT import DAT
from spandrel.architectures.ESRGAN import ESRGAN
from spandrel.architectures.HAT import HAT
from spandrel.architectures.PLKSR import RealPLKSR
from spandrel.architectures.SAFMN import SAFMN
from spandrel.architectures.SPAN import SPAN
from spandrel.architectures.SwinIR import SwinIR
from spandrel.__helpers.size_req import pad_tensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "native", "models", "tests", "goldens")
REAL = os.path.join(ROOT, "native", "core", "tests", "golden", "x4plus_ost009_ref.png")


def esrgan_new_keys(sd: dict, upsamples: int) -> OrderedDict:
    """Old-style RRDBNet keys (model.N...) to the Real-ESRGAN / BasicSR spelling."""
    nb = 1 + max(int(k.split(".")[3]) for k in sd if k.startswith("model.1.sub.") and ".RDB" in k)
    n = 3 * upsamples
    out = OrderedDict()
    for k, v in sd.items():
        p = k.split(".")
        if p[0:2] == ["model", "0"]:
            nk = f"conv_first.{p[2]}"
        elif p[0:3] == ["model", "1", "sub"] and p[3] == str(nb):
            nk = f"conv_body.{p[4]}"
        elif p[0:3] == ["model", "1", "sub"]:
            nk = f"body.{p[3]}.{p[4].lower()}.{p[5]}.{p[7]}"
        elif int(p[1]) == n + 2:
            nk = f"conv_hr.{p[2]}"
        elif int(p[1]) == n + 4:
            nk = f"conv_last.{p[2]}"
        else:
            nk = f"conv_up{int(p[1]) // 3}.{p[2]}"
        out[nk] = v
    return out


# name, constructor, kwargs, input (h, w), saves: list of (format, wrapper, key style, dtype)
CONFIGS = [
    ("esrgan_x4_nf8_nb1", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=8, num_blocks=1, scale=4), (16, 12),
     [("zip", None, "old", "f32")]),
    ("esrgan_x2_nf8_nb2", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=8, num_blocks=2, scale=2), (16, 12),
     [("legacy", "params_ema", "new", "f16")]),
    ("esrgan_x8_nf8_nb1", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=8, num_blocks=1, scale=8), (8, 6),
     [("zip", "params", "new", "bf16")]),
    ("esrgan_x1_nf4_nb1", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=4, num_blocks=1, scale=1), (16, 12),
     [("safetensors", "module", "old", "f16")]),
    # Real-ESRGAN x2plus layout: pixel-unshuffle by 2 into a 4x RRDBNet.
    ("esrgan_unshuffle2_x2_nf8_nb1", ESRGAN, dict(in_nc=12, out_nc=3, num_filters=8, num_blocks=1, scale=4, shuffle_factor=2), (16, 12),
     [("zip", "params_ema", "new", "f16")]),
    # 1x models: pixel-unshuffle by 4 into a 4x RRDBNet.
    ("esrgan_unshuffle4_x1_nf4_nb1", ESRGAN, dict(in_nc=48, out_nc=3, num_filters=4, num_blocks=1, scale=4, shuffle_factor=4), (16, 12),
     [("safetensors", None, "new", "f16")]),
    ("esrgan_plus_x4_nf4_nb1", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=4, num_blocks=1, scale=4, plus=True), (16, 12),
     [("zip", None, "old", "f16")]),
    ("compact_x4_nf16_nc2", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=16, num_conv=2, upscale=4), (16, 12),
     [("zip", None, None, "f32"), ("legacy", None, None, "f32"), ("safetensors", None, None, "f32"), ("zip", "params", None, "f16")]),
    ("compact_x2_nf24_nc4", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=24, num_conv=4, upscale=2), (16, 12),
     [("safetensors", None, None, "bf16"), ("zip", "module", None, "bf16")]),
    ("compact_x1_nf8_nc1", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=8, num_conv=1, upscale=1), (16, 12),
     [("zip", None, None, "f32")]),
    ("span_x4_f8", SPAN, dict(num_in_ch=3, num_out_ch=3, feature_channels=8, upscale=4), (16, 12),
     [("zip", None, None, "f32"), ("safetensors", None, None, "f16"), ("legacy", "params_ema", None, "f16")]),
    ("span_x2_f6_nonorm", SPAN, dict(num_in_ch=3, num_out_ch=3, feature_channels=6, upscale=2, norm=False), (16, 12),
     [("safetensors", None, None, "f32")]),
    ("realplksr_x2_d16_nb2_k7", RealPLKSR, dict(dim=16, n_blocks=2, upscaling_factor=2, kernel_size=7, split_ratio=0.25, layer_norm=True), (16, 12),
     [("zip", None, None, "f32"), ("safetensors", None, None, "f16")]),
    ("realplksr_x4_d12_nb1_k9_noea", RealPLKSR, dict(dim=12, n_blocks=1, upscaling_factor=4, kernel_size=9, split_ratio=0.25, use_ea=False, layer_norm=True), (16, 12),
     [("safetensors", "module", None, "f32")]),
    ("realplksr_x1_d8_nb1_k5", RealPLKSR, dict(dim=8, n_blocks=1, upscaling_factor=1, kernel_size=5, split_ratio=0.5, layer_norm=True), (16, 12),
     [("legacy", "params_ema", None, "f32")]),
    # SwinIR: window sizes 4/6/7/8, shifted windows with the mask (img_size > window), inputs that
    # are no multiple of the window (reflect pad + crop), all four upsamplers, 1conv/3conv.
    ("swinir_x1_ps_w4", SwinIR, dict(img_size=16, embed_dim=8, depths=[2], num_heads=[2], window_size=4, mlp_ratio=2.0,
     upscale=1, upsampler="pixelshuffle"), (13, 10), [("zip", "params_ema", None, "bf16")]),
    ("swinir_x4_direct_w8_3conv", SwinIR, dict(img_size=16, embed_dim=12, depths=[1, 1], num_heads=[3, 2], window_size=8, mlp_ratio=2.0,
     upscale=4, upsampler="pixelshuffledirect", resi_connection="3conv"), (9, 10), [("safetensors", None, None, "bf16")]),
    ("swinir_x3_direct_w6", SwinIR, dict(img_size=12, embed_dim=8, depths=[3], num_heads=[2], window_size=6, mlp_ratio=1.5,
     upscale=3, upsampler="pixelshuffledirect"), (14, 9), [("zip", None, None, "bf16")]),
    ("swinir_x2_nearest_w4", SwinIR, dict(img_size=16, embed_dim=8, depths=[2], num_heads=[1], window_size=4, mlp_ratio=2.0,
     upscale=2, upsampler="nearest+conv"), (12, 11), [("safetensors", None, None, "bf16")]),
    ("swinir_x1_none_w7_gray", SwinIR, dict(img_size=14, in_chans=1, embed_dim=8, depths=[2], num_heads=[2], window_size=7, mlp_ratio=2.0,
     upscale=1, upsampler="", img_range=255.0), (15, 10), [("zip", None, None, "bf16")]),
    # DAT: spatial + channel attention blocks, shifted blocks with the masks (group 0, block 2),
    # square and rectangular windows, zero padding to the larger split, both upsamplers.
    # (the position-bias MLP is embed_dim / 32 wide: below 64 its LayerNorm sees one value and the
    # bias is constant per head, so one config has 64.) Sizes keep the new files near 1 MB: SwinIR's
    # and DAT's fixed 64-feature upsampler convs dominate, so the pixelshuffle configs are 1x.
    ("dat_x3_direct_s4x2_shift", DAT, dict(img_size=16, embed_dim=32, split_size=[4, 2], depth=[3], num_heads=[4], expansion_factor=2.0,
     upscale=3, upsampler="pixelshuffledirect", resi_connection="3conv"), (12, 17), [("safetensors", None, None, "bf16")]),
    ("dat_x2_direct_s4x4_d64", DAT, dict(img_size=16, embed_dim=64, split_size=[4, 4], depth=[1], num_heads=[4], expansion_factor=1.5,
     upscale=2, upsampler="pixelshuffledirect", qkv_bias=False, resi_connection="3conv"), (10, 9), [("zip", "params", None, "bf16")]),
    ("dat_x1_ps_s2x4", DAT, dict(img_size=16, embed_dim=32, split_size=[2, 4], depth=[2], num_heads=[2], expansion_factor=2.0,
     upscale=1, upsampler="pixelshuffle"), (9, 11), [("zip", None, None, "bf16")]),
    # SAFMN: spandrel's size requirement is a multiple of 8, and its call API reflect-pads the
    # input to one and crops the output (SPANDREL_CALL below): the outputs are that, unclamped.
    # One input size a multiple of 8 (no padding: the bare network), others not.
    ("safmn_x2_d16_nb2", SAFMN, dict(dim=16, n_blocks=2, ffn_scale=2.0, upscaling_factor=2), (16, 24),
     [("zip", None, None, "f32"), ("safetensors", "params_ema", None, "f16")]),
    ("safmn_x4_d8_nb1_h12", SAFMN, dict(dim=8, n_blocks=1, ffn_scale=1.5, upscaling_factor=4), (13, 10),
     [("safetensors", None, None, "f32")]),
    ("safmn_x2_d12_nb3_h30", SAFMN, dict(dim=12, n_blocks=3, ffn_scale=2.5, upscaling_factor=2), (21, 30),
     [("zip", "params", None, "bf16")]),
    # HAT: hybrid attention blocks (shifted odd blocks with the mask, the CAB conv branch) and the
    # overlapping cross-attention block per group; windows 4 and 8, overlap ratios 0.5 and 0.25,
    # inputs that are no multiple of the window (reflect pad + crop), 1conv and identity
    # connections, with and without qkv bias and patch norm. spandrel rebuilds HAT with img_size 64
    # and conv_scale 0.01 whatever the file: the configs keep those defaults.
    ("hat_x2_w4_o50_e12", HAT, dict(embed_dim=12, depths=[2], num_heads=[2], window_size=4, compress_ratio=6, squeeze_factor=4,
     overlap_ratio=0.5, mlp_ratio=2.0, upscale=2, num_feat=16), (13, 10), [("zip", "params_ema", None, "f32")]),
    ("hat_x4_w8_o50_identity", HAT, dict(embed_dim=16, depths=[1, 2], num_heads=[2, 4], window_size=8, compress_ratio=2, squeeze_factor=8,
     overlap_ratio=0.5, mlp_ratio=1.5, upscale=4, num_feat=8, resi_connection="identity"), (12, 19), [("safetensors", None, None, "f32")]),
    ("hat_x3_w8_o25_noqkvbias", HAT, dict(embed_dim=12, depths=[2], num_heads=[3], window_size=8, compress_ratio=3, squeeze_factor=6,
     overlap_ratio=0.25, mlp_ratio=2.0, upscale=3, num_feat=8, qkv_bias=False, patch_norm=False), (9, 11), [("legacy", None, None, "bf16")]),
]

# Architectures whose outputs are spandrel's call API (pad to the size requirement, run, crop),
# without its final clamp to [0, 1]: the bare network takes no other sizes.
SPANDREL_CALL = (SAFMN,)

# Real-size hyperparameters (as the community's files have them): only the state dict's keys and
# shapes are kept (detect.json), with what spandrel detects from them; no weights are committed.
DETECT_ONLY = [
    ("RealESRGAN_x4plus", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=64, num_blocks=23, scale=4), "new", "params_ema"),
    ("RealESRGAN_x2plus", ESRGAN, dict(in_nc=12, out_nc=3, num_filters=64, num_blocks=23, scale=4, shuffle_factor=2), "new", "params_ema"),
    ("4x_old_arch_esrgan", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=64, num_blocks=23, scale=4), "old", None),
    ("8x_old_arch_esrgan", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=64, num_blocks=23, scale=8), "old", None),
    ("2x_esrgan_nf32_nb12", ESRGAN, dict(in_nc=3, out_nc=3, num_filters=32, num_blocks=12, scale=2), "old", None),
    ("1x_unshuffle_esrgan", ESRGAN, dict(in_nc=48, out_nc=3, num_filters=64, num_blocks=16, scale=4, shuffle_factor=4), "old", None),
    ("realesr-general-x4v3", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=64, num_conv=32, upscale=4), None, "params"),
    ("realesr-animevideov3", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=64, num_conv=16, upscale=4), None, "params"),
    ("2x_compact_nf48_nc24", Compact, dict(num_in_ch=3, num_out_ch=3, num_feat=48, num_conv=24, upscale=2), None, None),
    ("4x_SPAN_48", SPAN, dict(num_in_ch=3, num_out_ch=3, feature_channels=48, upscale=4), None, None),
    ("2x_SPAN_52_nonorm", SPAN, dict(num_in_ch=3, num_out_ch=3, feature_channels=52, upscale=2, norm=False), None, None),
    ("4x_RealPLKSR_layernorm", RealPLKSR, dict(dim=64, n_blocks=28, upscaling_factor=4, kernel_size=17, split_ratio=0.25, layer_norm=True), None, None),
    ("001_classicalSR_DF2K_s64w8_SwinIR-M_x4", SwinIR, dict(img_size=64, embed_dim=180, depths=[6] * 6, num_heads=[6] * 6, window_size=8,
     mlp_ratio=2.0, upscale=4, upsampler="pixelshuffle"), None, "params"),
    ("002_lightweightSR_DIV2K_s64w8_SwinIR-S_x2", SwinIR, dict(img_size=64, embed_dim=60, depths=[6] * 4, num_heads=[6] * 4, window_size=8,
     mlp_ratio=2.0, upscale=2, upsampler="pixelshuffledirect"), None, "params"),
    ("003_realSR_BSRGAN_DFOWMFC_s64w8_SwinIR-L_x4_GAN", SwinIR, dict(img_size=64, embed_dim=240, depths=[6] * 9, num_heads=[8] * 9,
     window_size=8, mlp_ratio=2.0, upscale=4, upsampler="nearest+conv", resi_connection="3conv"), None, "params_ema"),
    ("2x_RealPLKSR_layernorm_noea", RealPLKSR, dict(dim=48, n_blocks=12, upscaling_factor=2, kernel_size=13, split_ratio=0.25, use_ea=False, layer_norm=True), None, None),
]

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def save(sd: dict, path: str, fmt: str, wrapper: str | None) -> None:
    if wrapper == "module":
        sd = OrderedDict((f"module.{k}", v) for k, v in sd.items())
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in sd.items()}, path)
        return
    obj = {wrapper: sd} if wrapper in ("params_ema", "params") else sd
    torch.save(obj, path, _use_new_zipfile_serialization=(fmt == "zip"))


def inputs(h: int, w: int, seed: int, c: int = 3) -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    rnd = torch.rand((1, c, h, w), generator=g)
    img = np.asarray(Image.open(REAL).convert("RGB"), dtype=np.float32) / 255.0
    crop = torch.from_numpy(img[100:100 + h, 140:140 + w, :c].transpose(2, 0, 1).copy())[None]
    return [("random", rnd), ("real", crop)]


def spread_transformer(model: torch.nn.Module) -> None:
    """Transformer inits (weights std 0.02, LayerNorm 1/0, BatchNorm at identity, temperature 1)
    would leave attention near uniform and the norms trivial: give every part values that matter."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "relative_position_bias_table" not in name:
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif "relative_position_bias_table" in name:
                p.normal_(0.0, 0.5)
            elif name.endswith("temperature"):
                p.uniform_(0.5, 2.0)
            elif p.dim() == 1 and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.uniform_(-0.2, 0.2)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 1.5)


def run(model: torch.nn.Module, d, x: torch.Tensor) -> torch.Tensor:
    """The model's output on x: the bare network, or spandrel's call API (without the clamp)."""
    if not isinstance(model, SPANDREL_CALL):
        return model(x)
    h, w = x.shape[-2:]
    _, xp = pad_tensor(x, d.size_requirements)
    return model(xp)[..., : h * d.scale, : w * d.scale]


def main(only: list[str]) -> int:
    os.makedirs(OUT, exist_ok=True)
    index = {"torch": torch.__version__, "spandrel": spandrel.__version__, "configs": []}
    unknown = set(only) - {c[0] for c in CONFIGS}
    if unknown:
        print(f"no such configs: {sorted(unknown)}", file=sys.stderr)
        return 2
    old = None
    if only:
        with open(os.path.join(OUT, "index.json")) as f:
            old = json.load(f)
        if (old["torch"], old["spandrel"]) != (index["torch"], index["spandrel"]):
            print(f"index.json was made with torch {old['torch']}, spandrel {old['spandrel']}: regenerate all", file=sys.stderr)
            return 1
    for ci, (name, cls, kwargs, (h, w), saves) in enumerate(CONFIGS):
        if only and name not in only:
            continue
        torch.manual_seed(1000 + ci)
        model = cls(**kwargs).eval()
        # Default inits leave biases tiny; spread them so the tests see them.
        if cls in (SwinIR, DAT, SAFMN, HAT):
            spread_transformer(model)
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("bias"):
                    p.uniform_(-0.1, 0.1)
            if cls is HAT:
                # conv_scale (0.01, fixed by spandrel) would leave the CAB branch under the 1e-3
                # bound: make its conv output 30x larger, the squeeze-excitation's first conv 30x
                # smaller (its gate stays where it was).
                for pname, p in model.named_parameters():
                    if ".conv_block.cab.2." in pname:
                        p.mul_(30.0)
                    elif pname.endswith(".conv_block.cab.3.attention.1.weight"):
                        p.div_(30.0)
        sd = OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())
        entry = {"name": name, "files": [], "cases": []}
        for fi, (fmt, wrapper, keys, dt) in enumerate(saves):
            ssd = OrderedDict((k, v.to(DTYPES[dt]) if v.is_floating_point() else v) for k, v in sd.items())
            if keys == "new":
                ssd = esrgan_new_keys(ssd, {1: 0, 2: 1, 4: 2, 8: 3}[kwargs["scale"]])
            ext = "safetensors" if fmt == "safetensors" else "pth"
            fname = f"{name}.{fi}.{ext}"
            path = os.path.join(OUT, fname)
            save(ssd, path, fmt, wrapper)
            # What spandrel makes of the saved file.
            d = ModelLoader().load_from_file(path)
            hp = {k: v for k, v in getattr(d.model, "hyperparameters", {}).items() if isinstance(v, (int, float, bool, str, type(None)))}
            entry["files"].append({
                "file": fname, "format": fmt, "wrapper": wrapper, "keys": keys, "dtype": dt,
                "spandrel": {"architecture": d.architecture.id, "scale": d.scale, "in_channels": d.input_channels,
                             "out_channels": d.output_channels, "tags": d.tags, "hyperparameters": hp},
            })
        # Outputs of the model as the first file stores it (f16/bf16 saves are rounded: use the
        # rounded weights, as Lucent sees them) for every file's dtype.
        for dt in sorted({s[3] for s in saves}):
            m = cls(**kwargs).eval()
            m.load_state_dict(OrderedDict((k, v.to(DTYPES[dt]).float() if v.is_floating_point() else v) for k, v in sd.items()))
            for iname, x in inputs(h, w, 7 + ci, kwargs.get("in_chans", 3)):
                with torch.no_grad():
                    y = run(m, d, x)
                xi = f"{name}.{iname}.in.f32"
                yo = f"{name}.{iname}.{dt}.out.f32"
                x[0].numpy().astype("<f4").tofile(os.path.join(OUT, xi))
                y[0].numpy().astype("<f4").tofile(os.path.join(OUT, yo))
                entry["cases"].append({"dtype": dt, "input": xi, "input_shape": list(x.shape[1:]),
                                       "output": yo, "output_shape": list(y.shape[1:]),
                                       "output_max_abs": float(y.abs().max())})
        index["configs"].append(entry)
        print(name, [f["file"] for f in entry["files"]], file=sys.stderr)
    if old is not None:
        # the other configs' entries as they were, these replaced in place or appended
        fresh = {c["name"]: c for c in index["configs"]}
        kept = [fresh.pop(c["name"], c) for c in old["configs"]]
        index["configs"] = kept + [c for c in index["configs"] if c["name"] in fresh]
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    if old is not None:
        return 0
    detect = {"torch": torch.__version__, "spandrel": spandrel.__version__, "models": []}
    for name, cls, kwargs, keys, wrapper in DETECT_ONLY:
        sd = OrderedDict((k, v) for k, v in cls(**kwargs).state_dict().items())
        if keys == "new":
            sd = esrgan_new_keys(sd, {1: 0, 2: 1, 4: 2, 8: 3}[kwargs["scale"]])
        d = ModelLoader().load_from_state_dict({wrapper: sd} if wrapper else sd)
        hp = {k: v for k, v in getattr(d.model, "hyperparameters", {}).items() if isinstance(v, (int, float, bool, str, type(None)))}
        detect["models"].append({
            "name": name, "keys": [[k, list(v.shape)] for k, v in sd.items()],
            "spandrel": {"architecture": d.architecture.id, "scale": d.scale, "in_channels": d.input_channels,
                         "out_channels": d.output_channels, "tags": d.tags, "hyperparameters": hp},
        })
    with open(os.path.join(OUT, "detect.json"), "w") as f:
        json.dump(detect, f, separators=(",", ":"))
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] != "--only" or args == ["--only"]:
        print("usage: byom-goldens.py [--only NAME...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
