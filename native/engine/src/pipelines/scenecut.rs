//! A cheap scene-cut detector for frame pairs: interpolating across a cut blends two unrelated
//! pictures, so callers duplicate a frame instead when [`is_scene_cut`] says so.
//!
//! Measure: the frame is split into a 4 x 3 grid of regions; each region gets a 16-bin histogram
//! of luma (BT.601 Y) and of each chroma channel (Cb, Cr). The distance of two frames is the mean
//! over regions of the histograms' total-variation distance (half the L1 distance, 0..1),
//! weighted Y 1/2, Cb 1/4, Cr 1/4. Histograms ignore where things are inside a region, so pans,
//! zooms and fast motion move little mass; a cut replaces the content of every region. Regions
//! (rather than one global histogram) catch cuts between shots of similar overall colour.
//!
//! Threshold [`DEFAULT_THRESHOLD`] = 0.25, from the measurements in docs/models.md "Frame interpolation, engine side"
//! (`cargo run --release -p lucent-engine --example interp_eval -- scenecut`): motion in the
//! shared video peaks at 0.106 (frames two apart), pans of up to 16,8 px and 5 % zooms of the
//! shared photos at 0.213 (a 16,8 px pan of the 179x179 `0014.jpg`, i.e. 9 % of its width per
//! frame); the video's one real cut scores 0.447, and cuts between any two different shared photos
//! 0.307 or more (two grayscale photos being the closest pair).
//! Misses: cuts between shots with the same colour layout (same set, same framing) and slow
//! dissolves; it is per pair, so a flash frame reads as two cuts. Sampling keeps it cheap: at most
//! about 0.5 M pixels are read per frame (every k-th pixel in x and y).
use crate::raster::RasterRef;
use lucent_core::{Code, Error, Result};

/// Regions across and down.
pub const REGIONS_X: usize = 4;
pub const REGIONS_Y: usize = 3;
/// Histogram bins per channel.
pub const BINS: usize = 16;
/// Distance at or above which a pair is a cut.
pub const DEFAULT_THRESHOLD: f32 = 0.25;
const WEIGHTS: [f32; 3] = [0.5, 0.25, 0.25];
const SAMPLES: usize = 500_000;

/// What a frame contributes to the distance (computed once per frame of a stream).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameSignature {
    /// Normalised histograms: region-major, then channel (Y, Cb, Cr), then bin.
    hist: Vec<f32>,
}

impl FrameSignature {
    /// Signature of a frame (gray or colour, with or without alpha, 8 or 16 bit; alpha ignored).
    pub fn of(frame: RasterRef<'_>) -> Result<FrameSignature> {
        let (w, h) = (frame.width, frame.height);
        if w == 0 || h == 0 {
            return Err(Error::new(Code::InvalidArgument, "empty frame"));
        }
        let step = (((w * h) as f64 / SAMPLES as f64).sqrt().floor() as usize).max(1);
        let mut counts = vec![0u32; REGIONS_X * REGIONS_Y * 3 * BINS];
        let mut totals = [0u32; REGIONS_X * REGIONS_Y];
        let bin = |v: f32| ((v * BINS as f32) as usize).min(BINS - 1);
        for y in (0..h).step_by(step) {
            let ry = y * REGIONS_Y / h;
            for x in (0..w).step_by(step) {
                let r = ry * REGIONS_X + x * REGIONS_X / w;
                let [cr, cg, cb] = frame.rgb(x, y);
                let luma = 0.299 * cr + 0.587 * cg + 0.114 * cb;
                let u = 0.5 - 0.168736 * cr - 0.331264 * cg + 0.5 * cb;
                let v = 0.5 + 0.5 * cr - 0.418688 * cg - 0.081312 * cb;
                let base = r * 3 * BINS;
                counts[base + bin(luma)] += 1;
                counts[base + BINS + bin(u)] += 1;
                counts[base + 2 * BINS + bin(v)] += 1;
                totals[r] += 1;
            }
        }
        let hist = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| c as f32 / totals[i / (3 * BINS)].max(1) as f32)
            .collect();
        Ok(FrameSignature { hist })
    }

    /// Distance to another frame's signature, 0 (same histograms) ..= 1 (disjoint everywhere).
    pub fn distance(&self, other: &FrameSignature) -> f32 {
        let mut sum = 0.0f32;
        for (a, b) in self.hist.chunks_exact(3 * BINS).zip(other.hist.chunks_exact(3 * BINS)) {
            for ch in 0..3 {
                let l1: f32 = a[ch * BINS..(ch + 1) * BINS].iter().zip(&b[ch * BINS..(ch + 1) * BINS]).map(|(p, q)| (p - q).abs()).sum();
                sum += WEIGHTS[ch] * 0.5 * l1;
            }
        }
        sum / (REGIONS_X * REGIONS_Y) as f32
    }
}

/// Distance between two frames (see the module doc), 0..=1.
pub fn scene_distance(a: RasterRef<'_>, b: RasterRef<'_>) -> Result<f32> {
    Ok(FrameSignature::of(a)?.distance(&FrameSignature::of(b)?))
}

/// Whether `a` -> `b` is a scene cut at [`DEFAULT_THRESHOLD`].
pub fn is_scene_cut(a: RasterRef<'_>, b: RasterRef<'_>) -> Result<bool> {
    Ok(scene_distance(a, b)? >= DEFAULT_THRESHOLD)
}

/// Streaming use: feed frames in order, get for each frame after the first whether it starts a
/// new scene (one signature per frame, kept for the next call).
#[derive(Clone, Debug)]
pub struct SceneCutDetector {
    pub threshold: f32,
    prev: Option<FrameSignature>,
}

impl Default for SceneCutDetector {
    fn default() -> Self {
        SceneCutDetector::new(DEFAULT_THRESHOLD)
    }
}

impl SceneCutDetector {
    pub fn new(threshold: f32) -> SceneCutDetector {
        SceneCutDetector { threshold, prev: None }
    }

    /// The distance from the previous frame and whether it is a cut; `None` for the first frame.
    pub fn push(&mut self, frame: RasterRef<'_>) -> Result<Option<(f32, bool)>> {
        let s = FrameSignature::of(frame)?;
        let r = self.prev.as_ref().map(|p| {
            let d = p.distance(&s);
            (d, d >= self.threshold)
        });
        self.prev = Some(s);
        Ok(r)
    }

    /// Forget the previous frame (e.g. after a seek).
    pub fn reset(&mut self) {
        self.prev = None;
    }
}
