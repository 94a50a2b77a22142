//! Whole networks through the CPU backend against goldens from an independent reference
//! interpreter (tests/golden/README.md has the pre/post-processing). Criterion: PSNR >= 45 dB on
//! the 8-bit output; per-layer dumps within 1e-4 (max |a-b| / max(1, max|b|)).
//! The inputs are crops of the evaluation data, built at test time (tests/golden/inputs.json);
//! without the data folder these tests print SKIP and pass, unless CI is set.
mod common;
#[path = "common/golden_input.rs"]
mod golden_input;
use common::*;
use golden_input::golden_input;
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn read_png(p: &Path) -> (usize, usize, Vec<u8>) {
    let f = std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut r = png::Decoder::new(std::io::BufReader::new(f)).read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let ch = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        t => panic!("{}: unexpected colour type {t:?}", p.display()),
    };
    let (w, h) = (info.width as usize, info.height as usize);
    let mut rgb = Vec::with_capacity(w * h * 3);
    for px in buf[..w * h * ch].chunks(ch) {
        rgb.extend_from_slice(&px[..3]);
    }
    (w, h, rgb)
}

#[derive(Clone, Copy)]
enum Pad {
    /// numpy "reflect" / BORDER_REFLECT_101 (edge not repeated)
    Reflect,
    Edge,
}

fn pad_index(i: isize, n: usize, mode: Pad) -> usize {
    let n = n as isize;
    let j = match mode {
        Pad::Edge => i.clamp(0, n - 1),
        Pad::Reflect => {
            let mut j = i;
            while j < 0 || j >= n {
                if j < 0 {
                    j = -j;
                }
                if j >= n {
                    j = 2 * (n - 1) - j;
                }
            }
            j
        }
    };
    j as usize
}

struct Case {
    golden: &'static str,
    model: &'static str,
    input: &'static str,
    output: &'static str,
    pad: usize,
    mode: Pad,
    extra: &'static [f32],
    scale: usize,
    crop: usize,
}

#[allow(clippy::excessive_precision)] // the published values, digit for digit
const SRMD_PCA: [f32; 15] = [
    -1.12360956e-08, -1.36899159e-08, 1.85637958e-02, 2.86066886e-08, 3.35292965e-02, 8.37272935e-08, -2.54424009e-07,
    -3.16234976e-02, -1.35169253e-02, -1.10466090e-08, 3.84753793e-02, 3.79465739e-08, -2.44916752e-01, -8.02213490e-01,
    -5.40549755e-01,
];

/// Returns the PSNR of the CPU backend's 8-bit output against `<golden>_ref.png`.
/// `None` when the evaluation data is absent (skipped).
fn run_case(c: &Case) -> Option<f64> {
    let g = golden_dir();
    let gi = golden_input(c.golden)?;
    let (w, h, rgb) = (gi.w, gi.h, gi.rgb);
    let (pw, ph) = (w + 2 * c.pad, h + 2 * c.pad);
    let nc = 3 + c.extra.len();
    let mut x = Tensor::zeros(nc, ph, pw);
    for ch in 0..3 {
        for y in 0..ph {
            let sy = pad_index(y as isize - c.pad as isize, h, c.mode);
            for xx in 0..pw {
                let sx = pad_index(xx as isize - c.pad as isize, w, c.mode);
                x.data[(ch * ph + y) * pw + xx] = rgb[(sy * w + sx) * 3 + ch] as f32 / 255.0;
            }
        }
    }
    for (i, v) in c.extra.iter().enumerate() {
        x.channel_mut(3 + i).fill(*v);
    }
    let net = Arc::new(Net::load_stem(&shared_models().join(c.model)).unwrap());
    let be = CpuBackend::new(None);
    let p = be.prepare(net.clone()).unwrap();
    let (inb, outb) = (net.blob(c.input).unwrap(), net.blob(c.output).unwrap());
    let out = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap().remove(0);
    let (ow, oh) = (w * c.scale, h * c.scale);
    assert!(out.c == 3 && out.w >= c.crop + ow && out.h >= c.crop + oh, "{}: output {}", c.golden, out.shape_string());
    let (rw, rh, want) = read_png(&g.join(format!("{}_ref.png", c.golden)));
    assert_eq!((rw, rh), (ow, oh), "{}: golden size", c.golden);
    let mut se = 0.0f64;
    for y in 0..oh {
        for xx in 0..ow {
            for ch in 0..3 {
                let v = out.at(ch, y + c.crop, xx + c.crop).clamp(0.0, 1.0) * 255.0;
                let d = v.round_ties_even() as f64 - want[(y * ow + xx) * 3 + ch] as f64;
                se += d * d;
            }
        }
    }
    let mse = se / (ow * oh * 3) as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
    println!("{}: PSNR {psnr:.2} dB", c.golden);
    Some(psnr)
}

