//! SwinIR: input normalisation `(x - mean)·img_range`, reflect padding to a multiple of the
//! window, conv_first, residual Swin transformer blocks (RSTB: Swin blocks, a conv, a residual),
//! LayerNorm, conv_after_body plus conv_first's output, the upsampler ('pixelshuffle',
//! 'pixelshuffledirect', 'nearest+conv' or none), de-normalisation and a crop of the padding.
//!
//! A Swin block: `x + proj(WMSA(qkv(LN(x))))`, then `x + fc2(GELU(fc1(LN(x))))`; the odd blocks
//! shift the windows by half a window (with Swin's mask) when the training size exceeds the
//! window. The relative position bias `table[index]` is expanded here to heads x N x N.

use super::{Graph, B};
use crate::detect::{get, SwinIr};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net, WindowAttention};
use lucent_core::{bail, Code, Result};

pub(crate) const RGB_MEAN: [f32; 3] = [0.4488, 0.4371, 0.4040];

/// Relative position bias (heads x N x N, N = win²) from a `((2·win - 1)², heads)` table.
pub(crate) fn swin_bias(table: &[f32], win: usize, heads: usize) -> Vec<f32> {
    let n = win * win;
    let side = 2 * win - 1;
    let mut out = vec![0f32; heads * n * n];
    for i in 0..n {
        for j in 0..n {
            let ry = i / win + win - 1 - j / win;
            let rx = i % win + win - 1 - j % win;
            let idx = ry * side + rx;
            for h in 0..heads {
                out[(h * n + i) * n + j] = table[idx * heads + h];
            }
        }
    }
    out
}

fn swin_block(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &SwinIr, heads: usize, odd: bool) -> Result<B> {
    let table = get(sd, &format!("{key}.attn.relative_position_bias_table"))?;
    let rows = table.shape.first().copied().unwrap_or(0);
    let win = ((rows as f64).sqrt().round() as usize).div_ceil(2);
    if win == 0 || table.shape != [(2 * win - 1) * (2 * win - 1), heads] {
        bail!(Code::ModelInvalid, "{key}: relative position table of shape {:?} fits no square window", table.shape);
    }
    // spandrel's SwinTransformerBlock: no shift when the training size is within one window.
    let shift = if odd && p.img_size > p.window_size { win / 2 } else { 0 };
    let n1 = g.layer_norm(sd, &format!("{key}.norm1"), x)?;
    let a = window_msa(g, sd, key, n1, heads, p.embed_dim / heads, win, shift, &table.data)?;
    let x = g.sum(&format!("{key}.res1"), x, 1.0, a, 1.0);
    mlp_residual(g, sd, key, x)
}

/// Swin's (shifted) window self-attention on the normalised tokens `n`: `proj(WMSA(qkv(n)))`
/// from `{key}.attn.{qkv,proj}`, the relative position bias from `table` (`((2·win - 1)², heads)`),
/// Swin's mask on the shifted blocks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_msa(g: &mut Graph, sd: &StateDict, key: &str, n: B, heads: usize, head_dim: usize, win: usize, shift: usize, table: &[f32]) -> Result<B> {
    let qkv = g.linear(sd, &format!("{key}.attn.qkv"), n, Activation::None)?;
    let wa = WindowAttention {
        heads,
        win_h: win,
        win_w: win,
        shift_y: shift,
        shift_x: shift,
        pad_multiple: win,
        scale: (head_dim as f32).powf(-0.5),
        bias: swin_bias(table, win, heads),
        masked: shift > 0,
        mask_value: -100.0,
    };
    let a = g.window_attention(&format!("{key}.attn"), wa, qkv);
    g.linear(sd, &format!("{key}.attn.proj"), a, Activation::None)
}

