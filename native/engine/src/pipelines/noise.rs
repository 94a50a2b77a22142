//! Blind noise-level estimation: the PCA method of Chen, Zhu and Heng, "An Efficient Statistical
//! Method for Image Noise Level Estimation" (ICCV 2015), written from the paper.
//!
//! Patches (6 x 6 x channels) are sampled on a grid; the eigenvalues of their covariance split into
//! a signal part (few, large) and a noise part (many, all close to sigma^2). Scanning from the
//! largest eigenvalue down, the first tail whose mean has as many eigenvalues above it as below it
//! (mean == median: a tail of pure noise eigenvalues) gives sigma^2 = that mean.
//!
//! Clipping: 8-bit noisy images are clipped at 0 and 255, which shrinks the noise in dark and
//! bright areas. With `skip_clipped` a patch holding any clipped sample (exactly 0 or full scale)
//! is left out, so the estimate comes from areas where the noise is intact. The engine then maps
//! the raw estimate through a measured calibration (see `denoise.rs`).

use crate::raster::RasterRef;

/// Patch side.
pub const PATCH: usize = 6;
/// Upper bound on sampled patches (the grid stride grows with the image).
pub const MAX_PATCHES: usize = 40_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseEstimate {
    /// Noise standard deviation on the 0..255 scale.
    pub sigma: f64,
    /// Patches the covariance was built from.
    pub patches: usize,
}

/// Eigenvalues of a symmetric n x n matrix (row-major, destroyed), by cyclic Jacobi rotations.
/// Sorted in descending order.
pub fn symmetric_eigenvalues(a: &mut [f64], n: usize) -> Vec<f64> {
    assert_eq!(a.len(), n * n);
    let scale: f64 = a.iter().map(|v| v * v).sum::<f64>().max(1e-300);
    for _sweep in 0..60 {
        let mut off = 0f64;
        for p in 0..n {
            for q in p + 1..n {
                off += a[p * n + q] * a[p * n + q];
            }
        }
        if off <= 1e-26 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() <= 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = if theta >= 0.0 { 1.0 } else { -1.0 } / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                // A <- J^T A J with the rotation in the (p, q) plane: columns, then rows.
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
            }
        }
    }
    let mut ev: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
    ev.sort_by(|x, y| y.partial_cmp(x).unwrap_or(std::cmp::Ordering::Equal));
    ev
}

/// Noise variance from descending eigenvalues (the paper's mean == median rule).
pub fn noise_variance_from_eigenvalues(ev: &[f64]) -> f64 {
    for i in 0..ev.len() {
        let tail = &ev[i..];
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        let above = tail.iter().filter(|&&v| v > mean).count();
        let below = tail.iter().filter(|&&v| v < mean).count();
        if above >= below {
            return mean.max(0.0);
        }
    }
    0.0
}

/// Which patches enter the covariance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Select {
    All,
    /// Patches without any clipped sample (0 or full scale).
    NoClipped,
    /// Patches whose per-channel mean lies in [lo, 255 - lo] (0..255 scale).
    MeanInside(f64),
}

/// Estimate the noise sigma (0..255 scale) of the colour channels of `src`, clipping-aware: a
/// first estimate from all patches, then again from the patches whose mean (per channel) is at
/// least 2 sigma away from 0 and from full scale, where clipping leaves the noise intact.
pub fn estimate_noise_clip_aware(src: RasterRef<'_>) -> NoiseEstimate {
    let first = estimate_noise_with(src, Select::All);
    if first.sigma < 2.0 {
        return first;
    }
    // The first estimate is low where much is clipped: refine the selection with each new one.
    let mut est = first;
    for _ in 0..CLIP_PASSES {
        let next = estimate_noise_with(src, Select::MeanInside(CLIP_K * est.sigma));
        if next.patches == 0 {
            break;
        }
        est = next;
    }
    est
}

/// Distance from the clipping bounds (in first-estimate sigmas) a patch mean must keep.
pub const CLIP_K: f64 = 2.0;
/// Refinement passes after the first estimate.
pub const CLIP_PASSES: usize = 2;

/// Estimate the noise sigma (0..255 scale) of the colour channels of `src`.
pub fn estimate_noise(src: RasterRef<'_>, skip_clipped: bool) -> NoiseEstimate {
    estimate_noise_with(src, if skip_clipped { Select::NoClipped } else { Select::All })
}

