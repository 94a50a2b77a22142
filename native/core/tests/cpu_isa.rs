//! Each ISA level of the CPU backend (scalar, AVX2+FMA, AVX-512F) against the reference ops, on
//! random layer shapes with odd sizes and channel counts that are not multiples of the micro-kernel
//! blocks, every fused activation, fused PReLU/ReLU and fused residual sums (RRDB's `x + 0.2 f(x)`,
//! twice in a row, and a BinaryOp add), with Winograd and im2col each forced.
//!
//! Error bound: max |cpu - ref| / max(1, max |ref|) <= 1e-4 (inputs and weights in [-1, 1); the
//! worst seen is ~2e-6 for Winograd F(4x4, 3x3) at 48 input channels, ~5e-7 for im2col).
//!
//! A level this machine cannot run is listed by `cargo test` as ignored, with the reason (decided
//! by build.rs from the build host's CPU); run anyway (`--include-ignored`) it prints SKIPPED and
//! the CPU's flags, and checks nothing. The seed is printed on failure: LUCENT_TEST_SEED=<seed>.
mod common;
use common::*;
use lucent_core::cpu::{ConvPolicy, CpuBackend, Isa};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Prepared};
use std::sync::Arc;

const TOL: f32 = 1e-4;
/// Winograd F(4x4, 3x3): its transforms (entries up to 8 in the output transform) amplify f32 rounding; over
/// 1,500 seeds x 3 ISAs the worst relative error was 1.5e-4 (0.75 % of the runs above 1e-4), so 5e-4.
const WINO_TOL: f32 = 5e-4;

/// A conv on `data`, then (by `tail`) nothing / PReLU / ReLU, then by `res` nothing / one Eltwise
/// `0.2 y + x` / two in a row (the end of an RRDB) / a BinaryOp add; `x` comes from a 1x1 conv of
/// the input computed before (so the fusion may take it).
fn random_net(r: &mut Rng, k: usize) -> (Net, usize, usize, usize, usize) {
    // mostly wide enough for Winograd (>= 8 channels), sometimes not
    let cin = if r.below(4) == 0 { r.range(1, 7) } else { r.range(8, 48) };
    let cout = if r.below(4) == 0 { r.range(1, 7) } else { r.range(8, 40) };
    let (w, h) = (r.range(k, k + 29), r.range(k, k + 21));
    let act = r.below(7);
    let bias = r.below(4) != 0;
    let pad_value = if r.below(5) == 0 { " 18=2.500000e-01" } else { "" };
    let mut bin = Bin::default();
    let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 2 data d0 d1".to_string()];
    // the residual operand: 1x1 conv of the input to cout channels (same spatial size as the main conv: pad k/2)
    lines.push(format!("Convolution side 1 1 d1 x 0={cout} 1=1 5=1 6={}", cout * cin));
    bin.tagged(&r.vec(cout * cin));
    bin.raw(&r.vec(cout));
    lines.push("Split sx 1 3 x x0 x1 x2".to_string());
    let wsize = cout * cin * k * k;
    lines.push(format!("Convolution conv 1 1 d0 c 0={cout} 1={k} 4={} 5={} 6={wsize}{}{pad_value}", k / 2, bias as i32, act_params(act)));
    bin.tagged(&r.vec(wsize));
    if bias {
        bin.raw(&r.vec(cout));
    }
    let mut cur = "c".to_string();
    match r.below(3) {
        0 => {
            let ns = if r.below(2) == 0 { 1 } else { cout };
            lines.push(format!("PReLU pr 1 1 c p 0={ns}"));
            bin.raw(&r.vec(ns));
            cur = "p".into();
        }
        1 => {
            lines.push("ReLU relu 1 1 c p 0=1.000000e-01".into());
            cur = "p".into();
        }
        _ => {}
    }
    match r.below(4) {
        0 => {}
        1 => {
            lines.push(format!("Eltwise e1 2 1 {cur} x0 y 0=1 -23301=2,2.000000e-01,1.000000e+00"));
            cur = "y".into();
        }
        2 => {
            lines.push(format!("Eltwise e1 2 1 {cur} x0 y 0=1 -23301=2,2.000000e-01,1.000000e+00"));
            lines.push("Eltwise e2 2 1 x1 y z 0=1 -23301=2,1.000000e+00,2.000000e-01".into());
            cur = "z".into();
        }
        _ => {
            lines.push(format!("BinaryOp add 2 1 x0 {cur} y 0=0"));
            cur = "y".into();
        }
    }
    // The result under a fixed name (x1, x2 may stay unread: requested outputs are named).
    lines.push(format!("Noop end 1 1 {cur} out"));
    (net(&lines, &bin), cin, cout, w, h)
}

