//! The backends' options as plain data: [`GpuOptions`] (the wgpu backend, native/gpu, which
//! re-exports these types) and [`CacheFile`]; the CPU backend's are [`crate::cpu::CpuOptions`].
//! They live here, not in native/gpu, so that the engine's options hold them whether or not it
//! is built with its GPU backend. The crates read no `LUCENT_*` environment: the caller fills
//! these (the server from its settings through the addon's init options, the bench CLI at its
//! `main`); the setting each field corresponds to is named in its doc. The string forms of the
//! settings parse with [`Coop::parse`], [`TuneMode::parse`], [`ConvForce::parse`],
//! [`CacheFile::from_setting`].

use std::path::PathBuf;
use std::time::Duration;

/// Where a measurement cache lives (the CPU calibration, the GPU tuner).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheFile {
    /// `$XDG_CACHE_HOME/lucent/<name>`, else `$HOME/.cache/lucent/<name>` (else none).
    #[default]
    Default,
    /// No file: each process measures once.
    Off,
    /// This file.
    Path(PathBuf),
}

impl CacheFile {
    /// A path setting's value: empty = [`CacheFile::Off`], else that file.
    pub fn from_setting(v: &str) -> CacheFile {
        if v.is_empty() {
            CacheFile::Off
        } else {
            CacheFile::Path(PathBuf::from(v))
        }
    }

    /// The file, with the per-user default under the name `name` (None: no file).
    pub fn resolve(&self, name: &str) -> Option<PathBuf> {
        match self {
            CacheFile::Off => None,
            CacheFile::Path(p) => Some(p.clone()),
            // The XDG base-directory rule (not a Lucent setting): where a user's caches go.
            CacheFile::Default => std::env::var_os("XDG_CACHE_HOME")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").filter(|p| !p.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
                .map(|d| d.join("lucent").join(name)),
        }
    }
}

/// The GPU backend's options (the adapter choice and the execution settings). `Default` is the
/// behaviour without any setting. The device is process-wide: `adapter_name`, `coop` and
/// `timeout` count when a device is opened (the first backend, or the first after a lost
/// device); the rest holds per handle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// Case-insensitive substring of the adapter name, or `#N`: the N-th adapter in wgpu's order (`LUCENT_ADAPTER`; native/gpu/src/select.rs).
    pub adapter_name: Option<String>,
    /// Allow a CPU adapter (lavapipe / llvmpipe, SwiftShader) when no real GPU matches (`LUCENT_GPU_ALLOW_CPU=1`).
    pub allow_cpu_adapter: bool,
    /// Use f32 storage even when the adapter offers SHADER_F16 (`LUCENT_GPU_F32=1`).
    pub force_f32: bool,
    /// f16 accumulation in the FMA GEMM too (`LUCENT_GPU_F16_MATH=1`; only with f16 storage).
    pub f16_math: bool,
    /// Per-layer GPU times (and the tuner's candidates) to stderr (`LUCENT_GPU_PROFILE=1`; only
    /// with TIMESTAMP_QUERY).
    pub profile: bool,
    /// The GEMM kernels' pipelined form: double-buffered K slices (`LUCENT_GPU_PIPELINE=1`).
    pub pipeline: bool,
    /// Force the convolution kernel (`LUCENT_GPU_CONV`); None: chosen per adapter.
    pub conv: Option<ConvForce>,
    /// Cooperative matrices (`LUCENT_GPU_COOP`).
    pub coop: Coop,
    /// The measured kernel choice (`LUCENT_GPU_TUNE`).
    pub tune: TuneMode,
    /// The tuner's file cache (`LUCENT_GPU_TUNE_CACHE`; default `gpu-tune.tsv` in the user's cache folder).
    pub tune_cache: CacheFile,
    /// Deadline of one wait on the GPU (`LUCENT_GPU_TIMEOUT_S`); None: 600 s, 3600 s on CPU adapters.
    pub timeout: Option<Duration>,
}

/// Whether convolutions use cooperative matrices (tensor cores).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coop {
    /// GPUs that list them (not CPU adapters).
    #[default]
    Auto,
    /// Never (the device is opened without them).
    Off,
    /// Also on CPU adapters that list them.
    On,
    /// The emulated MMA kernel (16x16, 32-wide subgroups) on any device.
    Emulate,
}

