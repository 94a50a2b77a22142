//! Which instruction set the CPU backend's hot loops use, decided once per process.
//!
//! [`Isa::detected`] reads the CPU's features once (`is_x86_feature_detected!`, which also checks
//! that the OS saves the wide registers) and caches the answer. The backend's option
//! [`crate::cpu::CpuOptions::isa`] (the server's `LUCENT_CPU_ISA=scalar|avx2|avx512`) lowers it for
//! comparisons (a level the CPU lacks is never used: asking for one is ignored with a message on
//! stderr). A backend built with [`crate::cpu::CpuBackend::with_isa`] pins one level.
//!
//! What each level covers: the Winograd GEMM micro-kernels ([`super::wgemm`]), the Winograd input and
//! output transforms, and the conv epilogues (compiled once per level with `#[target_feature]`).
//! The im2col GEMMs go through the `gemm` crate, which does its own once-per-process dispatch
//! (AVX-512F kernels with its `x86-v4` feature, else FMA, else scalar) whatever level is pinned here.

use std::fmt;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust (whatever the compile target enables; SSE2 on x86-64).
    Scalar,
    /// AVX2 + FMA (256-bit, 16 registers).
    Avx2,
    /// AVX-512F (512-bit, 32 registers); implies AVX2 + FMA.
    Avx512,
}

impl Isa {
    /// Every level, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2+fma",
            Isa::Avx512 => "avx512f",
        }
    }

    pub fn parse(s: &str) -> Option<Isa> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" | "none" | "generic" => Some(Isa::Scalar),
            "avx2" | "avx2+fma" | "fma" => Some(Isa::Avx2),
            "avx512" | "avx512f" | "avx-512" => Some(Isa::Avx512),
            _ => None,
        }
    }

    /// Whether this CPU (and OS) can run the level.
    pub fn supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Isa::Avx2.supported() && std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Why the level cannot run here, or None when it can.
    pub fn unsupported_reason(self) -> Option<String> {
        if self.supported() {
            return None;
        }
        Some(if cfg!(target_arch = "x86_64") {
            let missing = match self {
                Isa::Avx2 => "avx2/fma",
                _ => "avx512f",
            };
            format!("this CPU ({}) lacks {missing} (its flags: {})", cpu_model(), cpu_flags_summary())
        } else {
            "not an x86-64 build".to_string()
        })
    }

    /// The best level this CPU supports; detected once per process.
    pub fn best() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| Isa::ALL.into_iter().rev().find(|i| i.supported()).unwrap_or(Isa::Scalar))
    }

    /// The level a backend uses without options: [`Isa::best`] (a backend's
    /// [`crate::cpu::CpuOptions::isa`] may lower it).
    pub fn detected() -> Isa {
        Isa::best()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The SIMD-related flags of this CPU as the OS reports them (x86: avx2, fma, avx512*, vnni, bf16,
/// f16c), for reports; "unknown" when they cannot be read.
pub fn cpu_flags_summary() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return "unknown".into() };
    let Some(line) = info.lines().find(|l| l.starts_with("flags")) else { return "unknown".into() };
    let keep = |f: &&str| f.starts_with("avx") || *f == "fma" || *f == "f16c" || f.contains("vnni") || f.contains("bf16");
    let flags: Vec<&str> = line.split(':').nth(1).unwrap_or("").split_whitespace().filter(keep).collect();
    if flags.is_empty() {
        "none of avx/fma".into()
    } else {
        flags.join(" ")
    }
}

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" when unreadable).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into())
}
