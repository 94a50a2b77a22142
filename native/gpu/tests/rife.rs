//! RIFE on the GPU backend (lavapipe here): the `rife.Warp` kernel against the CPU reference on
//! random images and flows (zero, integer, fractional, past the edges, far out of range), and
//! the whole RIFE v4.6 network against the ncnn golden of native/core/tests/golden.
//! Bounds, as max |gpu - ref| / max(1, max |ref|):
//! - warp, f32 storage: 1e-5 (same taps; only the shader compiler's contraction differs);
//! - warp, f16 storage: 1e-3 against the reference run on the f16-rounded image and flow (output
//!   rounding to f16 is 2^-11 relative); on the f32 inputs the f16 flow itself moves the sample
//!   point by up to 2^-11 x |flow|, which no fixed bound covers;
//! - whole network vs golden: f32 5e-4 max |diff| (0..1 values; measured 1.2e-4); f16 storage
//!   PSNR >= 50 dB (measured 56.7 dB, max |diff| 2.8e-2 where a warp samples an edge).
mod common;
#[path = "../../core/tests/common/golden_input.rs"]
mod golden_input;
use common::{backend, rel_err, Rng};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn warp_net() -> Arc<Net> {
    let text = "7767517\n3 3\nInput img 0 1 img\nInput flow 0 1 flow\nrife.Warp warp 2 1 img flow out\n";
    Arc::new(Net::from_parts(text, &[]).unwrap())
}

fn random_flow(r: &mut Rng, h: usize, w: usize) -> Tensor {
    let mut f = Tensor::zeros(2, h, w);
    let side = w.max(h) as f32 + 3.0;
    for (i, v) in f.data.iter_mut().enumerate() {
        let u = r.next_f32();
        *v = match i % 6 {
            0 => 0.0,
            1 => (u * 4.0).round(),
            2 => u * 1.5,
            3 => u * side,
            4 => u * 1000.0,
            _ => u * 6.0,
        };
    }
    f
}

fn f16_round(t: &Tensor) -> Tensor {
    let mut o = t.clone();
    o.data.iter_mut().for_each(|v| *v = half::f16::from_f32(*v).to_f32());
    o
}

#[test]
fn warp_matches_reference() {
    let Some(be) = backend() else { return };
    let net = warp_net();
    let (bi, bf, bo) = (net.blob("img").unwrap(), net.blob("flow").unwrap(), net.blob("out").unwrap());
    let mut vars = vec![("f32", be.with_settings(|s| s.f16 = false), 1e-5f32)];
    if be.f16_available() {
        vars.push(("f16", be.with_settings(|s| s.f16 = true), 1e-3));
    }
    let mut r = Rng::new(0x5eed_3a7f);
    for (label, b, bound) in vars {
        let p = b.prepare(net.clone()).unwrap();
        let mut worst = 0.0f32;
        for case in 0..24 {
            let (c, h, w) = (1 + case % 5, 1 + (case * 7) % 37, 1 + (case * 11) % 41);
            let img = r.tensor(c, h, w);
            let flow = random_flow(&mut r, h, w);
            let got = p.run(&[(bi, &img), (bf, &flow)], &[bo], &Cancel::new()).unwrap().remove(0);
            let want = if label == "f16" {
                reference::warp(&f16_round(&img), &f16_round(&flow)).unwrap()
            } else {
                reference::warp(&img, &flow).unwrap()
            };
            let e = rel_err(&got, &want);
            worst = worst.max(e);
            assert!(e <= bound, "{label} case {case} ({c}x{h}x{w}): error {e:e} > {bound:e}");
        }
        println!("warp on {} [{label}]: worst error {worst:.2e} (bound {bound:e})", b.adapter_name());
    }
}

fn frame(name: &str) -> Option<Tensor> {
    let gi = golden_input::golden_input(name)?;
    Some(Tensor::from_vec(3, gi.h, gi.w, gi.chw_f32()))
}

fn psnr(a: &Tensor, b: &Tensor) -> f64 {
    let mse: f64 = a.data.iter().zip(&b.data).map(|(x, y)| ((x.clamp(0.0, 1.0) - y.clamp(0.0, 1.0)) as f64).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (1.0 / mse.max(1e-20)).log10()
}

#[test]
fn rife_v46_matches_golden() {
    let Some(be) = backend() else { return };
    let (Some(f0), Some(f1)) = (frame("rife_ost009_f0"), frame("rife_ost009_f1")) else { return };
    let stem = root().join("../shared/models/interp/rife-v4.6/flownet");
    let net = Arc::new(Net::load_stem(&stem).unwrap());
    let bytes = std::fs::read(root().join("native/core/tests/golden/rife_v46_ost009_t025_ref.f32")).unwrap();
    let want = Tensor::from_vec(3, 96, 128, bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
    let ts = Tensor::from_vec(1, 96, 128, vec![0.25; 96 * 128]);
    let ins = [(net.blob("in0").unwrap(), &f0), (net.blob("in1").unwrap(), &f1), (net.blob("in2").unwrap(), &ts)];
    let out = [net.blob("out0").unwrap()];
    let mut vars = vec![("f32", be.with_settings(|s| s.f16 = false))];
    if be.f16_available() {
        vars.push(("f16", be.with_settings(|s| s.f16 = true)));
    }
    for (label, b) in vars {
        let p = b.prepare(net.clone()).unwrap();
        let t0 = std::time::Instant::now();
        let got = p.run(&ins, &out, &Cancel::new()).unwrap().remove(0);
        let d = got.data.iter().zip(&want.data).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        let db = psnr(&got, &want);
        println!("rife v4.6 128x96 t=0.25 on {} [{label}]: max|d| {d:.2e}, {db:.1} dB vs golden, {:?}", b.adapter_name(), t0.elapsed());
        if label == "f32" {
            assert!(d <= 5e-4, "f32: max |diff| {d:e}");
        } else {
            assert!(db >= 50.0, "f16: {db:.1} dB");
        }
    }
}
