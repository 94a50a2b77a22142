#!/usr/bin/env python3
"""Background removal edges: rembg's plain U²-Net mask against image-guided refinements, measured
on photos with ground-truth alpha mattes (docs/segmentation.md holds the figures and the method).

Reads (nothing is downloaded or committed here):
  --data DIR   a folder with input_training_lowres/GTnn.png and gt_training_lowres/GTnn.png, the 27
               training images of alphamatting.com (Rhemann et al., CVPR 2009) with their true alphas:
               the zips http://alphamatting.com/datasets/zip/{input,gt}_training_lowres.zip, or the copy
               in github.com/xuzhesong/Matting (dataset/, commit 4150fe65...).
  --model F    u2netp.onnx (`node --import tsx server/cli.ts models fetch --dir D seg/u2netp`).

Methods, each an alpha in [0,1] at the photo's size:
  plain   rembg's default: photo resized to 320x320 (Lanczos), x/max(x), ImageNet mean/std; first output;
          min-max; 8-bit; resized back (Lanczos).  This is the baseline.
  bilinear the float map resized back bilinearly (no 8-bit step): the input of the refinements.
  gf-*    the He et al. guided filter (ECCV 2010 / TPAMI 2013) of that map, the photo as guide
          (grey or RGB), radius r = k * (long side / 320) px, regulariser eps; clamped to [0,1];
          ":snap": pixels whose whole window is >= 0.95 (<= 0.05) in the map set to 1 (0).
          SHIPPED is what native/engine/src/pipelines/segment/refine.rs does (tested equal to the
          definition there).
  cf      (with --closed-form, needs pymatting) closed-form matting (Levin et al.) on a trimap made from
          the coarse map (>= hi: fg, <= lo: bg, eroded by the band; the rest unknown).

Parameters are chosen on --train images (mean SAD) and reported on the others.
Metrics against the true alpha: SAD = sum|a - gt| / 1000, MAE, MSE (alpha in [0,1]), IoU of a >= 0.5.

Run (2 cores: nice it):  nice -n 10 python3 scripts/seg-edges-eval.py --data /tmp/am --model \
    /tmp/segmodels/seg/u2netp.onnx --json /tmp/seg-eval.json
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from PIL import Image

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIDE = 320
SNAP_LO, SNAP_HI = 0.05, 0.95
# What native/engine/src/pipelines/segment/refine.rs ships (GuidedParams::for_mask).
SHIPPED = "rgb:k=2:eps=0.0001:snap"


def coarse_map(session, img):
    """rembg's pre-processing and the raw min-max map at 320x320 (float32 in [0,1])."""
    x = np.asarray(img.convert("RGB").resize((SIDE, SIDE), Image.LANCZOS), dtype=np.float64)
    x = x / np.max(x)
    x = (x - np.array(MEAN)) / np.array(STD)
    x = x.transpose(2, 0, 1)[None].astype(np.float32)
    out = session.run(None, {session.get_inputs()[0].name: x})[0][0, 0]
    lo, hi = float(out.min()), float(out.max())
    return ((out - lo) / max(hi - lo, 1e-12)).astype(np.float32)


def rembg_plain(m, size):
    """rembg's mask: the map as 8-bit, Lanczos back to the photo's size."""
    g = Image.fromarray((m * 255).astype(np.uint8), mode="L").resize(size, Image.LANCZOS)
    return np.asarray(g, dtype=np.float32) / 255.0


def upsample_bilinear(m, size):
    """The float map resized to the photo's size (the engine's path: no 8-bit step)."""
    return np.asarray(Image.fromarray(m, mode="F").resize(size, Image.BILINEAR), dtype=np.float32).clip(0, 1)


def box_mean(a, r):
    """Mean over the (2r+1)^2 window clipped at the borders (He et al.'s normalisation), O(N)."""
    h, w = a.shape
    c = np.zeros((h + 1, w + 1), dtype=np.float64)
    c[1:, 1:] = np.cumsum(np.cumsum(a, axis=0, dtype=np.float64), axis=1)
    y0 = np.clip(np.arange(h) - r, 0, h)
    y1 = np.clip(np.arange(h) + r + 1, 0, h)
    x0 = np.clip(np.arange(w) - r, 0, w)
    x1 = np.clip(np.arange(w) + r + 1, 0, w)
    s = c[y1][:, x1] - c[y0][:, x1] - c[y1][:, x0] + c[y0][:, x0]
    n = (y1 - y0)[:, None] * (x1 - x0)[None, :]
    return s / n