pub fn estimate_noise_with(src: RasterRef<'_>, select: Select) -> NoiseEstimate {
    let skip_clipped = select == Select::NoClipped;
    let cc = src.color_channels();
    let (w, h) = (src.width, src.height);
    if w < PATCH || h < PATCH {
        return NoiseEstimate { sigma: 0.0, patches: 0 };
    }
    let (nx, ny) = (w - PATCH + 1, h - PATCH + 1);
    let stride = (((nx * ny) as f64 / MAX_PATCHES as f64).sqrt().ceil() as usize).max(1);
    let d = PATCH * PATCH * cc;
    let full = match src.bit_depth() {
        8 => 255.0,
        _ => 65535.0,
    };
    let to255 = 255.0 / full;
    let mut sum = vec![0f64; d];
    let mut sxx = vec![0f64; d * d];
    let mut v = vec![0f64; d];
    let mut n = 0usize;
    for y0 in (0..ny).step_by(stride) {
        'patch: for x0 in (0..nx).step_by(stride) {
            let mut k = 0;
            for c in 0..cc {
                for dy in 0..PATCH {
                    for dx in 0..PATCH {
                        let raw = src.get(x0 + dx, y0 + dy, c) as f64 * full;
                        let raw = raw.round();
                        if skip_clipped && (raw <= 0.0 || raw >= full) {
                            continue 'patch;
                        }
                        v[k] = raw * to255;
                        k += 1;
                    }
                }
            }
            if let Select::MeanInside(lo) = select {
                let pp = PATCH * PATCH;
                let inside = (0..cc).all(|c| {
                    let m = v[c * pp..(c + 1) * pp].iter().sum::<f64>() / pp as f64;
                    m >= lo && m <= 255.0 - lo
                });
                if !inside {
                    continue 'patch;
                }
            }
            n += 1;
            for i in 0..d {
                sum[i] += v[i];
                let vi = v[i];
                let row = &mut sxx[i * d..i * d + d];
                for j in i..d {
                    row[j] += vi * v[j];
                }
            }
        }
    }
    if n < 2 * d {
        // Too few usable patches (tiny or mostly clipped image): try again with all patches.
        if select != Select::All {
            return estimate_noise_with(src, Select::All);
        }
        return NoiseEstimate { sigma: 0.0, patches: n };
    }
    let nf = n as f64;
    let mut cov = vec![0f64; d * d];
    for i in 0..d {
        for j in i..d {
            let c = (sxx[i * d + j] - sum[i] * sum[j] / nf) / (nf - 1.0);
            cov[i * d + j] = c;
            cov[j * d + i] = c;
        }
    }
    let ev = symmetric_eigenvalues(&mut cov, d);
    NoiseEstimate { sigma: noise_variance_from_eigenvalues(&ev).sqrt(), patches: n }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raster::Raster;

    #[test]
    fn jacobi_known_spectra() {
        let mut a = vec![2.0, 1.0, 1.0, 2.0];
        let ev = symmetric_eigenvalues(&mut a, 2);
        assert!((ev[0] - 3.0).abs() < 1e-12 && (ev[1] - 1.0).abs() < 1e-12, "{ev:?}");
        // Tridiagonal (2, -1): eigenvalues 2 - 2 cos(k pi / (n + 1)).
        let n = 9;
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            a[i * n + i] = 2.0;
            if i + 1 < n {
                a[i * n + i + 1] = -1.0;
                a[(i + 1) * n + i] = -1.0;
            }
        }
        let ev = symmetric_eigenvalues(&mut a, n);
        let mut want: Vec<f64> = (1..=n).map(|k| 2.0 - 2.0 * (k as f64 * std::f64::consts::PI / (n as f64 + 1.0)).cos()).collect();
        want.sort_by(|x, y| y.partial_cmp(x).unwrap());
        for (g, w) in ev.iter().zip(&want) {
            assert!((g - w).abs() < 1e-10, "{ev:?} vs {want:?}");
        }
    }

    /// Deterministic Gaussian samples (xorshift64* + Box-Muller).
    fn gauss(seed: &mut u64) -> f64 {
        let mut u = || {
            *seed ^= *seed >> 12;
            *seed ^= *seed << 25;
            *seed ^= *seed >> 27;
            ((seed.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (a, b) = (u(), u());
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
    }

    #[test]
    fn estimates_synthetic_noise_on_a_textured_image() {
        // A smooth colour gradient with stripes (signal) plus known Gaussian noise.
        let (w, h) = (160, 120);
        for sigma in [5.0, 15.0, 30.0] {
            let mut seed = 0x1234_5678_9abc_def1u64;
            let mut data = Vec::with_capacity(w * h * 3);
            for y in 0..h {
                for x in 0..w {
                    for c in 0..3 {
                        let s = 70.0 + 0.4 * x as f64 + 0.3 * y as f64 + 30.0 * ((x as f64 * 0.3 + c as f64).sin());
                        data.push((s + sigma * gauss(&mut seed)).round().clamp(0.0, 255.0) as u8);
                    }
                }
            }
            let r = Raster::from_u8(w, h, 3, data).unwrap();
            let e = estimate_noise(r.as_ref(), true);
            eprintln!("sigma {sigma}: estimated {:.2} from {} patches", e.sigma, e.patches);
            assert!((e.sigma - sigma).abs() < 0.1 * sigma + 0.5, "sigma {sigma}: estimated {}", e.sigma);
        }
        // A clean image estimates (near) zero.
        let data: Vec<u8> = (0..w * h * 3).map(|i| ((i / 3 % w) + (i / 3 / w)) as u8).collect();
        let e = estimate_noise(Raster::from_u8(w, h, 3, data).unwrap().as_ref(), true);
        assert!(e.sigma < 1.0, "clean ramp: {}", e.sigma);
    }
}
