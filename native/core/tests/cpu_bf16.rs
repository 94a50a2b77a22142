//! The bf16 convolution path (cpu/bf16.rs, cpu/amx.rs) against the fp32 reference executor, for
//! every bf16 kernel this CPU runs (AMX, AVX512-BF16, and the portable emulated one everywhere), on
//! random nets: 1x1 / 3x3 / 5x5 convs, odd sizes, channel counts across the 32-channel blocks,
//! pad values, every fused activation, PReLU/ReLU and residual followers, channel-concat inputs;
//! and the precision setting's fallbacks (what `info()` says when bf16 cannot run).
//!
//! Bounds, max |bf16 - ref| / max(1, max |ref|): with inputs and weights that are exact in bf16
//! the products are exact and only the fp32 sum order differs: 1e-4 (this checks the layout and
//! indexing; seen ~1e-6). With arbitrary fp32 inputs in [-1, 1) (bf16 rounding, up to 2^-9
//! relative, of both operands of each product; the errors add up like a random walk):
//! 5e-3 * sqrt(K), K the products per output (one product: up to 2^-8 = 3.9e-3; over 45 runs of
//! 24 nets per kernel the worst seen was 3.4e-3 * sqrt(K)). Wall time ~2 s in release. Seed printed on failure:
//! LUCENT_TEST_SEED=<seed>.
mod common;
use common::*;
use lucent_core::cpu::bf16::{from_bf16, to_bf16};
use lucent_core::cpu::{Bf16Kernel, ConvPolicy, CpuBackend, CpuOptions, Precision};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Prepared, Tensor};
use std::sync::Arc;

const EXACT_TOL: f32 = 1e-4;
/// Per sqrt(products per output): the bf16 rounding errors of the products add up like a random walk.
const ROUNDED_TOL: f32 = 5e-3;

fn round(v: Vec<f32>, exact: bool) -> Vec<f32> {
    if exact {
        v.into_iter().map(|x| from_bf16(to_bf16(x))).collect()
    } else {
        v
    }
}

/// data -> (1x1 side conv -> x) and the main conv (kernel `k`, on data or on concat(data, x) when
/// not `exact`), then an optional PReLU/ReLU and residual with x. Returns (net, cin, the main
/// conv's products per output).
fn random_net(r: &mut Rng, k: usize, exact: bool) -> (Net, usize, usize) {
    let cin = [r.range(8, 17), r.range(8, 40), r.range(30, 70)][r.below(3)]; // bf16 from 8 input channels
    let cout = [r.range(1, 9), r.range(10, 40), r.range(31, 70)][r.below(3)];
    let concat = !exact && r.below(3) == 0;
    let act = r.below(6);
    let bias = r.below(4) != 0;
    let pad_value = if r.below(4) == 0 { " 18=2.500000e-01" } else { "" };
    let mut bin = Bin::default();
    let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 2 data d0 d1".to_string()];
    lines.push(format!("Convolution side 1 1 d1 x 0={cout} 1=1 5=1 6={}", cout * cin));
    // Weights scaled by 1/sqrt(cin): x is O(1) like the data (it feeds the concat and residuals).
    let side_scale = 1.0 / (cin as f32).sqrt();
    bin.tagged(&round(r.vec(cout * cin).into_iter().map(|v| v * side_scale).collect(), exact));
    bin.raw(&r.vec(cout));
    lines.push("Split sx 1 3 x x0 x1 x2".to_string());
    let mut main_in = "d0".to_string();
    let mut mcin = cin;
    if concat {
        lines.push("Concat cat 2 1 d0 x2 dx 0=0".to_string());
        main_in = "dx".into();
        mcin += cout;
    }
    let wsize = cout * mcin * k * k;
    lines.push(format!("Convolution conv 1 1 {main_in} c 0={cout} 1={k} 4={} 5={} 6={wsize}{}{pad_value}", k / 2, bias as i32, act_params(act)));
    bin.tagged(&round(r.vec(wsize), exact));
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
    match r.below(3) {
        0 => {}
        1 => {
            lines.push(format!("Eltwise e1 2 1 {cur} x0 y 0=1 -23301=2,2.000000e-01,1.000000e+00"));
            lines.push("Eltwise e2 2 1 x1 y z 0=1 -23301=2,1.000000e+00,2.000000e-01".into());
            cur = "z".into();
        }
        _ => {
            lines.push(format!("BinaryOp add 2 1 x0 {cur} y 0=0"));
            cur = "y".into();
        }
    }
    lines.push(format!("Noop end 1 1 {cur} out"));
    (net(&lines, &bin), cin, mcin * k * k)
}

fn bf16_backend(threads: usize, kernel: Bf16Kernel) -> CpuBackend {
    // A pinned policy: every conv bf16 applies to runs bf16, unmeasured.
    let o = CpuOptions { threads: Some(threads), precision: Precision::Bf16, bf16_kernel: Some(kernel), policy: ConvPolicy::Winograd, calibration_cache: lucent_core::cpu::CacheFile::Off, ..Default::default() };
    CpuBackend::with_options(&o)
}

