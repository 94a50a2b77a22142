//! Face detection with RetinaFace-slim (shared/models/face/retinaface-slim, ncnn) run through the
//! engine's backend: the input is resampled so its long side lies in 320..=640, fed as BGR 0..255
//! minus the mean (104, 117, 123); the box deltas (`output0`), face softmax (`530`) and landmarks
//! (`529`) are decoded against the prior anchors (steps 8/16/32/64, min sizes {10,16,24},
//! {32,48}, {64,96}, {128,192,256}, variances 0.1/0.2), kept above score 0.6 and NMS'd at IoU 0.4;
//! boxes come back in input-image pixels.
//!
//! Two additions to the upstream recipe, both measured on shared/data/faces:
//! - a second pass at long side 320 when the first ran larger: faces bigger than the largest
//!   anchor (256 px at the detector's input, e.g. the aligned 512 px crops) otherwise come back as
//!   partial boxes (chin, forehead) that NMS keeps; the passes are merged by NMS, then a box lying
//!   mostly (>= 60 % of its area) inside a higher-scoring one is dropped;
//! - the face path keeps boxes scoring above [`FACE_SCORE_MIN`] = 0.8 (upstream's 0.6 is a
//!   visualisation threshold): a hand with a ring in 02.png scores 0.62, every real face in the
//!   data scores >= 0.99. (Face-restoration pipelines are stricter still; a false box only costs
//!   a GAN pass on a non-face region here.)

use super::image::resize_with;
use crate::raster::RasterRef;
use crate::runtime::Runtime;
use lucent_core::{Cancel, Code, Error, Result, Tensor};

/// Network stem of the detector, relative to the model dir.
pub use crate::catalog::FACE_DETECTOR as DETECTOR;
pub const SCORE_MIN: f32 = 0.6;
pub const NMS_IOU: f32 = 0.4;
/// What [`detect_faces`] keeps.
pub const FACE_SCORE_MIN: f32 = 0.8;
const CONTAIN_MAX: f32 = 0.6;
/// Long side of the detector's input: images outside this range are resampled into it.
pub const DET_MIN_SIDE: usize = 320;
pub const DET_MAX_SIDE: usize = 640;

const MEAN_BGR: [f32; 3] = [104.0, 117.0, 123.0];
const STEPS: [usize; 4] = [8, 16, 32, 64];
const MIN_SIZES: [&[f32]; 4] = [&[10.0, 16.0, 24.0], &[32.0, 48.0], &[64.0, 96.0], &[128.0, 192.0, 256.0]];
const VAR_CENTRE: f32 = 0.1;
const VAR_SIZE: f32 = 0.2;

/// One detected face, in pixels of the image it was detected on (x1/y1 exclusive edges).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceBox {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
    pub score: f32,
    /// Left eye, right eye, nose, left and right mouth corner (x, y).
    pub landmarks: [[f32; 2]; 5],
}

impl FaceBox {
    pub fn width(&self) -> f32 {
        (self.x1 - self.x0).max(0.0)
    }
    pub fn height(&self) -> f32 {
        (self.y1 - self.y0).max(0.0)
    }
    pub fn cx(&self) -> f32 {
        0.5 * (self.x0 + self.x1)
    }
    pub fn cy(&self) -> f32 {
        0.5 * (self.y0 + self.y1)
    }
    pub fn area(&self) -> f32 {
        self.width() * self.height()
    }
    pub fn iou(&self, o: &FaceBox) -> f32 {
        let iw = (self.x1.min(o.x1) - self.x0.max(o.x0)).max(0.0);
        let ih = (self.y1.min(o.y1) - self.y0.max(o.y0)).max(0.0);
        let inter = iw * ih;
        let uni = self.area() + o.area() - inter;
        if uni <= 0.0 { 0.0 } else { inter / uni }
    }
    /// The box with every coordinate multiplied by `f`.
    pub fn scaled(&self, f: f32) -> FaceBox {
        let mut b = *self;
        b.x0 *= f;
        b.y0 *= f;
        b.x1 *= f;
        b.y1 *= f;
        for l in b.landmarks.iter_mut() {
            l[0] *= f;
            l[1] *= f;
        }
        b
    }
}

/// Detector input size for a w x h image: (dw, dh, factor dw/w).
pub fn detection_size(w: usize, h: usize) -> (usize, usize, f32) {
    let long = w.max(h).max(1);
    let target = long.clamp(DET_MIN_SIDE, DET_MAX_SIDE);
    let f = target as f32 / long as f32;
    let dw = ((w as f32 * f).round() as usize).max(1);
    let dh = ((h as f32 * f).round() as usize).max(1);
    (dw, dh, f)
}

