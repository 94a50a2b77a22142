//! The CPU backend's max pooling (cpu/pool.rs) and bilinear Interp (cpu/resize.rs) against the
//! plain reference on random inputs and geometries (every ISA this CPU has, 2 and 3 threads).
//! Bound: identical results (0 difference, bit for bit; NaN where the reference has NaN): both
//! kernels do the reference's arithmetic in its order. Cases the fast paths leave to the reference
//! (average pooling, nearest / bicubic Interp) and the reference's errors are checked to come out
//! the same. Seeds: fixed ones plus LUCENT_TEST_SEED or the clock (printed on failure). Wall time:
//! well under a second in release.
mod common;
use common::*;
use lucent_core::ncnn::model::{Interp, Op, PoolKind, Pooling};
use lucent_core::{reference, Backend, Cancel, Tensor};

/// Runs `op` on `x` on every CPU backend and asserts the reference's answer, bit for bit (or the
/// same error code).
fn same_as_reference(op: Op, x: &Tensor, what: &str) {
    let net = one_op_net(op, x.c, x.h, x.w);
    let want = reference::run_net(&net, &[(0, x.clone())], &[1]);
    for be in backends() {
        let p = be.prepare(net.clone()).unwrap();
        let got = p.run(&[(0, x)], &[1], &Cancel::new());
        match (&got, &want) {
            (Ok(g), Ok(w)) => {
                let (g, w) = (&g[0], &w[0]);
                assert_eq!((g.dims, g.c, g.h, g.w), (w.dims, w.c, w.h, w.w), "{what}: shape");
                for (i, (a, b)) in g.data.iter().zip(&w.data).enumerate() {
                    assert!(a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan(), "{what} ({} {} threads): [{i}] {a} vs {b}", be.isa(), be.threads());
                }
            }
            (Err(g), Err(w)) => assert_eq!(g.code, w.code, "{what}: error codes"),
            _ => panic!("{what}: cpu {:?} vs reference {:?}", got.as_ref().err(), want.as_ref().err()),
        }
    }
}

fn pooling(kind: PoolKind, k: (usize, usize), s: (usize, usize), pads: [usize; 4], pad_mode: i32) -> Pooling {
    Pooling {
        kind,
        global: false,
        kernel_w: k.0,
        kernel_h: k.1,
        stride_w: s.0,
        stride_h: s.1,
        pad_left: pads[0],
        pad_right: pads[1],
        pad_top: pads[2],
        pad_bottom: pads[3],
        pad_mode,
        count_include_pad: false,
        adaptive: false,
        out_w: 0,
        out_h: 0,
    }
}

#[test]
fn max_pooling_matches_reference() {
    for seed in seeds() {
        let mut r = Rng(seed);
        // U²-Net's own: 2x2 stride 2, ceil mode (pad mode 0), even and odd sizes.
        for (c, h, w) in [(4, 40, 40), (3, 21, 19), (2, 1, 7), (70, 20, 20)] {
            let x = tensor(&mut r, c, h, w, 3.0);
            same_as_reference(Op::Pooling(pooling(PoolKind::Max, (2, 2), (2, 2), [0; 4], 0)), &x, &format!("seed {seed}: 2x2/2 ceil {c}x{h}x{w}"));
        }
        for _ in 0..40 {
            let k = (r.range(1, 4), r.range(1, 4));
            let s = (r.range(1, 3), r.range(1, 3));
            let pads = [r.range(0, k.0 - 1), r.range(0, k.0 - 1), r.range(0, k.1 - 1), r.range(0, k.1 - 1)];
            let mode = r.range(0, 3) as i32;
            let (c, h, w) = (r.range(1, 5), r.range(1, 23), r.range(1, 23));
            let mut x = tensor(&mut r, c, h, w, 4.0);
            if r.below(4) == 0 {
                let i = r.below(x.data.len());
                x.data[i] = f32::NAN;
            }
            let what = format!("seed {seed}: max k{k:?} s{s:?} pads {pads:?} mode {mode} on {c}x{h}x{w}");
            same_as_reference(Op::Pooling(pooling(PoolKind::Max, k, s, pads, mode)), &x, &what);
        }
        // Left to the reference: average pooling.
        let x = tensor(&mut r, 3, 9, 8, 1.0);
        same_as_reference(Op::Pooling(pooling(PoolKind::Avg, (3, 3), (2, 2), [1; 4], 0)), &x, &format!("seed {seed}: avg"));
    }
}

#[test]
fn bilinear_interp_matches_reference() {
    for seed in seeds() {
        let mut r = Rng(seed);
        // U²-Net's: 2x up to the next stage, and side outputs straight to 320 (one channel).
        for (c, h, w, oh, ow) in [(8, 10, 10, 20, 20), (1, 10, 10, 320, 320), (1, 40, 40, 320, 320), (64, 20, 20, 40, 40)] {
            let x = tensor(&mut r, c, h, w, 2.0);
            let p = Interp { resize_type: 2, height_scale: 1.0, width_scale: 1.0, output_h: oh, output_w: ow, align_corner: false };
            same_as_reference(Op::Interp(p), &x, &format!("seed {seed}: {c}x{h}x{w} -> {oh}x{ow}"));
        }
        for _ in 0..40 {
            let (c, h, w) = (r.range(1, 5), r.range(1, 30), r.range(1, 30));
            let align_corner = r.below(2) == 1;
            let p = if r.below(2) == 0 {
                Interp { resize_type: 2, height_scale: 1.0, width_scale: 1.0, output_h: r.range(1, 70), output_w: r.range(1, 70), align_corner }
            } else {
                let sc = |r: &mut Rng| [0.5f32, 2.0, 3.0, 0.25, 1.5][r.below(5)];
                Interp { resize_type: 2, height_scale: sc(&mut r), width_scale: sc(&mut r), output_h: 0, output_w: 0, align_corner }
            };
            let x = tensor(&mut r, c, h, w, 2.0);
            same_as_reference(Op::Interp(p.clone()), &x, &format!("seed {seed}: {p:?} on {c}x{h}x{w}"));
        }
        // Left to the reference: nearest and bicubic.
        for t in [1, 3] {
            let x = tensor(&mut r, 2, 7, 9, 1.0);
            let p = Interp { resize_type: t, height_scale: 2.0, width_scale: 2.0, output_h: 0, output_w: 0, align_corner: false };
            same_as_reference(Op::Interp(p), &x, &format!("seed {seed}: type {t}"));
        }
    }
}