impl Coop {
    /// `0` / `false` / `off`, `1` / `true` / `on`, `emulate`; anything else: auto.
    pub fn parse(v: &str) -> Coop {
        match v.trim().to_ascii_lowercase().as_str() {
            "0" | "false" | "off" => Coop::Off,
            "1" | "true" | "on" => Coop::On,
            "emulate" => Coop::Emulate,
            _ => Coop::Auto,
        }
    }
}

/// Whether the GPU backend's prepare measures the candidate kernels per convolution shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TuneMode {
    /// GPUs tune unless [`GpuOptions::conv`] or [`GpuOptions::pipeline`] ask for a kernel or form;
    /// CPU adapters do not (the register-blocked kernel has no candidates).
    #[default]
    Auto,
    Off,
    /// On every adapter, with the default probe side.
    On,
    /// On every adapter, with this probe side in pixels (>= 8).
    Side(u32),
}

impl TuneMode {
    /// `0` / `off` / `false`, `1` / `on` / `true`, a number >= 8 (the probe's side); anything else: auto.
    pub fn parse(v: &str) -> TuneMode {
        match v.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "false" => TuneMode::Off,
            "1" | "on" | "true" => TuneMode::On,
            n => match n.parse::<u32>() {
                Ok(side) if side >= 8 => TuneMode::Side(side),
                _ => TuneMode::Auto,
            },
        }
    }
}

/// A forced convolution kernel ([`GpuOptions::conv`]); the GPU backend checks the tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvForce {
    /// The GEMMs (FMA or MMA; on CPU adapters too, instead of the register-blocked kernel).
    Fma,
    /// The direct kernel everywhere.
    Direct,
    /// The register-blocked kernel on any device, with this tile (MC, PX); None or an invalid
    /// one: its default tile.
    Rb(Option<(u32, u32)>),
    /// The FMA GEMM with this tile (BM, BN, BK, TM); an invalid one forces nothing ([`ConvForce::Fma`]).
    Gemm([u32; 4]),
}

impl ConvForce {
    /// `direct`, `rb` or `rb:MC,PX`, a GEMM tile `BM,BN,BK,TM`; anything else (`fma`): [`ConvForce::Fma`].
    pub fn parse(v: &str) -> ConvForce {
        let v = v.trim();
        let nums = |t: &str| -> Vec<u32> { t.split(',').filter_map(|x| x.trim().parse().ok()).collect() };
        if v == "direct" {
            return ConvForce::Direct;
        }
        if let Some(rest) = v.strip_prefix("rb") {
            let n = nums(rest.trim_start_matches(':'));
            return ConvForce::Rb((n.len() == 2).then(|| (n[0], n[1])));
        }
        match nums(v)[..] {
            [bm, bn, bk, tm] => ConvForce::Gemm([bm, bn, bk, tm]),
            _ => ConvForce::Fma,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_strings_parse_as_the_documented_forms() {
        assert_eq!(Coop::parse("0"), Coop::Off);
        assert_eq!(Coop::parse(" emulate "), Coop::Emulate);
        assert_eq!(Coop::parse("on"), Coop::On);
        assert_eq!(Coop::parse("whatever"), Coop::Auto);
        assert_eq!(TuneMode::parse("off"), TuneMode::Off);
        assert_eq!(TuneMode::parse("1"), TuneMode::On);
        assert_eq!(TuneMode::parse("64"), TuneMode::Side(64));
        assert_eq!(TuneMode::parse("4"), TuneMode::Auto, "a side under 8 is no side");
        assert_eq!(ConvForce::parse("direct"), ConvForce::Direct);
        assert_eq!(ConvForce::parse("rb"), ConvForce::Rb(None));
        assert_eq!(ConvForce::parse("rb:8,4"), ConvForce::Rb(Some((8, 4))));
        assert_eq!(ConvForce::parse("64,64,16,4"), ConvForce::Gemm([64, 64, 16, 4]));
        assert_eq!(ConvForce::parse("fma"), ConvForce::Fma);
        assert_eq!(CacheFile::from_setting(""), CacheFile::Off);
        assert_eq!(CacheFile::from_setting("/tmp/x.tsv").resolve("y"), Some(PathBuf::from("/tmp/x.tsv")));
        assert_eq!(CacheFile::Off.resolve("y"), None);
    }
}
