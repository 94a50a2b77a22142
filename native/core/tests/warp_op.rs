//! `rife.Warp` (RIFE's bilinear backward warp): the reference checked by hand and against an
//! independent f64 rendition of rife-ncnn-vulkan's Vulkan kernel (taps clamped, not the point),
//! then the CPU backend against the reference on random images and flows: zero, integer,
//! fractional, past the edges and far out of range, on sizes down to 1 x 1.
//! Bounds: reference vs the f64 kernel <= 2e-6 + 2e-7 x |flow| (f32 rounding of the sample
//! point); CPU vs reference: bit-identical (same taps, same arithmetic order).
//! Seed printed on failure; rerun with LUCENT_TEST_SEED=<seed>.
mod common;
use common::*;
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::{Net, Op};
use lucent_core::{reference, Backend, Cancel, Code, Tensor};
use std::sync::Arc;

fn warp_net() -> Net {
    net(
        &[
            "Input img 0 1 img".into(),
            "Input flow 0 1 flow".into(),
            "rife.Warp warp 2 1 img flow out".into(),
        ],
        &Bin::default(),
    )
}

#[test]
fn parses_as_a_first_class_op() {
    let n = warp_net();
    assert!(matches!(n.layers[2].op, Op::Warp), "rife.Warp should load as Op::Warp");
    let text = "7767517\n2 2\nInput img 0 1 img\nrife.Warp warp 1 1 img out\n";
    let e = Net::from_parts(text, &[]).unwrap_err();
    assert_eq!(e.code, Code::ModelInvalid, "{e}");
}

#[test]
fn zero_flow_is_identity_and_integer_flow_is_a_clamped_shift() {
    let (mut r, seed) = Rng::from_env_or_time();
    let img = r.tensor(3, 7, 9);
    let zero = Tensor::zeros(2, 7, 9);
    assert_eq!(reference::warp(&img, &zero).unwrap(), img, "seed {seed}");
    for (dx, dy) in [(1i32, 0i32), (-2, 3), (4, -5), (20, -20)] {
        let mut flow = Tensor::zeros(2, 7, 9);
        flow.channel_mut(0).fill(dx as f32);
        flow.channel_mut(1).fill(dy as f32);
        let out = reference::warp(&img, &flow).unwrap();
        for c in 0..3 {
            for y in 0..7i32 {
                for x in 0..9i32 {
                    let (sx, sy) = ((x + dx).clamp(0, 8) as usize, (y + dy).clamp(0, 6) as usize);
                    assert_eq!(out.at(c, y as usize, x as usize), img.at(c, sy, sx), "seed {seed}: shift {dx},{dy} at {x},{y}");
                }
            }
        }
    }
}

#[test]
fn hand_computed_samples() {
    // image [[0, 1], [2, 3]]
    let img = Tensor::from_vec(1, 2, 2, vec![0.0, 1.0, 2.0, 3.0]);
    // (0,0) samples (0.25, 0.5) -> 0.5 * (0.25) + 0.5 * (2.25) = 1.25
    // (1,0) samples (1 - 0.5, 0 + 0.25) = (0.5, 0.25) -> 0.75 * 0.5 + 0.25 * 2.5 = 1.0
    // (0,1) samples (-3, 1 - 7) -> clamped to (0, 0) -> 0
    // (1,1) samples (1.5, 1.5) -> clamped to (1, 1) -> 3
    let flow = Tensor::from_vec(2, 2, 2, vec![0.25, -0.5, -3.0, 0.5, 0.5, 0.25, -7.0, 0.5]);
    let out = reference::warp(&img, &flow).unwrap();
    assert_eq!(out.data, vec![1.25, 1.0, 0.0, 3.0]);
}

#[test]
fn rejects_mismatched_operands() {
    let img = Tensor::zeros(3, 4, 5);
    for flow in [Tensor::zeros(2, 4, 6), Tensor::zeros(3, 4, 5), Tensor::zeros(2, 5, 5)] {
        let e = reference::warp(&img, &flow).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument, "{e}");
    }
}

