"""ONNX Runtime side of the segmentation bench (bench/segmentation/run.mjs): rembg's pipeline,
end to end, with onnxruntime (PyPI), Pillow and NumPy. A child process answering timing requests
on stdin, one per line, so the bench can alternate it with Lucent's run by run.

    python3 rembg_side.py MODEL.onnx THREADS OUTDIR NAME

The steps are those of rembg's `remove(bytes)` with a U²-Net session (rembg 2.x: sessions/u2net.py,
bg.py), written out here so that nothing but onnxruntime, Pillow and NumPy is needed:
decode (PIL), RGB, resize to 320x320 (LANCZOS), x / max(x), ImageNet mean/std, session.run, the
first output's map min-max normalised, to 8 bits, resized back to the photo's size (LANCZOS),
composite the photo over a transparent image with it as alpha (naive cutout), PNG encode of the
RGBA image and of the mask. PNG settings: zlib level 3 and Pillow's adaptive filters, faster than
rembg's own default (Pillow's level 6); Lucent's segmentation outputs use fdeflate's fast mode.

Session: CPU execution provider, intra-op threads THREADS, inter-op 1, sequential, all graph
optimisations (as bench/onnx/ort-lib.mjs).

Requests: `e2e PATH` -> `ms <milliseconds> <matted bytes> <mask bytes>` (the file is read before
the clock starts; the first answer writes OUTDIR/NAME.ort.png and OUTDIR/NAME.ort.mask.png);
`quit`.
"""
import io
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from PIL import Image

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
PNG_LEVEL = 3


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def predict_mask(sess, img):
    small = img.convert("RGB").resize((320, 320), Image.LANCZOS)
    x = np.asarray(small, dtype=np.float32)
    x = x / max(float(np.max(x)), 1e-6)
    x = (x - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    x = x.transpose(2, 0, 1)[None].astype(np.float32)
    pred = sess.run(None, {sess.get_inputs()[0].name: x})[0][:, 0, :, :]
    lo, hi = float(np.min(pred)), float(np.max(pred))
    pred = (pred - lo) / (hi - lo) if hi > lo else np.clip(pred, 0, 1)
    mask = Image.fromarray((np.squeeze(pred) * 255).astype(np.uint8), mode="L")
    return mask.resize(img.size, Image.LANCZOS)


def remove(sess, data):
    img = Image.open(io.BytesIO(data))
    img.load()
    mask = predict_mask(sess, img)
    empty = Image.new("RGBA", img.size, 0)
    cutout = Image.composite(img.convert("RGBA"), empty, mask)
    out, m = io.BytesIO(), io.BytesIO()
    cutout.save(out, "PNG", compress_level=PNG_LEVEL)
    mask.save(m, "PNG", compress_level=PNG_LEVEL)
    return out.getvalue(), m.getvalue()


def main():
    model, threads, outdir, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    sess = session(model, threads)
    print(f"ready onnxruntime {ort.__version__} pillow {Image.__version__ if hasattr(Image, '__version__') else ''}", flush=True)
    wrote = False
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] != "e2e":
            print(f"error unknown request {words[0]}", flush=True)
            continue
        data = open(words[1], "rb").read()
        t = time.perf_counter()
        matted, mask = remove(sess, data)
        ms = (time.perf_counter() - t) * 1e3
        if not wrote:
            open(os.path.join(outdir, f"{name}.ort.png"), "wb").write(matted)
            open(os.path.join(outdir, f"{name}.ort.mask.png"), "wb").write(mask)
            wrote = True
        print(f"ms {ms:.3f} {len(matted)} {len(mask)}", flush=True)


if __name__ == "__main__":
    main()