fn check_kernel(kernel: Bf16Kernel) {
    if let Some(why) = kernel.unsupported_reason() {
        println!("SKIPPED {}: {why}", kernel.name());
        return;
    }
    let (mut r, seed) = Rng::from_env_or_time();
    let mut worst = [0f32; 2];
    for case in 0..24 {
        let exact = case % 2 == 0;
        let k = [3, 3, 1, 5][r.below(4)];
        let (n, cin, terms) = random_net(&mut r, k, exact);
        let n = Arc::new(n);
        let (w, h) = (r.range(k, k + 60), r.range(k, k + 17)); // outputs narrower and wider than 32 (two store paths)
        let x = Tensor::from_vec(cin, h, w, round(r.vec(cin * h * w), exact));
        let (inb, outb) = (n.blob("data").unwrap(), n.blob("out").unwrap());
        let want = reference::run_net(&n, &[(inb, x.clone())], &[outb]).unwrap();
        let threads = 1 + case % 3;
        let be = bf16_backend(threads, kernel);
        let p = be.prepare_net(n.clone()).unwrap();
        assert!(p.conv_precisions().iter().all(|(_, pr)| *pr == "bf16"), "every conv runs bf16: {:?}", p.conv_precisions());
        let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
        let e = rel_err(&got[0], &want[0]);
        let tol = if exact { EXACT_TOL } else { ROUNDED_TOL * (terms as f32).sqrt() };
        worst[!exact as usize] = worst[!exact as usize].max(if exact { e } else { e / (terms as f32).sqrt() });
        assert!(e <= tol, "seed {seed}: {kernel} case {case} (k {k}, {cin} in, {w}x{h}, {threads} threads, exact {exact}): error {e:e} > {tol:e}\n{:?}", n.layers.iter().map(|l| &l.name).collect::<Vec<_>>());
    }
    println!("{kernel}: 24 random nets, worst error exact-in-bf16 {:.1e} (bound {EXACT_TOL:e}), fp32 inputs {:.1e} / sqrt(K) (bound {ROUNDED_TOL:e})", worst[0], worst[1]);
}

#[test]
fn emulated_vs_reference() {
    check_kernel(Bf16Kernel::Emulated);
}

#[test]
fn avx512bf16_vs_reference() {
    check_kernel(Bf16Kernel::Avx512Bf16);
}

#[test]
fn amx_vs_reference() {
    check_kernel(Bf16Kernel::Amx);
}

/// bf16 rounding: to nearest, ties to even, exact values kept.
#[test]
fn bf16_rounding_is_nearest_even() {
    for (x, want) in [(1.0f32, 0x3f80u16), (-2.0, 0xc000), (f32::from_bits(0x3f80_8000), 0x3f80), (f32::from_bits(0x3f81_8000), 0x3f82), (f32::from_bits(0x3f80_8001), 0x3f81), (f32::INFINITY, 0x7f80)] {
        assert_eq!(to_bf16(x), want, "{x}");
    }
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
}

/// What runs when bf16 is asked for: the best bf16 kernel the CPU has (a cap below AMX runs the
/// next one), or fp32 with the reason in `info()`; fp32 and auto never run bf16 (int8's
/// fallbacks: tests/cpu_int8.rs).
#[test]
fn precision_fallbacks_and_info() {
    let (mut r, _) = Rng::from_env_or_time();
    let n = Arc::new(random_net(&mut r, 3, true).0);
    let info = |o: &CpuOptions| CpuBackend::with_options(o).info().cpu_precision.expect("cpu precision");
    let base = CpuOptions { threads: Some(1), policy: ConvPolicy::Winograd, calibration_cache: lucent_core::cpu::CacheFile::Off, ..Default::default() };
    for p in [Precision::Fp32, Precision::Auto] {
        let o = CpuOptions { precision: p, ..base.clone() };
        let be = CpuBackend::with_options(&o);
        assert!(be.bf16_kernel().is_none(), "{p:?}");
        assert!(be.prepare_net(n.clone()).unwrap().conv_precisions().iter().all(|(_, pr)| *pr == "fp32"));
        let i = info(&o);
        assert!(i.starts_with("fp32"), "{p:?}: {i}");
    }
    for cap in [None, Some(Bf16Kernel::Amx), Some(Bf16Kernel::Avx512Bf16)] {
        let o = CpuOptions { precision: Precision::Bf16, bf16_kernel: cap, ..base.clone() };
        let be = CpuBackend::with_options(&o);
        let want = match cap {
            None => Bf16Kernel::best(),
            Some(c) => Bf16Kernel::best_up_to(c),
        };
        assert_eq!(be.bf16_kernel(), want, "cap {cap:?}");
        let i = info(&o);
        let conv = be.prepare_net(n.clone()).unwrap().conv_precisions();
        match want {
            Some(k) => {
                assert!(i.starts_with("bf16") && i.contains(k.name()), "{i}");
                assert!(conv.iter().all(|(_, pr)| *pr == "bf16"), "{conv:?}");
            }
            None => {
                assert!(i.starts_with("fp32 (bf16 requested") && i.contains("lacks"), "{i}");
                assert!(conv.iter().all(|(_, pr)| *pr == "fp32"), "{conv:?}");
            }
        }
        println!("bf16 capped at {cap:?}: {i}");
    }
    assert_eq!(Precision::parse(" BF16 "), Some(Precision::Bf16));
    assert_eq!(Precision::parse("int4"), None);
}