/// The detector's input tensor for `src`: BGR 0..255 minus the mean, resampled to
/// [`detection_size`]. Returns the tensor and the factor (detector px per input px).
pub fn preprocess(src: RasterRef<'_>) -> (Tensor, f32) {
    let (dw, dh, _) = detection_size(src.width, src.height);
    preprocess_to(src, dw, dh)
}

/// [`preprocess`] at a given detector input size.
pub fn preprocess_to(src: RasterRef<'_>, dw: usize, dh: usize) -> (Tensor, f32) {
    let img = if (dw, dh) == (src.width, src.height) {
        super::image::Rgb::from_raster(src)
    } else {
        resize_with(src.width, src.height, dw, dh, |x, y| src.rgb(x, y))
    };
    let mut t = Tensor::zeros(3, dh, dw);
    let plane = dw * dh;
    for y in 0..dh {
        for x in 0..dw {
            let [r, g, b] = img.rgb(x, y);
            let i = y * dw + x;
            t.data[i] = b.clamp(0.0, 1.0) * 255.0 - MEAN_BGR[0];
            t.data[plane + i] = g.clamp(0.0, 1.0) * 255.0 - MEAN_BGR[1];
            t.data[2 * plane + i] = r.clamp(0.0, 1.0) * 255.0 - MEAN_BGR[2];
        }
    }
    // Effective factor per axis may differ by rounding; the mean of the two is within half a pixel.
    let fx = dw as f32 / src.width as f32;
    let fy = dh as f32 / src.height as f32;
    (t, 0.5 * (fx + fy))
}

/// Prior anchors (cx, cy, w, h), normalised to the input size, in the network's output order.
pub fn anchors(w: usize, h: usize) -> Vec<[f32; 4]> {
    let mut v = Vec::new();
    for (k, &step) in STEPS.iter().enumerate() {
        let (fw, fh) = (w.div_ceil(step), h.div_ceil(step));
        for i in 0..fh {
            for j in 0..fw {
                for &ms in MIN_SIZES[k] {
                    v.push([
                        (j as f32 + 0.5) * step as f32 / w as f32,
                        (i as f32 + 0.5) * step as f32 / h as f32,
                        ms / w as f32,
                        ms / h as f32,
                    ]);
                }
            }
        }
    }
    v
}

/// Decode the three output blobs for a w x h detector input into boxes in detector pixels,
/// keeping scores > [`SCORE_MIN`] (no NMS).
pub fn decode(loc: &Tensor, conf: &Tensor, landm: &Tensor, w: usize, h: usize) -> Result<Vec<FaceBox>> {
    decode_above(loc, conf, landm, w, h, SCORE_MIN)
}

/// [`decode`] with another score threshold.
pub fn decode_above(loc: &Tensor, conf: &Tensor, landm: &Tensor, w: usize, h: usize, min: f32) -> Result<Vec<FaceBox>> {
    let pri = anchors(w, h);
    let n = pri.len();
    if loc.len() != 4 * n || conf.len() != 2 * n || landm.len() != 10 * n {
        return Err(Error::new(
            Code::ModelInvalid,
            format!(
                "face detector outputs {} / {} / {} do not match {} anchors of a {w}x{h} input",
                loc.shape_string(),
                conf.shape_string(),
                landm.shape_string(),
                n
            ),
        ));
    }
    let (wf, hf) = (w as f32, h as f32);
    let mut out = Vec::new();
    for (a, p) in pri.iter().enumerate() {
        let score = conf.data[2 * a + 1];
        if score.is_nan() || score <= min {
            continue;
        }
        let l = &loc.data[4 * a..4 * a + 4];
        let cx = p[0] + l[0] * VAR_CENTRE * p[2];
        let cy = p[1] + l[1] * VAR_CENTRE * p[3];
        let bw = p[2] * (l[2] * VAR_SIZE).exp();
        let bh = p[3] * (l[3] * VAR_SIZE).exp();
        let mut lm = [[0f32; 2]; 5];
        for (k, m) in lm.iter_mut().enumerate() {
            let d = &landm.data[10 * a + 2 * k..10 * a + 2 * k + 2];
            m[0] = (p[0] + d[0] * VAR_CENTRE * p[2]) * wf;
            m[1] = (p[1] + d[1] * VAR_CENTRE * p[3]) * hf;
        }
        out.push(FaceBox {
            x0: (cx - 0.5 * bw) * wf,
            y0: (cy - 0.5 * bh) * hf,
            x1: (cx + 0.5 * bw) * wf,
            y1: (cy + 0.5 * bh) * hf,
            score,
            landmarks: lm,
        });
    }
    Ok(out)
}

/// Greedy non-maximum suppression, highest score first.
pub fn nms(mut boxes: Vec<FaceBox>, iou: f32) -> Vec<FaceBox> {
    boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut keep: Vec<FaceBox> = Vec::new();
    for b in boxes {
        if keep.iter().all(|k| k.iou(&b) <= iou) {
            keep.push(b);
        }
    }
    keep
}

