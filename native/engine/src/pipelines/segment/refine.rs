//! Edge refinement of a segmentation mask: the colour guided filter (He, Sun, Tang, "Guided Image
//! Filtering", ECCV 2010 / TPAMI 2013) of the coarse alpha, the photo as guide, with the fast
//! variant's subsampling (He & Sun 2015) where the photo is large. U²-Net's map is 320x320; resized
//! back it is a blur of the true edge. The filter fits, in each window, alpha ~ a . I + b to the
//! photo's colours, so the edge moves onto the photo's own edge and hair / fur come out as
//! fractional alpha. Chosen and measured in docs/segmentation.md (scripts/seg-edges-eval.py).
//!
//! Cost: O(N) whatever the radius (box sums kept as running column sums and row prefix sums, in
//! f64); the two full-size passes (the block means, the final q = a . I + b) in bands of rows on
//! the machine's cores (at most 8) from 256 K pixels, the low-resolution box filters on one.
//! Memory: the output (N f32) plus at most 13 planes of [`MAX_LOW_PIXELS`] f32 and O(width) f64 per
//! thread: the filter runs at 1/s of the size, s chosen so that the low plane fits, and its linear
//! coefficients are resized back bilinearly (the fast guided filter). Over 500 lines (~550): about
//! 200 of them are the tests against the filter's O(N r^2) definition.
use lucent_core::{Code, Error, Result};

/// The network's map side (rembg's 320x320 input): the radius scales with `long side / MAP_SIDE`.
pub const MAP_SIDE: usize = 320;
/// Radius in pixels of the 320-px map (measured on alphamatting.com GT01..GT27, docs/segmentation.md).
pub const RADIUS_PER_MAP_PX: f32 = 2.0;
/// The filter's regulariser (guide in [0,1]); smaller follows the photo's edges more closely.
pub const DEFAULT_EPS: f32 = 1e-4;
/// Where the coarse mask is sure: a pixel whose whole window is >= SNAP_HI (<= SNAP_LO) in the
/// coarse mask is set to 1 (0) after filtering (with [`GuidedParams::snap`]).
pub const SNAP_LO: f32 = 0.05;
pub const SNAP_HI: f32 = 0.95;
/// The most pixels the filter's low-resolution planes hold (12 planes: 48 MiB).
pub const MAX_LOW_PIXELS: usize = 1 << 20;

/// The filter's parameters, in full-resolution pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuidedParams {
    /// Window radius: windows are (2r+1)^2, clipped at the borders.
    pub radius: usize,
    /// Regulariser, > 0 and finite.
    pub eps: f32,
    /// Run at 1/subsample of the size (1: full size); raised where the low plane would pass
    /// [`MAX_LOW_PIXELS`].
    pub subsample: usize,
    /// Keep the sure parts of the mask sure: windows wholly >= [`SNAP_HI`] give 1, wholly <=
    /// [`SNAP_LO`] give 0 (the filter only moves the uncertain band).
    pub snap: bool,
}

impl GuidedParams {
    /// The measured defaults for a mask from the 320-px map on a `width` x `height` photo.
    pub fn for_mask(width: usize, height: usize) -> GuidedParams {
        let scale = width.max(height) as f32 / MAP_SIDE as f32;
        GuidedParams { radius: ((RADIUS_PER_MAP_PX * scale).round() as usize).max(1), eps: DEFAULT_EPS, subsample: 1, snap: true }
    }
}