fn check_isa(isa: Isa) {
    if let Some(why) = isa.unsupported_reason() {
        println!("SKIPPED {}: {why}", isa.name());
        return;
    }
    let (mut r, seed) = Rng::from_env_or_time();
    let mut worst = [0.0f32; 2];
    let mut fused = 0;
    let mut winograd_cases = 0;
    for case in 0..32 {
        let k = [3, 3, 3, 3, 1, 5][r.below(6)];
        let (n, cin, cout, w, h) = random_net(&mut r, k);
        let n = Arc::new(n);
        let x = r.tensor(cin, h, w);
        let (inb, outb) = (n.blob("data").unwrap(), n.blob("out").unwrap());
        let want = reference::run_net(&n, &[(inb, x.clone())], &[outb]).unwrap();
        let expect_fused = n.layers.iter().filter(|l| matches!(l.kind.as_str(), "PReLU" | "ReLU" | "Eltwise" | "BinaryOp")).count();
        for (pi, policy) in [ConvPolicy::Winograd, ConvPolicy::Im2col].into_iter().enumerate() {
            let threads = 1 + case % 3;
            let be = CpuBackend::with_isa(Some(threads), isa).unwrap().with_policy(policy);
            let p = be.prepare_net(n.clone()).unwrap();
            assert_eq!(p.fusable_followers(), expect_fused, "every follower of the main conv is fused");
            let wino = p.conv_algorithms().into_iter().find(|(name, _)| name == "conv").unwrap().1;
            assert_eq!(wino, policy == ConvPolicy::Winograd && k == 3 && cin >= 8 && cout >= 8, "algorithm of the main conv");
            winograd_cases += wino as usize;
            fused += expect_fused;
            let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
            let e = rel_err(&got[0], &want[0]);
            worst[pi] = worst[pi].max(e);
            let tol = if wino { WINO_TOL } else { TOL };
            assert!(e <= tol, "seed {seed}: {} {policy:?} case {case} ({threads} threads): error {e:e} > {tol:e}\n{:?}", isa.name(), n.layers.iter().map(|l| &l.name).collect::<Vec<_>>());
        }
    }
    println!("{}: 32 random nets ({winograd_cases} on Winograd, {fused} fused followers), worst error winograd {:.1e} (bound {WINO_TOL:e}), im2col {:.1e} (bound {TOL:e})", isa.name(), worst[0], worst[1]);
}

#[test]
fn scalar_vs_reference() {
    check_isa(Isa::Scalar);
}

#[test]
#[cfg_attr(not(lucent_host_avx2), ignore = "this machine lacks AVX2+FMA (build.rs checked the build host)")]
fn avx2_vs_reference() {
    check_isa(Isa::Avx2);
}

#[test]
#[cfg_attr(not(lucent_host_avx512), ignore = "this machine lacks AVX-512F (build.rs checked the build host)")]
fn avx512_vs_reference() {
    check_isa(Isa::Avx512);
}

/// The level picked by default is the best the CPU has (the crate reads no environment: a cap comes
/// as the option `CpuOptions::isa`, which lowers it and never raises it), and a level the CPU lacks
/// is refused with the reason.
#[test]
fn detection_and_refusal() {
    let best = Isa::ALL.into_iter().rev().find(|i| i.supported()).unwrap();
    assert_eq!(Isa::detected(), best);
    assert_eq!(CpuBackend::new(Some(1)).isa(), best);
    for want in Isa::ALL {
        let b = CpuBackend::with_options(&lucent_core::cpu::CpuOptions { threads: Some(1), isa: Some(want), ..Default::default() });
        assert_eq!(b.isa(), want.min(best), "cap {want}");
        assert_eq!(lucent_core::Backend::info(&b).cpu_isa, Some(want.min(best).name()));
    }
    println!("this CPU: best {best}, flags: {}", lucent_core::cpu::isa::cpu_flags_summary());
    for isa in Isa::ALL {
        let b = CpuBackend::with_isa(Some(1), isa);
        match isa.unsupported_reason() {
            None => assert_eq!(b.unwrap().isa(), isa),
            Some(why) => {
                let e = b.err().expect("refused");
                assert!(e.message.contains(isa.name()) && e.message.contains(&why), "{}", e.message);
                println!("SKIPPED {}: {why}", isa.name());
            }
        }
    }
}

