//! THE model catalog: every photo and video model name of the API (shared/spec/api.md), what it
//! runs, and whether this build can run it. Names that are not implemented yet stay listed with
//! `available: false` and a reason; asking the engine to run one answers `unknown_model`.
//!
//! Pre/post-processing facts per network file come from shared/models/README.md ([`prepost`]).

use lucent_core::{Code, Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Photo,
    Video,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Photo => "photo",
            Kind::Video => "video",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// "enhancement and denoise" in the API: DPI honoured, 70 MP in / 432 MP out.
    Enhance,
    /// Generative: DPI ignored, 34 MP in and out.
    Generative,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Enhance => "enhance",
            Category::Generative => "generative",
        }
    }
    /// (max input pixels, max output pixels) from the API's limits table (photos).
    pub fn photo_limits(self) -> (u64, u64) {
        match self {
            Category::Enhance => (70_000_000, 432_000_000),
            Category::Generative => (34_000_000, 34_000_000),
        }
    }
}

/// How a network's input is padded at the image borders before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// Mirror without repeating the edge pixel (ncnn / numpy "reflect").
    Reflect,
    /// Repeat the edge pixel.
    Replicate,
}

impl PadMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
        }
    }
}

/// Pre/post facts of one network file (shared/models/README.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrePost {
    pub pad_mode: PadMode,
    /// Pixels of padding on every side of the input.
    pub pad: usize,
    /// Output pixels to cut from every side afterwards (= pad * scale for the SR nets).
    pub crop: usize,
    /// Network scale (output / input side).
    pub net_scale: usize,
}

/// Pre/post facts for a network stem (relative to the model dir, without extension).
pub fn prepost(stem: &str) -> Option<PrePost> {
    let s = |pad_mode, pad, net_scale, crop| Some(PrePost { pad_mode, pad, crop, net_scale });
    match stem {
        "sr/realesr-general-x4v3" | "sr/realesrgan-x4plus" | "sr/realesr-animevideov3-x4" => {
            s(PadMode::Reflect, 10, 4, 40)
        }
        "sr/realesr-animevideov3-x3" => s(PadMode::Reflect, 10, 3, 30),
        "sr/realesr-animevideov3-x2" => s(PadMode::Reflect, 10, 2, 20),
        "sr/srmd_x2" | "sr/srmdnf_x2" => s(PadMode::Replicate, 12, 2, 24),
        "sr/srmd_x3" | "sr/srmdnf_x3" => s(PadMode::Replicate, 12, 3, 36),
        "sr/srmd_x4" | "sr/srmdnf_x4" => s(PadMode::Replicate, 12, 4, 48),
        _ if stem.starts_with("sr/waifu2x-upconv7-photo/") => s(PadMode::Replicate, 7, 2, 14),
        "sr/realcugan-se/up2x-conservative" => s(PadMode::Reflect, 18, 2, 36),
        "sr/realcugan-se/up4x-conservative" => s(PadMode::Reflect, 19, 4, 76),
        _ => None,
    }
}

/// What the engine does with a model's network(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// Run the (single) network tiled with its reflect/replicate border padding, then, when the
    /// model's scale is below the network's, area-average (box) downscale by the integer factor
    /// `net_scale / scale` (inside each tile, so nothing full-size is ever held in float).
    TiledSr,
    /// SRMD / SRMDNF: RGB + 15 constant maps of the bicubic kernel's PCA code (+ a noise map for
    /// SRMD), tiled like TiledSr (pipelines/srmd.rs).
    Srmd,
    /// Blind 1x denoising: noise level estimated from the image (PCA, Chen et al. 2015), then
    /// FFDNet-Clip tiled with that sigma (+ a luma unsharp mask for `Sharpen`) (pipelines/denoise.rs).
    Denoise(DenoiseKind),
    /// Face / portrait models: base network on the whole picture + detected faces enhanced by a
    /// face network and blended in with feathered masks (face/mod.rs; style per name there).
    Face,
    /// Not implemented in this build.
    Unavailable,
}

