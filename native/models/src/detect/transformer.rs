//! Detection of the window-attention transformers SwinIR, DAT (incl. DAT-light / DAT-S /
//! DAT-2) and HAT, from keys and shapes as spandrel (MIT) reads them, restated.

use super::{dim, get, has, seq_len, Arch, ModelInfo};
use crate::tensor::StateDict;
use lucent_core::{bail, Code, Result};
use std::collections::BTreeMap;

/// SwinIR (spandrel's defaults where the weights say nothing: patch size 1, qkv bias, no absolute
/// position embedding).
#[derive(Debug, Clone, PartialEq)]
pub struct SwinIr {
    pub in_nc: usize,
    pub out_nc: usize,
    pub embed_dim: usize,
    /// Blocks per residual Swin transformer block (RSTB).
    pub depths: Vec<usize>,
    pub num_heads: Vec<usize>,
    pub window_size: usize,
    /// Training size, which decides whether the odd blocks shift (they do when > window).
    pub img_size: usize,
    pub mlp_hidden: usize,
    /// "pixelshuffle", "pixelshuffledirect", "nearest+conv" or "" (none).
    pub upsampler: &'static str,
    pub upscale: usize,
    pub img_range: f32,
    pub three_conv: bool,
    pub patch_norm: bool,
}

/// DAT (Dual Aggregation Transformer).
#[derive(Debug, Clone, PartialEq)]
pub struct Dat {
    pub in_nc: usize,
    pub embed_dim: usize,
    pub depth: Vec<usize>,
    pub num_heads: Vec<usize>,
    /// Spatial window (height, width) of the first branch; the second uses it transposed.
    pub split_size: [usize; 2],
    pub img_size: usize,
    pub ffn_hidden: usize,
    /// "pixelshuffle" or "pixelshuffledirect".
    pub upsampler: &'static str,
    pub upscale: usize,
    pub three_conv: bool,
}

