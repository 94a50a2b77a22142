//! Bring your own model: read a community super-resolution model's weights (PyTorch `.pth` /
//! `.pt` / `.ckpt`, zip or legacy, and `.safetensors`) without running anything from the file,
//! detect its architecture and hyperparameters from the weights alone (the facts spandrel uses),
//! and build the network as a [`lucent_core::ncnn::Net`] of existing ops, so every backend runs it.
//!
//! Supported architectures: ESRGAN / RRDBNet (old and new key styles, BSRGAN/RealSR keys,
//! ESRGAN+, 1x/2x/4x/8x, the pixel-unshuffle variants as Real-ESRGAN x2plus and 1x models use),
//! Real-ESRGAN Compact (SRVGGNetCompact), SPAN, RealPLKSR (LayerNorm variant), SwinIR (all four
//! upsamplers), DAT (DAT, DAT-S, DAT-2, DAT-light), SAFMN and HAT. Anything else (ATD, DRCT, RGT,
//! OmniSR, ...) is refused with an error that names what was recognised.
//!
//! ONNX models (`.onnx`, any network made of the ops listed in [`onnx`], e.g. U²-Net or an SR
//! export) are read as a graph and mapped op by op instead (architecture "ONNX").


pub mod arch;
pub mod detect;
pub mod onnx;
pub mod pickle;
mod safetensors_fmt;
pub mod tensor;
mod torch;
pub mod zipfile;

pub use detect::{detect, Arch, ModelInfo};
pub use tensor::{Limits, Param, StateDict};

use lucent_core::ncnn::Net;
use lucent_core::{bail, Code, Result};

/// The container a model file came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `torch.save` zip archive (PyTorch 1.6+).
    TorchZip,
    /// `torch.save` legacy stream (`_use_new_zipfile_serialization=False`).
    TorchLegacy,
    Safetensors,
    /// An ONNX model (a graph, mapped op by op: see [`onnx`]).
    Onnx,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::TorchZip => "pytorch",
            Format::TorchLegacy => "pytorch-legacy",
            Format::Safetensors => "safetensors",
            Format::Onnx => "onnx",
        }
    }
}

/// Read the state dict of a model file held in memory. The format is taken from the contents;
/// `file_name` only shapes the error for files that are not model weights at all.
pub fn read_state_dict(bytes: &[u8], file_name: &str, limits: &Limits) -> Result<(Format, StateDict)> {
    if bytes.len() as u64 > limits.max_file_bytes {
        bail!(Code::ModelInvalid, "{file_name}: {} bytes, over the limit of {}", bytes.len(), limits.max_file_bytes);
    }
    let (format, tensors) = if zipfile::is_zip(bytes) {
        (Format::TorchZip, torch::load_zip(bytes, limits)?)
    } else if torch::is_legacy(bytes) {
        (Format::TorchLegacy, torch::load_legacy(bytes, limits)?)
    } else if safetensors_fmt::is_safetensors(bytes) {
        (Format::Safetensors, safetensors_fmt::load(bytes, limits)?)
    } else {
        let lower = file_name.to_ascii_lowercase();
        if lower.ends_with(".param") || lower.ends_with(".bin") {
            bail!(Code::ModelInvalid, "{file_name}: ncnn models are added as a .param and .bin pair, not through the weights reader");
        }
        if bytes.starts_with(b"PK") {
            bail!(Code::ModelInvalid, "{file_name}: a zip archive that does not start with a file entry: truncated or damaged?");
        }
        bail!(Code::ModelInvalid, "{file_name}: not a PyTorch (.pth/.pt/.ckpt) or .safetensors model file");
    };
    Ok((format, torch::strip_common_prefixes(tensors)))
}

/// What a model file is, without building it.
pub fn inspect(bytes: &[u8], file_name: &str) -> Result<(Format, ModelInfo)> {
    if is_onnx_file(bytes, file_name) {
        return Ok((Format::Onnx, onnx::load(bytes, file_name, &Limits::default())?.1));
    }
    let (format, sd) = read_state_dict(bytes, file_name, &Limits::default())?;
    let (_, info) = detect(&sd)?;
    Ok((format, info))
}

/// A model ready for a backend: its description and its network (input blob "in0", output blob
/// "out0", RGB in [0, 1], planar).
pub struct Loaded {
    pub format: Format,
    pub info: ModelInfo,
    pub net: Net,
}

/// Read, detect and build.
pub fn load(bytes: &[u8], file_name: &str, limits: &Limits) -> Result<Loaded> {
    if is_onnx_file(bytes, file_name) {
        let (net, info) = onnx::load(bytes, file_name, limits)?;
        return Ok(Loaded { format: Format::Onnx, info, net });
    }
    let (format, sd) = read_state_dict(bytes, file_name, limits)?;
    let (arch, info) = detect(&sd)?;
    let net = arch::build(&arch, &sd)?;
    Ok(Loaded { format, info, net })
}

/// An ONNX file: named `.onnx`, or (unnamed) not any of the state-dict containers and starting
/// like an ONNX `ModelProto`.
fn is_onnx_file(bytes: &[u8], file_name: &str) -> bool {
    onnx::is_onnx(bytes, file_name) && !zipfile::is_zip(bytes) && !torch::is_legacy(bytes) && !safetensors_fmt::is_safetensors(bytes)
}