/// The fused residual chain must step aside when an intermediate blob is requested.
#[test]
fn fused_residual_with_requested_intermediate() {
    let (mut r, seed) = Rng::from_env_or_time();
    let mut bin = Bin::default();
    let c = 8;
    let lines = vec![
        "Input in 0 1 data".to_string(),
        "Split sp 1 3 data a b d".to_string(),
        format!("Convolution conv 1 1 a y 0={c} 1=3 4=1 5=1 6={} 9=2 -23310=1,2.000000e-01", c * c * 9),
        "Eltwise e1 2 1 y b z 0=1 -23301=2,2.000000e-01,1.000000e+00".to_string(),
        "Eltwise e2 2 1 z d out 0=1 -23301=2,2.000000e-01,1.000000e+00".to_string(),
    ];
    bin.tagged(&r.vec(c * c * 9));
    bin.raw(&r.vec(c));
    let n = Arc::new(net(&lines, &bin));
    let x = r.tensor(c, 13, 11);
    let inb = n.blob("data").unwrap();
    for outs in [vec!["out"], vec!["out", "z"], vec!["out", "y"], vec!["z"]] {
        let ob: Vec<usize> = outs.iter().map(|o| n.blob(o).unwrap()).collect();
        let want = reference::run_net(&n, &[(inb, x.clone())], &ob).unwrap();
        let be = CpuBackend::new(Some(2)).with_policy(ConvPolicy::Winograd);
        let got = be.prepare(n.clone()).unwrap().run(&[(inb, &x)], &ob, &Cancel::new()).unwrap();
        for (g, w) in got.iter().zip(&want) {
            let e = rel_err(g, w);
            assert!(e <= TOL, "seed {seed}: outputs {outs:?}: error {e:e}");
        }
    }
}

/// An RRDB dense block at widths where Winograd applies (16 + 8k channels in, 8 out, then 40 -> 16
/// and the residual `x + 0.2 y`): the transforms of x, x1, x2 are kept and reused by the later convs;
/// on every ISA level this machine has, against the reference.
#[test]
fn dense_block_keeps_transforms() {
    let (mut r, seed) = Rng::from_env_or_time();
    let (c, g) = (16, 8);
    let mut bin = Bin::default();
    let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 5 data d0 d1 d2 d3 d4".to_string()];
    let mut conv = |lines: &mut Vec<String>, name: &str, input: &str, out: &str, cin: usize, cout: usize, act: &str| {
        lines.push(format!("Convolution {name} 1 1 {input} {out} 0={cout} 1=3 4=1 5=1 6={}{act}", cout * cin * 9));
        bin.tagged(&r.vec(cout * cin * 9));
        bin.raw(&r.vec(cout));
    };
    let lrelu = " 9=2 -23310=1,2.000000e-01";
    conv(&mut lines, "c1", "d0", "x1", c, g, lrelu);
    lines.push("Split s1 1 3 x1 x1a x1b x1c".into());
    lines.push("Concat k1 2 1 d1 x1a k1".into());
    conv(&mut lines, "c2", "k1", "x2", c + g, g, lrelu);
    lines.push("Split s2 1 2 x2 x2a x2b".into());
    lines.push("Concat k2 3 1 d2 x1b x2a k2".into());
    conv(&mut lines, "c3", "k2", "x3", c + 2 * g, g, lrelu);
    lines.push("Concat k3 4 1 d3 x1c x2b x3 k3".into());
    conv(&mut lines, "c4", "k3", "y", c + 3 * g, c, "");
    lines.push("Eltwise res 2 1 y d4 out 0=1 -23301=2,2.000000e-01,1.000000e+00".into());
    let n = Arc::new(net(&lines, &bin));
    let x = r.tensor(c, 37, 29);
    let (inb, outb) = (n.blob("data").unwrap(), n.blob("out").unwrap());
    let want = reference::run_net(&n, &[(inb, x.clone())], &[outb]).unwrap();
    for isa in Isa::ALL {
        if let Some(why) = isa.unsupported_reason() {
            println!("SKIPPED {}: {why}", isa.name());
            continue;
        }
        for threads in [1, 2] {
            let be = CpuBackend::with_isa(Some(threads), isa).unwrap().with_policy(ConvPolicy::Winograd);
            let p = be.prepare_net(n.clone()).unwrap();
            // data (read by c1..c4), x1 (c2..c4), x2 (c3, c4)
            assert_eq!(p.kept_transform_sources(), 3);
            for _ in 0..2 {
                let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
                let e = rel_err(&got[0], &want[0]);
                assert!(e <= TOL, "seed {seed}: {} ({threads} threads): error {e:e}", isa.name());
            }
        }
    }
}