/// The photo guiding the filter: three planes in [0,1], or interleaved 8-bit RGB (no copy made).
#[derive(Clone, Copy, Debug)]
pub enum Guide<'a> {
    Planes([&'a [f32]; 3]),
    Rgb8(&'a [u8]),
}

impl Guide<'_> {
    fn len_ok(&self, n: usize) -> bool {
        match self {
            Guide::Planes(p) => p.iter().all(|c| c.len() == n),
            Guide::Rgb8(v) => n.checked_mul(3) == Some(v.len()),
        }
    }

    #[inline]
    fn px(&self, i: usize) -> [f64; 3] {
        match self {
            Guide::Planes(p) => [fin(p[0][i]), fin(p[1][i]), fin(p[2][i])],
            Guide::Rgb8(v) => [U8_UNIT[v[3 * i] as usize], U8_UNIT[v[3 * i + 1] as usize], U8_UNIT[v[3 * i + 2] as usize]],
        }
    }
}

/// `v as f64 / 255.0` for every byte (the same values, looked up).
static U8_UNIT: [f64; 256] = {
    let mut t = [0f64; 256];
    let mut v = 0;
    while v < 256 {
        t[v] = v as f64 / 255.0;
        v += 1;
    }
    t
};

/// Full-size passes run on this many threads (bands of rows) when the photo has at least
/// [`PAR_MIN_PIXELS`]: `threads` (the pipeline passes the runtime's; [`guided_filter`] the
/// machine's cores), at most 8.
fn threads_for(n: usize, threads: usize) -> usize {
    if n < PAR_MIN_PIXELS {
        return 1;
    }
    threads.clamp(1, 8)
}

/// Below this many pixels the filter runs on the calling thread only.
const PAR_MIN_PIXELS: usize = 1 << 18;

/// `f(first_row, rows)` on bands of whole rows of `data` (`row_len` items a row), one band per thread.
fn par_rows<T: Send>(data: &mut [T], row_len: usize, threads: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let rows = data.len() / row_len.max(1);
    let band = rows.div_ceil(threads.max(1)).max(1);
    if threads <= 1 || rows <= band {
        f(0, data);
        return;
    }
    std::thread::scope(|sc| {
        for (b, chunk) in data.chunks_mut(band * row_len).enumerate() {
            let f = &f;
            sc.spawn(move || f(b * band, chunk));
        }
    });
}

/// A non-finite sample read as 0 (the filter never spreads a NaN).
#[inline]
fn fin(v: f32) -> f64 {
    if v.is_finite() {
        v as f64
    } else {
        0.0
    }
}

/// The refined alpha (N = width * height values in [0,1], row-major) of `alpha` (N values, read
/// as given: the caller's upsampled coarse mask) guided by `guide`.
pub fn guided_filter(guide: Guide<'_>, alpha: &[f32], width: usize, height: usize, p: GuidedParams) -> Result<Vec<f32>> {
    let n = width.checked_mul(height).filter(|&n| n > 0).ok_or_else(|| bad(format!("bad size {width}x{height}")))?;
    let cores = std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1);
    guided_filter_on(guide, alpha, width, height, p, threads_for(n, cores))
}

/// [`guided_filter`] on at most `threads` threads (the runtime's: the pipeline does not use more
/// cores than the CPU backend was given). The result does not depend on `threads`.
pub fn guided_filter_threads(guide: Guide<'_>, alpha: &[f32], width: usize, height: usize, p: GuidedParams, threads: usize) -> Result<Vec<f32>> {
    let n = width.checked_mul(height).filter(|&n| n > 0).ok_or_else(|| bad(format!("bad size {width}x{height}")))?;
    guided_filter_on(guide, alpha, width, height, p, threads_for(n, threads))
}

