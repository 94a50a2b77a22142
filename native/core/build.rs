//! Build script: only tells the CPU ISA tests (tests/cpu_isa.rs) whether the machine building them
//! has AVX-512F / AVX2+FMA, so a test of a level the host lacks is listed by `cargo test` as
//! `ignored` with its reason instead of passing silently. The library itself detects the CPU at run
//! time and does not use these cfgs.
//!
//! It also fingerprints the CPU convolution kernels (the sources below) into `LUCENT_CPU_KERNELS`, part of the
//! key of the calibration file cache (src/cpu/calibrate.rs): a build with changed kernels measures again.
const KERNEL_SOURCES: [&str; 12] = [
    "src/cpu/amx.rs",
    "src/cpu/bf16.rs",
    "src/cpu/bf16_job.rs",
    "src/cpu/calibrate.rs",
    "src/cpu/conv.rs",
    "src/cpu/epilogue.rs",
    "src/cpu/int8.rs",
    "src/cpu/isa.rs",
    "src/cpu/simd.rs",
    "src/cpu/wgemm.rs",
    "src/cpu/winograd.rs",
    "src/cpu/wtransform.rs",
];

fn main() {
    // FNV-1a 64 over the kernel sources (no dependency for a build script)
    let mut h: u64 = 0xcbf29ce484222325;
    for f in KERNEL_SOURCES {
        println!("cargo::rerun-if-changed={f}");
        for b in f.bytes().chain([0]).chain(std::fs::read(f).unwrap_or_default()) {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    println!("cargo::rustc-env=LUCENT_CPU_KERNELS={h:016x}");
    println!("cargo::rustc-check-cfg=cfg(lucent_host_avx512)");
    println!("cargo::rustc-check-cfg=cfg(lucent_host_avx2)");
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(target_arch = "x86_64")]
    {
        // Only meaningful when building for the host itself.
        if std::env::var("TARGET").ok() == std::env::var("HOST").ok()
            && std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                println!("cargo::rustc-cfg=lucent_host_avx2");
                if std::arch::is_x86_feature_detected!("avx512f") {
                    println!("cargo::rustc-cfg=lucent_host_avx512");
                }
            }
    }
}
