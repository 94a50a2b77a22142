//! Transformer ops in the reference executor: per-pixel LayerNorm, exact GELU, reflect padding to
//! a multiple, shifted-window attention (Swin / DAT) and transposed channel attention (DAT).
//! Blobs stay planar (c, h, w): a "token" is one pixel's channel vector, so per-token linear
//! layers are 1x1 convolutions and need no op here. Plain loops, accumulation in f32 except
//! where noted; each function checks its operands and says why it refuses.

use super::check_tensor;
use crate::bail;
use crate::error::{Code, Result};
use crate::ncnn::model::WindowAttention;
use crate::tensor::Tensor;

fn need_3d(x: &Tensor, what: &str) -> Result<()> {
    check_tensor(x)?;
    if x.dims != 3 || x.h == 0 || x.w == 0 {
        bail!(Code::InvalidArgument, "{what} needs a non-empty 3-D blob, got {}", x.shape_string());
    }
    Ok(())
}

/// LayerNorm over the channels of each pixel: mean and biased variance of the `c` values, then
/// `(x - mean) / sqrt(var + eps) · weight + bias` (statistics in f64).
pub fn layer_norm(x: &Tensor, weight: &[f32], bias: &[f32], eps: f32) -> Result<Tensor> {
    need_3d(x, "LayerNorm")?;
    if weight.len() != x.c || bias.len() != x.c {
        bail!(Code::InvalidArgument, "LayerNorm of {} channels applied to {}", weight.len(), x.shape_string());
    }
    let hw = x.h * x.w;
    let mut out = x.clone();
    for p in 0..hw {
        let mean = (0..x.c).map(|c| x.data[c * hw + p] as f64).sum::<f64>() / x.c as f64;
        let var = (0..x.c).map(|c| (x.data[c * hw + p] as f64 - mean).powi(2)).sum::<f64>() / x.c as f64;
        let r = 1.0 / (var + eps as f64).sqrt();
        for c in 0..x.c {
            out.data[c * hw + p] = ((x.data[c * hw + p] as f64 - mean) * r) as f32 * weight[c] + bias[c];
        }
    }
    Ok(out)
}

/// erf(x), Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), evaluated in f64.
pub fn erf(x: f64) -> f64 {
    let s = x.signum();
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    s * (1.0 - poly * (-a * a).exp())
}