def guided_gray(guide, p, r, eps):
    mi, mp = box_mean(guide, r), box_mean(p, r)
    cov = box_mean(guide * p, r) - mi * mp
    var = box_mean(guide * guide, r) - mi * mi
    a = cov / (var + eps)
    b = mp - a * mi
    return box_mean(a, r) * guide + box_mean(b, r)


def guided_rgb(guide, p, r, eps):
    """The colour guided filter: a 3x3 solve per pixel (Sigma + eps U) a = cov(I, p)."""
    h, w, _ = guide.shape
    mi = [box_mean(guide[..., c], r) for c in range(3)]
    mp = box_mean(p, r)
    cov = np.stack([box_mean(guide[..., c] * p, r) - mi[c] * mp for c in range(3)], -1)
    sig = np.empty((h, w, 3, 3))
    for i in range(3):
        for j in range(i, 3):
            v = box_mean(guide[..., i] * guide[..., j], r) - mi[i] * mi[j]
            sig[..., i, j] = v
            sig[..., j, i] = v
    sig += eps * np.eye(3)
    a = np.linalg.solve(sig, cov[..., None])[..., 0]
    b = mp - (a * np.stack(mi, -1)).sum(-1)
    q = sum(box_mean(a[..., c], r) * guide[..., c] for c in range(3)) + box_mean(b, r)
    return q


def refine_gf(photo, coarse, k, eps, color, scale):
    r = max(1, int(round(k * scale)))
    if color:
        q = guided_rgb(photo, coarse, r, eps)
    else:
        g = photo @ np.array([0.299, 0.587, 0.114])
        q = guided_gray(g, coarse, r, eps)
    return q.clip(0, 1).astype(np.float32)


def snap(q, coarse, r):
    """The sure parts of the coarse mask stay sure: whole window >= SNAP_HI: 1, <= SNAP_LO: 0."""
    q = q.copy()
    q[erode(coarse >= SNAP_HI, r)] = 1.0
    q[erode(coarse <= SNAP_LO, r)] = 0.0
    return q


def erode(mask, r):
    """Binary erosion by a (2r+1) square (box sum == full)."""
    return box_mean(mask.astype(np.float64), r) > 1 - 1e-9


def refine_cf(photo, coarse, band, lo=0.1, hi=0.9):
    from pymatting import estimate_alpha_cf

    fg = erode(coarse >= hi, band)
    bg = erode(coarse <= lo, band)
    tri = np.full(coarse.shape, 0.5)
    tri[fg] = 1.0
    tri[bg] = 0.0
    return estimate_alpha_cf(photo, tri).clip(0, 1).astype(np.float32)


def metrics(a, gt):
    d = a.astype(np.float64) - gt
    fa, fg = a >= 0.5, gt >= 0.5
    union = np.logical_or(fa, fg).sum()
    # the edge band: within 10 px of a fractional true alpha (hair, fur, blur), where edges are judged
    band = box_mean(((gt > 0.02) & (gt < 0.98)).astype(np.float64), 10) > 0
    return {
        "sad": float(np.abs(d).sum() / 1000.0),
        "sad_band": float(np.abs(d[band]).sum() / 1000.0),
        "mae": float(np.abs(d).mean()),
        "mse": float((d * d).mean()),
        "iou": float(np.logical_and(fa, fg).sum() / union) if union else 1.0,
    }