/// [`guided_filter`] with its full-size passes on `threads` threads (the result does not depend on it).
fn guided_filter_on(guide: Guide<'_>, alpha: &[f32], width: usize, height: usize, p: GuidedParams, threads: usize) -> Result<Vec<f32>> {
    let n = width.checked_mul(height).filter(|&n| n > 0).ok_or_else(|| bad(format!("bad size {width}x{height}")))?;
    if alpha.len() != n || !guide.len_ok(n) {
        return Err(bad(format!("planes do not match {width}x{height}")));
    }
    if !(p.eps.is_finite() && p.eps > 0.0) {
        return Err(bad(format!("eps must be finite and > 0, got {}", p.eps)));
    }
    // The subsampling factor: the requested one, raised until the low plane fits the bound.
    let mut s = p.subsample.clamp(1, width.max(height));
    while width.div_ceil(s) * height.div_ceil(s) > MAX_LOW_PIXELS {
        s += 1;
    }
    let (lw, lh) = (width.div_ceil(s), height.div_ceil(s));
    let r = if s == 1 { p.radius } else { ((p.radius as f64 / s as f64).round() as usize).max(1) };
    let r = r.min(lw.max(lh));
    let eps = p.eps as f64;

    // The low planes: guide (3) and alpha, s x s block means (computed row-interleaved, [ly][c][lx],
    // in bands of rows over the threads, then laid out as planes).
    let mut rows = vec![0f32; 4 * lw * lh];
    par_rows(&mut rows, 4 * lw, threads, |ly0, band| {
        let mut acc = vec![0f64; 4 * lw];
        for (j, dst) in band.chunks_mut(4 * lw).enumerate() {
            let ly = ly0 + j;
            acc.fill(0.0);
            let (y0, y1) = (ly * s, ((ly + 1) * s).min(height));
            for y in y0..y1 {
                // Column blocks of s pixels (no division per pixel).
                for (lx, a) in acc.chunks_exact_mut(4).enumerate() {
                    #[allow(clippy::needless_range_loop)] // `i` indexes the guide (a method) and alpha alike
                    for i in y * width + lx * s..y * width + ((lx + 1) * s).min(width) {
                        let g = guide.px(i);
                        a[0] += g[0];
                        a[1] += g[1];
                        a[2] += g[2];
                        a[3] += fin(alpha[i]);
                    }
                }
            }
            for lx in 0..lw {
                let cnt = ((y1 - y0) * (((lx + 1) * s).min(width) - lx * s)) as f64;
                for c in 0..4 {
                    dst[c * lw + lx] = (acc[4 * lx + c] / cnt) as f32;
                }
            }
        }
    });
    let mut low = vec![0f32; 4 * lw * lh];
    for (ly, row) in rows.chunks_exact(4 * lw).enumerate() {
        for c in 0..4 {
            low[c * lw * lh + ly * lw..c * lw * lh + (ly + 1) * lw].copy_from_slice(&row[c * lw..(c + 1) * lw]);
        }
    }
    drop(rows);
    let (gl, al) = low.split_at(3 * lw * lh);
    let gl = [&gl[..lw * lh], &gl[lw * lh..2 * lw * lh], &gl[2 * lw * lh..]];

    // Pass 1: the window statistics and each window's coefficients a (3) and b.
    let mut coef = vec![0f32; 4 * lw * lh];
    box_rows(lw, lh, r, 13, |y, q| {
        for x in 0..lw {
            let i = y * lw + x;
            let (g0, g1, g2, pv) = (gl[0][i] as f64, gl[1][i] as f64, gl[2][i] as f64, al[i] as f64);
            let v = [g0, g1, g2, pv, g0 * g0, g0 * g1, g0 * g2, g1 * g1, g1 * g2, g2 * g2, g0 * pv, g1 * pv, g2 * pv];
            for (k, &vk) in v.iter().enumerate() {
                q[k * lw + x] = vk;
            }
        }
    }, |y, sums, cnt| {
        for x in 0..lw {
            let m = |k: usize| sums[k * lw + x] / cnt[x];
            let (m0, m1, m2, mp) = (m(0), m(1), m(2), m(3));
            // Sigma + eps U (symmetric) and cov(I, p).
            let s00 = m(4) - m0 * m0 + eps;
            let s01 = m(5) - m0 * m1;
            let s02 = m(6) - m0 * m2;
            let s11 = m(7) - m1 * m1 + eps;
            let s12 = m(8) - m1 * m2;
            let s22 = m(9) - m2 * m2 + eps;
            let c = [m(10) - m0 * mp, m(11) - m1 * mp, m(12) - m2 * mp];
            // The adjugate solve of the 3x3 system.
            let i00 = s11 * s22 - s12 * s12;
            let i01 = s02 * s12 - s01 * s22;
            let i02 = s01 * s12 - s02 * s11;
            let i11 = s00 * s22 - s02 * s02;
            let i12 = s01 * s02 - s00 * s12;
            let i22 = s00 * s11 - s01 * s01;
            let det = s00 * i00 + s01 * i01 + s02 * i02;
            let a = if det.is_finite() && det > 0.0 {
                [(i00 * c[0] + i01 * c[1] + i02 * c[2]) / det, (i01 * c[0] + i11 * c[1] + i12 * c[2]) / det, (i02 * c[0] + i12 * c[1] + i22 * c[2]) / det]
            } else {
                [0.0; 3]
            };
            let b = mp - a[0] * m0 - a[1] * m1 - a[2] * m2;
            let i = y * lw + x;
            let plane = lw * lh;
            coef[i] = a[0] as f32;
            coef[plane + i] = a[1] as f32;
            coef[2 * plane + i] = a[2] as f32;
            coef[3 * plane + i] = b as f32;
        }
    });

    // Pass 2: the mean of the coefficients over each window, and whether the window is sure
    // (wholly >= SNAP_HI: 1, wholly <= SNAP_LO: 2, else 0).
    let mut mean = vec![0f32; 4 * lw * lh];
    let mut sure = vec![0u8; lw * lh];
    let plane = lw * lh;
    box_rows(lw, lh, r, 6, |y, q| {
        for k in 0..4 {
            for x in 0..lw {
                q[k * lw + x] = coef[k * plane + y * lw + x] as f64;
            }
        }
        for x in 0..lw {
            let v = al[y * lw + x];
            q[4 * lw + x] = (v >= SNAP_HI) as u8 as f64;
            q[5 * lw + x] = (v <= SNAP_LO) as u8 as f64;
        }
    }, |y, sums, cnt| {
        for k in 0..4 {
            for x in 0..lw {
                mean[k * plane + y * lw + x] = (sums[k * lw + x] / cnt[x]) as f32;
            }
        }
        if p.snap {
            for x in 0..lw {
                // Counts are exact small integers in f64.
                sure[y * lw + x] = if sums[4 * lw + x] == cnt[x] { 1 } else if sums[5 * lw + x] == cnt[x] { 2 } else { 0 };
            }
        }
    });
    drop(coef);

    // q = mean(a) . I + mean(b) at full size (the coefficients resized bilinearly where s > 1:
    // per output row, the four planes' vertical blend once, then per pixel the horizontal one),
    // in bands of rows over the threads.
    let mut out = vec![0f32; n];
    let xtaps: Vec<(usize, usize, f64)> = (0..width).map(|x| lerp_at(x, s, lw)).collect();
    let xsure: Vec<usize> = (0..width).map(|x| x / s).collect();
    par_rows(&mut out, width, threads, |y0, band| {
        let mut col = vec![0f64; 4 * lw];
        for (j, orow) in band.chunks_mut(width).enumerate() {
            let y = y0 + j;
            let (ya, yb, wy) = lerp_at(y, s, lh);
            for k in 0..4 {
                let (ra, rb) = (&mean[k * plane + ya * lw..k * plane + (ya + 1) * lw], &mean[k * plane + yb * lw..k * plane + (yb + 1) * lw]);
                for ((c, &a), &b) in col[k * lw..(k + 1) * lw].iter_mut().zip(ra).zip(rb) {
                    *c = a as f64 * (1.0 - wy) + b as f64 * wy;
                }
            }
            let srow = &sure[(y / s) * lw..(y / s + 1) * lw];
            for (x, ((o, &(xa, xb, wx)), &sx)) in orow.iter_mut().zip(&xtaps).zip(&xsure).enumerate() {
                match srow[sx] {
                    1 => {
                        *o = 1.0;
                        continue;
                    }
                    2 => continue,
                    _ => {}
                }
                let g = guide.px(y * width + x);
                let mut v = 0.0;
                for (k, gk) in [g[0], g[1], g[2], 1.0].into_iter().enumerate() {
                    v += (col[k * lw + xa] * (1.0 - wx) + col[k * lw + xb] * wx) * gk;
                }
                *o = if v.is_finite() { v.clamp(0.0, 1.0) as f32 } else { 0.0 };
            }
        }
    });
    Ok(out)
}