/// rife-ncnn-vulkan's Vulkan kernel, restated in f64: taps floor(p) and floor(p) + 1 each
/// clamped, weight p - clamped floor (so it leaves [0, 1] outside the image).
fn upstream_f64(img: &Tensor, flow: &Tensor) -> Vec<f64> {
    let (h, w) = (img.h as i64, img.w as i64);
    let mut out = Vec::with_capacity(img.len());
    for c in 0..img.c {
        for y in 0..h {
            for x in 0..w {
                let sx = x as f64 + flow.at(0, y as usize, x as usize) as f64;
                let sy = y as f64 + flow.at(1, y as usize, x as usize) as f64;
                let (fx, fy) = (sx.floor() as i64, sy.floor() as i64);
                let (x0, x1) = (fx.clamp(0, w - 1), (fx + 1).clamp(0, w - 1));
                let (y0, y1) = (fy.clamp(0, h - 1), (fy + 1).clamp(0, h - 1));
                let (a, b) = (sx - x0 as f64, sy - y0 as f64);
                let v = |yy: i64, xx: i64| img.at(c, yy as usize, xx as usize) as f64;
                let top = v(y0, x0) * (1.0 - a) + v(y0, x1) * a;
                let bot = v(y1, x0) * (1.0 - a) + v(y1, x1) * a;
                out.push(top * (1.0 - b) + bot * b);
            }
        }
    }
    out
}

/// A random flow mixing zero, integer, fractional, edge-crossing and far out-of-range values.
fn random_flow(r: &mut Rng, h: usize, w: usize) -> Tensor {
    let mut f = Tensor::zeros(2, h, w);
    for v in f.data.iter_mut() {
        *v = match r.below(6) {
            0 => 0.0,
            1 => r.range(0, 8) as f32 - 4.0,
            2 => r.f() * 1.5,
            3 => r.f() * (w.max(h) as f32 + 3.0),
            4 => r.f() * 1000.0,
            _ => r.f() * 6.0,
        };
    }
    f
}

#[test]
fn reference_matches_upstream_formula() {
    let (mut r, seed) = Rng::from_env_or_time();
    for case in 0..40 {
        let (c, h, w) = (r.range(1, 4), r.range(1, 17), r.range(1, 17));
        let img = r.tensor(c, h, w);
        let flow = random_flow(&mut r, h, w);
        let got = reference::warp(&img, &flow).unwrap();
        let want = upstream_f64(&img, &flow);
        for (i, (&g, &u)) in got.data.iter().zip(&want).enumerate() {
            let p = i % (h * w);
            let fmax = flow.data[p].abs().max(flow.data[h * w + p].abs()) as f64;
            let tol = 2e-6 + 2e-7 * fmax;
            assert!((g as f64 - u).abs() <= tol, "seed {seed} case {case} ({c}x{h}x{w}) at {i}: {g} vs {u} (tol {tol:e})");
        }
    }
}

#[test]
fn cpu_backend_is_bit_identical_to_reference() {
    let (mut r, seed) = Rng::from_env_or_time();
    let net = Arc::new(warp_net());
    let (bi, bf, bo) = (net.blob("img").unwrap(), net.blob("flow").unwrap(), net.blob("out").unwrap());
    for threads in [1, 3] {
        let p = CpuBackend::new(Some(threads)).prepare(net.clone()).unwrap();
        for case in 0..30 {
            let (c, h, w) = (r.range(1, 6), r.range(1, 40), r.range(1, 40));
            let img = r.tensor(c, h, w);
            let flow = random_flow(&mut r, h, w);
            let want = reference::warp(&img, &flow).unwrap();
            let got = p.run(&[(bi, &img), (bf, &flow)], &[bo], &Cancel::new()).unwrap().remove(0);
            assert_eq!(got, want, "seed {seed} case {case} ({c}x{h}x{w}, {threads} threads)");
        }
        let e = p.run(&[(bi, &Tensor::zeros(3, 4, 4)), (bf, &Tensor::zeros(2, 4, 5))], &[bo], &Cancel::new()).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument, "{e}");
    }
}
