//! The CPU backend's options, passed by the caller ([`super::CpuBackend::with_options`]); the crate
//! reads no environment for them. The server maps its `LUCENT_CPU_*` settings onto these (through
//! the addon's init options), the bench CLI maps the same names at its `main`.

use super::isa::Isa;
pub use crate::options::CacheFile;

/// The CPU backend's options. `Default` is the behaviour without any setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Worker threads (None or 0: all available cores).
    pub threads: Option<usize>,
    /// Caps the SIMD level of the hot loops (`LUCENT_CPU_ISA`); a level this CPU lacks gives the
    /// best it has (with a message on stderr). None: the best this CPU runs.
    pub isa: Option<Isa>,
    /// Winograd or im2col per 3x3 conv (`LUCENT_CPU_WINOGRAD`: 0 im2col, 1 Winograd; default measured).
    pub policy: ConvPolicy,
    /// Winograd tiles per work item (`LUCENT_CPU_WINO_CHUNK`); process-wide, the first backend
    /// that gives one sets it. None: 64.
    pub wino_chunk: Option<usize>,
    /// Keep Winograd input transforms for later convs of a dense block (`LUCENT_CPU_KEEP_TRANSFORMS`;
    /// false only for comparisons).
    pub keep_transforms: bool,
    /// Per-op-kind CPU times of every run to stderr (`LUCENT_CPU_PROFILE`).
    pub profile: bool,
    /// The calibration's file cache (`LUCENT_CPU_CALIBRATION_CACHE`); process-wide, the first
    /// backend's choice holds.
    pub calibration_cache: CacheFile,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            threads: None,
            isa: None,
            policy: ConvPolicy::Measure,
            wino_chunk: None,
            keep_transforms: true,
            profile: false,
            calibration_cache: CacheFile::Default,
        }
    }
}

impl CpuOptions {
    /// The level the hot loops run: `isa` capped at the best this CPU has.
    pub fn effective_isa(&self) -> Isa {
        let best = Isa::best();
        match self.isa {
            None => best,
            Some(want) if want <= best => want,
            Some(want) => {
                eprintln!("cpu isa {}: not supported here, using {}", want.name(), best.name());
                best
            }
        }
    }
}

/// How a backend picks the algorithm of its Winograd-capable convs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvPolicy {
    /// By measured cost (the default).
    #[default]
    Measure,
    /// Winograd wherever it applies.
    Winograd,
    /// im2col + GEMM everywhere.
    Im2col,
}

impl ConvPolicy {
    /// A setting's value (`LUCENT_CPU_WINOGRAD`): `0` im2col, `1` Winograd, anything else measure.
    pub fn from_setting(v: &str) -> ConvPolicy {
        match v.trim() {
            "0" | "im2col" => ConvPolicy::Im2col,
            "1" | "winograd" => ConvPolicy::Winograd,
            _ => ConvPolicy::Measure,
        }
    }
}
