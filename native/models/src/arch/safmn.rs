//! SAFMN: a 3x3 conv to `dim` channels, `n_blocks` attention blocks, plus the conv's output, then
//! a 3x3 conv to `3·scale²` channels and a pixel shuffle. A block:
//! `x + SAFM(LN(x))`, then `x + CCM(LN(x))`, the LayerNorms over the channels of each pixel
//! (eps 1e-6). SAFM splits its input into four channel chunks: chunk 0 goes through a depthwise
//! 3x3 conv; chunk `i` > 0 is max-pooled to `(h / 2^i, w / 2^i)`, goes through its depthwise
//! conv, and is nearest-upsampled back to `(h, w)`. The chunks are concatenated, mixed by a 1x1
//! conv, passed through GELU and multiplied by the SAFM input. CCM: 3x3 conv to the hidden
//! width, GELU, 1x1 conv back.
//!
//! The input is reflect-padded to a multiple of 8 and the output cropped back, as spandrel's call
//! API does (SAFMN's size requirement). On such sides `adaptive_max_pool2d` to `h / 2^i` is a max
//! pool with kernel and stride `2^i`, and nearest interpolation back is an exact `2^i` upsample:
//! both existing ops, equal to torch.

use super::{Graph, B};
use crate::detect::{get, Safmn, SAFMN_LEVELS, SAFMN_MULTIPLE};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net, Op, PoolKind, Pooling};
use lucent_core::Result;

const EPS: f32 = 1e-6;

fn layer_norm(g: &mut Graph, sd: &StateDict, key: &str, x: B) -> Result<B> {
    let weight = get(sd, &format!("{key}.weight"))?.data.clone();
    let bias = get(sd, &format!("{key}.bias"))?.data.clone();
    Ok(g.add(key, "LayerNorm", Op::LayerNorm { weight, bias, eps: EPS }, &[x]))
}

/// A depthwise 3x3 conv from `{key}.weight` (c, 1, 3, 3) / `{key}.bias`.
fn depthwise(g: &mut Graph, sd: &StateDict, key: &str, x: B) -> Result<B> {
    let w = get(sd, &format!("{key}.weight"))?;
    let bias = sd.get(&format!("{key}.bias")).map(|b| b.data.clone());
    let group = w.shape.first().copied().unwrap_or(0);
    g.conv_grouped(key, &w.shape, group, w.data.clone(), bias, x, Activation::None)
}

/// Max pooling with kernel and stride `k`, no padding (the side is a multiple of `k`).
fn max_pool(g: &mut Graph, name: &str, x: B, k: usize) -> B {
    let p = Pooling {
        kind: PoolKind::Max,
        global: false,
        kernel_w: k,
        kernel_h: k,
        stride_w: k,
        stride_h: k,
        pad_left: 0,
        pad_right: 0,
        pad_top: 0,
        pad_bottom: 0,
        pad_mode: 1,
        count_include_pad: false,
        adaptive: false,
        out_w: 0,
        out_h: 0,
    };
    g.add(name, "Pooling", Op::Pooling(p), &[x])
}

fn safm(g: &mut Graph, sd: &StateDict, key: &str, x: B, dim: usize) -> Result<B> {
    let chunk = dim / SAFMN_LEVELS;
    let mut levels = Vec::with_capacity(SAFMN_LEVELS);
    for i in 0..SAFMN_LEVELS {
        let conv = format!("{key}.mfr.{i}");
        let c = g.crop_channels(&format!("{key}.chunk{i}"), x, i * chunk, (i + 1) * chunk);
        levels.push(if i == 0 {
            depthwise(g, sd, &conv, c)?
        } else {
            let f = 1 << i;
            let p = max_pool(g, &format!("{key}.pool{i}"), c, f);
            let s = depthwise(g, sd, &conv, p)?;
            g.nearest(&format!("{key}.up{i}"), s, f)
        });
    }
    let cat = g.concat(&format!("{key}.cat"), &levels);
    let a = g.conv(sd, &format!("{key}.aggr"), cat, Activation::None)?;
    let a = g.gelu(&format!("{key}.act"), a);
    Ok(g.mul(&format!("{key}.mod"), a, x))
}

fn block(g: &mut Graph, sd: &StateDict, key: &str, x: B, dim: usize) -> Result<B> {
    let n1 = layer_norm(g, sd, &format!("{key}.norm1"), x)?;
    let s = safm(g, sd, &format!("{key}.safm"), n1, dim)?;
    let x = g.sum(&format!("{key}.res1"), s, 1.0, x, 1.0);
    let n2 = layer_norm(g, sd, &format!("{key}.norm2"), x)?;
    let c = g.conv(sd, &format!("{key}.ccm.ccm.0"), n2, Activation::None)?;
    let c = g.gelu(&format!("{key}.ccm.ccm.1"), c);
    let c = g.conv(sd, &format!("{key}.ccm.ccm.2"), c, Activation::None)?;
    Ok(g.sum(&format!("{key}.res2"), c, 1.0, x, 1.0))
}

pub fn build(p: &Safmn, sd: &StateDict) -> Result<Net> {
    let (mut g, x) = Graph::new();
    let xp = g.pad_to_multiple("pad", x, SAFMN_MULTIPLE);
    let feat = g.conv(sd, "to_feat", xp, Activation::None)?;
    let mut y = feat;
    for i in 0..p.n_blocks {
        y = block(&mut g, sd, &format!("feats.{i}"), y, p.dim)?;
    }
    let y = g.sum("feats.res", y, 1.0, feat, 1.0);
    let y = g.conv(sd, "to_img.0", y, Activation::None)?;
    let y = if p.scale > 1 { g.pixel_shuffle("to_img.1", y, p.scale) } else { y };
    let like = if p.scale > 1 { g.nearest("size_ref", x, p.scale) } else { x };
    let out = g.crop_like("crop", y, like);
    Ok(g.finish(out))
}