/// The low-plane neighbours and weight of full-size coordinate `x` at factor `s` (centres aligned).
#[inline]
fn lerp_at(x: usize, s: usize, len: usize) -> (usize, usize, f64) {
    if s == 1 {
        return (x, x, 0.0);
    }
    let f = ((x as f64 + 0.5) / s as f64 - 0.5).clamp(0.0, (len - 1) as f64);
    let a = f.floor() as usize;
    (a, (a + 1).min(len - 1), f - a as f64)
}

/// Box sums of `k` per-pixel quantities over (2r+1)^2 windows clipped at the borders, row by row:
/// `row(y, q)` writes row y's quantities (q[k * w + x]); `emit(y, sums, counts)` gets row y's
/// window sums (same layout) and window sizes. Running column sums over the window's rows (one
/// add and one remove per row), then row prefix sums: O(w h k), O(w k) memory.
fn box_rows(w: usize, h: usize, r: usize, k: usize, mut row: impl FnMut(usize, &mut [f64]), mut emit: impl FnMut(usize, &[f64], &[f64])) {
    let mut col = vec![0f64; k * w];
    let mut tmp = vec![0f64; k * w];
    let mut out = vec![0f64; k * w];
    let mut pre = vec![0f64; w + 1];
    let mut cnt = vec![0f64; w];
    // The rows now summed in `col`: lo..hi (empty at first).
    let (mut lo, mut hi) = (0usize, 0usize);
    for y in 0..h {
        let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h));
        while hi < y1 {
            row(hi, &mut tmp);
            col.iter_mut().zip(&tmp).for_each(|(c, t)| *c += t);
            hi += 1;
        }
        while lo < y0 {
            row(lo, &mut tmp);
            col.iter_mut().zip(&tmp).for_each(|(c, t)| *c -= t);
            lo += 1;
        }
        for q in 0..k {
            let c = &col[q * w..(q + 1) * w];
            for x in 0..w {
                pre[x + 1] = pre[x] + c[x];
            }
            for x in 0..w {
                out[q * w + x] = pre[(x + r + 1).min(w)] - pre[x.saturating_sub(r)];
            }
        }
        let rows = (y1 - y0) as f64;
        for (x, c) in cnt.iter_mut().enumerate() {
            *c = rows * ((x + r + 1).min(w) - x.saturating_sub(r)) as f64;
        }
        emit(y, &out, &cnt);
    }
}

