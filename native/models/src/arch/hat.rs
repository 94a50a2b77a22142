//! HAT (Hybrid Attention Transformer): SwinIR's frame with hybrid attention blocks and an
//! overlapping cross-attention block closing each residual group. Input normalisation
//! `(x - mean)·img_range`, reflect padding to a multiple of the window, conv_first, the patch
//! LayerNorm, residual hybrid attention groups (RHAG: hybrid attention blocks, an OCAB, a 3x3
//! conv or nothing, a residual), LayerNorm, conv_after_body (or nothing) plus conv_first's
//! output, the pixel-shuffle upsampler, de-normalisation and a crop of the padding.
//!
//! A hybrid attention block (HAB), on `n = LN(x)`: `x + WMSA(n) + conv_scale · CAB(n)`, then the
//! MLP with its residual. WMSA is Swin's (odd blocks shifted by half a window, with the mask);
//! CAB is conv3x3 (to C / compress_ratio), GELU, conv3x3 back, then squeeze-excitation (global
//! average, 1x1 conv, ReLU, 1x1 conv, sigmoid, times its input). An OCAB, on `n = LN(x)`:
//! `x + proj(OCA(qkv(n)))`, then the MLP with its residual; OCA is [`OverlapAttention`] with the
//! bias `table[relative_position_index_OCA]` (indices as torch reads them: negative ones count
//! from the end of the table).

use super::swinir::{mlp_residual, window_msa, RGB_MEAN};
use super::{Graph, B};
use crate::detect::{get, Hat};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net, OverlapAttention};
use lucent_core::{bail, Code, Result};

/// Relative position bias (heads x Nq x Nk) of `table` (rows x heads) at the `Nq x Nk` indices
/// of `index`, a negative index counting from the end of the table as in torch.
pub(crate) fn indexed_bias(table: &[f32], heads: usize, index: &[f32], nq: usize, nk: usize) -> Result<Vec<f32>> {
    let rows = table.len() / heads.max(1);
    if heads == 0 || rows * heads != table.len() || index.len() != nq * nk {
        bail!(Code::ModelInvalid, "HAT: position table of {} values for {heads} heads, index of {} for {nq} x {nk} tokens", table.len(), index.len());
    }
    let mut out = vec![0f32; heads * nq * nk];
    for (ij, &v) in index.iter().enumerate() {
        let r = rows as f32;
        if v.fract() != 0.0 || v < -r || v >= r {
            bail!(Code::ModelInvalid, "HAT: position index {v} is outside a table of {rows} rows");
        }
        let row = if v < 0.0 { (v + r) as usize } else { v as usize };
        for h in 0..heads {
            out[h * nq * nk + ij] = table[row * heads + h];
        }
    }
    Ok(out)
}

/// CAB: conv3x3, GELU, conv3x3, then squeeze-excitation on the result.
fn cab(g: &mut Graph, sd: &StateDict, key: &str, n: B) -> Result<B> {
    let c = g.conv(sd, &format!("{key}.0"), n, Activation::None)?;
    let c = g.gelu(&format!("{key}.1"), c);
    let c = g.conv(sd, &format!("{key}.2"), c, Activation::None)?;
    let pooled = g.global_avg(&format!("{key}.3.attention.0"), c);
    let s = g.conv(sd, &format!("{key}.3.attention.1"), pooled, Activation::Relu)?;
    let s = g.conv(sd, &format!("{key}.3.attention.3"), s, Activation::None)?;
    let s = g.sigmoid(&format!("{key}.3.attention.4"), s);
    Ok(g.mul(&format!("{key}.3"), c, s))
}

fn hab(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &Hat, heads: usize, odd: bool) -> Result<B> {
    let ws = p.window_size;
    let table = get(sd, &format!("{key}.attn.relative_position_bias_table"))?;
    if table.shape != [(2 * ws - 1) * (2 * ws - 1), heads] {
        bail!(Code::ModelInvalid, "{key}: relative position table of shape {:?} does not fit window {ws} and {heads} heads", table.shape);
    }
    // spandrel's HAB: shifted odd blocks (the 64-pixel training size always exceeds the window).
    let shift = if odd { ws / 2 } else { 0 };
    let n = g.layer_norm(sd, &format!("{key}.norm1"), x)?;
    let conv = cab(g, sd, &format!("{key}.conv_block.cab"), n)?;
    let a = window_msa(g, sd, key, n, heads, p.embed_dim / heads, ws, shift, &table.data)?;
    let x = g.sum(&format!("{key}.res1"), x, 1.0, a, 1.0);
    let x = g.sum(&format!("{key}.res_conv"), x, 1.0, conv, p.conv_scale);
    mlp_residual(g, sd, key, x)
}