/// Which denoise model (its measured constants live in pipelines/denoise.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenoiseKind {
    /// detail_denoise_1x: keeps fine texture.
    Detail,
    /// sharpen_denoise_1x: denoise, then unsharp mask on luma.
    Sharpen,
}

impl Pipeline {
    pub fn id(self) -> &'static str {
        match self {
            Pipeline::TiledSr => "tiled_sr",
            Pipeline::Srmd => "srmd",
            Pipeline::Denoise(_) => "denoise_ffdnet",
            Pipeline::Face => "face",
            Pipeline::Unavailable => "unavailable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub name: &'static str,
    pub kind: Kind,
    /// Output side / input side: 1, 2 or 4.
    pub scale: usize,
    pub category: Category,
    pub description: &'static str,
    /// Network file stems relative to the model dir, e.g. "sr/realesr-general-x4v3".
    pub networks: &'static [&'static str],
    pub pipeline: Pipeline,
    /// Per-tile context margin (input pixels on each side of a tile) for tiled pipelines. Measured
    /// tiled-vs-untiled (tests/engine.rs): compact nets 24 px -> max diff 1/255 (rounding flips);
    /// RRDB x4plus 32 px -> 6/255, 48 -> 1/255, 64 -> identical, so 64.
    pub tile_margin: usize,
    /// None when available; otherwise why not.
    pub unavailable: Option<&'static str>,
}

impl ModelInfo {
    pub fn available(&self) -> bool {
        self.unavailable.is_none()
    }
    /// Pre/post facts of the model's first network.
    pub fn prepost(&self) -> Option<PrePost> {
        self.networks.first().and_then(|n| prepost(n))
    }
}

const GENERAL: &[&str] = &["sr/realesr-general-x4v3"];
const X4PLUS: &[&str] = &["sr/realesrgan-x4plus"];
const ANIME_X2: &[&str] = &["sr/realesr-animevideov3-x2"];
const ANIME_X4: &[&str] = &["sr/realesr-animevideov3-x4"];
const SRMDNF_X2: &[&str] = &["sr/srmdnf_x2"];
const SRMDNF_X4: &[&str] = &["sr/srmdnf_x4"];
const FFDNET_CLIP: &[&str] = &["denoise/ffdnet_clip_color"];
#[allow(dead_code)]
const NONE: &[&str] = &[];
// Face/portrait models: base network, face network, detector (face/mod.rs has the styles).
const FACE_CLEAR: &[&str] = &["sr/realesr-general-x4v3", "sr/realesrgan-x4plus", "face/retinaface-slim"];
const FACE_PORTRAIT: &[&str] = &["sr/realesrgan-x4plus", "sr/realesrgan-x4plus", "face/retinaface-slim"];
const FACE_SOFT_VIDEO: &[&str] = &["sr/realesr-animevideov3-x2", "sr/realesr-general-x4v3", "face/retinaface-slim"];
const PORTRAIT_VIDEO: &[&str] = &["sr/realesr-animevideov3-x2", "sr/realesrgan-x4plus", "face/retinaface-slim"];

#[allow(dead_code)]
const NO_FACE_PRIOR: &str =
    "needs a face-restoration prior (GFPGAN/CodeFormer/GPEN class), none is available in this deployment";
#[allow(dead_code)]
const NOT_YET: &str = "not implemented in this build yet";

macro_rules! m {
    ($name:expr, $kind:ident, $scale:expr, $cat:ident, $desc:expr, $nets:expr, $pipe:ident $(($parg:expr))?, $margin:expr, $unavail:expr) => {
        ModelInfo {
            name: $name,
            kind: Kind::$kind,
            scale: $scale,
            category: Category::$cat,
            description: $desc,
            networks: $nets,
            pipeline: Pipeline::$pipe $(($parg))?,
            tile_margin: $margin,
            unavailable: $unavail,
        }
    };
}

