//! Build script: only tells the CPU ISA tests (tests/cpu_isa.rs) whether the machine building them
//! has AVX-512F / AVX2+FMA, so a test of a level the host lacks is listed by `cargo test` as
//! `ignored` with its reason instead of passing silently. The library itself detects the CPU at run
//! time and does not use these cfgs.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(lucent_host_avx512)");
    println!("cargo::rustc-check-cfg=cfg(lucent_host_avx2)");
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(target_arch = "x86_64")]
    {
        // Only meaningful when building for the host itself.
        if std::env::var("TARGET").ok() == std::env::var("HOST").ok() {
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                println!("cargo::rustc-cfg=lucent_host_avx2");
                if std::arch::is_x86_feature_detected!("avx512f") {
                    println!("cargo::rustc-cfg=lucent_host_avx512");
                }
            }
        }
    }
}
