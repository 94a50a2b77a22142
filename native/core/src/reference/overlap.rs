//! Overlapping cross-attention (HAT's OCAB) in the reference executor: queries from
//! non-overlapping windows, keys and values from larger windows centred on them, read with zeros
//! outside the blob. Plain loops, accumulation in f32, the same order of operations as
//! [`super::window_attention`] (so with `overlap == window` the two agree bit for bit).

use super::check_tensor;
use crate::bail;
use crate::error::{Code, Result};
use crate::ncnn::model::OverlapAttention;
use crate::tensor::Tensor;

/// Overlapping window cross-attention; see [`OverlapAttention`] for the exact semantics.
pub fn overlap_attention(p: &OverlapAttention, x: &Tensor) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 || x.h == 0 || x.w == 0 {
        bail!(Code::InvalidArgument, "OverlapAttention needs a non-empty 3-D blob, got {}", x.shape_string());
    }
    let (ws, ows, heads) = (p.window, p.overlap, p.heads);
    if heads == 0 || ws == 0 || ows < ws || !(ows - ws).is_multiple_of(2) || !x.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "OverlapAttention: {heads} heads, window {ws}, overlap window {ows} do not fit {} channels (the overlap window must exceed the window by an even count)", x.c);
    }
    let (nq, nk) = (ws * ws, ows * ows);
    if !p.bias.is_empty() && p.bias.len() != heads * nq * nk {
        bail!(Code::ModelInvalid, "OverlapAttention: bias of {} values for {heads} heads of {nq} x {nk} tokens", p.bias.len());
    }
    let c = x.c / 3;
    let d = c / heads;
    let pad = (ows - ws) / 2;
    let (h, w) = (x.h, x.w);
    let hw = h * w;
    let inside = |y: usize, xx: usize| (y < h && xx < w).then_some(y * w + xx);
    let mut out = Tensor::zeros(c, h, w);
    let mut q = vec![0f32; nq * d];
    let mut k = vec![0f32; nk * d];
    let mut v = vec![0f32; nk * d];
    let mut qpix: Vec<Option<usize>> = vec![None; nq];
    let mut kpix: Vec<Option<usize>> = vec![None; nk];
    let mut row = vec![0f32; nk];
    for wy in 0..h.div_ceil(ws) {
        for wx in 0..w.div_ceil(ws) {
            for (t, qp) in qpix.iter_mut().enumerate() {
                *qp = inside(wy * ws + t / ws, wx * ws + t % ws);
            }
            for (t, kp) in kpix.iter_mut().enumerate() {
                // (wy·ws - pad + ky, wx·ws - pad + kx), None above/left of the blob.
                let (y, xx) = ((wy * ws + t / ows).checked_sub(pad), (wx * ws + t % ows).checked_sub(pad));
                *kp = y.zip(xx).and_then(|(y, xx)| inside(y, xx));
            }
            for hd in 0..heads {
                for j in 0..d {
                    let ch = hd * d + j;
                    for t in 0..nq {
                        q[t * d + j] = qpix[t].map_or(0.0, |o| x.data[ch * hw + o]);
                    }
                    for t in 0..nk {
                        k[t * d + j] = kpix[t].map_or(0.0, |o| x.data[(c + ch) * hw + o]);
                        v[t * d + j] = kpix[t].map_or(0.0, |o| x.data[(2 * c + ch) * hw + o]);
                    }
                }
                for i in 0..nq {
                    let Some(o) = qpix[i] else { continue };
                    let mut m = f32::NEG_INFINITY;
                    for (j, r) in row.iter_mut().enumerate() {
                        let mut s = 0f32;
                        for e in 0..d {
                            s += q[i * d + e] * p.scale * k[j * d + e];
                        }
                        if !p.bias.is_empty() {
                            s += p.bias[(hd * nq + i) * nk + j];
                        }
                        *r = s;
                        m = m.max(s);
                    }
                    let mut sum = 0f32;
                    for r in row.iter_mut() {
                        *r = (*r - m).exp();
                        sum += *r;
                    }
                    for e in 0..d {
                        let mut acc = 0f32;
                        for j in 0..nk {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::model::WindowAttention;
    use crate::reference::window_attention;

    /// q = 0 (every score equal), one head of one channel, v = the pixel's index.
    fn uniform_qk(h: usize, w: usize) -> Tensor {
        let mut data = vec![0.0; 2 * h * w];
        data.extend((0..h * w).map(|i| i as f32));
        Tensor::from_vec(3, h, w, data)
    }

    #[test]
    fn keys_come_from_the_zero_padded_overlap_window() {
        // 4x4, windows of 2, overlap windows of 4 (p = 1): window (0, 0) sees rows and columns
        // -1..3, i.e. pixels (0..3, 0..3) and seven zeros, all with the same weight 1/16.
        let x = uniform_qk(4, 4);
        let p = OverlapAttention { heads: 1, window: 2, overlap: 4, scale: 1.0, bias: vec![] };
        let y = overlap_attention(&p, &x).unwrap();
        assert_eq!((y.c, y.h, y.w), (1, 4, 4));
        let seen: f32 = [0, 1, 2, 4, 5, 6, 8, 9, 10].iter().map(|&i| i as f32).sum();
        for o in [0, 1, 4, 5] {
            assert!((y.data[o] - seen / 16.0).abs() < 1e-5, "{o}: {}", y.data[o]);
        }
        // Window (1, 1) sees rows/columns 1..5: pixels (1..4, 1..4).
        let seen: f32 = [5, 6, 7, 9, 10, 11, 13, 14, 15].iter().map(|&i| i as f32).sum();
        assert!((y.data[15] - seen / 16.0).abs() < 1e-5, "{}", y.data[15]);
    }

    #[test]
    fn bias_is_indexed_query_by_key_token_row_major() {
        // A large bias on key token 6 = (ky 1, kx 2) of window (1, 1)'s 4x4 overlap window, whose
        // top-left is pixel (1, 1): every query attends to pixel (2, 3), v = 11.
        let x = uniform_qk(4, 4);
        let (nq, nk) = (4, 16);
        let mut bias = vec![0.0; nq * nk];
        for i in 0..nq {
            bias[i * nk + 6] = 100.0;
        }
        let p = OverlapAttention { heads: 1, window: 2, overlap: 4, scale: 1.0, bias };
        let y = overlap_attention(&p, &x).unwrap();
        for o in [10, 11, 14, 15] {
            assert!((y.data[o] - 11.0).abs() < 1e-4, "{o}: {}", y.data[o]);
        }
        // Window (0, 0)'s token 6 is pixel (0, 1).
        assert!((y.data[0] - 1.0).abs() < 1e-4, "{}", y.data[0]);
    }

    #[test]
    fn sizes_that_are_no_multiple_of_the_window_read_zeros() {
        // 3x3 with windows of 2 and overlap 2 (p = 0): window (1, 1) holds pixel (2, 2) and three
        // zeros; q = 0, so its output is v / 4.
        let x = uniform_qk(3, 3);
        let p = OverlapAttention { heads: 1, window: 2, overlap: 2, scale: 1.0, bias: vec![] };
        let y = overlap_attention(&p, &x).unwrap();
        assert!((y.data[8] - 8.0 / 4.0).abs() < 1e-6, "{}", y.data[8]);
    }

    /// With `overlap == window` the op is unshifted window attention over the zero-padded frame.
    #[test]
    fn equals_window_attention_without_overlap() {
        let mut seed = 12345u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        };
        let (heads, d, h, w, ws) = (2, 3, 7, 5, 3usize);
        let x = Tensor::from_vec(3 * heads * d, h, w, (0..3 * heads * d * h * w).map(|_| rnd()).collect());
        let bias: Vec<f32> = (0..heads * ws.pow(4)).map(|_| rnd()).collect();
        let p = OverlapAttention { heads, window: ws, overlap: ws, scale: 0.7, bias: bias.clone() };
        let wa = WindowAttention { heads, win_h: ws, win_w: ws, shift_y: 0, shift_x: 0, pad_multiple: ws, scale: 0.7, bias, masked: false, mask_value: -100.0 };
        let (a, b) = (overlap_attention(&p, &x).unwrap(), window_attention(&wa, &x).unwrap());
        assert_eq!(a.data, b.data);
    }

    #[test]
    fn refuses_operands_that_do_not_fit() {
        let x = uniform_qk(4, 4);
        let p = OverlapAttention { heads: 1, window: 2, overlap: 3, scale: 1.0, bias: vec![] };
        assert!(overlap_attention(&p, &x).unwrap_err().message.contains("even"));
        let p = OverlapAttention { heads: 2, overlap: 4, ..p };
        assert!(overlap_attention(&p, &x).is_err());
        let p = OverlapAttention { heads: 1, bias: vec![0.0; 3], ..p };
        assert!(overlap_attention(&p, &x).unwrap_err().message.contains("bias"));
    }
}