/// The transformer MLP with its residual: `x + fc2(GELU(fc1(norm2(x))))` from `{key}.norm2` and
/// `{key}.mlp.fc{1,2}`.
pub(crate) fn mlp_residual(g: &mut Graph, sd: &StateDict, key: &str, x: B) -> Result<B> {
    let n2 = g.layer_norm(sd, &format!("{key}.norm2"), x)?;
    let m = g.linear(sd, &format!("{key}.mlp.fc1"), n2, Activation::None)?;
    let m = g.gelu(&format!("{key}.mlp.act"), m);
    let m = g.linear(sd, &format!("{key}.mlp.fc2"), m, Activation::None)?;
    Ok(g.sum(&format!("{key}.res2"), x, 1.0, m, 1.0))
}

/// A "1conv" (3x3) or "3conv" (3x3 to C/4, leaky 0.2, 1x1, leaky 0.2, 3x3 back) residual conv.
pub(crate) fn resi_conv(g: &mut Graph, sd: &StateDict, key: &str, x: B, three: bool) -> Result<B> {
    if !three {
        return g.conv(sd, key, x, Activation::None);
    }
    let y = g.conv(sd, &format!("{key}.0"), x, Activation::LeakyRelu(0.2))?;
    let y = g.conv(sd, &format!("{key}.2"), y, Activation::LeakyRelu(0.2))?;
    g.conv(sd, &format!("{key}.4"), y, Activation::None)
}

pub fn build(p: &SwinIr, sd: &StateDict) -> Result<Net> {
    let (mut g, x) = Graph::new();
    let mean: Vec<f32> = if p.in_nc == 3 { RGB_MEAN.to_vec() } else { vec![0.0; p.in_nc] };
    let xp = g.pad_to_multiple("check_image_size", x, p.window_size);
    let r = p.img_range;
    let xn = g.affine("sub_mean", xp, vec![r; p.in_nc], mean.iter().map(|m| -m * r).collect());
    let first = g.conv(sd, "conv_first", xn, Activation::None)?;
    let mut t = if p.patch_norm { g.layer_norm(sd, "patch_embed.norm", first)? } else { first };
    for (i, (&depth, &heads)) in p.depths.iter().zip(&p.num_heads).enumerate() {
        let res = t;
        for j in 0..depth {
            t = swin_block(&mut g, sd, &format!("layers.{i}.residual_group.blocks.{j}"), t, p, heads, j % 2 == 1)?;
        }
        let c = resi_conv(&mut g, sd, &format!("layers.{i}.conv"), t, p.three_conv)?;
        t = g.sum(&format!("layers.{i}.res"), c, 1.0, res, 1.0);
    }
    let t = g.layer_norm(sd, "norm", t)?;
    let body = resi_conv(&mut g, sd, "conv_after_body", t, p.three_conv)?;
    let y = g.sum("body_res", body, 1.0, first, 1.0);
    let y = match p.upsampler {
        "pixelshuffle" => {
            let y = g.conv(sd, "conv_before_upsample.0", y, Activation::LeakyRelu(0.01))?;
            let y = g.upsample_stages(sd, "upsample", y)?;
            g.conv(sd, "conv_last", y, Activation::None)?
        }
        "pixelshuffledirect" => {
            let y = g.conv(sd, "upsample.0", y, Activation::None)?;
            g.pixel_shuffle("upsample.1", y, p.upscale)
        }
        "nearest+conv" => {
            let mut y = g.conv(sd, "conv_before_upsample.0", y, Activation::LeakyRelu(0.01))?;
            let mut k = 1;
            while sd.contains_key(&format!("conv_up{k}.weight")) {
                let u = g.nearest(&format!("up{k}"), y, 2);
                y = g.conv(sd, &format!("conv_up{k}"), u, Activation::LeakyRelu(0.2))?;
                k += 1;
            }
            let y = g.conv(sd, "conv_hr", y, Activation::LeakyRelu(0.2))?;
            g.conv(sd, "conv_last", y, Activation::None)?
        }
        _ => {
            let y = g.conv(sd, "conv_last", y, Activation::None)?;
            g.sum("add_input", xn, 1.0, y, 1.0)
        }
    };
    let y = g.affine("add_mean", y, vec![1.0 / r; p.out_nc], mean.clone());
    let like = if p.upscale > 1 { g.nearest("size_ref", x, p.upscale) } else { x };
    let out = g.crop_like("crop", y, like);
    Ok(g.finish(out))
}
