//! The transformer kernels (LayerNorm, GELU, PadToMultiple, window attention, channel attention,
//! HAT's overlapping cross-attention)
//! against lucent_core::reference on fresh random inputs, in f32 and f16 storage.
//! Error metric: max|gpu - ref| / max(1, max|ref|); f32 <= 1e-4, f16 storage <= 2e-3, as
//! tests/kernels.rs. Measured on lavapipe (Mesa 26): f32 <= 2.1e-6, f16 storage <= 7.2e-4 (the
//! inputs and outputs rounded to 11 bits; every kernel computes in f32).

mod common;
use common::{backend, rel_err, Rng};
use lucent_core::ncnn::model::{Layer, OverlapAttention, WindowAttention};
use lucent_core::ncnn::{Net, Op};
use lucent_core::{reference, Backend, Cancel, Code, Tensor};
use lucent_gpu::GpuBackend;
use std::sync::Arc;

const F32_BOUND: f32 = 1e-4;
const F16_BOUND: f32 = 2e-3;

/// in -> op -> out.
fn one_op(op: Op, kind: &str) -> Net {
    let layers = vec![
        Layer { name: "in".into(), kind: "Input".into(), op: Op::Input { w: 0, h: 0, c: 0 }, bottoms: vec![], tops: vec![0] },
        Layer { name: "op".into(), kind: kind.into(), op, bottoms: vec![0], tops: vec![1] },
    ];
    Net::from_layers(layers, vec!["in".into(), "out".into()])
}

fn variants(be: &GpuBackend) -> Vec<(&'static str, GpuBackend, f32)> {
    let mut v = vec![("f32", be.with_settings(|s| s.f16 = false), F32_BOUND)];
    if be.f16_available() {
        v.push(("f16", be.with_settings(|s| s.f16 = true), F16_BOUND));
    }
    v
}

fn check(name: &str, be: &GpuBackend, op: Op, kind: &str, x: Tensor) {
    let net = one_op(op, kind);
    let want = reference::run_net(&net, &[(0, x.clone())], &[1]).unwrap_or_else(|e| panic!("{name}: reference: {e}")).remove(0);
    let net = Arc::new(net);
    for (label, b, bound) in variants(be) {
        let p = b.prepare(net.clone()).unwrap_or_else(|e| panic!("{name} [{label}]: prepare: {e}"));
        let got = p.run(&[(0, &x)], &[1], &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: run: {e}")).remove(0);
        let e = rel_err(&got, &want);
        println!("{name:<48} [{label}] {:<12} rel err {e:.2e}", got.shape_string());
        assert!(e <= bound, "{name} [{label}]: rel err {e:.3e} > {bound:.0e}");
    }
}

#[test]
fn layer_norm_gelu_and_padding() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(31);
    for (c, h, w) in [(7, 5, 9), (60, 12, 10)] {
        let op = Op::LayerNorm { weight: r.vec(c, 1.5), bias: r.vec(c, 0.5), eps: 1e-5 };
        let mut x = r.tensor(c, h, w);
        x.data.iter_mut().enumerate().for_each(|(i, v)| *v = *v * 3.0 + (i % 5) as f32);
        check(&format!("layer norm {c}x{h}x{w}"), &be, op, "LayerNorm", x);
    }
    let mut x = r.tensor(6, 9, 11);
    x.data.iter_mut().for_each(|v| *v *= 4.0);
    check("gelu", &be, Op::Gelu, "Gelu", x);
    for (m, h, w) in [(4, 5, 7), (8, 13, 9), (4, 8, 8), (16, 17, 20)] {
        check(&format!("pad {h}x{w} to a multiple of {m}"), &be, Op::PadToMultiple { multiple: m }, "PadToMultiple", r.tensor(3, h, w));
    }
}

/// (heads, head width, window, shift, pad multiple, masked, bias, h, w)
type WinCase = (usize, usize, (usize, usize), (usize, usize), usize, bool, bool, usize, usize);

