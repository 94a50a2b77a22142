//! The precision options beyond `precision` itself:
//! - per-layer precision over the backend's (`CpuOptions::layer_precision`, int8's per-layer rule):
//!   a named conv runs the named precision where this CPU has a unit for it (else fp32), the others
//!   the backend's; `info()` counts what the named layers run; a backend sharing another's pool runs
//!   its own options; the mixed net stays near the fp32 reference;
//! - the ISA cap (`LUCENT_CPU_ISA`) below avx512 keeps the bf16 and int8 hardware kernels off.
//!
//! Bound: relative error (to max(1, max |ref|)) under 0.05, as the int8 net test (one int8 conv of
//! random weights adds ~1e-2). Wall time < 1 s in release. Seed printed on failure:
//! LUCENT_TEST_SEED=<seed>.
mod common;
use common::*;
use lucent_core::cpu::{Bf16Kernel, CacheFile, ConvPolicy, CpuBackend, CpuOptions, Int8Kernel, Precision};
use lucent_core::{reference, Backend, Cancel, Prepared, Tensor};
use std::sync::Arc;

/// Three 3x3 convs: 3 -> c1 (reads < 8 channels: always fp32), c1 -> c2, c2 -> c3.
fn three_convs(r: &mut Rng) -> Arc<lucent_core::ncnn::Net> {
    let (c1, c2, c3) = (r.range(8, 24), r.range(8, 40), r.range(8, 20));
    let lines = vec![
        "Input in 0 1 data".to_string(),
        format!("Convolution first 1 1 data a 0={c1} 1=3 4=1 5=1 6={} 9=1", c1 * 3 * 9),
        format!("Convolution second 1 1 a b 0={c2} 1=3 4=1 5=1 6={} 9=1", c2 * c1 * 9),
        format!("Convolution third 1 1 b out 0={c3} 1=3 4=1 5=1 6={}", c3 * c2 * 9),
    ];
    let mut bin = Bin::default();
    for (o, i) in [(c1, 3), (c2, c1), (c3, c2)] {
        bin.tagged(&r.vec(o * i * 9).into_iter().map(|v| v / (i as f32 * 9.0).sqrt()).collect::<Vec<_>>());
        bin.raw(&r.vec(o));
    }
    Arc::new(net(&lines, &bin))
}

fn opts(precision: Precision, layers: &[(&str, Precision)]) -> CpuOptions {
    CpuOptions {
        threads: Some(2),
        precision,
        policy: ConvPolicy::Winograd,
        calibration_cache: CacheFile::Off,
        layer_precision: layers.iter().map(|(l, p)| (l.to_string(), *p)).collect(),
        ..Default::default()
    }
}

#[test]
fn named_layers_run_their_own_precision() {
    let (mut r, seed) = Rng::from_env_or_time();
    let n = three_convs(&mut r);
    let x = Tensor::from_vec(3, 21, 33, r.vec(3 * 21 * 33));
    let (inb, outb) = (n.blob("data").unwrap(), n.blob("out").unwrap());
    let want = reference::run_net(&n, &[(inb, x.clone())], &[outb]).unwrap();
    let (bf16, int8) = (Bf16Kernel::best().is_some(), Int8Kernel::best().is_some());
    let or_fp32 = |has: bool, p: &'static str| if has { p } else { "fp32" };

    // int8 with the middle conv set apart in bf16 (the rule's shape).
    let ruled = CpuBackend::with_options(&opts(Precision::Int8, &[("second", Precision::Bf16)]));
    let info = ruled.info().cpu_precision.unwrap();
    assert!(info.ends_with(&format!("; per-layer rule: 1 {} conv layer(s) set apart", or_fp32(bf16, "bf16"))), "{info}");
    let p = ruled.prepare_net(n.clone()).unwrap();
    let want_prec = vec![("first".to_string(), "fp32"), ("second".to_string(), or_fp32(bf16, "bf16")), ("third".to_string(), or_fp32(int8, "int8"))];
    assert_eq!(p.conv_precisions(), want_prec, "seed {seed}");
    let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
    let e = rel_err(&got[0], &want[0]);
    assert!(e < 0.05, "seed {seed}: mixed net error {e}");

    // fp32 with one conv in int8 (the rule's measurement), on the first backend's pool.
    let one = ruled.sharing_pool(&opts(Precision::Fp32, &[("third", Precision::Int8)]));
    assert_eq!(one.threads(), ruled.threads());
    assert!(one.info().cpu_precision.unwrap().starts_with("fp32; per-layer rule: 1 "));
    let p1 = one.prepare_net(n.clone()).unwrap();
    assert_eq!(p1.conv_precisions(), vec![("first".to_string(), "fp32"), ("second".to_string(), "fp32"), ("third".to_string(), or_fp32(int8, "int8"))]);
    let e1 = rel_err(&p1.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap()[0], &want[0]);
    assert!(e1 < 0.05, "seed {seed}: one int8 conv error {e1}");

    // A name that is no layer changes nothing; without overrides the line has no rule.
    let none = CpuBackend::with_options(&opts(Precision::Fp32, &[("no-such-layer", Precision::Int8)]));
    assert!(none.prepare_net(n.clone()).unwrap().conv_precisions().iter().all(|(_, p)| *p == "fp32"));
    assert!(!CpuBackend::with_options(&opts(Precision::Int8, &[])).info().cpu_precision.unwrap().contains("per-layer"));
    println!("{info}; error {e:.2e}, one int8 conv {e1:.2e}");
}

#[test]
fn isa_cap_below_avx512_keeps_the_narrow_kernels_off() {
    use lucent_core::cpu::Isa;
    for isa in [Isa::Scalar, Isa::Avx2] {
        for p in [Precision::Bf16, Precision::Int8] {
            let o = CpuOptions { isa: Some(isa), ..opts(p, &[("second", Precision::Bf16), ("third", Precision::Int8)]) };
            assert_eq!(o.effective_int8(), None);
            let (k, line) = o.effective_bf16();
            assert_eq!(k, None, "{line}");
            assert_eq!(line, format!("fp32 ({} requested, the cpu isa is capped at {})", p.name(), isa.name()));
            assert_eq!((o.kernels_for(Precision::Bf16), o.kernels_for(Precision::Int8)), ((None, None), (None, None)));
            // The pinned emulated bf16 kernel is portable: the cap leaves it.
            let emu = CpuOptions { bf16_kernel: Some(Bf16Kernel::Emulated), ..o.clone() };
            assert_eq!(emu.kernels_for(Precision::Bf16).0, Some(Bf16Kernel::Emulated));
        }
    }
    // At avx512 (or no cap) the best kernels this CPU has.
    for isa in [None, Some(Isa::Avx512)] {
        let o = CpuOptions { isa, ..opts(Precision::Int8, &[]) };
        assert_eq!(o.effective_int8(), Int8Kernel::best());
        assert_eq!(CpuOptions { precision: Precision::Bf16, ..o }.effective_bf16().0, Bf16Kernel::best());
    }
}
