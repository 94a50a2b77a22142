//! `catalog()`: every model of the engine's catalog with the fields of models/catalog.json
//! (camelCase), its enums as generated TS string unions.

use lucent_engine::{
    catalog, Category, FaceStyle as XFaceStyle, Kind, Limits, ModelInfo, Pipeline, PriceClass as XPriceClass,
};
use napi_derive::napi;

#[napi(string_enum = "lowercase")]
pub enum ModelKind {
    Photo,
    Video,
}

/// Engine category: 'enhance' (DPI honoured) or 'generative' (DPI ignored).
#[napi(string_enum = "lowercase")]
pub enum ModelCategory {
    Enhance,
    Generative,
}

/// The price table row a model bills by.
#[napi(string_enum = "snake_case")]
pub enum PriceClass {
    Enhance,
    GenerativePortrait,
    Generative,
    Standard,
    Premium,
    Interp,
}

/// Size limits (api.md "Limits"): photos have maxInMp / maxOutMp, videos maxOutMp / minSeconds /
/// maxSeconds.
#[napi(object)]
pub struct ModelLimits {
    pub max_in_mp: Option<u32>,
    pub max_out_mp: u32,
    pub min_seconds: Option<f64>,
    pub max_seconds: Option<u32>,
}

/// A face pipeline's style (the catalog's data of that pipeline).
#[napi(object)]
pub struct FaceStyle {
    pub base: String,
    pub base_margin: u32,
    pub face_net: String,
    pub face_margin: u32,
    pub strength: f64,
    pub enlarge_below: f64,
    /// 0: face crops at their input size; > 0: the face network's output px per output px.
    pub out_density: f64,
    /// Longest side (px) of a face crop at the face network's input.
    pub work_max: u32,
}

/// One model of the catalog (the same facts as models/catalog.json, camelCase).
#[napi(object)]
pub struct CatalogEntry {
    /// e.g. 'general_4x'.
    pub name: String,
    /// api.md's family name, e.g. 'General Enhance' (a family's models differ only by scale).
    pub family: String,
    pub kind: ModelKind,
    /// Other API names accepted for this model, e.g. ['detail_denoise'].
    pub aliases: Vec<String>,
    /// Output side / input side: 1, 2 or 4.
    pub scale: u32,
    pub category: ModelCategory,
    pub price_class: PriceClass,
    pub limits: ModelLimits,
    pub description: String,
    /// Model files relative to modelDir, e.g. 'sr/realesr-general-x4v3'.
    pub networks: Vec<String>,
    /// 'tiled_sr' | 'srmd' | 'denoise_ffdnet' | 'face' | 'interp' | 'unavailable' (more may come).
    pub pipeline: String,
    /// Frame interpolation (the 'interp' pipeline): no per-frame enhancement; a job needs an fps or slowmo.
    pub interpolation: bool,
    /// False: listed by the API but not runnable here (-> unknown_model).
    pub available: bool,
    /// Why the model is unavailable (absent when available).
    pub reason: Option<String>,
    /// Face pipelines: their style.
    pub face: Option<FaceStyle>,
}

fn entry(m: &ModelInfo) -> CatalogEntry {
    let limits = match m.limits() {
        Limits::Photo { max_in_mp, max_out_mp } => ModelLimits { max_in_mp: Some(max_in_mp), max_out_mp, min_seconds: None, max_seconds: None },
        Limits::Video { max_out_mp, min_seconds, max_seconds } => {
            ModelLimits { max_in_mp: None, max_out_mp, min_seconds: Some(min_seconds), max_seconds: Some(max_seconds) }
        }
    };
    let face = match m.pipeline {
        Pipeline::Face(XFaceStyle { base, base_margin, face_net, face_margin, strength, enlarge_below, out_density, work_max }) => Some(FaceStyle {
            base: base.to_string(),
            base_margin: base_margin as u32,
            face_net: face_net.to_string(),
            face_margin: face_margin as u32,
            strength: catalog::decimal(strength),
            enlarge_below: catalog::decimal(enlarge_below),
            out_density: catalog::decimal(out_density),
            work_max: work_max as u32,
        }),
        _ => None,
    };
    CatalogEntry {
        name: m.name.to_string(),
        family: m.family.to_string(),
        kind: match m.kind {
            Kind::Photo => ModelKind::Photo,
            Kind::Video => ModelKind::Video,
        },
        aliases: m.aliases.iter().map(|s| s.to_string()).collect(),
        scale: m.scale as u32,
        category: match m.category {
            Category::Enhance => ModelCategory::Enhance,
            Category::Generative => ModelCategory::Generative,
        },
        price_class: match m.price_class {
            XPriceClass::Enhance => PriceClass::Enhance,
            XPriceClass::GenerativePortrait => PriceClass::GenerativePortrait,
            XPriceClass::Generative => PriceClass::Generative,
            XPriceClass::Standard => PriceClass::Standard,
            XPriceClass::Premium => PriceClass::Premium,
            XPriceClass::Interp => PriceClass::Interp,
        },
        limits,
        description: m.description.to_string(),
        networks: m.networks.iter().map(|s| s.to_string()).collect(),
        pipeline: m.pipeline.id().to_string(),
        interpolation: m.interpolation(),
        available: m.available(),
        reason: m.unavailable.map(|s| s.to_string()),
        face,
    }
}

/// Every photo and video model of the catalog (photo first, API order).
#[napi]
pub fn catalog() -> Vec<CatalogEntry> {
    catalog::CATALOG.iter().map(entry).collect()
}