/// Drop boxes lying mostly inside a higher-scoring box (input sorted by score, highest first).
pub fn suppress_contained(boxes: Vec<FaceBox>) -> Vec<FaceBox> {
    let mut keep: Vec<FaceBox> = Vec::new();
    for b in boxes {
        let inside = keep.iter().any(|k| {
            let iw = (b.x1.min(k.x1) - b.x0.max(k.x0)).max(0.0);
            let ih = (b.y1.min(k.y1) - b.y0.max(k.y0)).max(0.0);
            b.area() > 0.0 && iw * ih >= CONTAIN_MAX * b.area()
        });
        if !inside {
            keep.push(b);
        }
    }
    keep
}

/// Faces in `src` (colour; alpha ignored), boxes in `src` pixels, clipped to the image,
/// highest score first.
pub fn detect_faces(rt: &Runtime, src: RasterRef<'_>, cancel: &Cancel) -> Result<Vec<FaceBox>> {
    if src.width == 0 || src.height == 0 {
        return Err(Error::new(Code::InvalidArgument, "empty image"));
    }
    let l = rt.network(DETECTOR)?;
    let blob = |name: &str| {
        l.net.blob(name).ok_or_else(|| Error::new(Code::ModelInvalid, format!("{DETECTOR}: no blob '{name}'")))
    };
    let (input, loc_b, conf_b, landm_b) = (blob("input0")?, blob("output0")?, blob("530")?, blob("529")?);
    let (dw, dh, _) = detection_size(src.width, src.height);
    let mut sizes = vec![(dw, dh)];
    if dw.max(dh) > DET_MIN_SIDE {
        let g = DET_MIN_SIDE as f32 / dw.max(dh) as f32;
        sizes.push((((dw as f32 * g).round() as usize).max(1), ((dh as f32 * g).round() as usize).max(1)));
    }
    let mut all = Vec::new();
    for (sw, sh) in sizes {
        cancel.check()?;
        let (t, f) = preprocess_to(src, sw, sh);
        let outs = l.prepared.run(&[(input, &t)], &[loc_b, conf_b, landm_b], cancel)?;
        if outs.len() != 3 {
            return Err(Error::new(Code::Internal, "face detector returned the wrong number of outputs"));
        }
        let found = decode_above(&outs[0], &outs[1], &outs[2], sw, sh, FACE_SCORE_MIN)?;
        all.extend(found.into_iter().map(|b| b.scaled(1.0 / f)));
    }
    let boxes = suppress_contained(nms(all, NMS_IOU));
    let (w, h) = (src.width as f32, src.height as f32);
    Ok(boxes
        .into_iter()
        .map(|b| {
            let mut b = b;
            b.x0 = b.x0.clamp(0.0, w);
            b.x1 = b.x1.clamp(0.0, w);
            b.y0 = b.y0.clamp(0.0, h);
            b.y1 = b.y1.clamp(0.0, h);
            b
        })
        .filter(|b| b.width() >= 1.0 && b.height() >= 1.0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_count_and_centres() {
        // 320x240: steps 8/16/32/64 -> 40x30, 20x15, 10x8, 5x4 maps.
        let a = anchors(320, 240);
        assert_eq!(a.len(), 40 * 30 * 3 + 20 * 15 * 2 + 10 * 8 * 2 + 5 * 4 * 3);
        assert_eq!(a[0], [4.0 / 320.0, 4.0 / 240.0, 10.0 / 320.0, 10.0 / 240.0]);
        assert_eq!(a[3][0], 12.0 / 320.0);
    }

    #[test]
    fn nms_keeps_the_best_of_overlaps() {
        let b = |x: f32, s: f32| FaceBox { x0: x, y0: 0.0, x1: x + 10.0, y1: 10.0, score: s, landmarks: [[0.0; 2]; 5] };
        let k = nms(vec![b(0.0, 0.7), b(1.0, 0.9), b(30.0, 0.8)], 0.4);
        assert_eq!(k.iter().map(|b| b.x0).collect::<Vec<_>>(), vec![1.0, 30.0]);
    }

    #[test]
    fn decode_zero_deltas_gives_the_anchor() {
        let (w, h) = (64, 64);
        let n = anchors(w, h).len();
        let loc = Tensor::matrix(n, 4, vec![0.0; 4 * n]);
        let mut c = vec![0.0; 2 * n];
        c[1] = 0.9; // anchor 0 is a face
        let conf = Tensor::matrix(n, 2, c);
        let landm = Tensor::matrix(n, 10, vec![0.0; 10 * n]);
        let d = decode(&loc, &conf, &landm, w, h).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].x0, d[0].y0, d[0].x1, d[0].y1), (-1.0, -1.0, 9.0, 9.0));
        assert_eq!(d[0].landmarks[0], [4.0, 4.0]);
    }
}