fn bad(m: String) -> Error {
    Error::new(Code::InvalidArgument, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), no dependency.
    struct Rng(u64);
    impl Rng {
        fn f(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    /// The filter straight from its definition: every window summed pixel by pixel, O(N r^2), f64.
    fn naive(g: [&[f32]; 3], p: &[f32], w: usize, h: usize, r: usize, eps: f64, snap: bool) -> Vec<f32> {
        let win = |x: usize, y: usize| {
            let xs = x.saturating_sub(r)..(x + r + 1).min(w);
            let ys = y.saturating_sub(r)..(y + r + 1).min(h);
            ys.flat_map(move |yy| xs.clone().map(move |xx| yy * w + xx))
        };
        let mut a = vec![[0f64; 4]; w * h];
        for y in 0..h {
            for x in 0..w {
                let idx: Vec<usize> = win(x, y).collect();
                let nn = idx.len() as f64;
                let mean = |f: &dyn Fn(usize) -> f64| idx.iter().map(|&i| f(i)).sum::<f64>() / nn;
                let mi: Vec<f64> = (0..3).map(|c| mean(&|i| g[c][i] as f64)).collect();
                let mp = mean(&|i| p[i] as f64);
                let mut sig = [[0f64; 3]; 3];
                for (i, row) in sig.iter_mut().enumerate() {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = mean(&|k| g[i][k] as f64 * g[j][k] as f64) - mi[i] * mi[j] + if i == j { eps } else { 0.0 };
                    }
                }
                let c: Vec<f64> = (0..3).map(|ch| mean(&|k| g[ch][k] as f64 * p[k] as f64) - mi[ch] * mp).collect();
                // Gaussian elimination with partial pivoting.
                let mut m = [[sig[0][0], sig[0][1], sig[0][2], c[0]], [sig[1][0], sig[1][1], sig[1][2], c[1]], [sig[2][0], sig[2][1], sig[2][2], c[2]]];
                for col in 0..3 {
                    let piv = (col..3).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs())).unwrap();
                    m.swap(col, piv);
                    let pr = m[col];
                    for (row, mr) in m.iter_mut().enumerate() {
                        if row != col {
                            let f = mr[col] / pr[col];
                            mr.iter_mut().zip(pr).skip(col).for_each(|(v, pv)| *v -= f * pv);
                        }
                    }
                }
                let av = [m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]];
                a[y * w + x] = [av[0], av[1], av[2], mp - av[0] * mi[0] - av[1] * mi[1] - av[2] * mi[2]];
            }
        }
        let mut out = vec![0f32; w * h];
        for y in 0..h {
            for x in 0..w {
                let idx: Vec<usize> = win(x, y).collect();
                let nn = idx.len() as f64;
                let mut v = 0.0;
                for k in 0..4 {
                    let mk = idx.iter().map(|&i| a[i][k]).sum::<f64>() / nn;
                    v += mk * if k < 3 { g[k][y * w + x] as f64 } else { 1.0 };
                }
                out[y * w + x] = v.clamp(0.0, 1.0) as f32;
                if snap && idx.iter().all(|&i| p[i] >= SNAP_HI) {
                    out[y * w + x] = 1.0;
                }
                if snap && idx.iter().all(|&i| p[i] <= SNAP_LO) {
                    out[y * w + x] = 0.0;
                }
            }
        }
        out
    }

    fn random(w: usize, h: usize, seed: u64) -> ([Vec<f32>; 3], Vec<f32>) {
        let mut rng = Rng(seed);
        let g = [0, 1, 2].map(|_| (0..w * h).map(|_| rng.f()).collect::<Vec<f32>>());
        let p = (0..w * h).map(|_| rng.f()).collect();
        (g, p)
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    /// Bands of rows on several threads give the one-thread result, bit for bit (full size and
    /// subsampled; snapping on and off).
    #[test]
    fn threads_do_not_change_the_result() {
        let (w, h) = (301, 211);
        let (g, p) = random(w, h, 11);
        let rgb: Vec<u8> = (0..w * h).flat_map(|i| g.iter().map(move |c| (c[i] * 255.0) as u8)).collect();
        for (sub, snap) in [(1, false), (3, true), (4, false)] {
            let gp = GuidedParams { radius: 5, eps: 1e-3, subsample: sub, snap };
            let one = guided_filter_on(Guide::Rgb8(&rgb), &p, w, h, gp, 1).unwrap();
            for t in [2, 3, 7] {
                let many = guided_filter_on(Guide::Rgb8(&rgb), &p, w, h, gp, t).unwrap();
                assert!(one.iter().zip(&many).all(|(a, b)| a.to_bits() == b.to_bits()), "subsample {sub}, {t} threads");
            }
        }
    }

    /// The O(N) filter equals the definition within 1e-4 (max abs) on random planes, radii 0..9
    /// (some wider than the image), eps 1e-4..1e-1, odd sizes; with snapping on a blobby mask
    /// (sure regions present) and without it on a random one.
    #[test]
    fn matches_the_naive_definition() {
        let mut seed = 7;
        let mut worst = 0f32;
        for &(w, h) in &[(17usize, 11usize), (9, 23), (31, 5), (1, 13), (12, 1)] {
            for &r in &[0usize, 1, 2, 4, 9] {
                for &eps in &[1e-4f32, 1e-2, 1e-1] {
                    for snap in [false, true] {
                        seed += 1;
                        let (g, mut p) = random(w, h, seed);
                        if snap {
                            let ph = seed as f32;
                            for (i, v) in p.iter_mut().enumerate() {
                                let (x, y) = ((i % w) as f32, (i / w) as f32);
                                *v = (1.5 * (x / 3.0 + ph).sin() * (y / 4.0).cos() + 0.5).clamp(0.0, 1.0);
                            }
                        }
                        let gr = [&g[0][..], &g[1][..], &g[2][..]];
                        let got = guided_filter(Guide::Planes(gr), &p, w, h, GuidedParams { radius: r, eps, subsample: 1, snap }).unwrap();
                        let want = naive(gr, &p, w, h, r, eps as f64, snap);
                        let d = max_diff(&got, &want);
                        assert!(d <= 1e-4, "{w}x{h} r={r} eps={eps} snap={snap}: max abs diff {d}");
                        worst = worst.max(d);
                    }
                }
            }
        }
        eprintln!("worst max abs diff against the definition: {worst:e}");
    }

    /// The 8-bit guide is the same filter as its planes / 255.
    #[test]
    fn rgb8_guide_equals_planes() {
        let (w, h) = (21, 14);
        let mut rng = Rng(99);
        let rgb: Vec<u8> = (0..w * h * 3).map(|_| (rng.f() * 255.0) as u8).collect();
        let planes: Vec<Vec<f32>> = (0..3).map(|c| (0..w * h).map(|i| rgb[3 * i + c] as f32 / 255.0).collect()).collect();
        let p: Vec<f32> = (0..w * h).map(|_| rng.f()).collect();
        let prm = GuidedParams { radius: 3, eps: 1e-3, subsample: 1, snap: false };
        let a = guided_filter(Guide::Rgb8(&rgb), &p, w, h, prm).unwrap();
        let b = guided_filter(Guide::Planes([&planes[0], &planes[1], &planes[2]]), &p, w, h, prm).unwrap();
        assert!(max_diff(&a, &b) <= 1e-6);
    }

    /// 1x1, a radius far larger than the image, subsampling larger than the image: values stay in
    /// [0,1] and finite; a constant guide gives the window mean of alpha (a = 0, b = mean).
    #[test]
    fn edge_cases() {
        let one = guided_filter(Guide::Planes([&[0.3], &[0.5], &[0.9]]), &[0.7], 1, 1, GuidedParams { radius: 5, eps: 1e-4, subsample: 1, snap: false }).unwrap();
        assert!((one[0] - 0.7).abs() < 1e-6, "{one:?}");
        let one = guided_filter(Guide::Rgb8(&[1, 2, 3]), &[0.25], 1, 1, GuidedParams { radius: 0, eps: 1e-2, subsample: 64, snap: false }).unwrap();
        assert!((one[0] - 0.25).abs() < 1e-6, "{one:?}");

        let (w, h) = (13, 7);
        let c = vec![0.4f32; w * h];
        let mut rng = Rng(3);
        let p: Vec<f32> = (0..w * h).map(|_| rng.f()).collect();
        let mean = p.iter().map(|&v| v as f64).sum::<f64>() / p.len() as f64;
        let q = guided_filter(Guide::Planes([&c, &c, &c]), &p, w, h, GuidedParams { radius: 1000, eps: 1e-4, subsample: 1, snap: false }).unwrap();
        assert!(q.iter().all(|&v| (v as f64 - mean).abs() < 1e-5), "constant guide, r > size: every pixel is the mean {mean}");
        // Radius 0: every window is the pixel itself, so the output is alpha (a = 0, b = p).
        let (g, _) = random(w, h, 5);
        let q = guided_filter(Guide::Planes([&g[0], &g[1], &g[2]]), &p, w, h, GuidedParams { radius: 0, eps: 1e-4, subsample: 1, snap: false }).unwrap();
        assert!(max_diff(&q, &p) < 1e-5);
        // Subsampled: still finite and in range.
        let q = guided_filter(Guide::Planes([&g[0], &g[1], &g[2]]), &p, w, h, GuidedParams { radius: 3, eps: 1e-4, subsample: 3, snap: false }).unwrap();
        assert!(q.iter().all(|v| (0.0..=1.0).contains(v)));
        // Non-finite inputs do not spread.
        let mut pn = p.clone();
        pn[10] = f32::NAN;
        pn[11] = f32::INFINITY;
        let q = guided_filter(Guide::Planes([&g[0], &g[1], &g[2]]), &pn, w, h, GuidedParams { radius: 2, eps: 1e-4, subsample: 1, snap: false }).unwrap();
        assert!(q.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn bad_arguments_are_errors() {
        let z = [0f32; 4];
        let prm = GuidedParams { radius: 1, eps: 1e-3, subsample: 1, snap: false };
        for (w, h) in [(0usize, 4usize), (4, 0), (usize::MAX, 2), (3, 1)] {
            let e = guided_filter(Guide::Planes([&z, &z, &z]), &z, w, h, prm).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument);
        }
        for eps in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let e = guided_filter(Guide::Planes([&z, &z, &z]), &z, 2, 2, GuidedParams { eps, ..prm }).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument);
        }
        let e = guided_filter(Guide::Rgb8(&[0; 11]), &z, 2, 2, prm).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
    }

    /// A large image is filtered at a raised subsampling: the low planes stay within the bound.
    #[test]
    fn the_low_plane_is_bounded() {
        let (w, h) = (2049, 1031); // 2.1 MP > MAX_LOW_PIXELS: s becomes 2
        let g = vec![0u8; w * h * 3];
        let p = vec![1f32; w * h];
        let q = guided_filter(Guide::Rgb8(&g), &p, w, h, GuidedParams::for_mask(w, h)).unwrap();
        assert!(q.iter().all(|&v| (v - 1.0).abs() < 1e-5));
    }

    #[test]
    fn default_radius_scales_with_the_photo() {
        assert_eq!(GuidedParams::for_mask(320, 200).radius, 2);
        assert_eq!(GuidedParams::for_mask(800, 497).radius, 5);
        assert_eq!(GuidedParams::for_mask(1, 1).radius, 1);
    }
}
