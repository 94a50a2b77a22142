//! DAT (Dual Aggregation Transformer; DAT, DAT-S, DAT-2, DAT-light): input normalisation,
//! conv_first, LayerNorm, residual groups of DAT blocks (each `x + attn(LN(x))`, then
//! `x + SGFN(LN(x))`) closed by a conv and a residual, LayerNorm, conv_after_body plus
//! conv_first's output, and a pixel-shuffle upsampler. Even blocks use adaptive spatial
//! attention, odd blocks adaptive channel attention.
//!
//! Spatial attention: qkv (its rows regrouped here so each branch's q, k, v are contiguous), two
//! branches of half the channels and heads with `split` and transposed-`split` windows over the
//! zero-padded image (some blocks shifted by half a window, with the mask), a dynamic position
//! bias (a small MLP of the relative offsets, evaluated here once per window shape), then the
//! adaptive interaction with a depthwise-conv path on v: attention · sigmoid(channel map of the
//! conv path, global average), conv path · sigmoid(spatial map of the attention), summed, proj.
//! Channel attention: transposed attention over all pixels, the same interaction with the maps
//! swapped. SGFN: fc1, GELU, the second half LayerNorm + depthwise 3x3, times the first half, fc2.
//! BatchNorms (eval) are folded into the convs before them.

use super::swinir::resi_conv;
use super::{Graph, B};
use crate::detect::{get, Dat};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net, WindowAttention};
use lucent_core::{bail, Code, Result};

const RGB_MEAN: [f32; 3] = [0.4488, 0.4371, 0.4040];

/// `nn.Linear` of `(out, in)` weights on a list of f64 vectors.
fn lin(sd: &StateDict, key: &str, xs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
    let w = get(sd, &format!("{key}.weight"))?;
    let b = get(sd, &format!("{key}.bias"))?;
    let [o, i] = w.shape[..] else { bail!(Code::ModelInvalid, "'{key}' is not a linear layer") };
    if b.data.len() != o || xs.iter().any(|x| x.len() != i) {
        bail!(Code::ModelInvalid, "'{key}': shapes do not fit its input");
    }
    Ok(xs.iter().map(|x| (0..o).map(|r| b.data[r] as f64 + (0..i).map(|c| w.data[r * i + c] as f64 * x[c]).sum::<f64>()).collect()).collect())
}

/// LayerNorm (eps 1e-5) then ReLU on each vector.
fn ln_relu(sd: &StateDict, key: &str, xs: &mut [Vec<f64>]) -> Result<()> {
    let w = &get(sd, &format!("{key}.weight"))?.data;
    let b = &get(sd, &format!("{key}.bias"))?.data;
    for x in xs.iter_mut() {
        let n = x.len() as f64;
        if w.len() != x.len() || b.len() != x.len() {
            bail!(Code::ModelInvalid, "'{key}': LayerNorm size does not fit");
        }
        let m = x.iter().sum::<f64>() / n;
        let v = x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / n;
        for (k, a) in x.iter_mut().enumerate() {
            *a = ((*a - m) / (v + 1e-5).sqrt() * w[k] as f64 + b[k] as f64).max(0.0);
        }
    }
    Ok(())
}

/// The dynamic position bias of a `wh` x `ww` window (heads x N x N): the MLP at `key` on every
/// relative offset (dy, dx), indexed by token pairs.
fn dynamic_bias(sd: &StateDict, key: &str, wh: usize, ww: usize, heads: usize) -> Result<Vec<f32>> {
    let offsets: Vec<Vec<f64>> = (0..2 * wh - 1)
        .flat_map(|a| (0..2 * ww - 1).map(move |b| vec![a as f64 - (wh as f64 - 1.0), b as f64 - (ww as f64 - 1.0)]))
        .collect();
    let mut pos = lin(sd, &format!("{key}.pos_proj"), &offsets)?;
    for s in ["pos1", "pos2", "pos3"] {
        ln_relu(sd, &format!("{key}.{s}.0"), &mut pos)?;
        pos = lin(sd, &format!("{key}.{s}.2"), &pos)?;
    }
    if pos.first().is_some_and(|p| p.len() != heads) {
        bail!(Code::ModelInvalid, "'{key}': position bias for {} heads, the branch has {heads}", pos[0].len());
    }
    let n = wh * ww;
    let mut out = vec![0f32; heads * n * n];
    for i in 0..n {
        for j in 0..n {
            let idx = (i / ww + wh - 1 - j / ww) * (2 * ww - 1) + (i % ww + ww - 1 - j % ww);
            for h in 0..heads {
                out[(h * n + i) * n + j] = pos[idx][h] as f32;
            }
        }
    }
    Ok(out)
}

