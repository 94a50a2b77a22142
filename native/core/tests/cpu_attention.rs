//! The transformer ops on the CPU backend (native/core/src/cpu/attention.rs) against the plain
//! reference, one op per net, on random inputs: fixed seeds plus one from LUCENT_TEST_SEED or the
//! clock (printed on failure), every ISA level this CPU supports, 2 and 3 threads.
//!
//! Error measure: max over elements of |cpu - ref| / max(1, |ref|). Bounds: LayerNorm and
//! PadToMultiple exact (bit-identical); GELU 1e-6; WindowAttention and ChannelAttention 1e-5.
//! Measured (AMD EPYC, scalar / AVX2 / AVX-512 paths): LayerNorm 0, PadToMultiple 0, GELU 1.2e-7,
//! WindowAttention 7.6e-7 (only its exp differs from the reference's), ChannelAttention 0 (the
//! test prints the worst of each).
mod common;
use common::{one_op_net, seeds, tensor, worst_error, Rng};
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::model::{Op, WindowAttention};
use lucent_core::{reference, Backend, Cancel, Tensor};

#[test]
fn layer_norm_is_bit_identical() {
    let mut worst = 0f32;
    for seed in seeds() {
        let mut r = Rng(seed);
        for (c, h, w) in [(60, 17, 33), (1, 5, 7), (180, 9, 70), (3, 40, 41), (7, 1, 1)] {
            let op = Op::LayerNorm { weight: r.vec(c), bias: r.vec(c), eps: [1e-5, 1e-6, 0.0][r.below(3)] };
            // An offset per tensor: the two-pass variance must not cancel.
            let mut x = tensor(&mut r, c, h, w, 3.0);
            let off = r.f() * 100.0;
            x.data.iter_mut().for_each(|v| *v += off);
            worst = worst.max(worst_error(op, &x, &format!("seed {seed}: LayerNorm {c}x{h}x{w}")));
        }
    }
    println!("LayerNorm: worst error {worst:e}");
    assert_eq!(worst, 0.0);
}

#[test]
fn gelu_matches_within_1e_6() {
    let mut worst = 0f32;
    for seed in seeds() {
        let mut r = Rng(seed);
        for (c, h, w) in [(60, 37, 29), (1, 3, 5), (2, 130, 131)] {
            let x = tensor(&mut r, c, h, w, 9.0);
            worst = worst.max(worst_error(Op::Gelu, &x, &format!("seed {seed}: Gelu {c}x{h}x{w}")));
        }
    }
    // A sweep over [-20, 20] plus extremes.
    let mut v: Vec<f32> = (-80_000..=80_000).map(|i| i as f32 / 4000.0).collect();
    v.extend([0.0, -0.0, 1e-30, -1e-30, 50.0, -50.0, 1e20, -1e20, f32::MAX, f32::MIN]);
    let n = v.len();
    worst = worst.max(worst_error(Op::Gelu, &Tensor::from_vec(1, 1, n, v), "Gelu sweep"));
    println!("Gelu: worst error {worst:e}");
    assert!(worst <= 1e-6, "Gelu: {worst:e}");
}

#[test]
fn pad_to_multiple_is_exact_and_refuses_what_the_reference_refuses() {
    for seed in seeds() {
        let mut r = Rng(seed);
        for (c, h, w, m) in [(5, 13, 21, 8), (2, 16, 16, 8), (1, 3, 3, 4), (30, 9, 70, 16), (4, 7, 1, 1)] {
            let x = tensor(&mut r, c, h, w, 1.0);
            assert_eq!(worst_error(Op::PadToMultiple { multiple: m }, &x, &format!("seed {seed}: pad {c}x{h}x{w} to {m}")), 0.0);
        }
    }
    // Padding as large as the side: an error on both.
    let net = one_op_net(Op::PadToMultiple { multiple: 4 }, 1, 2, 2);
    let x = Tensor::from_vec(1, 2, 2, vec![0.0; 4]);
    assert!(reference::run_net(&net, &[(0, x.clone())], &[1]).is_err());
    let p = CpuBackend::new(Some(2)).prepare(net).unwrap();
    assert!(p.run(&[(0, &x)], &[1], &Cancel::new()).is_err());
}

