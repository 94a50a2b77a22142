//! Architecture detection from a state dict's keys and shapes. The rules are the facts spandrel
//! (MIT) relies on, restated: which keys mark an architecture, and which shapes give its
//! hyperparameters. Scale, channel counts and hyperparameters come out as spandrel reports them.

use crate::tensor::{Param, StateDict};
use lucent_core::{bail, Code, Error, Result};
use std::collections::BTreeMap;

/// ESRGAN / RRDBNet hyperparameters. Keys are in the old style after [`esrgan_old_keys`].
#[derive(Debug, Clone, PartialEq)]
pub struct Esrgan {
    /// Channels the first conv takes (after pixel-unshuffle when `shuffle` is set).
    pub in_nc: usize,
    pub out_nc: usize,
    pub nf: usize,
    pub nb: usize,
    /// Growth channels of the dense blocks.
    pub gc: usize,
    /// Nearest-x2 + conv stages.
    pub upsamples: usize,
    /// ESRGAN+ extra 1x1 residual paths.
    pub plus: bool,
    /// Pixel-unshuffle factor applied to the input (2 or 4), if any.
    pub shuffle: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Compact {
    pub in_nc: usize,
    pub out_nc: usize,
    pub num_feat: usize,
    pub num_conv: usize,
    pub scale: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub in_nc: usize,
    pub out_nc: usize,
    pub feat: usize,
    pub scale: usize,
    /// `(x - mean) * 255` on the input (false when the file has a `no_norm` buffer).
    pub norm: bool,
}

/// RealPLKSR (spandrel's "PLKSR" architecture, "Real" variant) with channel LayerNorm; the
/// GroupNorm and DySample variants are refused.
#[derive(Debug, Clone, PartialEq)]
pub struct RealPlksr {
    pub dim: usize,
    pub n_blocks: usize,
    pub scale: usize,
    pub kernel_size: usize,
    /// Channels the large-kernel conv covers (`dim · split_ratio`).
    pub pdim: usize,
    pub use_ea: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Arch {
    Esrgan(Esrgan),
    Compact(Compact),
    Span(Span),
    RealPlksr(RealPlksr),
    SwinIr(SwinIr),
    Dat(Dat),
    Safmn(Safmn),
    Hat(Hat),
}

mod safmn;
mod transformer;
pub use safmn::{Safmn, SAFMN_LEVELS, SAFMN_MULTIPLE};
pub use transformer::{Dat, Hat, SwinIr};

/// What a model is, as spandrel would describe it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// spandrel's architecture id: "ESRGAN", "Compact", "SPAN", "PLKSR", "SwinIR", "DAT", "SAFMN", "HAT".
    pub architecture: &'static str,
    pub scale: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    /// Hyperparameters by name (spandrel's constructor argument names).
    pub params: BTreeMap<String, String>,
    pub tags: Vec<String>,
    pub warnings: Vec<String>,
    /// Input sides the network takes must be a multiple of this (1: any size). Only the
    /// pixel-unshuffle ESRGANs need one (the unshuffle factor); SwinIR, DAT, SAFMN and HAT pad inside
    /// the network.
    pub size_multiple: usize,
}

pub(crate) fn has(sd: &StateDict, k: &str) -> bool {
    sd.contains_key(k)
}

pub(crate) fn get<'a>(sd: &'a StateDict, k: &str) -> Result<&'a Param> {
    sd.get(k).ok_or_else(|| Error::new(Code::ModelInvalid, format!("tensor '{k}' is missing")))
}

pub(crate) fn dim(sd: &StateDict, k: &str, i: usize) -> Result<usize> {
    let p = get(sd, k)?;
    p.shape.get(i).copied().ok_or_else(|| Error::new(Code::ModelInvalid, format!("tensor '{k}' has rank {}, wanted more than {i}", p.shape.len())))
}

