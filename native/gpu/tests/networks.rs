//! Whole networks on the GPU backend against the independent goldens in
//! native/core/tests/golden (PSNR >= 45 dB), plus the reference on a per-layer basis.
//! The golden inputs are crops of the evaluation data built at test time (see
//! native/core/tests/golden/inputs.json); without the data folder those tests print SKIP, unless CI is set.

mod common;
#[path = "../../core/tests/common/golden_input.rs"]
mod golden_input;
use common::{backend, rel_err};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model(stem: &str) -> Net {
    let p = root().join("../shared/models/sr").join(stem);
    Net::load_stem(&p).unwrap_or_else(|e| panic!("cannot load {}: {e}", p.display()))
}

/// The golden input `name` as a [3,h,w] tensor of v/255; `None` when the evaluation data is absent.
fn golden_input(name: &str) -> Option<Tensor> {
    let gi = golden_input::golden_input(name)?;
    Some(Tensor::from_vec(3, gi.h, gi.w, gi.chw_f32()))
}

/// Reflection without repeating the edge (numpy "reflect").
fn reflect_pad(t: &Tensor, p: usize) -> Tensor {
    let (h, w) = (t.h, t.w);
    let refl = |i: isize, n: usize| -> usize {
        let n = n as isize;
        let mut i = i;
        if i < 0 {
            i = -i;
        }
        if i >= n {
            i = 2 * (n - 1) - i;
        }
        i as usize
    };
    let (oh, ow) = (h + 2 * p, w + 2 * p);
    let mut o = Tensor::zeros(t.c, oh, ow);
    for c in 0..t.c {
        for y in 0..oh {
            for x in 0..ow {
                o.data[(c * oh + y) * ow + x] = t.at(c, refl(y as isize - p as isize, h), refl(x as isize - p as isize, w));
            }
        }
    }
    o
}

fn crop_to_u8(t: &Tensor, p: usize) -> Vec<u8> {
    let (oh, ow) = (t.h - 2 * p, t.w - 2 * p);
    let mut v = Vec::with_capacity(oh * ow * 3);
    for y in 0..oh {
        for x in 0..ow {
            for c in 0..3 {
                v.push((t.at(c, y + p, x + p).clamp(0.0, 1.0) * 255.0).round_ties_even() as u8);
            }
        }
    }
    v
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum::<f64>() / a.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

fn golden(stem: &str, name: &str, f32_too: bool) {
    let Some(be) = backend() else { return };
    let Some(input) = golden_input(name) else { return };
    let dir = root().join("native/core/tests/golden");
    let refp = dir.join(format!("{name}_ref.png"));
    assert!(refp.exists(), "golden {name}_ref.png missing in {}", dir.display());
    let net = Arc::new(model(stem));
    let x = reflect_pad(&input, 10);
    let want = image::open(&refp).unwrap().to_rgb8().into_raw();
    let (i, o) = (net.blob("data").unwrap(), net.blob("output").unwrap());
    let mut vars = vec![(if be.settings().f16 { "default (f16)" } else { "default (f32)" }, be.clone())];
    if f32_too && be.settings().f16 {
        vars.push(("f32", be.with_settings(|s| s.f16 = false)));
    }
    for (label, b) in vars {
        let p = b.prepare(net.clone()).unwrap();
        let t0 = Instant::now();
        let out = p.run(&[(i, &x)], &[o], &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: {e}"));
        let dt = t0.elapsed();
        let got = crop_to_u8(&out[0], 40);
        let db = psnr(&got, &want);
        println!("{stem} on {}x{} (padded) [{label}] on {}: PSNR {db:.2} dB vs golden, {:.2} s", x.w, x.h, b.adapter_name(), dt.as_secs_f64());
        assert!(db >= 45.0, "{stem} [{label}]: PSNR {db:.2} dB < 45 dB");
    }
}

#[test]
fn realesr_general_x4v3_matches_golden() {
    golden("realesr-general-x4v3", "general_x4v3_ost009", false);
}

#[test]
fn realesrgan_x4plus_matches_golden() {
    golden("realesrgan-x4plus", "x4plus_ost009", false);
}

/// Whole network against the CPU reference on a small random input (f32: tight bound).
#[test]
fn general_x4v3_matches_reference_f32() {
    let Some(be) = backend() else { return };
    let net = Arc::new(model("realesr-general-x4v3"));
    let mut r = common::Rng::new(11);
    let mut x = r.tensor(3, 12, 10);
    for v in x.data.iter_mut() {
        *v = *v * 0.5 + 0.5;
    }
    let (i, o) = (net.blob("data").unwrap(), net.blob("output").unwrap());
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap();
    // A second size: a second run reuses the pool and the pipelines.
    let x2 = r.tensor(3, 9, 13);
    let want2 = reference::run_net(&net, &[(i, x2.clone())], &[o]).unwrap();
    // The default kernel (register-blocked on CPU adapters) and the FMA GEMM.
    for be in [be.with_settings(|s| s.f16 = false), be.with_settings(|s| {
        s.f16 = false;
        s.rb = None;
    })] {
        let p = be.prepare(net.clone()).unwrap();
        let got = p.run(&[(i, &x)], &[o], &Cancel::new()).unwrap();
        let e = rel_err(&got[0], &want[0]);
        println!("general-x4v3 12x10 f32 vs reference (rb {}): rel err {e:.2e}", be.settings().rb.is_some());
        assert!(e <= 1e-4, "rel err {e}");
        let got2 = p.run(&[(i, &x2)], &[o], &Cancel::new()).unwrap();
        assert!(rel_err(&got2[0], &want2[0]) <= 1e-4);
        assert!(be.max_tile(&net) >= 64);
    }
}
