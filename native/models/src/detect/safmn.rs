//! Detection of SAFMN (spatially-adaptive feature modulation network), from keys and shapes as
//! spandrel (MIT) reads them, restated: the width from `to_feat`, the block count from `feats`,
//! the feed-forward width from the first block's CCM conv, the scale from `to_img`'s outputs
//! (`3·scale²`). RGB in and out, four feature levels per block (fixed in the network).

use super::{dim, seq_len, Arch, ModelInfo};
use crate::tensor::StateDict;
use lucent_core::{bail, Code, Result};
use std::collections::BTreeMap;

/// The multiple spandrel pads SAFMN's input to (its size requirement): the coarsest of the four
/// levels pools by 2³.
pub const SAFMN_MULTIPLE: usize = 8;

/// Levels of a SAFM module: level `i` max-pools by `2^i` (level 0 not at all).
pub const SAFMN_LEVELS: usize = 4;

#[derive(Debug, Clone, PartialEq)]
pub struct Safmn {
    pub dim: usize,
    pub n_blocks: usize,
    /// Channels of the CCM feed-forward (`dim · ffn_scale`).
    pub hidden: usize,
    pub scale: usize,
}

pub(crate) fn detect_safmn(sd: &StateDict) -> Result<(Arch, ModelInfo)> {
    let width = dim(sd, "to_feat.weight", 0)?;
    let in_nc = dim(sd, "to_feat.weight", 1)?;
    let n_blocks = seq_len(sd, "feats");
    let hidden = dim(sd, "feats.0.ccm.ccm.0.weight", 0)?;
    let last = dim(sd, "to_img.0.weight", 0)?;
    let scale = (last / 3).isqrt();
    if in_nc != 3 {
        bail!(Code::ModelInvalid, "SAFMN: the first conv takes {in_nc} channels; the network is RGB only");
    }
    if scale == 0 || scale * scale * 3 != last {
        bail!(Code::ModelInvalid, "SAFMN: last conv has {last} outputs, not 3·scale²");
    }
    let levels = seq_len(sd, "feats.0.safm.mfr");
    let chunk = dim(sd, "feats.0.safm.mfr.0.weight", 0)?;
    if width == 0 || !width.is_multiple_of(SAFMN_LEVELS) || levels != SAFMN_LEVELS || chunk * SAFMN_LEVELS != width || n_blocks == 0 || hidden == 0 {
        bail!(Code::ModelInvalid, "SAFMN: {width} channels in {levels} levels of {chunk}, {n_blocks} blocks, is no SAFMN layout");
    }
    let ffn_scale = hidden as f64 / width as f64;
    let s = Safmn { dim: width, n_blocks, hidden, scale };
    let params = BTreeMap::from([
        ("dim".to_string(), width.to_string()),
        ("n_blocks".into(), n_blocks.to_string()),
        ("ffn_scale".into(), format!("{ffn_scale:?}")),
        ("upscaling_factor".into(), scale.to_string()),
    ]);
    let tags = vec![format!("{width}dim"), format!("{n_blocks}nb")];
    let warnings = vec![format!(
        "input is reflect-padded to a multiple of {SAFMN_MULTIPLE} inside the network (spandrel's size requirement); the output is cropped back"
    )];
    let info = ModelInfo { architecture: "SAFMN", scale, in_channels: 3, out_channels: 3, params, tags, warnings, size_multiple: 1 };
    Ok((Arch::Safmn(s), info))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Param;

    /// The keys and shapes of a SAFMN state dict (zero weights).
    fn state_dict(dim: usize, n_blocks: usize, hidden: usize, scale: usize) -> StateDict {
        let mut sd = StateDict::new();
        let mut put = |k: String, shape: &[usize]| {
            sd.insert(k, Param { shape: shape.to_vec(), data: vec![0.0; shape.iter().product()] });
        };
        put("to_feat.weight".into(), &[dim, 3, 3, 3]);
        put("to_feat.bias".into(), &[dim]);
        for b in 0..n_blocks {
            let k = format!("feats.{b}");
            for n in ["norm1", "norm2"] {
                put(format!("{k}.{n}.weight"), &[dim]);
                put(format!("{k}.{n}.bias"), &[dim]);
            }
            for i in 0..SAFMN_LEVELS {
                put(format!("{k}.safm.mfr.{i}.weight"), &[dim / SAFMN_LEVELS, 1, 3, 3]);
                put(format!("{k}.safm.mfr.{i}.bias"), &[dim / SAFMN_LEVELS]);
            }
            put(format!("{k}.safm.aggr.weight"), &[dim, dim, 1, 1]);
            put(format!("{k}.safm.aggr.bias"), &[dim]);
            put(format!("{k}.ccm.ccm.0.weight"), &[hidden, dim, 3, 3]);
            put(format!("{k}.ccm.ccm.0.bias"), &[hidden]);
            put(format!("{k}.ccm.ccm.2.weight"), &[dim, hidden, 1, 1]);
            put(format!("{k}.ccm.ccm.2.bias"), &[dim]);
        }
        put("to_img.0.weight".into(), &[3 * scale * scale, dim, 3, 3]);
        put("to_img.0.bias".into(), &[3 * scale * scale]);
        sd
    }

    #[test]
    fn real_sizes_are_detected_as_spandrel_does() {
        // SAFMN x4 (dim 36, 8 blocks), SAFMN-L x2 (dim 128, 16 blocks), a 1x restoration model.
        for (dim, nb, hidden, scale, ffn) in [(36, 8, 72, 4, "2.0"), (128, 16, 256, 2, "2.0"), (64, 4, 96, 1, "1.5")] {
            let sd = state_dict(dim, nb, hidden, scale);
            let (arch, info) = crate::detect(&sd).unwrap();
            assert_eq!(arch, Arch::Safmn(Safmn { dim, n_blocks: nb, hidden, scale }));
            assert_eq!((info.architecture, info.scale, info.in_channels, info.out_channels, info.size_multiple), ("SAFMN", scale, 3, 3, 1));
            assert_eq!(info.tags, [format!("{dim}dim"), format!("{nb}nb")]);
            assert_eq!(info.params["ffn_scale"], ffn);
            assert_eq!(info.params["n_blocks"], nb.to_string());
        }
    }

    #[test]
    fn layouts_spandrel_cannot_build_are_refused() {
        // 18 channels do not split into four equal chunks.
        let mut sd = state_dict(16, 1, 32, 2);
        sd.get_mut("to_feat.weight").unwrap().shape = vec![18, 3, 3, 3];
        assert!(crate::detect(&sd).unwrap_err().message.contains("no SAFMN layout"));
        // 4 outputs are no 3·scale².
        let mut sd = state_dict(16, 1, 32, 2);
        sd.get_mut("to_img.0.weight").unwrap().shape = vec![4, 16, 3, 3];
        assert!(crate::detect(&sd).unwrap_err().message.contains("3·scale²"));
        // a grey input
        let mut sd = state_dict(16, 1, 32, 2);
        sd.get_mut("to_feat.weight").unwrap().shape = vec![16, 1, 3, 3];
        assert!(crate::detect(&sd).unwrap_err().message.contains("RGB only"));
    }
}