/// Length of a numbered sequence: 1 + the highest `i` in `{prefix}.{i}.…` keys (0 if none).
pub(crate) fn seq_len(sd: &StateDict, prefix: &str) -> usize {
    let p = format!("{prefix}.");
    sd.keys()
        .filter_map(|k| k.strip_prefix(&p)?.split('.').next()?.parse::<usize>().ok())
        .max()
        .map_or(0, |m| m + 1)
}

/// (scale, out channels) with scale² · out = `x`, trying out = `in_nc`, 3, 4, 1 in that order.
fn scale_and_out(x: usize, in_nc: usize) -> Result<(usize, usize)> {
    for c in [in_nc, 3, 4, 1] {
        if c > 0 && x.is_multiple_of(c) {
            let s = (x / c).isqrt();
            if s * s == x / c {
                return Ok((s, c));
            }
        }
    }
    bail!(Code::ModelInvalid, "cannot split {x} upsampler channels into scale² x 1, 3 or 4 output channels")
}

fn idx(s: &str) -> Option<usize> {
    s.parse().ok()
}

/// Rename a new-style RRDBNet state dict (`conv_first`, `body.N.rdbR.convC`, `conv_body`,
/// `conv_upK`, `conv_hr`, `conv_last`, or the BSRGAN spellings) to the old `model.N` layout.
pub fn esrgan_old_keys(sd: &StateDict) -> StateDict {
    if !sd.contains_key("conv_first.weight") {
        return sd.clone();
    }
    let nb = sd
        .keys()
        .filter_map(|k| {
            let rest = k.strip_prefix("body.").or_else(|| k.strip_prefix("RRDB_trunk."))?;
            idx(rest.split('.').next()?)
        })
        .max()
        .map_or(0, |m| m + 1);
    let ups = sd
        .keys()
        .filter_map(|k| idx(k.strip_prefix("conv_up").or_else(|| k.strip_prefix("upconv"))?.split('.').next()?))
        .max()
        .unwrap_or(0);
    let mut out = StateDict::new();
    for (k, v) in sd {
        let (stem, kind) = match k.rsplit_once('.') {
            Some(p) => p,
            None => continue,
        };
        let parts: Vec<&str> = stem.split('.').collect();
        let new = match parts.as_slice() {
            ["conv_first"] => Some("model.0".to_string()),
            ["conv_body"] | ["trunk_conv"] => Some(format!("model.1.sub.{nb}")),
            ["body" | "RRDB_trunk", n, rdb, conv] => {
                let r = rdb.strip_prefix("rdb").or_else(|| rdb.strip_prefix("RDB"));
                match (idx(n), r) {
                    (Some(n), Some(r)) => Some(format!("model.1.sub.{n}.RDB{r}.{conv}.0")),
                    _ => None,
                }
            }
            [up] if up.starts_with("conv_up") || up.starts_with("upconv") => {
                idx(up.trim_start_matches("conv_up").trim_start_matches("upconv")).map(|i| format!("model.{}", 3 * i))
            }
            ["conv_hr"] | ["HRconv"] => Some(format!("model.{}", 3 * ups + 2)),
            ["conv_last"] => Some(format!("model.{}", 3 * ups + 4)),
            _ => None,
        };
        if let Some(n) = new {
            out.insert(format!("{n}.{kind}"), v.clone());
        }
    }
    out
}