/// One random WindowAttention case: heads, per-head size d, window, shift (masked when shifted),
/// padding multiple, input size (often not a multiple), bias or none.
fn window_case(r: &mut Rng, win: (usize, usize), heads: usize, d: usize) -> (WindowAttention, Tensor) {
    let (wh, ww) = win;
    let n = wh * ww;
    let lcm = (1..).map(|k| k * wh).find(|m| m % ww == 0).unwrap();
    let pad_multiple = if r.below(3) == 0 { 1 } else { lcm * (1 + r.below(2)) };
    let mut tile = |k: usize, m: usize| if pad_multiple == 1 { k * (1 + r.below(3)) } else { (m * (1 + r.below(2))).saturating_sub(r.below(m)).max(m / 2 + 1) };
    let (h, w) = (tile(wh, pad_multiple), tile(ww, pad_multiple));
    let (hp, wp) = (h.div_ceil(pad_multiple) * pad_multiple, w.div_ceil(pad_multiple) * pad_multiple);
    let shifted = r.below(3) != 0;
    let (shift_y, shift_x) = match (shifted, r.below(2)) {
        (false, _) => (0, 0),
        (true, 0) => (wh / 2, ww / 2),
        (true, _) => (r.below(hp), r.below(wp)),
    };
    let bias = if r.below(4) == 0 { vec![] } else { r.vec(heads * n * n).into_iter().map(|v| v * 3.0).collect() };
    let p = WindowAttention { heads, win_h: wh, win_w: ww, shift_y, shift_x, pad_multiple, scale: 1.0 / (d as f32).sqrt(), bias, masked: shifted && r.below(4) != 0, mask_value: -100.0 };
    let amp = [1.0, 3.0][r.below(2)];
    (p, tensor(r, 3 * heads * d, h, w, amp))
}

#[test]
fn window_attention_matches_within_1e_5() {
    let mut worst = 0f32;
    let mut cases = 0;
    for seed in seeds() {
        let mut r = Rng(seed);
        for win in [(4, 4), (8, 8), (2, 4), (8, 16), (16, 8), (1, 1), (3, 5)] {
            for _ in 0..3 {
                let heads = r.range(1, 6);
                let d = if r.below(2) == 0 { r.range(1, 30) } else { r.range(1, 8) };
                let (p, x) = window_case(&mut r, win, heads, d);
                let what = format!("seed {seed}: WindowAttention {p:?} on {}", x.shape_string()).replace(&format!("{:?}", p.bias), "[..]");
                worst = worst.max(worst_error(Op::WindowAttention(p), &x, &what));
                cases += 1;
            }
        }
    }
    println!("WindowAttention: {cases} cases, worst error {worst:e}");
    assert!(worst <= 1e-5, "WindowAttention: {worst:e}");
}

/// Swin's real settings: 8x8 windows, shift 4, mask, bias; and DAT-light's 8x32 rectangles.
#[test]
fn window_attention_swin_and_dat_settings() {
    let mut r = Rng(7);
    let mut worst = 0f32;
    for (heads, d, wh, ww, shift, pm, h, w) in [(6, 30, 8, 8, 4, 8, 20, 27), (3, 10, 8, 32, 0, 32, 40, 33), (3, 10, 32, 8, 16, 32, 33, 40)] {
        let n = wh * ww;
        let p = WindowAttention {
            heads,
            win_h: wh,
            win_w: ww,
            shift_y: shift.min(wh / 2),
            shift_x: shift.min(ww / 2),
            pad_multiple: pm,
            scale: 1.0 / (d as f32).sqrt(),
            bias: r.vec(heads * n * n),
            masked: shift > 0,
            mask_value: -100.0,
        };
        let x = tensor(&mut r, 3 * heads * d, h, w, 2.0);
        worst = worst.max(worst_error(Op::WindowAttention(p), &x, &format!("{wh}x{ww} shift {shift}")));
    }
    println!("WindowAttention (Swin / DAT settings): worst error {worst:e}");
    assert!(worst <= 1e-5, "{worst:e}");
    // Operands that do not fit: an error on the CPU backend too.
    let bad = WindowAttention { heads: 2, win_h: 4, win_w: 4, shift_y: 0, shift_x: 0, pad_multiple: 3, scale: 1.0, bias: vec![], masked: false, mask_value: -100.0 };
    let net = one_op_net(Op::WindowAttention(bad), 12, 8, 8);
    let x = tensor(&mut r, 12, 8, 8, 1.0);
    let e = CpuBackend::new(Some(2)).prepare(net).unwrap().run(&[(0, &x)], &[1], &Cancel::new()).unwrap_err();
    assert!(e.message.contains("do not tile"), "{e}");
}

#[test]
fn channel_attention_matches_within_1e_5() {
    let mut worst = 0f32;
    for seed in seeds() {
        let mut r = Rng(seed);
        for (h, w) in [(70, 65), (3, 5), (64, 80), (1, 1)] {
            let heads = r.range(1, 4);
            let d = r.range(1, 16);
            let temperature: Vec<f32> = (0..heads).map(|_| 0.5 + 2.5 * (r.f() + 1.0) / 2.0).collect();
            let x = tensor(&mut r, 3 * heads * d, h, w, 2.0);
            worst = worst.max(worst_error(Op::ChannelAttention { heads, temperature }, &x, &format!("seed {seed}: ChannelAttention {heads} heads, d {d}, {h}x{w}")));
        }
    }
    println!("ChannelAttention: worst error {worst:e}");
    assert!(worst <= 1e-5, "ChannelAttention: {worst:e}");
}
