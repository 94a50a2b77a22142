//! Temporal smoothing of face boxes across the frames of one video, so restored regions neither
//! jitter nor flicker.
//!
//! Each frame's detections are matched to the running tracks greedily by IoU (highest first,
//! IoU >= [`MATCH_IOU`]). A matched track moves toward its detection by an exponential moving
//! average (centre [`ALPHA_POS`], size [`ALPHA_SIZE`]); when the detection moved far (IoU below
//! [`FAST_IOU`]: real motion or a cut) it follows faster ([`ALPHA_FAST`]). A track's blend weight
//! ramps up by [`FADE`] per detected frame and down by [`FADE`] per missed frame (a face that the
//! detector drops for a frame or two keeps its restored look instead of popping), and the track
//! is dropped when the weight reaches 0 or after [`MAX_MISSES`] misses. Tracks seen on the very
//! first frame start at full weight.
//!
//! The state is small and plain: [`FaceTracker::to_bytes`] / [`FaceTracker::from_bytes`] let a
//! caller carry it between the batches of one video (e.g. through a worker pool) as an opaque blob.

use super::detect::FaceBox;
use lucent_core::{Code, Error, Result};

pub const MATCH_IOU: f32 = 0.2;
pub const FAST_IOU: f32 = 0.5;
pub const ALPHA_POS: f32 = 0.35;
pub const ALPHA_SIZE: f32 = 0.2;
pub const ALPHA_FAST: f32 = 0.8;
pub const FADE: f32 = 1.0 / 3.0;
pub const MAX_MISSES: u32 = 4;

const MAGIC: &[u8; 4] = b"LFT1";

#[derive(Debug, Clone, Copy, PartialEq)]
struct Track {
    id: u32,
    /// Smoothed centre and size.
    cx: f32,
    cy: f32,
    w: f32,
    h: f32,
    score: f32,
    weight: f32,
    misses: u32,
}

impl Track {
    fn face(&self) -> FaceBox {
        FaceBox {
            x0: self.cx - 0.5 * self.w,
            y0: self.cy - 0.5 * self.h,
            x1: self.cx + 0.5 * self.w,
            y1: self.cy + 0.5 * self.h,
            score: self.score,
            landmarks: [[self.cx, self.cy]; 5],
        }
    }
}

/// One face to restore on the current frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracked {
    pub id: u32,
    /// Smoothed box (frame pixels; landmarks are not tracked and sit at the centre).
    pub face: FaceBox,
    /// Blend weight 0..1 (fades in and out).
    pub weight: f32,
}

/// Per-video face tracking state (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaceTracker {
    w: u32,
    h: u32,
    frames: u64,
    next_id: u32,
    tracks: Vec<Track>,
}

impl FaceTracker {
    pub fn new() -> FaceTracker {
        FaceTracker::default()
    }