fn detect_esrgan(sd0: &StateDict) -> Result<(Arch, ModelInfo)> {
    let sd = esrgan_old_keys(sd0);
    let seq = seq_len(&sd, "model");
    if seq < 5 || !(seq - 5).is_multiple_of(3) {
        bail!(Code::ModelInvalid, "ESRGAN: the model has {seq} top-level layers, which is no RRDBNet layout");
    }
    let upsamples = (seq - 5) / 3;
    let in_nc = dim(&sd, "model.0.weight", 1)?;
    let nf = dim(&sd, "model.0.weight", 0)?;
    let out_nc = dim(&sd, &format!("model.{}.weight", seq - 1), 0)?;
    let nb = seq_len(&sd, "model.1.sub").saturating_sub(1);
    if nb == 0 {
        bail!(Code::ModelInvalid, "ESRGAN: no RRDB blocks");
    }
    let gc = dim(&sd, "model.1.sub.0.RDB1.conv1.0.weight", 0)?;
    let plus = sd.keys().any(|k| k.contains(".conv1x1."));
    let shuffle = if in_nc == out_nc * 4 {
        Some(2)
    } else if in_nc == out_nc * 16 {
        Some(4)
    } else {
        None
    };
    let mut scale = 1usize << upsamples;
    let mut in_ch = in_nc;
    let mut tags = vec![format!("{nf}nf"), format!("{nb}nb")];
    if plus {
        tags.insert(0, "ESRGAN+".into());
    }
    let mut warnings = Vec::new();
    if let Some(f) = shuffle {
        in_ch /= f * f;
        scale /= f;
        tags.push("unshuffle".into());
        warnings.push(format!("input sides must be a multiple of {f} (pixel-unshuffle)"));
    }
    if gc != 32 {
        warnings.push(format!("growth channels {gc} differ from spandrel's fixed 32"));
    }
    let e = Esrgan { in_nc, out_nc, nf, nb, gc, upsamples, plus, shuffle };
    let params = BTreeMap::from([
        ("in_nc".to_string(), in_nc.to_string()),
        ("out_nc".into(), out_nc.to_string()),
        ("num_filters".into(), nf.to_string()),
        ("num_blocks".into(), nb.to_string()),
        ("scale".into(), (1usize << upsamples).to_string()),
        ("plus".into(), plus.to_string()),
        ("shuffle_factor".into(), shuffle.map_or("none".into(), |f| f.to_string())),
    ]);
    let size_multiple = shuffle.unwrap_or(1);
    let info = ModelInfo { architecture: "ESRGAN", scale, in_channels: in_ch, out_channels: out_nc, params, tags, warnings, size_multiple };
    Ok((Arch::Esrgan(e), info))
}

fn detect_compact(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let highest = seq_len(sd, "body") - 1;
    if highest < 2 || !highest.is_multiple_of(2) {
        bail!(Code::ModelInvalid, "Compact: body has {} entries, which is no SRVGGNetCompact layout", highest + 1);
    }
    let in_nc = dim(sd, "body.0.weight", 1)?;
    let num_feat = dim(sd, "body.0.weight", 0)?;
    let num_conv = (highest - 2) / 2;
    for i in (1..highest).step_by(2) {
        let k = format!("body.{i}.weight");
        if get(sd, &k)?.shape != [num_feat] {
            bail!(Code::ModelInvalid, "Compact: '{k}' is not a PReLU of {num_feat} slopes (shape {:?})", get(sd, &k)?.shape);
        }
    }
    let (scale, out_nc) = scale_and_out(dim(sd, &format!("body.{highest}.bias"), 0)?, in_nc)?;
    let c = Compact { in_nc, out_nc, num_feat, num_conv, scale };
    let params = BTreeMap::from([
        ("num_in_ch".to_string(), in_nc.to_string()),
        ("num_out_ch".into(), out_nc.to_string()),
        ("num_feat".into(), num_feat.to_string()),
        ("num_conv".into(), num_conv.to_string()),
        ("upscale".into(), scale.to_string()),
        ("act_type".into(), "prelu".into()),
    ]);
    let tags = vec![format!("{num_feat}nf"), format!("{num_conv}nc")];
    let info = ModelInfo { architecture: "Compact", scale, in_channels: in_nc, out_channels: out_nc, params, tags, warnings: Vec::new(), size_multiple: 1 };
    Ok((Arch::Compact(c), info))
}

