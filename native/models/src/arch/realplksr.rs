//! RealPLKSR (LayerNorm variant): a 3x3 conv, `n_blocks` PLK blocks, a 3x3 conv to `3·scale²`
//! channels plus the input repeated `scale²` times per channel, and a pixel shuffle. A PLK block:
//! channel LayerNorm, conv 3x3 (x2 channels) + Mish, conv 3x3 back, a large-kernel conv on the
//! first `pdim` channels (the rest pass through), element-wise attention `x·sigmoid(conv(x))`,
//! a 1x1 refine conv, plus the block input.
//!
//! The channel LayerNorm is built from existing ops: centring as a 1x1 conv with weights
//! `I - 1/C`, the variance as a 1x1 conv of the squares with weights `1/C` and bias `eps`, then
//! `^-0.5`, a broadcast multiply and the per-channel affine.

use super::{Graph, B};
use crate::detect::{get, RealPlksr};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net};
use lucent_core::Result;

const EPS: f32 = 1e-6;

fn layer_norm(g: &mut Graph, sd: &StateDict, key: &str, x: B, c: usize) -> Result<B> {
    let inv = 1.0 / c as f32;
    let centre: Vec<f32> = (0..c * c).map(|k| if k / c == k % c { 1.0 - inv } else { -inv }).collect();
    let y = g.conv_raw(&format!("{key}.centre"), &[c, c, 1, 1], centre, None, x, Activation::None)?;
    let sq = g.mul(&format!("{key}.sq"), y, y);
    let var = g.conv_raw(&format!("{key}.var"), &[1, c, 1, 1], vec![inv; c], Some(vec![EPS]), sq, Activation::None)?;
    let rstd = g.pow_scalar(&format!("{key}.rstd"), var, -0.5);
    let z = g.mul(&format!("{key}.norm"), y, rstd);
    let w = get(sd, &format!("{key}.weight"))?.data.clone();
    let b = get(sd, &format!("{key}.bias"))?.data.clone();
    Ok(g.affine(&format!("{key}.affine"), z, w, b))
}

fn block(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &RealPlksr) -> Result<B> {
    let ln = layer_norm(g, sd, &format!("{key}.layer_norm"), x, p.dim)?;
    let m = g.conv(sd, &format!("{key}.channel_mixer.0"), ln, Activation::Mish)?;
    let m = g.conv(sd, &format!("{key}.channel_mixer.2"), m, Activation::None)?;
    let lk = if p.pdim < p.dim {
        let a = g.crop_channels(&format!("{key}.lk.head"), m, 0, p.pdim);
        let rest = g.crop_channels(&format!("{key}.lk.rest"), m, p.pdim, p.dim);
        let a = g.conv(sd, &format!("{key}.lk.conv"), a, Activation::None)?;
        g.concat(&format!("{key}.lk.cat"), &[a, rest])
    } else {
        g.conv(sd, &format!("{key}.lk.conv"), m, Activation::None)?
    };
    let at = if p.use_ea {
        let f = g.conv(sd, &format!("{key}.attn.f.0"), lk, Activation::Sigmoid)?;
        g.mul(&format!("{key}.attn"), lk, f)
    } else {
        lk
    };
    let r = g.conv(sd, &format!("{key}.refine"), at, Activation::None)?;
    Ok(g.sum(&format!("{key}.res"), r, 1.0, x, 1.0))
}

pub fn build(p: &RealPlksr, sd: &StateDict) -> Result<Net> {
    let (mut g, x) = Graph::new();
    let mut y = g.conv(sd, "feats.0", x, Activation::None)?;
    for i in 1..=p.n_blocks {
        y = block(&mut g, sd, &format!("feats.{i}"), y, p)?;
    }
    y = g.conv(sd, &format!("feats.{}", p.n_blocks + 2), y, Activation::None)?;
    let s2 = p.scale * p.scale;
    let out = if s2 > 1 {
        // repeat_interleave(x, s², dim=1): channel j is input channel j / s² (a one-hot 1x1 conv).
        let rep: Vec<f32> = (0..3 * s2 * 3).map(|k| if (k / 3) / s2 == k % 3 { 1.0 } else { 0.0 }).collect();
        let base = g.conv_raw("repeat", &[3 * s2, 3, 1, 1], rep, None, x, Activation::None)?;
        let y = g.sum("add_base", y, 1.0, base, 1.0);
        g.pixel_shuffle("to_img", y, p.scale)
    } else {
        g.sum("add_base", y, 1.0, x, 1.0)
    };
    Ok(g.finish(out))
}