def load(data, name):
    img = Image.open(os.path.join(data, "input_training_lowres", name)).convert("RGB")
    gt = np.asarray(Image.open(os.path.join(data, "gt_training_lowres", name)).convert("L"), dtype=np.float64) / 255.0
    return img, gt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", default="GT01,GT02,GT03,GT04,GT05", help="images the parameters are chosen on")
    ap.add_argument("--closed-form", action="store_true", help="also the trimap + closed-form matting step")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--dump", help="write, per image, the photo (.rgb8), the map resized (.coarse) and the SHIPPED "
                    "alpha (.py) as raw little-endian, and .json {w, h}: the engine's test equals_the_measuring_script reads them")
    args = ap.parse_args()

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    names = sorted(f for f in os.listdir(os.path.join(args.data, "input_training_lowres")) if f.endswith(".png"))
    train = {t + ".png" for t in args.train.split(",") if t}

    grid = [(False, k, 1e-4) for k in (1, 2)] + [(True, k, e) for k in (1, 2, 4) for e in (1e-5, 1e-4, 1e-3)]
    rows = {}
    for n in names:
        img, gt = load(args.data, n)
        photo = np.asarray(img, dtype=np.float64) / 255.0
        m = coarse_map(sess, img)
        scale = max(img.size) / SIDE
        plain = rembg_plain(m, img.size)
        up = upsample_bilinear(m, img.size)
        r = {"size": list(img.size), "plain": metrics(plain, gt), "bilinear": metrics(up, gt), "gf": {}}
        for c, k, e in grid:
            key = f"{'rgb' if c else 'grey'}:k={k}:eps={e:g}"
            q = refine_gf(photo, up, k, e, c, scale)
            r["gf"][key] = metrics(q, gt)
            r["gf"][key + ":snap"] = metrics(snap(q, up, max(1, int(round(k * scale)))), gt)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            stem = os.path.join(args.dump, n[:-4])
            np.asarray(img, dtype=np.uint8).tofile(stem + ".rgb8")
            up.astype("<f4").tofile(stem + ".coarse")
            r2 = max(1, int(round(2 * scale)))
            snap(refine_gf(photo, up, 2, 1e-4, True, scale), up, r2).astype("<f4").tofile(stem + ".py")
            with open(stem + ".json", "w") as fh:
                json.dump({"w": img.size[0], "h": img.size[1]}, fh)
        if args.closed_form:
            t = time.time()
            band = max(1, int(round(2 * scale)))
            r["cf"] = metrics(refine_cf(photo, up, band), gt)
            r["cf_seconds"] = time.time() - t
        rows[n] = r
        print(n, "plain SAD %.2f" % r["plain"]["sad"], file=sys.stderr)

    def mean(ms, key):
        return float(np.mean([x[key] for x in ms]))

    train_rows = [rows[n] for n in names if n in train]
    best = min(rows[names[0]]["gf"], key=lambda g: mean([x["gf"][g] for x in train_rows], "sad"))
    best_grey = min((g for g in rows[names[0]]["gf"] if g.startswith("grey")), key=lambda g: mean([x["gf"][g] for x in train_rows], "sad"))
    test = [n for n in names if n not in train]
    cols = [("plain", lambda x: x["plain"]), ("bilinear", lambda x: x["bilinear"]), (SHIPPED, lambda x: x["gf"][SHIPPED])]
    if best != SHIPPED:
        cols.append((best, lambda x: x["gf"][best]))
    cols.append((best_grey, lambda x: x["gf"][best_grey]))
    if args.closed_form:
        cols.append(("cf", lambda x: x["cf"]))
    print(f"chosen on {sorted(train)}: {best} (grey: {best_grey}); shipped: {SHIPPED}")
    print("every setting, mean SAD train / test: " + "; ".join("%s %.2f / %.2f" % (g, mean([x["gf"][g] for x in train_rows], "sad"), mean([rows[n]["gf"][g] for n in names if n not in train], "sad")) for g in rows[names[0]]["gf"]))
    print("| image | " + " | ".join(f"{c} SAD / MSE x1e3 / IoU" for c, _ in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for n in test:
        print(f"| {n[:-4]} | " + " | ".join("%.2f / %.2f / %.3f" % (f(rows[n])["sad"], 1e3 * f(rows[n])["mse"], f(rows[n])["iou"]) for _, f in cols) + " |")
    # where the network found the subject (plain IoU >= 0.85): the edges are what differs there
    found = [n for n in test if rows[n]["plain"]["iou"] >= 0.85]
    for label, ns in (("mean (test)", test), (f"mean (test, IoU >= 0.85: {len(found)})", found), ("mean (train)", sorted(train & set(names)))):
        ms = [rows[n] for n in ns]
        print(f"| {label} | " + " | ".join("%.2f / %.2f / %.3f" % (mean([f(x) for x in ms], "sad"), 1e3 * mean([f(x) for x in ms], "mse"), mean([f(x) for x in ms], "iou")) for _, f in cols) + " |")
    print("edge-band SAD (test mean): " + ", ".join("%s %.2f" % (c, mean([f(rows[n]) for n in test], "sad_band")) for c, f in cols))
    print("MAE (test mean): " + ", ".join("%s %.4f" % (c, mean([f(rows[n]) for n in test], "mae")) for c, f in cols))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"train": sorted(train), "chosen": best, "chosen_grey": best_grey, "images": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