/// Exact GELU: `x · (1 + erf(x / √2)) / 2`.
#[inline]
pub fn gelu_scalar(v: f32) -> f32 {
    let x = v as f64;
    (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

pub fn gelu(x: &Tensor) -> Tensor {
    super::map(x, gelu_scalar)
}

/// Reflect index (no edge repeat) of `i` into `0..n`, for `i < 2n - 1`.
fn reflect(i: usize, n: usize) -> usize {
    if i < n { i } else { 2 * (n - 1) - i }
}

/// Bottom/right reflect padding to the next multiple of `m` (no-op when already a multiple).
/// As in PyTorch, the padding must be smaller than the side it reflects.
pub fn pad_to_multiple(x: &Tensor, m: usize) -> Result<Tensor> {
    need_3d(x, "PadToMultiple")?;
    if m == 0 {
        bail!(Code::ModelInvalid, "PadToMultiple by 0");
    }
    let (oh, ow) = (x.h.div_ceil(m) * m, x.w.div_ceil(m) * m);
    if oh == x.h && ow == x.w {
        return Ok(x.clone());
    }
    if oh - x.h >= x.h || ow - x.w >= x.w {
        bail!(Code::InvalidArgument, "reflect padding of {} to a multiple of {m} is as large as the side it mirrors", x.shape_string());
    }
    let mut out = Tensor::zeros(x.c, oh, ow);
    for c in 0..x.c {
        for y in 0..oh {
            let sy = reflect(y, x.h);
            for xx in 0..ow {
                out.data[(c * oh + y) * ow + xx] = x.at(c, sy, reflect(xx, x.w));
            }
        }
    }
    Ok(out)
}

/// Region label along one axis of length `n` for Swin's mask: the last of Python's slices
/// `[0:-win]`, `[-win:-shift]`, `[-shift:]` that contains `i` (so a zero shift makes the third
/// slice the whole axis, as in Python).
pub(crate) fn region(i: usize, n: usize, win: usize, shift: usize) -> usize {
    // Python slice bounds resolved for a length-n axis.
    let neg = |k: usize| n.saturating_sub(k);
    let s0 = (0, neg(win));
    let s1 = (neg(win), if shift == 0 { 0 } else { neg(shift) });
    let s2 = (if shift == 0 { 0 } else { neg(shift) }, n);
    let mut label = usize::MAX;
    for (k, (a, b)) in [s0, s1, s2].into_iter().enumerate() {
        if i >= a && i < b {
            label = k;
        }
    }
    label
}

/// Shifted-window multi-head self-attention; see [`WindowAttention`] for the exact steps.
pub fn window_attention(p: &WindowAttention, x: &Tensor) -> Result<Tensor> {
    need_3d(x, "WindowAttention")?;
    let (wh, ww, heads) = (p.win_h, p.win_w, p.heads);
    if heads == 0 || wh == 0 || ww == 0 || p.pad_multiple == 0 || !x.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "WindowAttention: {heads} heads, window {wh}x{ww} do not fit {} channels", x.c);
    }
    let n = wh * ww;
    if !p.bias.is_empty() && p.bias.len() != heads * n * n {
        bail!(Code::ModelInvalid, "WindowAttention: bias of {} values for {heads} heads of {n} tokens", p.bias.len());
    }
    let c = x.c / 3;
    let d = c / heads;
    let (h, w) = (x.h, x.w);
    let (hp, wp) = (h.div_ceil(p.pad_multiple) * p.pad_multiple, w.div_ceil(p.pad_multiple) * p.pad_multiple);
    if !hp.is_multiple_of(wh) || !wp.is_multiple_of(ww) || p.shift_y >= hp || p.shift_x >= wp {
        bail!(Code::ModelInvalid, "WindowAttention: window {wh}x{ww}, shift {},{} do not tile {hp}x{wp}", p.shift_y, p.shift_x);
    }
    let hw = h * w;
    // Source pixel (in x) of shifted-frame position (y, x), None in the zero padding.
    let src = |sy: usize, sx: usize| -> Option<usize> {
        let (py, px) = ((sy + p.shift_y) % hp, (sx + p.shift_x) % wp);
        (py < h && px < w).then_some(py * w + px)
    };
    let mut out = Tensor::zeros(c, h, w);
    let mut q = vec![0f32; n * d];
    let mut k = vec![0f32; n * d];
    let mut v = vec![0f32; n * d];
    let mut pix: Vec<Option<usize>> = vec![None; n];
    let mut label = vec![0usize; n];
    let mut row = vec![0f32; n];
    for wy in 0..hp / wh {
        for wx in 0..wp / ww {
            for t in 0..n {
                let (sy, sx) = (wy * wh + t / ww, wx * ww + t % ww);
                pix[t] = src(sy, sx);
                label[t] = region(sy, hp, wh, p.shift_y) * 3 + region(sx, wp, ww, p.shift_x);
            }
            for hd in 0..heads {
                for t in 0..n {
                    for j in 0..d {
                        let ch = hd * d + j;
                        let get = |base: usize| pix[t].map_or(0.0, |o| x.data[(base + ch) * hw + o]);
                        q[t * d + j] = get(0);
                        k[t * d + j] = get(c);
                        v[t * d + j] = get(2 * c);
                    }
                }
                for i in 0..n {
                    let mut m = f32::NEG_INFINITY;
                    for j in 0..n {
                        let mut s = 0f32;
                        for e in 0..d {
                            s += q[i * d + e] * p.scale * k[j * d + e];
                        }
                        if !p.bias.is_empty() {
                            s += p.bias[(hd * n + i) * n + j];
                        }
                        if p.masked && label[i] != label[j] {
                            s += p.mask_value;
                        }
                        row[j] = s;
                        m = m.max(s);
                    }
                    let mut sum = 0f32;
                    for r in row.iter_mut() {
                        *r = (*r - m).exp();
                        sum += *r;
                    }
                    let Some(o) = pix[i] else { continue };
                    for e in 0..d {
                        let mut acc = 0f32;
                        for j in 0..n {
                            acc += row[j] * v[j * d + e];
                        }
                        out.data[(hd * d + e) * hw + o] = acc / sum;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Transposed channel attention over the whole blob; see [`crate::ncnn::model::Op::ChannelAttention`].
pub fn channel_attention(heads: usize, temperature: &[f32], x: &Tensor) -> Result<Tensor> {
    need_3d(x, "ChannelAttention")?;
    if heads == 0 || temperature.len() != heads || !x.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "ChannelAttention: {heads} heads ({} temperatures) do not fit {} channels", temperature.len(), x.c);
    }
    let c = x.c / 3;
    let d = c / heads;
    let hw = x.h * x.w;
    let plane = |ch: usize| &x.data[ch * hw..(ch + 1) * hw];
    let norm = |ch: usize| (plane(ch).iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt()).max(1e-12);
    let mut out = Tensor::zeros(c, x.h, x.w);
    for (hd, &temp) in temperature.iter().enumerate() {
        let qn: Vec<f64> = (0..d).map(|i| norm(hd * d + i)).collect();
        let kn: Vec<f64> = (0..d).map(|j| norm(c + hd * d + j)).collect();
        for (i, &qni) in qn.iter().enumerate() {
            let qi = plane(hd * d + i);
            let mut a: Vec<f64> = (0..d)
                .map(|j| {
                    let kj = plane(c + hd * d + j);
                    let dot: f64 = qi.iter().zip(kj).map(|(&a, &b)| a as f64 * b as f64).sum();
                    dot / (qni * kn[j]) * temp as f64
                })
                .collect();
            let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for v in a.iter_mut() {
                *v = (*v - m).exp();
                sum += *v;
            }
            let o = &mut out.data[(hd * d + i) * hw..(hd * d + i + 1) * hw];
            for (j, aj) in a.iter().enumerate() {
                let wj = (aj / sum) as f32;
                for (ov, &vv) in o.iter_mut().zip(plane(2 * c + hd * d + j)) {
                    *ov += wj * vv;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_and_erf_match_known_values() {
        // torch.nn.functional.gelu(torch.tensor([1., -1., 2.5, -3.]))
        for (x, want) in [(1.0f32, 0.841_344_7f32), (-1.0, -0.158_655_26), (2.5, 2.484_475_8), (-3.0, -0.004_049_694)] {
            assert!((gelu_scalar(x) - want).abs() < 1e-6, "gelu({x}) = {}", gelu_scalar(x));
        }
        assert!((erf(0.5) - 0.520_499_877_8).abs() < 2e-7);
    }

    #[test]
    fn layer_norm_normalises_each_pixel_over_channels() {
        // Two channels, pixels (1, 3) and (5, 5): the second has zero variance.
        let x = Tensor::from_vec(2, 1, 2, vec![1.0, 5.0, 3.0, 5.0]);
        let y = layer_norm(&x, &[2.0, 1.0], &[0.5, 0.0], 0.0).unwrap();
        assert_eq!(y.data[0], -2.0 + 0.5);
        assert_eq!(y.data[2], 1.0);
        assert!(layer_norm(&x, &[1.0], &[0.0], 1e-5).is_err());
    }

    #[test]
    fn pad_to_multiple_reflects_without_repeating_the_edge() {
        let x = Tensor::from_vec(1, 3, 3, (1..=9).map(|v| v as f32).collect());
        let y = pad_to_multiple(&x, 5).unwrap();
        assert_eq!((y.h, y.w), (5, 5));
        assert_eq!(&y.data[..5], &[1.0, 2.0, 3.0, 2.0, 1.0]);
        assert_eq!(&y.data[20..], &[1.0, 2.0, 3.0, 2.0, 1.0]);
        // A padding as large as the side cannot reflect (PyTorch refuses it too).
        assert!(pad_to_multiple(&Tensor::from_vec(1, 2, 2, vec![0.0; 4]), 4).is_err());
    }

    #[test]
    fn swin_regions_follow_python_slices() {
        // n = 8, window 4, shift 2: [0:4] -> 0, [4:6] -> 1, [6:8] -> 2.
        let labels: Vec<usize> = (0..8).map(|i| region(i, 8, 4, 2)).collect();
        assert_eq!(labels, [0, 0, 0, 0, 1, 1, 2, 2]);
        // A zero shift makes slice(-0, None) the whole axis.
        assert!((0..8).all(|i| region(i, 8, 4, 0) == 2));
    }

    /// One head, d = 1: q = 0 makes every score equal, so each output is the mean of v over the
    /// tokens it may see: its whole window, or with the mask only those of its own region.
    #[test]
    fn window_attention_windows_shift_and_mask() {
        let (h, w) = (4, 4);
        let v: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let mut data = vec![0.0; 32];
        data.extend(&v);
        let x = Tensor::from_vec(3, h, w, data);
        let p = WindowAttention { heads: 1, win_h: 2, win_w: 2, shift_y: 0, shift_x: 0, pad_multiple: 1, scale: 1.0, bias: vec![], masked: false, mask_value: -100.0 };
        let y = window_attention(&p, &x).unwrap();
        // Top-left window holds pixels 0, 1, 4, 5.
        assert!((y.data[0] - 2.5).abs() < 1e-6 && (y.data[5] - 2.5).abs() < 1e-6);
        // Shifted by (1, 1) with the mask: pixel (0, 0) lands at the shifted frame's corner (3, 3),
        // alone in its region (labels from the 4x4 frame: rows [0:2] [2:3] [3:4]).
        let ps = WindowAttention { shift_y: 1, shift_x: 1, masked: true, ..p.clone() };
        let y = window_attention(&ps, &x).unwrap();
        assert!((y.data[0] - 0.0).abs() < 1e-4, "{}", y.data[0]);
        // Without the mask it mixes with its window (pixels 0, 3, 12, 15 in the shifted corner).
        let pu = WindowAttention { masked: false, ..ps };
        let y = window_attention(&pu, &x).unwrap();
        assert!((y.data[0] - 7.5).abs() < 1e-5, "{}", y.data[0]);
        // Zero padding: a 3x3 input padded to 4x4 keeps its size, padded tokens count as v = 0.
        let x3 = Tensor::from_vec(3, 3, 3, [vec![0.0; 18], vec![1.0; 9]].concat());
        let pp = WindowAttention { pad_multiple: 2, ..p };
        let y = window_attention(&pp, &x3).unwrap();
        assert_eq!((y.c, y.h, y.w), (1, 3, 3));
        assert!((y.data[0] - 1.0).abs() < 1e-6 && (y.data[8] - 0.25).abs() < 1e-6);
    }

    #[test]
    fn channel_attention_rows_are_convex_mixes_of_v() {
        // Two channels, one head: uniform q/k give equal weights, so both outputs are v's mean.
        let mut data = vec![1.0; 8];
        data.extend([2.0, 4.0, 6.0, 8.0]);
        let x = Tensor::from_vec(6, 1, 2, data);
        let y = channel_attention(1, &[1.0], &x).unwrap();
        assert!((y.data[0] - 4.0).abs() < 1e-6 && (y.data[1] - 6.0).abs() < 1e-6, "{:?}", y.data);
        assert!(channel_attention(2, &[1.0], &x).is_err());
    }
}