/// conv (+BN folded) -> GELU -> conv: the interaction maps' small MLPs.
fn interaction(g: &mut Graph, sd: &StateDict, key: &str, x: B, first: usize, bn: usize, last: usize) -> Result<B> {
    let y = g.conv_bn(sd, &format!("{key}.{first}"), &format!("{key}.{bn}"), 1, x, Activation::None)?;
    let y = g.gelu(&format!("{key}.gelu"), y);
    g.conv(sd, &format!("{key}.{last}"), y, Activation::None)
}

/// The depthwise conv + BN + GELU path on v.
fn dw_path(g: &mut Graph, sd: &StateDict, key: &str, v: B, c: usize) -> Result<B> {
    let y = g.conv_bn(sd, &format!("{key}.dwconv.0"), &format!("{key}.dwconv.1"), c, v, Activation::None)?;
    Ok(g.gelu(&format!("{key}.dwconv.2"), y))
}

fn spatial_attention(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &Dat, heads: usize, shifted: bool) -> Result<B> {
    let c = p.embed_dim;
    let h2 = c / 2;
    // qkv rows regrouped: [q0 k0 v0 | q1 k1 v1], branch b holding channels b·C/2 .. (b+1)·C/2.
    let w = get(sd, &format!("{key}.qkv.weight"))?;
    if w.shape != [3 * c, c] {
        bail!(Code::ModelInvalid, "{key}.qkv: weight of shape {:?}, wanted [{}, {c}]", w.shape, 3 * c);
    }
    let bias = sd.get(&format!("{key}.qkv.bias")).map(|b| &b.data);
    let order: Vec<usize> = (0..2).flat_map(|b| (0..3).flat_map(move |part| (0..h2).map(move |k| part * c + b * h2 + k))).collect();
    let wr: Vec<f32> = order.iter().flat_map(|&r| w.data[r * c..(r + 1) * c].iter().copied()).collect();
    let br = bias.map(|b| order.iter().map(|&r| b[r]).collect::<Vec<f32>>());
    let qkv = g.conv_raw(&format!("{key}.qkv"), &[3 * c, c, 1, 1], wr, br, x, Activation::None)?;
    let [s0, s1] = p.split_size;
    let pad = s0.max(s1);
    let mut outs = Vec::new();
    for b in 0..2 {
        let part = g.crop_channels(&format!("{key}.branch{b}"), qkv, b * 3 * h2, (b + 1) * 3 * h2);
        let (wh, ww) = if b == 0 { (s0, s1) } else { (s1, s0) };
        let bh = heads / 2;
        let wa = WindowAttention {
            heads: bh,
            win_h: wh,
            win_w: ww,
            shift_y: if shifted { wh / 2 } else { 0 },
            shift_x: if shifted { ww / 2 } else { 0 },
            pad_multiple: pad,
            scale: ((h2 / bh) as f32).powf(-0.5),
            bias: dynamic_bias(sd, &format!("{key}.attns.{b}.pos"), wh, ww, bh)?,
            masked: shifted,
            mask_value: -100.0,
        };
        outs.push(g.window_attention(&format!("{key}.attns.{b}"), wa, part));
    }
    let att = g.concat(&format!("{key}.cat"), &outs);
    let v0 = g.crop_channels(&format!("{key}.v0"), qkv, 2 * h2, 3 * h2);
    let v1 = g.crop_channels(&format!("{key}.v1"), qkv, 5 * h2, 6 * h2);
    let v = g.concat(&format!("{key}.v"), &[v0, v1]);
    let conv_x = dw_path(g, sd, key, v, c)?;
    let pooled = g.global_avg(&format!("{key}.channel_interaction.0"), conv_x);
    let cmap = interaction(g, sd, &format!("{key}.channel_interaction"), pooled, 1, 2, 4)?;
    let smap = interaction(g, sd, &format!("{key}.spatial_interaction"), att, 0, 1, 3)?;
    Ok(combine(g, key, att, cmap, conv_x, smap))
}

/// `att · sigmoid(att_map) + conv_x · sigmoid(conv_map)`.
fn combine(g: &mut Graph, key: &str, att: B, att_map: B, conv_x: B, conv_map: B) -> B {
    let sa = g.sigmoid(&format!("{key}.att_gate"), att_map);
    let a = g.mul(&format!("{key}.att_gated"), att, sa);
    let sc = g.sigmoid(&format!("{key}.conv_gate"), conv_map);
    let cx = g.mul(&format!("{key}.conv_gated"), conv_x, sc);
    g.sum(&format!("{key}.aim"), a, 1.0, cx, 1.0)
}