fn detect_span(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let in_nc = dim(sd, "conv_1.sk.weight", 1)?;
    let feat = dim(sd, "conv_1.sk.weight", 0)?;
    let (scale, out_nc) = scale_and_out(dim(sd, "upsampler.0.weight", 0)?, in_nc)?;
    let norm = !has(sd, "no_norm");
    if norm && in_nc != 3 {
        bail!(Code::ModelInvalid, "SPAN: input normalisation needs 3 input channels, the model has {in_nc}");
    }
    let s = Span { in_nc, out_nc, feat, scale, norm };
    let params = BTreeMap::from([
        ("num_in_ch".to_string(), in_nc.to_string()),
        ("num_out_ch".into(), out_nc.to_string()),
        ("feature_channels".into(), feat.to_string()),
        ("upscale".into(), scale.to_string()),
        ("norm".into(), norm.to_string()),
    ]);
    let tags = vec![format!("{feat}nf")];
    let info = ModelInfo { architecture: "SPAN", scale, in_channels: in_nc, out_channels: out_nc, params, tags, warnings: Vec::new(), size_multiple: 1 };
    Ok((Arch::Span(s), info))
}

fn detect_realplksr(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let width = dim(sd, "feats.0.weight", 0)?;
    let total = seq_len(sd, "feats");
    if total < 4 {
        bail!(Code::ModelInvalid, "RealPLKSR: {total} feature layers, which is no RealPLKSR layout");
    }
    let n_blocks = total - 3;
    let last = dim(sd, &format!("feats.{}.weight", total - 1), 0)?;
    let scale = (last / 3).isqrt();
    if scale == 0 || scale * scale * 3 != last {
        bail!(Code::ModelInvalid, "RealPLKSR: last conv has {last} outputs, not 3·scale²");
    }
    let kernel_size = dim(sd, "feats.1.lk.conv.weight", 2)?;
    let pdim = dim(sd, "feats.1.lk.conv.weight", 0)?;
    let use_ea = has(sd, "feats.1.attn.f.0.weight");
    let layer_norm = has(sd, "feats.1.layer_norm.bias");
    let dysample = has(sd, "to_img.init_pos");
    if dysample {
        bail!(Code::ModelInvalid, "recognised RealPLKSR with a DySample upsampler, which Lucent cannot run yet");
    }
    if !layer_norm {
        bail!(Code::ModelInvalid, "recognised RealPLKSR with GroupNorm (whole-image statistics, which tiles cannot reproduce); only the LayerNorm variant runs");
    }
    if pdim == 0 || pdim > width || kernel_size % 2 == 0 {
        bail!(Code::ModelInvalid, "RealPLKSR: large-kernel conv of {pdim} channels, kernel {kernel_size}, is not supported");
    }
    let p = RealPlksr { dim: width, n_blocks, scale, kernel_size, pdim, use_ea };
    let params = BTreeMap::from([
        ("dim".to_string(), width.to_string()),
        ("n_blocks".into(), n_blocks.to_string()),
        ("upscaling_factor".into(), scale.to_string()),
        ("kernel_size".into(), kernel_size.to_string()),
        ("split_ratio".into(), format!("{:?}", pdim as f64 / width as f64)),
        ("use_ea".into(), use_ea.to_string()),
        ("dysample".into(), "false".into()),
        ("layer_norm".into(), "true".into()),
    ]);
    let tags = vec![format!("{width}dim"), format!("{n_blocks}nb"), format!("{kernel_size}ks"), "Real".into(), "LayerNorm".into()];
    let info = ModelInfo { architecture: "PLKSR", scale, in_channels: 3, out_channels: 3, params, tags, warnings: Vec::new(), size_multiple: 1 };
    Ok((Arch::RealPlksr(p), info))
}

/// Architectures spandrel knows that Lucent cannot build yet, each by keys that mark it (all must
/// be present; checked in this order, so the more specific come first).
const KNOWN_UNSUPPORTED: [(&[&str], &str); 6] = [
    (&["feats.0.weight", "feats.1.channe_mixer.0.weight", "feats.1.refine.weight"], "PLKSR"),
    (&["relative_position_index_SA", "layers.0.residual_group.td"], "ATD"),
    (&["layers.0.swin1.attn.relative_position_bias_table"], "DRCT"),
    (&["before_RG.1.weight", "layers.0.blocks.0.gamma", "layers.0.blocks.0.attn.attns.0.rpe_biases"], "RGT"),
    (&["input.weight", "up.0.weight", "residual_layer.0.residual_layer.0.layer.0.fn.0.weight"], "OmniSR"),
    (&["conv_first.weight", "conv_last.weight"], "an RRDBNet-like network without RRDB blocks"),
];