fn ocab(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &Hat, heads: usize) -> Result<B> {
    let (ws, ows) = (p.window_size, p.overlap_win);
    let side = ws + ows - 1;
    let table = get(sd, &format!("{key}.relative_position_bias_table"))?;
    let index = get(sd, "relative_position_index_OCA")?;
    if table.shape != [side * side, heads] || index.shape != [ws * ws, ows * ows] {
        bail!(Code::ModelInvalid, "{key}: position table {:?} and index {:?} do not fit windows {ws} and {ows}, {heads} heads", table.shape, index.shape);
    }
    let n = g.layer_norm(sd, &format!("{key}.norm1"), x)?;
    let qkv = g.linear(sd, &format!("{key}.qkv"), n, Activation::None)?;
    let oa = OverlapAttention {
        heads,
        window: ws,
        overlap: ows,
        scale: ((p.embed_dim / heads) as f32).powf(-0.5),
        bias: indexed_bias(&table.data, heads, &index.data, ws * ws, ows * ows)?,
    };
    let a = g.overlap_attention(&format!("{key}.attn"), oa, qkv);
    let a = g.linear(sd, &format!("{key}.proj"), a, Activation::None)?;
    let x = g.sum(&format!("{key}.res1"), x, 1.0, a, 1.0);
    mlp_residual(g, sd, key, x)
}

pub fn build(p: &Hat, sd: &StateDict) -> Result<Net> {
    let (mut g, x) = Graph::new();
    let mean: Vec<f32> = if p.in_nc == 3 { RGB_MEAN.to_vec() } else { vec![0.0; p.in_nc] };
    let r = p.img_range;
    let xn = g.affine("sub_mean", x, vec![r; p.in_nc], mean.iter().map(|m| -m * r).collect());
    let xp = g.pad_to_multiple("check_image_size", xn, p.window_size);
    let first = g.conv(sd, "conv_first", xp, Activation::None)?;
    let mut t = if p.patch_norm { g.layer_norm(sd, "patch_embed.norm", first)? } else { first };
    for (i, (&depth, &heads)) in p.depths.iter().zip(&p.num_heads).enumerate() {
        let res = t;
        let key = format!("layers.{i}.residual_group");
        for j in 0..depth {
            t = hab(&mut g, sd, &format!("{key}.blocks.{j}"), t, p, heads, j % 2 == 1)?;
        }
        t = ocab(&mut g, sd, &format!("{key}.overlap_attn"), t, p, heads)?;
        let c = if p.conv_resi { g.conv(sd, &format!("layers.{i}.conv"), t, Activation::None)? } else { t };
        t = g.sum(&format!("layers.{i}.res"), c, 1.0, res, 1.0);
    }
    let t = g.layer_norm(sd, "norm", t)?;
    let body = if p.conv_resi { g.conv(sd, "conv_after_body", t, Activation::None)? } else { t };
    let y = g.sum("body_res", body, 1.0, first, 1.0);
    let y = g.conv(sd, "conv_before_upsample.0", y, Activation::LeakyRelu(0.01))?;
    let y = g.upsample_stages(sd, "upsample", y)?;
    let y = g.conv(sd, "conv_last", y, Activation::None)?;
    let y = g.affine("add_mean", y, vec![1.0 / r; p.in_nc], mean.clone());
    let like = if p.upscale > 1 { g.nearest("size_ref", x, p.upscale) } else { x };
    let out = g.crop_like("crop", y, like);
    Ok(g.finish(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_bias_reads_negative_indices_from_the_end() {
        // 3 rows x 2 heads; index [[0, -1]]: row 0, then row 2.
        let table = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0];
        let b = indexed_bias(&table, 2, &[0.0, -1.0], 1, 2).unwrap();
        assert_eq!(b, [1.0, 3.0, 10.0, 30.0]);
        assert!(indexed_bias(&table, 2, &[0.0, 3.0], 1, 2).is_err());
        assert!(indexed_bias(&table, 2, &[0.0, -4.0], 1, 2).is_err());
    }
}