fn list(v: &[usize]) -> String {
    format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

/// spandrel's `get_pixelshuffle_params`: (scale, num_feat) from `upsample.{0,2,..}` convs.
fn pixelshuffle_params(sd: &StateDict) -> Result<(usize, usize)> {
    let (mut scale, mut nf) = (1, 64);
    for i in (0..10).step_by(2) {
        let k = format!("upsample.{i}.weight");
        if !has(sd, &k) {
            break;
        }
        nf = dim(sd, &k, 1)?;
        scale *= (dim(sd, &k, 0)? / nf.max(1)).isqrt();
    }
    Ok((scale, nf))
}

pub(crate) fn detect_swinir(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    if has(sd, "conv_first.1.weight") {
        bail!(Code::ModelInvalid, "recognised SwinIR with a pixel-unshuffle input (start_unshuffle), which Lucent cannot run yet");
    }
    if has(sd, "absolute_pos_embed") {
        bail!(Code::ModelInvalid, "recognised SwinIR with an absolute position embedding, which spandrel and Lucent do not run");
    }
    let upsampler = if has(sd, "conv_before_upsample.0.weight") {
        if has(sd, "conv_up1.weight") { "nearest+conv" } else { "pixelshuffle" }
    } else if has(sd, "upsample.0.weight") {
        "pixelshuffledirect"
    } else {
        ""
    };
    let in_nc = dim(sd, "conv_first.weight", 1)?;
    let out_nc = if has(sd, "conv_last.weight") { dim(sd, "conv_last.weight", 0)? } else { in_nc };
    let mut num_feat = 64;
    let upscale = match upsampler {
        "nearest+conv" => 1 << sd.keys().filter(|k| k.contains("conv_up") && !k.contains("bias")).count(),
        "pixelshuffle" => {
            let (s, nf) = pixelshuffle_params(sd)?;
            num_feat = nf;
            s
        }
        "pixelshuffledirect" => (dim(sd, "upsample.0.bias", 0)? / out_nc).isqrt(),
        _ => 1,
    };
    let embed_dim = dim(sd, "conv_first.weight", 0)?;
    let mlp_hidden = dim(sd, "layers.0.residual_group.blocks.0.mlp.fc1.bias", 0)?;
    let window_size = dim(sd, "layers.0.residual_group.blocks.0.attn.relative_position_index", 0)?.isqrt();
    let img_size = match sd.get("layers.0.residual_group.blocks.1.attn_mask") {
        Some(m) => ((m.shape.first().copied().unwrap_or(0) as f64).sqrt() * window_size as f64) as usize,
        None => 64,
    };
    let layers = seq_len(sd, "layers");
    let mut depths = Vec::new();
    let mut num_heads = Vec::new();
    for i in 0..layers {
        depths.push(seq_len(sd, &format!("layers.{i}.residual_group.blocks")));
        num_heads.push(dim(sd, &format!("layers.{i}.residual_group.blocks.0.attn.relative_position_bias_table"), 1)?);
    }
    let three_conv = !has(sd, "conv_after_body.weight");
    let img_range = if window_size == 7 { 255.0 } else { 1.0 };
    if window_size == 0 || upscale == 0 || layers == 0 || depths.contains(&0) || num_heads.iter().any(|&h| h == 0 || !embed_dim.is_multiple_of(h)) {
        bail!(Code::ModelInvalid, "SwinIR: window {window_size}, {layers} layers, heads {num_heads:?} do not fit {embed_dim} channels");
    }
    if in_nc != out_nc {
        bail!(Code::ModelInvalid, "SwinIR: {in_nc} input and {out_nc} output channels; spandrel builds only equal counts");
    }
    let resi = if three_conv { "3conv" } else { "1conv" };
    let size_tag = match layers {
        0..=4 => "small",
        5..=8 => "medium",
        _ => "large",
    };
    let tags = vec![size_tag.to_string(), format!("s{img_size}w{window_size}"), format!("{num_feat}nf"), format!("{embed_dim}dim"), resi.to_string(), "1unshuf".to_string()];
    let params = BTreeMap::from([
        ("img_size".to_string(), img_size.to_string()),
        ("patch_size".into(), "1".into()),
        ("in_chans".into(), in_nc.to_string()),
        ("embed_dim".into(), embed_dim.to_string()),
        ("depths".into(), list(&depths)),
        ("num_heads".into(), list(&num_heads)),
        ("window_size".into(), window_size.to_string()),
        ("mlp_ratio".into(), format!("{:?}", mlp_hidden as f64 / embed_dim as f64)),
        ("upscale".into(), upscale.to_string()),
        ("img_range".into(), format!("{:?}", img_range as f64)),
        ("upsampler".into(), upsampler.to_string()),
        ("resi_connection".into(), resi.to_string()),
        ("start_unshuffle".into(), "1".into()),
    ]);
    let s = SwinIr {
        in_nc,
        out_nc,
        embed_dim,
        depths,
        num_heads,
        window_size,
        img_size,
        mlp_hidden,
        upsampler,
        upscale,
        img_range,
        three_conv,
        patch_norm: has(sd, "patch_embed.norm.weight"),
    };
    let warnings = vec![format!("input is reflect-padded to a multiple of {window_size} inside the network; attention windows make tile seams likelier than with convolutional models")];
    let info = ModelInfo { architecture: "SwinIR", scale: upscale, in_channels: in_nc, out_channels: out_nc, params, tags, warnings, size_multiple: 1 };
    Ok((Arch::SwinIr(s), info))
}

pub(crate) fn detect_dat(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let in_nc = dim(sd, "conv_first.weight", 1)?;
    let embed_dim = dim(sd, "conv_first.weight", 0)?;
    let layers = seq_len(sd, "layers");
    let depth: Vec<usize> = (0..layers).map(|i| seq_len(sd, &format!("layers.{i}.blocks"))).collect();
    let mut num_heads = Vec::new();
    for (i, &d) in depth.iter().enumerate() {
        num_heads.push(if d >= 2 {
            dim(sd, &format!("layers.{i}.blocks.1.attn.temperature"), 0)?
        } else {
            dim(sd, &format!("layers.{i}.blocks.0.attn.attns.0.pos.pos3.2.weight"), 0)? * 2
        });
    }
    let upsampler = if has(sd, "conv_last.weight") { "pixelshuffle" } else { "pixelshuffledirect" };
    let three_conv = !has(sd, "conv_after_body.weight");
    let (upscale, num_feat) = if upsampler == "pixelshuffle" {
        pixelshuffle_params(sd)?
    } else {
        ((dim(sd, "upsample.0.weight", 0)? / in_nc.max(1)).isqrt(), dim(sd, "upsample.0.weight", 1)?)
    };
    let qkv_bias = has(sd, "layers.0.blocks.0.attn.qkv.bias");
    let ffn_hidden = dim(sd, "layers.0.blocks.0.ffn.fc1.weight", 0)?;
    let img_size = match sd.get("layers.0.blocks.2.attn.attn_mask_0") {
        Some(m) if m.shape.len() == 3 => ((m.shape[0] * m.shape[1]) as f64).sqrt() as usize,
        _ => 64,
    };
    let rpe = get(sd, "layers.0.blocks.0.attn.attns.0.rpe_biases")?;
    let split_size = match (rpe.shape.as_slice(), rpe.data.len()) {
        ([_, 2], n) if n >= 2 => [(rpe.data[n - 2] + 1.0) as usize, (rpe.data[n - 1] + 1.0) as usize],
        _ => bail!(Code::ModelInvalid, "DAT: rpe_biases of shape {:?} is not a list of 2-D offsets", rpe.shape),
    };
    // Channel attention splits all channels over the heads, each spatial branch half of them over
    // half the heads.
    let heads_ok = num_heads.iter().all(|&h| h >= 2 && embed_dim.is_multiple_of(h) && (embed_dim / 2).is_multiple_of(h / 2));
    if layers == 0 || depth.contains(&0) || !heads_ok || split_size.contains(&0) || upscale == 0 || embed_dim % 2 != 0 || embed_dim < 16 {
        bail!(Code::ModelInvalid, "DAT: {layers} groups, heads {num_heads:?}, split {split_size:?} do not fit {embed_dim} channels");
    }
    let ef = ffn_hidden as f64 / embed_dim as f64;
    let resi = if three_conv { "3conv" } else { "1conv" };
    let size_tag = if layers < 4 {
        "light"
    } else if split_size == [8, 16] {
        "small"
    } else {
        "medium"
    };
    let tags = vec![
        size_tag.to_string(),
        format!("s{img_size}|{}x{}", split_size[0], split_size[1]),
        format!("{num_feat}nf"),
        format!("{embed_dim}dim"),
        format!("{ef:?}ef"),
        resi.to_string(),
    ];
    let params = BTreeMap::from([
        ("img_size".to_string(), img_size.to_string()),
        ("in_chans".into(), in_nc.to_string()),
        ("embed_dim".into(), embed_dim.to_string()),
        ("split_size".into(), list(&split_size)),
        ("depth".into(), list(&depth)),
        ("num_heads".into(), list(&num_heads)),
        ("expansion_factor".into(), format!("{ef:?}")),
        ("qkv_bias".into(), qkv_bias.to_string()),
        ("upscale".into(), upscale.to_string()),
        ("img_range".into(), "1.0".into()),
        ("resi_connection".into(), resi.to_string()),
        ("upsampler".into(), upsampler.to_string()),
    ]);
    let d = Dat { in_nc, embed_dim, depth, num_heads, split_size, img_size, ffn_hidden, upsampler, upscale, three_conv };
    let warnings = vec!["DAT's channel attention and adaptive interaction use whole-image statistics: a tiled run differs from a whole-image run".to_string()];
    let info = ModelInfo { architecture: "DAT", scale: upscale, in_channels: in_nc, out_channels: in_nc, params, tags, warnings, size_multiple: 1 };
    Ok((Arch::Dat(d), info))
}

/// HAT (Hybrid Attention Transformer), with spandrel's fixed values where the weights say
/// nothing: training size 64 (so the odd blocks shift whenever the window is smaller), patch
/// size 1, `conv_scale` 0.01, `img_range` 1, the "pixelshuffle" upsampler.
#[derive(Debug, Clone, PartialEq)]
pub struct Hat {
    pub in_nc: usize,
    pub embed_dim: usize,
    /// Hybrid attention blocks per residual group (RHAG).
    pub depths: Vec<usize>,
    pub num_heads: Vec<usize>,
    pub window_size: usize,
    /// Side of OCAB's key/value windows (`window_size + int(window_size · overlap_ratio)`).
    pub overlap_win: usize,
    pub upscale: usize,
    /// `resi_connection` "1conv" (a 3x3 conv closes each group and the body) or "identity".
    pub conv_resi: bool,
    pub patch_norm: bool,
    pub conv_scale: f32,
    pub img_range: f32,
}

/// spandrel's `_inv_int_div`: a `b` with `a // b == c`, printed as Python would (an int when
/// it finds a whole one).
fn inv_int_div(a: usize, c: usize) -> Result<(f64, String)> {
    if c == 0 || a == 0 {
        bail!(Code::ModelInvalid, "HAT: {c} of {a} channels gives no ratio");
    }
    let b = a as f64 / c as f64;
    if b.fract() == 0.0 {
        return Ok((b, format!("{}", b as usize)));
    }
    for whole in [b.ceil() as usize, b.floor() as usize] {
        if whole > 0 && a / whole == c {
            return Ok((whole as f64, whole.to_string()));
        }
    }
    for f in [b, b - 0.01, b + 0.01] {
        if (a as f64 / f).floor() == c as f64 {
            return Ok((f, format!("{f:?}")));
        }
    }
    bail!(Code::ModelInvalid, "HAT: no ratio divides {a} channels into {c}")
}

/// spandrel's `_get_overlap_ratio`: the first "nice" ratio giving this overlap window, else the
/// plain quotient plus 0.01 (as Python prints it).
fn overlap_ratio(ws: usize, ows: usize) -> String {
    let nice: [(f64, &str); 13] = [(0.0, "0"), (1.0, "1"), (0.5, ""), (0.25, ""), (0.75, ""), (0.1, ""), (0.2, ""), (0.3, ""), (0.4, ""), (0.6, ""), (0.7, ""), (0.8, ""), (0.9, "")];
    for (r, int) in nice {
        if (ws as f64 + ws as f64 * r) as usize == ows {
            return if int.is_empty() { format!("{r:?}") } else { int.to_string() };
        }
    }
    format!("{:?}", (ows as f64 - ws as f64) / ws as f64 + 0.01)
}

/// spandrel's HAT keys, all of which its detection wants.
const HAT_KEYS: [&str; 15] = [
    "relative_position_index_SA",
    "conv_first.weight",
    "layers.0.residual_group.blocks.0.norm1.weight",
    "layers.0.residual_group.blocks.0.conv_block.cab.0.weight",
    "layers.0.residual_group.blocks.0.conv_block.cab.2.weight",
    "layers.0.residual_group.blocks.0.conv_block.cab.3.attention.1.weight",
    "layers.0.residual_group.blocks.0.conv_block.cab.3.attention.3.weight",
    "layers.0.residual_group.blocks.0.mlp.fc1.bias",
    "layers.0.residual_group.blocks.0.mlp.fc2.weight",
    "layers.0.residual_group.overlap_attn.relative_position_bias_table",
    "layers.0.residual_group.overlap_attn.qkv.weight",
    "layers.0.residual_group.overlap_attn.proj.weight",
    "layers.0.residual_group.overlap_attn.mlp.fc1.weight",
    "layers.0.residual_group.overlap_attn.mlp.fc2.weight",
    "conv_last.weight",
];

pub(crate) fn detect_hat(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    if let Some(k) = HAT_KEYS.iter().find(|k| !has(sd, k)) {
        bail!(Code::ModelInvalid, "recognised HAT, but the file lacks '{k}', which spandrel's HAT has");
    }
    if has(sd, "absolute_pos_embed") {
        bail!(Code::ModelInvalid, "recognised HAT with an absolute position embedding (it fixes the input size), which Lucent cannot run");
    }
    let in_nc = dim(sd, "conv_first.weight", 1)?;
    let embed_dim = dim(sd, "conv_first.weight", 0)?;
    let num_feat = dim(sd, "conv_last.weight", 1)?;
    let out_nc = dim(sd, "conv_last.weight", 0)?;
    let (upscale, _) = pixelshuffle_params(sd)?;
    let window_size = dim(sd, "relative_position_index_SA", 0)?.isqrt();
    let overlap_win = dim(sd, "relative_position_index_OCA", 1)?.isqrt();
    let layers = seq_len(sd, "layers");
    let depths: Vec<usize> = (0..layers).map(|i| seq_len(sd, &format!("layers.{i}.residual_group.blocks"))).collect();
    let mut num_heads = Vec::new();
    for i in 0..layers {
        num_heads.push(dim(sd, &format!("layers.{i}.residual_group.overlap_attn.relative_position_bias_table"), 1)?);
    }
    let conv_resi = has(sd, "conv_after_body.weight");
    let (compress, compress_s) = inv_int_div(embed_dim, dim(sd, "layers.0.residual_group.blocks.0.conv_block.cab.0.weight", 0)?)?;
    let (_, squeeze_s) = inv_int_div(embed_dim, dim(sd, "layers.0.residual_group.blocks.0.conv_block.cab.3.attention.1.weight", 0)?)?;
    let qkv_bias = has(sd, "layers.0.residual_group.blocks.0.attn.qkv.bias");
    let patch_norm = has(sd, "patch_embed.norm.weight");
    let mlp_hidden = dim(sd, "layers.0.residual_group.blocks.0.mlp.fc1.weight", 0)?;
    // spandrel builds HAT for 64x64 training patches: a window of 64 or more would not load.
    let heads_ok = num_heads.iter().all(|&h| h > 0 && embed_dim.is_multiple_of(h));
    if window_size == 0 || window_size >= 64 || overlap_win < window_size || !(overlap_win - window_size).is_multiple_of(2) || layers == 0 || !heads_ok || upscale == 0 {
        bail!(Code::ModelInvalid, "HAT: window {window_size}, overlap window {overlap_win}, {layers} groups, heads {num_heads:?} do not fit {embed_dim} channels (Lucent needs the overlap window to exceed the window by an even count)");
    }
    if out_nc != in_nc {
        bail!(Code::ModelInvalid, "HAT: {in_nc} input and {out_nc} output channels; spandrel builds only equal counts");
    }
    let resi = if conv_resi { "1conv" } else { "identity" };
    let size_tag = match layers {
        0..=8 if compress > 4.0 => "small",
        0..=8 => "medium",
        _ => "large",
    };
    let tags = vec![size_tag.to_string(), format!("s64w{window_size}"), format!("{num_feat}nf"), format!("{embed_dim}dim"), resi.to_string()];
    let params = BTreeMap::from([
        ("img_size".to_string(), "64".to_string()),
        ("patch_size".into(), "1".into()),
        ("in_chans".into(), in_nc.to_string()),
        ("embed_dim".into(), embed_dim.to_string()),
        ("depths".into(), list(&depths)),
        ("num_heads".into(), list(&num_heads)),
        ("window_size".into(), window_size.to_string()),
        ("compress_ratio".into(), compress_s),
        ("squeeze_factor".into(), squeeze_s),
        ("conv_scale".into(), "0.01".into()),
        ("overlap_ratio".into(), overlap_ratio(window_size, overlap_win)),
        ("mlp_ratio".into(), format!("{:?}", mlp_hidden as f64 / embed_dim as f64)),
        ("qkv_bias".into(), qkv_bias.to_string()),
        ("ape".into(), "false".into()),
        ("patch_norm".into(), patch_norm.to_string()),
        ("upscale".into(), upscale.to_string()),
        ("img_range".into(), "1.0".into()),
        ("upsampler".into(), "pixelshuffle".into()),
        ("resi_connection".into(), resi.into()),
        ("num_feat".into(), num_feat.to_string()),
    ]);
    let h = Hat { in_nc, embed_dim, depths, num_heads, window_size, overlap_win, upscale, conv_resi, patch_norm, conv_scale: 0.01, img_range: 1.0 };
    let warnings = vec![
        format!("input is reflect-padded to a multiple of {window_size} inside the network; attention windows make tile seams likelier than with convolutional models"),
        "HAT's channel attention blocks use whole-image averages: a tiled run differs slightly from a whole-image run".to_string(),
    ];
    let info = ModelInfo { architecture: "HAT", scale: upscale, in_channels: in_nc, out_channels: in_nc, params, tags, warnings, size_multiple: 1 };
    Ok((Arch::Hat(h), info))
}