/// Detect the architecture and hyperparameters of a state dict.
pub fn detect(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let esrgan = (has(sd, "model.0.weight") && (has(sd, "model.1.sub.0.RDB1.conv1.0.weight") || has(sd, "model.1.sub.0.RDB1.conv1x1.weight")))
        || ["body.0.rdb1.conv1.weight", "conv_body.weight", "conv_last.weight"].iter().all(|k| has(sd, k)) && has(sd, "conv_first.weight")
        || ["RRDB_trunk.0.RDB1.conv1.weight", "trunk_conv.weight", "conv_last.weight"].iter().all(|k| has(sd, k)) && has(sd, "conv_first.weight");
    if esrgan {
        return detect_esrgan(sd);
    }
    if ["conv_1.sk.weight", "block_1.c1_r.sk.weight", "conv_cat.weight", "conv_2.sk.weight", "upsampler.0.weight"].iter().all(|k| has(sd, k)) {
        return detect_span(sd);
    }
    if has(sd, "body.0.weight") && has(sd, "body.1.weight") {
        return detect_compact(sd);
    }
    if ["feats.0.weight", "feats.1.lk.conv.weight", "feats.1.refine.weight", "feats.1.channel_mixer.0.weight"].iter().all(|k| has(sd, k)) {
        return detect_realplksr(sd);
    }
    // HAT by its markers; a file with them that lacks others of spandrel's HAT keys is refused
    // naming the missing key.
    if ["relative_position_index_SA", "layers.0.residual_group.blocks.0.conv_block.cab.0.weight"].iter().all(|k| has(sd, k)) {
        return transformer::detect_hat(sd);
    }
    if ["layers.0.residual_group.blocks.0.norm1.weight", "layers.0.residual_group.blocks.0.mlp.fc1.bias", "layers.0.residual_group.blocks.0.attn.relative_position_index"]
        .iter()
        .all(|k| has(sd, k))
        && (has(sd, "conv_first.weight") || has(sd, "conv_first.1.weight"))
    {
        return transformer::detect_swinir(sd);
    }
    if ["conv_first.weight", "before_RG.1.weight", "layers.0.blocks.0.ffn.sg.conv.weight", "layers.0.blocks.0.attn.attns.0.rpe_biases", "norm.weight"]
        .iter()
        .all(|k| has(sd, k))
    {
        return transformer::detect_dat(sd);
    }
    if [
        "to_feat.weight",
        "feats.0.norm1.weight",
        "feats.0.norm2.weight",
        "feats.0.safm.mfr.0.weight",
        "feats.0.safm.mfr.3.weight",
        "feats.0.safm.aggr.weight",
        "feats.0.ccm.ccm.0.weight",
        "feats.0.ccm.ccm.2.weight",
        "to_img.0.weight",
    ]
    .iter()
    .all(|k| has(sd, k))
    {
        return safmn::detect_safmn(sd);
    }
    let known = KNOWN_UNSUPPORTED.iter().find(|(keys, _)| keys.iter().all(|k| has(sd, k))).map(|(_, n)| *n);
    let sample: Vec<&str> = sd.keys().take(4).map(|k| k.as_str()).collect();
    match known {
        Some(name) => bail!(Code::ModelInvalid, "recognised {name}, which Lucent cannot run yet (supported: ESRGAN/RRDBNet, Real-ESRGAN Compact, SPAN, RealPLKSR, SwinIR, DAT, SAFMN, HAT)"),
        None => bail!(
            Code::ModelInvalid,
            "unknown architecture ({} tensors, first keys {:?}); supported: ESRGAN/RRDBNet, Real-ESRGAN Compact, SPAN, RealPLKSR, SwinIR, DAT, SAFMN, HAT",
            sd.len(),
            sample
        ),
    }
}