fn check(c: Case) {
    let Some(psnr) = run_case(&c) else { return };
    assert!(psnr >= 45.0, "{}: PSNR {psnr:.2} dB < 45", c.golden);
}

#[test]
fn golden_realesr_general_x4v3() {
    check(Case { golden: "general_x4v3_ost009", model: "sr/realesr-general-x4v3", input: "data", output: "output", pad: 10, mode: Pad::Reflect, extra: &[], scale: 4, crop: 40 });
}

#[test]
fn golden_realesrgan_x4plus() {
    check(Case { golden: "x4plus_ost009", model: "sr/realesrgan-x4plus", input: "data", output: "output", pad: 10, mode: Pad::Reflect, extra: &[], scale: 4, crop: 40 });
}

#[test]
fn golden_animevideov3_x2_bicubic_inside() {
    check(Case { golden: "animevideov3_x2_0030", model: "sr/realesr-animevideov3-x2", input: "data", output: "output", pad: 10, mode: Pad::Reflect, extra: &[], scale: 2, crop: 20 });
}

#[test]
fn golden_srmdnf_x4() {
    check(Case { golden: "srmdnf_x4_ost009", model: "sr/srmdnf_x4", input: "input", output: "output", pad: 12, mode: Pad::Edge, extra: &SRMD_PCA, scale: 4, crop: 48 });
}

#[test]
fn golden_waifu2x_upconv7_deconv() {
    check(Case { golden: "waifu2x_upconv7_photo_scale2_ost009", model: "sr/waifu2x-upconv7-photo/scale2.0x_model", input: "Input1", output: "Eltwise4", pad: 7, mode: Pad::Edge, extra: &[], scale: 2, crop: 0 });
}

#[test]
fn golden_realcugan_se_up2x() {
    check(Case { golden: "realcugan_se_up2x_conservative_0030", model: "sr/realcugan-se/up2x-conservative", input: "in0", output: "out0", pad: 18, mode: Pad::Reflect, extra: &[], scale: 2, crop: 0 });
}

