//! Where a face-model frame's time goes: with the engine option `face_profile` (the server's
//! `LUCENT_FACE_PROFILE=1`; [`set_enabled`] at engine construction), every video frame (and still
//! picture) of a face model prints one line to stderr:
//!
//! `face-profile 640x480 x2: base 4148 ms | detect 233 ms | 2 faces: 207x207->207x207 sr/realesr-general-x4v3 811 ms + 13 ms; ... | total 7996 ms`
//!
//! (per face: the crop in input px -> the face network's input, the network, then resample + blend).
//! Off (the default) it costs one relaxed atomic load per frame.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Process-wide: the face pipelines run deep below the engine's entry points.
static ON: AtomicBool = AtomicBool::new(false);

/// Turns the per-frame report on or off for the process (the engine's `face_profile` option).
pub fn set_enabled(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Whether the per-frame report is on.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// One face's share of a frame.
#[derive(Debug, Clone, Default)]
pub struct FaceCost {
    /// Crop (input px) and the face network's input size.
    pub crop: (usize, usize),
    pub work: (usize, usize),
    pub net_ms: f64,
    /// Resampling the network's output to the output region + the blend.
    pub blend_ms: f64,
    /// Skipped (too small / zero weight): no network ran.
    pub skipped: bool,
}

/// The stages of one frame (collected only when [`enabled`]).
#[derive(Debug)]
pub struct FrameProfile {
    t0: Instant,
    pub base_ms: f64,
    pub detect_ms: f64,
    pub faces: Vec<FaceCost>,
}

impl FrameProfile {
    pub fn start() -> Option<FrameProfile> {
        enabled().then(|| FrameProfile { t0: Instant::now(), base_ms: 0.0, detect_ms: 0.0, faces: Vec::new() })
    }

    /// The line this frame prints.
    pub fn line(&self, w: usize, h: usize, scale: usize, face_net: &str) -> String {
        let mut s = format!("face-profile {w}x{h} x{scale}: base {:.0} ms | detect {:.0} ms | {} faces", self.base_ms, self.detect_ms, self.faces.len());
        for (i, f) in self.faces.iter().enumerate() {
            s.push_str(if i == 0 { ": " } else { "; " });
            if f.skipped {
                let _ = write!(s, "{}x{} skipped", f.crop.0, f.crop.1);
            } else {
                let _ = write!(s, "{}x{}->{}x{} {face_net} {:.0} ms + {:.0} ms", f.crop.0, f.crop.1, f.work.0, f.work.1, f.net_ms, f.blend_ms);
            }
        }
        let _ = write!(s, " | total {:.0} ms", ms_since(self.t0));
        s
    }
}

pub fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
