// Finds the system libheif (feature `heif`) through pkg-config and enables `cfg(lucent_heif)`.
// Without libheif the crate still builds and HEIF operations return `unsupported_format`;
// set LUCENT_REQUIRE_HEIF=1 to make a missing libheif a build error instead.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(lucent_heif)");
    println!("cargo:rerun-if-env-changed=LUCENT_REQUIRE_HEIF");
    #[cfg(feature = "heif")]
    {
        match pkg_config::Config::new().atleast_version("1.12").probe("libheif") {
            Ok(_) => println!("cargo:rustc-cfg=lucent_heif"),
            Err(e) => {
                if std::env::var_os("LUCENT_REQUIRE_HEIF").is_some_and(|v| v == "1") {
                    panic!("libheif not found: {e}");
                }
                println!("cargo:warning=libheif not found ({e}); HEIF/HEIC support disabled (apt-get install libheif-dev)");
            }
        }
    }
}
