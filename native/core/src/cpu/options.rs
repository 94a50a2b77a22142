//! The CPU backend's options, passed by the caller ([`super::CpuBackend::with_options`]); the crate
//! reads no environment for them. The server maps its `LUCENT_CPU_*` settings onto these (through
//! the addon's init options), the bench CLI maps the same names at its `main`.

use super::bf16::Bf16Kernel;
use super::int8::Int8Kernel;
use super::isa::Isa;
pub use crate::options::CacheFile;

/// The CPU backend's options. `Default` is the behaviour without any setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Worker threads (None or 0: all available cores).
    pub threads: Option<usize>,
    /// Caps the SIMD level of the hot loops (`LUCENT_CPU_ISA`); a level this CPU lacks gives the
    /// best it has (with a message on stderr). Below avx512 it also keeps the bf16 and int8 kernels
    /// off (fp32, and `info()` says why). None: the best this CPU runs.
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
    /// The arithmetic of the convolutions (`LUCENT_CPU_PRECISION`; default [`Precision::Auto`], which
    /// here means fp32: the engine decides `auto` per network).
    pub precision: Precision,
    /// Caps the bf16 kernel (tests and comparisons: `Some(Avx512Bf16)` keeps AMX off, `Some(Emulated)`
    /// pins the portable one). None: the best this CPU runs.
    pub bf16_kernel: Option<Bf16Kernel>,
    /// Per-layer precision, by conv layer name, over `precision`: the per-layer rule (the layers of
    /// one network that lose too much at its precision run one step wider, from the engine's
    /// committed measurements) and the measurements behind it (one layer narrower). A layer not
    /// named runs `precision`; a named precision this CPU lacks runs fp32.
    pub layer_precision: Vec<(String, Precision)>,
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
            precision: Precision::Auto,
            bf16_kernel: None,
            layer_precision: Vec::new(),
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

/// The arithmetic of a backend's convolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// fp32 everywhere.
    Fp32,
    /// bf16 inputs and weights with fp32 sums for each conv where it is measured faster
    /// ([`super::calibrate`]); fp32 on a CPU without AVX512-BF16 or AMX (`info()` says why). With a
    /// pinned [`ConvPolicy`] (not `Measure`: tests and comparisons) every conv bf16 applies to runs
    /// bf16, unmeasured. Convs reading fewer than 8 channels stay fp32.
    Bf16,
    /// s8 weights (per output channel) and u8 activations (per tensor, from each conv input's
    /// range) with i32 sums ([`super::int8`]) for each conv where it is measured faster, like
    /// `Bf16`; fp32 on a CPU without AVX512-VNNI or AMX-INT8 (`info()` says why). Convs reading
    /// fewer than 8 channels stay fp32.
    Int8,
    /// The caller decided nothing: fp32 here (the engine maps `auto` to a precision per network).
    #[default]
    Auto,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
            Precision::Auto => "auto",
        }
    }

    /// A setting's value (`LUCENT_CPU_PRECISION`): `fp32`, `bf16`, `int8`, `auto`; None otherwise.
    pub fn parse(v: &str) -> Option<Precision> {
        match v.trim().to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Some(Precision::Fp32),
            "bf16" => Some(Precision::Bf16),
            "int8" | "i8" => Some(Precision::Int8),
            "auto" | "" => Some(Precision::Auto),
            _ => None,
        }
    }
}

impl CpuOptions {
    /// The int8 kernel the convs may use under these options (precision `Int8` and a CPU with
    /// AMX-INT8 or AVX512-VNNI), or None; [`Self::effective_bf16`] gives the line saying so.
    pub fn effective_int8(&self) -> Option<Int8Kernel> {
        (self.precision == Precision::Int8).then(|| self.int8_capped()).flatten()
    }

    /// The int8 kernel under the `isa` cap.
    fn int8_capped(&self) -> Option<Int8Kernel> {
        self.isa_cap().is_none().then(Int8Kernel::best).flatten()
    }

    /// The `isa` cap below AVX-512 (`LUCENT_CPU_ISA=avx2` or `scalar`) keeps the bf16 and int8
    /// hardware kernels off too (they are AVX-512 or AMX): why, or None.
    fn isa_cap(&self) -> Option<String> {
        self.isa.filter(|&i| i < Isa::Avx512).map(|i| format!("the cpu isa is capped at {}", i.name()))
    }

    /// The bf16 kernel under the caps (`bf16_kernel`, `isa`): the pinned emulated one always runs.
    fn bf16_capped(&self) -> Option<Bf16Kernel> {
        match (self.bf16_kernel, self.isa_cap()) {
            (Some(Bf16Kernel::Emulated), _) => Some(Bf16Kernel::Emulated),
            (_, Some(_)) => None,
            (Some(cap), None) => Bf16Kernel::best_up_to(cap),
            (None, None) => Bf16Kernel::best(),
        }
    }

    /// The (bf16, int8) kernels a conv at precision `p` may use here (bf16 under the cap of
    /// [`Self::bf16_kernel`]): what a [`Self::layer_precision`] entry runs.
    pub fn kernels_for(&self, p: Precision) -> (Option<Bf16Kernel>, Option<Int8Kernel>) {
        match p {
            Precision::Bf16 => (self.bf16_capped(), None),
            Precision::Int8 => (None, self.int8_capped()),
            Precision::Fp32 | Precision::Auto => (None, None),
        }
    }

    /// The bf16 kernel the convs may use under these options, or None (fp32), and a line saying
    /// what runs and, where fp32 runs instead of what was asked, why.
    pub fn effective_bf16(&self) -> (Option<Bf16Kernel>, String) {
        match self.precision {
            Precision::Fp32 => (None, "fp32".into()),
            Precision::Auto => (None, "fp32 (auto: no precision chosen by the caller)".into()),
            Precision::Int8 => match (self.int8_capped(), self.isa_cap()) {
                (Some(k), _) => (None, format!("int8 ({}) where measured faster, else fp32", k.name())),
                (None, Some(why)) => (None, format!("fp32 (int8 requested, {why})")),
                (None, None) => {
                    let why: Vec<String> = [Int8Kernel::Amx, Int8Kernel::Vnni].iter().map(|k| format!("{}: {}", k.name(), k.unsupported_reason().unwrap_or_default())).collect();
                    (None, format!("fp32 (int8 requested, no int8 unit: {})", why.join("; ")))
                }
            },
            Precision::Bf16 => {
                match (self.bf16_capped(), self.isa_cap()) {
                    (Some(k), _) => (Some(k), format!("bf16 ({}) where measured faster, else fp32", k.name())),
                    (None, Some(why)) => (None, format!("fp32 (bf16 requested, {why})")),
                    (None, None) => {
                        let why: Vec<String> = [Bf16Kernel::Amx, Bf16Kernel::Avx512Bf16]
                            .into_iter()
                            .filter(|&x| self.bf16_kernel.is_none_or(|cap| x <= cap))
                            .map(|x| format!("{}: {}", x.name(), x.unsupported_reason().unwrap_or_else(|| "capped off".into())))
                            .collect();
                        let why = if why.is_empty() { "capped off".to_string() } else { why.join("; ") };
                        (None, format!("fp32 (bf16 requested, no bf16 unit: {why})"))
                    }
                }
            }
        }
    }
}