fn read_f32(p: &Path) -> Vec<f32> {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Every blob of layers_index.json, from both the CPU backend and the plain reference.
#[test]
fn per_layer_dumps_x4v3() {
    let g = golden_dir();
    let Some(input) = golden_input("layers_x4v3") else { return };
    let index = std::fs::read_to_string(g.join("layers_index.json")).unwrap();
    // Tiny extraction of ("file", "blob", shape) triples; the index is machine-written JSON.
    let mut entries = Vec::new();
    for part in index.split("\"file\":").skip(1) {
        let q = |s: &str, key: &str| -> String {
            let i = s.find(key).unwrap() + key.len();
            let rest = &s[i..];
            let a = rest.find('"').unwrap() + 1;
            let b = a + rest[a..].find('"').unwrap();
            rest[a..b].to_string()
        };
        let file = q(&format!("\"file\":{part}"), "\"file\":");
        let blob = q(part, "\"blob\":");
        let si = part.find("\"shape\":").unwrap();
        let sh = &part[si..];
        let sh = &sh[sh.find('[').unwrap() + 1..sh.find(']').unwrap()];
        let shape: Vec<usize> = sh.split(',').map(|v| v.trim().parse().unwrap()).collect();
        entries.push((file, blob, shape));
    }
    assert!(entries.len() >= 5, "layers_index.json lists {} blobs", entries.len());
    let net = Arc::new(Net::load_stem(&shared_models().join("sr/realesr-general-x4v3")).unwrap());
    let (_, _, input_shape) = entries.iter().find(|e| e.1 == "data").expect("input dump");
    // The dump's input blob is the crop as v/255 (the former layers_x4v3_input.f32).
    assert_eq!(&input_shape[..], &[3, input.h, input.w], "layers_x4v3 crop size vs the dump's input shape");
    let x = Tensor::from_vec(3, input.h, input.w, input.chw_f32());
    let outs: Vec<usize> = entries.iter().filter(|e| e.1 != "data").map(|e| net.blob(&e.1).unwrap()).collect();
    let inb = net.blob("data").unwrap();
    let be = CpuBackend::new(Some(2));
    let got = be.prepare(net.clone()).unwrap().run(&[(inb, &x)], &outs, &Cancel::new()).unwrap();
    let want_ref = reference::run_net(&net, &[(inb, x.clone())], &outs).unwrap();
    for ((e, cpu), refr) in entries.iter().filter(|e| e.1 != "data").zip(&got).zip(&want_ref) {
        let gold = Tensor::from_vec(e.2[0], e.2[1], e.2[2], read_f32(&g.join(&e.0)));
        let (ec, er) = (rel_err(cpu, &gold), rel_err(refr, &gold));
        println!("blob {}: cpu {ec:e}, reference {er:e}", e.1);
        assert!(ec <= 1e-4, "blob {} ({}): cpu error {ec:e}", e.1, e.0);
        assert!(er <= 1e-4, "blob {} ({}): reference error {er:e}", e.1, e.0);
    }
}

/// Unclamped output of general-x4v3 (ref.f32) against the CPU backend.
#[test]
fn general_x4v3_unclamped_output() {
    let c = Case { golden: "general_x4v3_ost009", model: "sr/realesr-general-x4v3", input: "data", output: "output", pad: 10, mode: Pad::Reflect, extra: &[], scale: 4, crop: 40 };
    let g = golden_dir();
    let Some(gi) = golden_input(c.golden) else { return };
    let (w, h, rgb) = (gi.w, gi.h, gi.rgb);
    let (pw, ph) = (w + 20, h + 20);
    let mut x = Tensor::zeros(3, ph, pw);
    for ch in 0..3 {
        for y in 0..ph {
            for xx in 0..pw {
                let (sy, sx) = (pad_index(y as isize - 10, h, Pad::Reflect), pad_index(xx as isize - 10, w, Pad::Reflect));
                x.data[(ch * ph + y) * pw + xx] = rgb[(sy * w + sx) * 3 + ch] as f32 / 255.0;
            }
        }
    }
    let net = Arc::new(Net::load_stem(&shared_models().join(c.model)).unwrap());
    let out = CpuBackend::new(None).prepare(net.clone()).unwrap().run(&[(net.blob("data").unwrap(), &x)], &[net.blob("output").unwrap()], &Cancel::new()).unwrap().remove(0);
    let gold = read_f32(&g.join("general_x4v3_ost009_ref.f32"));
    let (ow, oh) = (w * 4, h * 4);
    let mut crop = Vec::with_capacity(3 * ow * oh);
    for ch in 0..3 {
        for y in 0..oh {
            for xx in 0..ow {
                crop.push(out.at(ch, y + 40, xx + 40));
            }
        }
    }
    let e = rel_err(&Tensor::from_vec(3, oh, ow, crop), &Tensor::from_vec(3, oh, ow, gold));
    println!("general-x4v3 unclamped: error {e:e}");
    assert!(e <= 1e-4, "error {e:e}");
}
