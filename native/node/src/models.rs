//! Bring your own model: `inspectModel` reads a PyTorch (`.pth` / `.pt` / `.ckpt`) or
//! `.safetensors` file held in memory, without running anything from it, and says what it is
//! (lucent_models). Errors carry code `model_invalid` with a message naming what was wrong or
//! what was recognised.

use crate::errors::{nerr, ErrCode};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::collections::HashMap;

/// What a model file is, as spandrel would describe it.
#[napi(object)]
pub struct ModelInspection {
    /// spandrel's architecture id: 'ESRGAN', 'Compact', 'SPAN', 'PLKSR' (RealPLKSR), 'SwinIR',
    /// 'DAT' or 'SAFMN'.
    pub architecture: String,
    /// Container: 'pytorch' (zip), 'pytorch-legacy' or 'safetensors'.
    pub format: String,
    /// Output side / input side.
    pub scale: u32,
    pub in_channels: u32,
    pub out_channels: u32,
    /// Hyperparameters by spandrel's constructor argument names, as strings.
    pub params: HashMap<String, String>,
    pub tags: Vec<String>,
    /// Things the caller should know (e.g. input sides must be a multiple of 2).
    pub warnings: Vec<String>,
    /// Input sides the network takes must be a multiple of this (1: any size; a pixel-unshuffle
    /// ESRGAN's factor otherwise). Always set by this addon; optional in the type only so that
    /// objects of this shape built elsewhere need not carry it.
    pub size_multiple: Option<u32>,
}

/// Inspect a model file's bytes (`fileName` only shapes error messages).
#[napi]
pub fn inspect_model(bytes: Buffer, file_name: String) -> Result<ModelInspection, ErrCode> {
    let (format, info) = lucent_models::inspect(&bytes, &file_name).map_err(nerr)?;
    Ok(ModelInspection {
        architecture: info.architecture.to_string(),
        format: format.as_str().to_string(),
        scale: info.scale as u32,
        in_channels: info.in_channels as u32,
        out_channels: info.out_channels as u32,
        params: info.params.into_iter().collect(),
        tags: info.tags,
        warnings: info.warnings,
        size_multiple: Some(info.size_multiple as u32),
    })
}