/// The catalog (photo models first, then video models, API order).
pub static CATALOG: &[ModelInfo] = &[
    // ---- photo: enhancement and denoise
    m!(
        "face_2x", Photo, 2, Enhance,
        "Face Clear 2x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) re-done with Real-ESRGAN x4plus, full strength, feathered blend (no face prior)",
        FACE_CLEAR, Face, 24, None
    ),
    m!(
        "face_4x", Photo, 4, Enhance,
        "Face Clear 4x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) re-done with Real-ESRGAN x4plus, full strength, feathered blend (no face prior)",
        FACE_CLEAR, Face, 24, None
    ),
    m!(
        "face_v2_2x", Photo, 2, Enhance,
        "Face Natural 2x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) get 55% Real-ESRGAN x4plus over the base, feathered blend (no face prior)",
        FACE_CLEAR, Face, 24, None
    ),
    m!(
        "face_v2_4x", Photo, 4, Enhance,
        "Face Natural 4x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) get 55% Real-ESRGAN x4plus over the base, feathered blend (no face prior)",
        FACE_CLEAR, Face, 24, None
    ),
    m!(
        "general_2x", Photo, 2, Enhance,
        "General Enhance 2x: Real-ESRGAN general x4v3 (compact), then 2x2 area-average downscale",
        GENERAL, TiledSr, 24, None
    ),
    m!(
        "general_4x", Photo, 4, Enhance,
        "General Enhance 4x: Real-ESRGAN general x4v3 (SRVGGNetCompact, blind real-world degradations)",
        GENERAL, TiledSr, 24, None
    ),
    m!(
        "high_fidelity_2x", Photo, 2, Enhance,
        "High Fidelity 2x: SRMDNF x2 (PSNR-trained, bicubic degradation, no noise map)",
        SRMDNF_X2, Srmd, 16, None
    ),
    m!(
        "high_fidelity_4x", Photo, 4, Enhance,
        "High Fidelity 4x: SRMDNF x4 (PSNR-trained, bicubic degradation, no noise map)",
        SRMDNF_X4, Srmd, 16, None
    ),
    m!(
        "sharpen_denoise_1x", Photo, 1, Enhance,
        "Sharp Denoise 1x: noise level estimated from the image (PCA), FFDNet-Clip, then a luma unsharp mask",
        FFDNET_CLIP, Denoise(DenoiseKind::Sharpen), 32, None
    ),
    m!(
        "detail_denoise_1x", Photo, 1, Enhance,
        "Detail Denoise 1x: noise level estimated from the image (PCA), FFDNet-Clip (texture-keeping sigma)",
        FFDNET_CLIP, Denoise(DenoiseKind::Detail), 32, None
    ),
    // ---- photo: generative
    m!(
        "generative_portrait_1x", Photo, 1, Generative,
        "Generative Portrait 1x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend, 4x4 area-average down (no face prior)",
        FACE_PORTRAIT, Face, 64, None
    ),
    m!(
        "generative_portrait_2x", Photo, 2, Generative,
        "Generative Portrait 2x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend, 2x2 area-average down (no face prior)",
        FACE_PORTRAIT, Face, 64, None
    ),
    m!(
        "generative_portrait_4x", Photo, 4, Generative,
        "Generative Portrait 4x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend (no face prior)",
        FACE_PORTRAIT, Face, 64, None
    ),
    m!(
        "generative_1x", Photo, 1, Generative,
        "Generative Enhance 1x: Real-ESRGAN x4plus (RRDB, GAN), then 4x4 area-average downscale to the input size",
        X4PLUS, TiledSr, 64, None
    ),
    m!(
        "generative_2x", Photo, 2, Generative,
        "Generative Enhance 2x: Real-ESRGAN x4plus (RRDB, GAN), then 2x2 area-average downscale",
        X4PLUS, TiledSr, 64, None
    ),
    m!(
        "generative_4x", Photo, 4, Generative,
        "Generative Enhance 4x: Real-ESRGAN x4plus (RRDB, GAN-trained, 16.7M params)",
        X4PLUS, TiledSr, 64, None
    ),
    // ---- video
    m!(
        "face_soft_2x", Video, 2, Enhance,
        "Face Soft 2x (video): Real-ESRGAN animevideov3 x2 per frame; faces (RetinaFace, boxes smoothed over time) get 60% Real-ESRGAN general x4v3, feathered blend (no face prior)",
        FACE_SOFT_VIDEO, Face, 16, None
    ),
    m!(
        "portrait_restore_1x", Video, 1, Enhance,
        "Portrait Restore 1x (video): Real-ESRGAN animevideov3 x2 + 2x2 area-average down per frame; faces (RetinaFace, boxes smoothed over time) get 85% Real-ESRGAN x4plus, feathered blend (no face prior)",
        PORTRAIT_VIDEO, Face, 16, None
    ),
    m!(
        "portrait_restore_2x", Video, 2, Enhance,
        "Portrait Restore 2x (video): Real-ESRGAN animevideov3 x2 per frame; faces (RetinaFace, boxes smoothed over time) get 85% Real-ESRGAN x4plus, feathered blend (no face prior)",
        PORTRAIT_VIDEO, Face, 16, None
    ),
    m!(
        "general_restore_1x", Video, 1, Enhance,
        "General Restore 1x (video): Real-ESRGAN animevideov3 x2, then 2x2 area-average downscale",
        ANIME_X2, TiledSr, 16, None
    ),
    m!(
        "general_restore_2x", Video, 2, Enhance,
        "General Restore 2x (video): Real-ESRGAN animevideov3 x2 (compact, video-trained)",
        ANIME_X2, TiledSr, 16, None
    ),
    m!(
        "general_restore_4x", Video, 4, Enhance,
        "General Restore 4x (video): Real-ESRGAN animevideov3 x4 (compact, video-trained)",
        ANIME_X4, TiledSr, 16, None
    ),
    m!(
        "ultrahd_restore_2x", Video, 2, Enhance,
        "Ultra HD Restore 2x (video): Real-ESRGAN general x4v3, then 2x2 area-average downscale",
        GENERAL, TiledSr, 24, None
    ),
    m!(
        "generative_1x", Video, 1, Generative,
        "Generative 1x (video): Real-ESRGAN x4plus (RRDB, GAN), then 4x4 area-average downscale",
        X4PLUS, TiledSr, 64, None
    ),
];