#[test]
fn window_attention_matches_the_reference() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(47);
    let cases: [WinCase; 7] = [
        (1, 1, (2, 2), (0, 0), 1, false, false, 4, 4),
        (2, 5, (4, 4), (2, 2), 4, true, true, 7, 10),
        (3, 30, (8, 8), (4, 4), 8, true, true, 13, 17),
        (2, 4, (2, 4), (1, 2), 4, true, true, 6, 9),
        // DAT's rectangles (8x16 and 16x8 halves), unshifted then shifted, zero padding.
        (3, 10, (8, 16), (0, 0), 16, false, false, 17, 20),
        (3, 10, (16, 8), (8, 4), 16, true, false, 17, 20),
        (1, 64, (4, 4), (2, 2), 4, true, true, 8, 8),
    ];
    for (heads, d, (wh, ww), (sy, sx), pm, masked, biased, h, w) in cases {
        let n = wh * ww;
        let bias = if biased { r.vec(heads * n * n, 2.0) } else { vec![] };
        let p = WindowAttention { heads, win_h: wh, win_w: ww, shift_y: sy, shift_x: sx, pad_multiple: pm, scale: 1.0 / (d as f32).sqrt(), bias, masked, mask_value: -100.0 };
        let mut x = r.tensor(3 * heads * d, h, w);
        x.data.iter_mut().for_each(|v| *v *= 2.0);
        let name = format!("window {heads}x{d} {wh}x{ww} shift {sy},{sx} pad {pm} mask {masked} bias {biased}");
        check(&name, &be, Op::WindowAttention(p), "WindowAttention", x);
    }
}

#[test]
fn channel_attention_matches_the_reference() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(59);
    for (heads, d, h, w) in [(1, 4, 9, 11), (3, 5, 70, 70), (2, 16, 33, 31)] {
        let temperature: Vec<f32> = r.vec(heads, 1.0).iter().map(|t| t.abs() * 3.0 + 0.2).collect();
        let op = Op::ChannelAttention { heads, temperature };
        check(&format!("channel attention {heads}x{d} over {h}x{w}"), &be, op, "ChannelAttention", r.tensor(3 * heads * d, h, w));
    }
}

#[test]
fn overlap_attention_matches_the_reference() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(71);
    // (heads, head width, window, overlap window, biased, h, w)
    for (heads, d, ws, ows, biased, h, w) in [
        (1, 1, 2, 2, false, 4, 4),
        (2, 5, 4, 6, true, 13, 10),
        (3, 10, 8, 12, true, 9, 17),
        (2, 30, 8, 10, false, 16, 16),
        (1, 8, 16, 24, true, 40, 37),
    ] {
        let bias = if biased { r.vec(heads * ws * ws * ows * ows, 2.0) } else { vec![] };
        let p = OverlapAttention { heads, window: ws, overlap: ows, scale: 1.0 / (d as f32).sqrt(), bias };
        let mut x = r.tensor(3 * heads * d, h, w);
        x.data.iter_mut().for_each(|v| *v *= 2.0);
        check(&format!("overlap {heads}x{d} window {ws}/{ows} bias {biased} {h}x{w}"), &be, Op::OverlapAttention(p), "OverlapAttention", x);
    }
}

/// What the kernels cannot take is refused with `model_invalid`, never a panic or a wrong answer.
#[test]
fn unfit_attention_is_refused() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(3);
    let wide = WindowAttention { heads: 1, win_h: 2, win_w: 2, shift_y: 0, shift_x: 0, pad_multiple: 1, scale: 1.0, bias: vec![], masked: false, mask_value: -100.0 };
    let untiled = WindowAttention { heads: 1, win_h: 3, win_w: 3, ..wide.clone() };
    for (what, op, x) in [
        ("a head of 65 channels", Op::WindowAttention(wide), r.tensor(3 * 65, 4, 4)),
        ("windows that do not tile", Op::WindowAttention(untiled), r.tensor(3, 4, 4)),
        ("heads that do not divide", Op::ChannelAttention { heads: 2, temperature: vec![1.0, 1.0] }, r.tensor(9, 4, 4)),
        ("an odd overlap margin", Op::OverlapAttention(OverlapAttention { heads: 1, window: 2, overlap: 3, scale: 1.0, bias: vec![] }), r.tensor(3, 4, 4)),
    ] {
        let p = be.prepare(Arc::new(one_op(op, "Attention"))).unwrap();
        let e = p.run(&[(0, &x)], &[1], &Cancel::new()).expect_err(what);
        assert_eq!(e.code, Code::ModelInvalid, "{what}: {e}");
    }
}
