//! Golden network inputs, built at test time from the evaluation data (which must not be
//! committed): `tests/golden/inputs.json` names a source image under shared/data and a crop.
//! One copy, used by lucent-core's and lucent-gpu's tests via `#[path]`.
//!
//! Data folder: `LUCENT_DATA_DIR`, else `<repo>/../shared/data` (`CARGO_MANIFEST_DIR/../../../shared/data`).
//! When it is absent the caller gets `None` after a printed message, except with `CI` set: then
//! the test fails, so a CI run cannot pass without having run the goldens.
#![allow(dead_code)]
use std::path::PathBuf;

const INPUTS_JSON: &str = include_str!("../golden/inputs.json");

/// One crop: 8-bit RGB, interleaved, row-major.
pub struct GoldenInput {
    pub w: usize,
    pub h: usize,
    pub rgb: Vec<u8>,
}

impl GoldenInput {
    /// Planar CHW f32 `v / 255` (the networks' input convention).
    pub fn chw_f32(&self) -> Vec<f32> {
        let mut v = vec![0.0f32; 3 * self.w * self.h];
        for (i, px) in self.rgb.chunks_exact(3).enumerate() {
            for c in 0..3 {
                v[c * self.w * self.h + i] = px[c] as f32 / 255.0;
            }
        }
        v
    }
}

pub fn data_dir() -> PathBuf {
    match std::env::var_os("LUCENT_DATA_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    }
}

/// Skip (print, `None`) or, under CI, fail.
fn missing(what: String) -> Option<GoldenInput> {
    if std::env::var_os("CI").is_some() {
        panic!("{what} (CI is set: the golden tests must run; set LUCENT_DATA_DIR)");
    }
    println!("SKIP: {what} (set LUCENT_DATA_DIR to the evaluation data folder to run this test)");
    None
}

/// Value of `"key": ...` inside one flat JSON object (string or integer).
fn field<'a>(obj: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let i = obj.find(&pat).unwrap_or_else(|| panic!("inputs.json: no {key} in {obj}")) + pat.len();
    let rest = obj[i..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        &s[..s.find('"').unwrap()]
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        rest[..end].trim()
    }
}

fn fnv1a64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &c| (h ^ c as u64).wrapping_mul(0x100000001b3))
}

/// The crop `name` of inputs.json, or `None` (message printed) when the data folder or the
/// source image is missing. Panics if the crop does not reproduce the recorded checksum.
pub fn golden_input(name: &str) -> Option<GoldenInput> {
    let obj = INPUTS_JSON
        .split('{')
        .find(|o| o.contains(&format!("\"name\": \"{name}\"")))
        .unwrap_or_else(|| panic!("inputs.json has no input named {name}"));
    let num = |k: &str| -> usize { field(obj, k).parse().unwrap_or_else(|e| panic!("inputs.json {name}.{k}: {e}")) };
    let (x, y, w, h) = (num("x"), num("y"), num("width"), num("height"));
    let dir = data_dir();
    if !dir.is_dir() {
        return missing(format!("evaluation data folder {} absent; golden input {name} not built", dir.display()));
    }
    let src = dir.join(field(obj, "source"));
    if !src.is_file() {
        return missing(format!("{} absent; golden input {name} not built", src.display()));
    }
    let img = image::open(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display())).to_rgb8();
    let (sw, sh) = (img.width() as usize, img.height() as usize);
    assert!(x + w <= sw && y + h <= sh, "{name}: crop {x},{y} {w}x{h} outside {} ({sw}x{sh})", src.display());
    let mut rgb = Vec::with_capacity(w * h * 3);
    for row in y..y + h {
        let a = (row * sw + x) * 3;
        rgb.extend_from_slice(&img.as_raw()[a..a + w * 3]);
    }
    let got = format!("{:016x}", fnv1a64(&rgb));
    if obj.contains("\"decoded_fnv1a64\"") {
        // Lossy source: the crop was made with another JPEG decoder (Pillow), so only report a change.
        if got != field(obj, "decoded_fnv1a64") {
            println!("note: {name}: JPEG decode of {} changed since inputs.json was written (FNV-1a {got})", src.display());
        }
    } else {
        let want = field(obj, "rgb_fnv1a64");
        assert_eq!(got, want, "{name}: crop of {} does not reproduce the recorded input (FNV-1a 64 of the RGB bytes)", src.display());
    }
    Some(GoldenInput { w, h, rgb })
}