    /// Frames seen so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Feed one frame's detections (frame size w x h; a size change resets the state) and get the
    /// faces to restore on it.
    pub fn update(&mut self, w: usize, h: usize, dets: &[FaceBox]) -> Vec<Tracked> {
        if (self.w, self.h) != (w as u32, h as u32) {
            *self = FaceTracker { w: w as u32, h: h as u32, ..FaceTracker::default() };
        }
        let first = self.frames == 0;
        self.frames += 1;
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (ti, t) in self.tracks.iter().enumerate() {
            let tb = t.face();
            for (di, d) in dets.iter().enumerate() {
                let iou = tb.iou(d);
                if iou >= MATCH_IOU {
                    pairs.push((iou, ti, di));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut t_used = vec![false; self.tracks.len()];
        let mut d_used = vec![false; dets.len()];
        for (iou, ti, di) in pairs {
            if t_used[ti] || d_used[di] {
                continue;
            }
            t_used[ti] = true;
            d_used[di] = true;
            let d = &dets[di];
            let t = &mut self.tracks[ti];
            let (ap, asz) = if iou < FAST_IOU { (ALPHA_FAST, ALPHA_FAST) } else { (ALPHA_POS, ALPHA_SIZE) };
            t.cx += ap * (d.cx() - t.cx);
            t.cy += ap * (d.cy() - t.cy);
            t.w += asz * (d.width() - t.w);
            t.h += asz * (d.height() - t.h);
            t.score = d.score;
            t.weight = (t.weight + FADE).min(1.0);
            t.misses = 0;
        }
        for (ti, t) in self.tracks.iter_mut().enumerate() {
            if !t_used[ti] {
                t.misses += 1;
                t.weight = (t.weight - FADE).max(0.0);
            }
        }
        self.tracks.retain(|t| t.weight > 1e-3 && t.misses <= MAX_MISSES);
        for (di, d) in dets.iter().enumerate() {
            if d_used[di] {
                continue;
            }
            self.tracks.push(Track {
                id: self.next_id,
                cx: d.cx(),
                cy: d.cy(),
                w: d.width(),
                h: d.height(),
                score: d.score,
                weight: if first { 1.0 } else { FADE },
                misses: 0,
            });
            self.next_id = self.next_id.wrapping_add(1);
        }
        self.tracks.iter().map(|t| Tracked { id: t.id, face: t.face(), weight: t.weight }).collect()
    }

    /// The state as an opaque little-endian blob.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + 32 * self.tracks.len());
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&self.w.to_le_bytes());
        v.extend_from_slice(&self.h.to_le_bytes());
        v.extend_from_slice(&self.frames.to_le_bytes());
        v.extend_from_slice(&self.next_id.to_le_bytes());
        v.extend_from_slice(&(self.tracks.len() as u32).to_le_bytes());
        for t in &self.tracks {
            v.extend_from_slice(&t.id.to_le_bytes());
            for f in [t.cx, t.cy, t.w, t.h, t.score, t.weight] {
                v.extend_from_slice(&f.to_le_bytes());
            }
            v.extend_from_slice(&t.misses.to_le_bytes());
        }
        v
    }

    /// Parse [`FaceTracker::to_bytes`]; an empty blob is a fresh tracker.
    pub fn from_bytes(b: &[u8]) -> Result<FaceTracker> {
        if b.is_empty() {
            return Ok(FaceTracker::new());
        }
        let bad = || Error::new(Code::InvalidArgument, "face tracker state is not a blob this engine wrote");
        if b.len() < 28 || &b[..4] != MAGIC {
            return Err(bad());
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let f32_at = |i: usize| f32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let n = u32_at(24) as usize;
        if n > 10_000 || b.len() != 28 + 32 * n {
            return Err(bad());
        }
        let mut tracks = Vec::with_capacity(n);
        for k in 0..n {
            let o = 28 + 32 * k;
            let t = Track {
                id: u32_at(o),
                cx: f32_at(o + 4),
                cy: f32_at(o + 8),
                w: f32_at(o + 12),
                h: f32_at(o + 16),
                score: f32_at(o + 20),
                weight: f32_at(o + 24),
                misses: u32_at(o + 28),
            };
            if ![t.cx, t.cy, t.w, t.h, t.score, t.weight].iter().all(|v| v.is_finite()) {
                return Err(bad());
            }
            tracks.push(t);
        }
        Ok(FaceTracker {
            w: u32_at(4),
            h: u32_at(8),
            frames: u64::from_le_bytes(b[12..20].try_into().unwrap()),
            next_id: u32_at(20),
            tracks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(cx: f32, cy: f32, s: f32) -> FaceBox {
        FaceBox { x0: cx - s / 2.0, y0: cy - s / 2.0, x1: cx + s / 2.0, y1: cy + s / 2.0, score: 0.9, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn state_round_trips_and_rejects_garbage() {
        let mut t = FaceTracker::new();
        t.update(100, 80, &[fb(30.0, 30.0, 20.0), fb(70.0, 40.0, 16.0)]);
        t.update(100, 80, &[fb(31.0, 30.0, 20.0)]);
        let b = t.to_bytes();
        assert_eq!(FaceTracker::from_bytes(&b).unwrap(), t);
        assert_eq!(FaceTracker::from_bytes(&[]).unwrap(), FaceTracker::new());
        assert!(FaceTracker::from_bytes(&b[..b.len() - 1]).is_err());
        assert!(FaceTracker::from_bytes(b"nope, not a state blob at all").is_err());
    }

    #[test]
    fn dropped_detection_fades_instead_of_popping() {
        let mut t = FaceTracker::new();
        assert_eq!(t.update(100, 80, &[fb(30.0, 30.0, 20.0)])[0].weight, 1.0);
        let r = t.update(100, 80, &[]);
        assert_eq!(r.len(), 1);
        assert!((r[0].weight - (1.0 - FADE)).abs() < 1e-6);
        let r = t.update(100, 80, &[fb(30.0, 30.0, 20.0)]);
        assert_eq!((r.len(), r[0].weight), (1, 1.0));
        // A face appearing later fades in.
        let r = t.update(100, 80, &[fb(30.0, 30.0, 20.0), fb(75.0, 50.0, 18.0)]);
        assert_eq!(r.len(), 2);
        assert!((r[1].weight - FADE).abs() < 1e-6);
        // Size change resets.
        assert_eq!(t.update(50, 40, &[]).len(), 0);
    }
}
