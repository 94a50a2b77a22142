//! SPAN: optional input normalisation `(x - mean)·255`, a Conv3XC, six SPABs (three Conv3XC with
//! SiLU between them, then `(c3 + x)·(sigmoid(c3) - 0.5)`), a Conv3XC, a 1x1 conv over the concat
//! of the first features, the second conv's output, the first block's output and the last
//! block's first conv (after its in-place SiLU), and a pixel-shuffle upsampler.
//!
//! A Conv3XC (1x1 -> 3x3 -> 1x1 plus a 1x1 skip) runs in PyTorch's eval mode as one 3x3 conv whose
//! weights are recomputed from those four convs on every forward; the same fold is done here
//! (in f64), so the file's stored `eval_conv` tensors are not trusted.

use super::{Graph, B};
use crate::detect::{get, Span};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net};
use lucent_core::{bail, Code, Result};

const RGB_MEAN: [f32; 3] = [0.4488, 0.4371, 0.4040];

/// The folded 3x3 weight (out, in, 3, 3) and bias of the Conv3XC at `key`.
fn fold(sd: &StateDict, key: &str) -> Result<(Vec<usize>, Vec<f32>, Vec<f32>)> {
    let w1 = get(sd, &format!("{key}.conv.0.weight"))?;
    let b1 = get(sd, &format!("{key}.conv.0.bias"))?;
    let w2 = get(sd, &format!("{key}.conv.1.weight"))?;
    let b2 = get(sd, &format!("{key}.conv.1.bias"))?;
    let w3 = get(sd, &format!("{key}.conv.2.weight"))?;
    let b3 = get(sd, &format!("{key}.conv.2.bias"))?;
    let sk = get(sd, &format!("{key}.sk.weight"))?;
    let skb = get(sd, &format!("{key}.sk.bias"))?;
    let (m1, ci) = match w1.shape[..] {
        [m, c, 1, 1] => (m, c),
        _ => bail!(Code::ModelInvalid, "{key}.conv.0 is not a 1x1 conv"),
    };
    let n2 = match w2.shape[..] {
        [n, m, 3, 3] if m == m1 => n,
        _ => bail!(Code::ModelInvalid, "{key}.conv.1 is not a 3x3 conv over conv.0's output"),
    };
    let co = match w3.shape[..] {
        [o, n, 1, 1] if n == n2 => o,
        _ => bail!(Code::ModelInvalid, "{key}.conv.2 is not a 1x1 conv over conv.1's output"),
    };
    if sk.shape[..] != [co, ci, 1, 1] || b1.data.len() != m1 || b2.data.len() != n2 || b3.data.len() != co || skb.data.len() != co {
        bail!(Code::ModelInvalid, "{key}: Conv3XC shapes do not fit together");
    }
    // a[n][i][k] = sum_m w2[n][m][k] w1[m][i]
    let mut a = vec![0f64; n2 * ci * 9];
    for n in 0..n2 {
        for m in 0..m1 {
            for i in 0..ci {
                let w1v = w1.data[m * ci + i] as f64;
                for k in 0..9 {
                    a[(n * ci + i) * 9 + k] += w2.data[(n * m1 + m) * 9 + k] as f64 * w1v;
                }
            }
        }
    }
    // bias after conv.1: sum_{m,k} w2[n][m][k] b1[m] + b2[n]
    let bn: Vec<f64> = (0..n2)
        .map(|n| (0..m1).map(|m| (0..9).map(|k| w2.data[(n * m1 + m) * 9 + k] as f64).sum::<f64>() * b1.data[m] as f64).sum::<f64>() + b2.data[n] as f64)
        .collect();
    let mut w = vec![0f32; co * ci * 9];
    let mut b = vec![0f32; co];
    for o in 0..co {
        for i in 0..ci {
            for k in 0..9 {
                let mut s: f64 = (0..n2).map(|n| w3.data[o * n2 + n] as f64 * a[(n * ci + i) * 9 + k]).sum();
                if k == 4 {
                    s += sk.data[o * ci + i] as f64;
                }
                w[(o * ci + i) * 9 + k] = s as f32;
            }
        }
        b[o] = ((0..n2).map(|n| w3.data[o * n2 + n] as f64 * bn[n]).sum::<f64>() + b3.data[o] as f64 + skb.data[o] as f64) as f32;
    }
    Ok((vec![co, ci, 3, 3], w, b))
}

fn conv3xc(g: &mut Graph, sd: &StateDict, key: &str, x: B) -> Result<B> {
    let (shape, w, b) = fold(sd, key)?;
    g.conv_raw(key, &shape, w, Some(b), x, Activation::None)
}

fn silu(g: &mut Graph, name: &str, x: B) -> B {
    let s = g.sigmoid(&format!("{name}.sig"), x);
    g.mul(name, x, s)
}

/// (block output, first conv's output after SiLU: PyTorch applies the SiLU in place, so the
/// value the block hands out as its first conv's output is the activated one).
fn spab(g: &mut Graph, sd: &StateDict, key: &str, x: B) -> Result<(B, B)> {
    let o1 = conv3xc(g, sd, &format!("{key}.c1_r"), x)?;
    let a1 = silu(g, &format!("{key}.act1a"), o1);
    let o2 = conv3xc(g, sd, &format!("{key}.c2_r"), a1)?;
    let a2 = silu(g, &format!("{key}.act1b"), o2);
    let o3 = conv3xc(g, sd, &format!("{key}.c3_r"), a2)?;
    let s = g.sigmoid(&format!("{key}.att_sig"), o3);
    let att = g.sub_scalar(&format!("{key}.att"), s, 0.5);
    let res = g.sum(&format!("{key}.res"), o3, 1.0, x, 1.0);
    Ok((g.mul(&format!("{key}.out"), res, att), a1))
}

pub fn build(p: &Span, sd: &StateDict) -> Result<Net> {
    let (mut g, mut x) = Graph::new();
    if p.norm {
        let scale = vec![255.0f32; 3];
        let bias = RGB_MEAN.iter().map(|m| -m * 255.0).collect();
        x = g.affine("norm", x, scale, bias);
    }
    let f = conv3xc(&mut g, sd, "conv_1", x)?;
    let mut b = f;
    let mut b1 = f;
    let mut b6_1 = f;
    for i in 1..=6 {
        let (o, first) = spab(&mut g, sd, &format!("block_{i}"), b)?;
        if i == 1 {
            b1 = o;
        }
        if i == 6 {
            b6_1 = first;
        }
        b = o;
    }
    let c2 = conv3xc(&mut g, sd, "conv_2", b)?;
    let cat = g.concat("cat", &[f, c2, b1, b6_1]);
    let y = g.conv(sd, "conv_cat", cat, Activation::None)?;
    let y = g.conv(sd, "upsampler.0", y, Activation::None)?;
    let out = if p.scale > 1 { g.pixel_shuffle("upsampler.1", y, p.scale) } else { y };
    Ok(g.finish(out))
}