/// Look a model up by kind and name. Unknown or unavailable names answer `unknown_model`.
pub fn lookup(kind: Kind, name: &str) -> Result<&'static ModelInfo> {
    let name = canonical_name(kind, name);
    match CATALOG.iter().find(|m| m.kind == kind && m.name == name) {
        Some(m) if m.available() => Ok(m),
        Some(m) => Err(Error::new(
            Code::UnknownModel,
            format!("{} model '{}' is not available: {}", kind.as_str(), name, m.unavailable.unwrap_or("")),
        )),
        None => Err(Error::new(Code::UnknownModel, format!("unknown {} model '{}'", kind.as_str(), name))),
    }
}

/// API aliases (compat.md): the suffix-less denoise names.
pub fn canonical_name(kind: Kind, name: &str) -> &str {
    match (kind, name) {
        (Kind::Photo, "sharpen_denoise") => "sharpen_denoise_1x",
        (Kind::Photo, "detail_denoise") => "detail_denoise_1x",
        _ => name,
    }
}

/// Like [`lookup`] but also returns unavailable entries (for listing / docs).
pub fn find(kind: Kind, name: &str) -> Option<&'static ModelInfo> {
    let name = canonical_name(kind, name);
    CATALOG.iter().find(|m| m.kind == kind && m.name == name)
}