fn channel_attention(g: &mut Graph, sd: &StateDict, key: &str, x: B, p: &Dat, heads: usize) -> Result<B> {
    let c = p.embed_dim;
    let qkv = g.linear(sd, &format!("{key}.qkv"), x, Activation::None)?;
    let temp = get(sd, &format!("{key}.temperature"))?.data.clone();
    let att = g.channel_attention(&format!("{key}.attn"), heads, temp, qkv);
    let v = g.crop_channels(&format!("{key}.v"), qkv, 2 * c, 3 * c);
    let conv_x = dw_path(g, sd, key, v, c)?;
    let pooled = g.global_avg(&format!("{key}.channel_interaction.0"), att);
    let cmap = interaction(g, sd, &format!("{key}.channel_interaction"), pooled, 1, 2, 4)?;
    let smap = interaction(g, sd, &format!("{key}.spatial_interaction"), conv_x, 0, 1, 3)?;
    Ok(combine(g, key, att, smap, conv_x, cmap))
}

fn sgfn(g: &mut Graph, sd: &StateDict, key: &str, x: B, hidden: usize) -> Result<B> {
    let y = g.linear(sd, &format!("{key}.fc1"), x, Activation::None)?;
    let y = g.gelu(&format!("{key}.act"), y);
    let half = hidden / 2;
    let x1 = g.crop_channels(&format!("{key}.x1"), y, 0, half);
    let x2 = g.crop_channels(&format!("{key}.x2"), y, half, hidden);
    let x2 = g.layer_norm(sd, &format!("{key}.sg.norm"), x2)?;
    let w = get(sd, &format!("{key}.sg.conv.weight"))?;
    let b = sd.get(&format!("{key}.sg.conv.bias")).map(|b| b.data.clone());
    let x2 = g.conv_grouped(&format!("{key}.sg.conv"), &w.shape, half, w.data.clone(), b, x2, Activation::None)?;
    let gt = g.mul(&format!("{key}.sg"), x1, x2);
    g.linear(sd, &format!("{key}.fc2"), gt, Activation::None)
}

pub fn build(p: &Dat, sd: &StateDict) -> Result<Net> {
    let (mut g, x) = Graph::new();
    let mean: Vec<f32> = if p.in_nc == 3 { RGB_MEAN.to_vec() } else { vec![0.0; p.in_nc] };
    let xn = g.affine("sub_mean", x, vec![1.0; p.in_nc], mean.iter().map(|m| -m).collect());
    let first = g.conv(sd, "conv_first", xn, Activation::None)?;
    let mut t = g.layer_norm(sd, "before_RG.1", first)?;
    for (rg, (&depth, &heads)) in p.depth.iter().zip(&p.num_heads).enumerate() {
        let res = t;
        for bi in 0..depth {
            let key = format!("layers.{rg}.blocks.{bi}");
            let n1 = g.layer_norm(sd, &format!("{key}.norm1"), t)?;
            let a = if bi % 2 == 0 {
                let shifted = (rg % 2 == 0 && bi > 0 && (bi - 2) % 4 == 0) || (rg % 2 != 0 && bi % 4 == 0);
                spatial_attention(&mut g, sd, &format!("{key}.attn"), n1, p, heads, shifted)?
            } else {
                channel_attention(&mut g, sd, &format!("{key}.attn"), n1, p, heads)?
            };
            let a = g.linear(sd, &format!("{key}.attn.proj"), a, Activation::None)?;
            t = g.sum(&format!("{key}.res1"), t, 1.0, a, 1.0);
            let n2 = g.layer_norm(sd, &format!("{key}.norm2"), t)?;
            let f = sgfn(&mut g, sd, &format!("{key}.ffn"), n2, p.ffn_hidden)?;
            t = g.sum(&format!("{key}.res2"), t, 1.0, f, 1.0);
        }
        let c = resi_conv(&mut g, sd, &format!("layers.{rg}.conv"), t, p.three_conv)?;
        t = g.sum(&format!("layers.{rg}.res"), res, 1.0, c, 1.0);
    }
    let t = g.layer_norm(sd, "norm", t)?;
    let body = resi_conv(&mut g, sd, "conv_after_body", t, p.three_conv)?;
    let y = g.sum("body_res", body, 1.0, first, 1.0);
    let y = if p.upsampler == "pixelshuffle" {
        let y = g.conv(sd, "conv_before_upsample.0", y, Activation::LeakyRelu(0.01))?;
        let y = g.upsample_stages(sd, "upsample", y)?;
        g.conv(sd, "conv_last", y, Activation::None)?
    } else {
        let y = g.conv(sd, "upsample.0", y, Activation::None)?;
        g.pixel_shuffle("upsample.1", y, p.upscale)
    };
    let out = g.affine("add_mean", y, vec![1.0; p.in_nc], mean);
    Ok(g.finish(out))
}
