//! The int8 convolution path (cpu/int8.rs, cpu/amx.rs's TDPBSSD kernel) against the fp32 reference
//! executor, for every int8 kernel this CPU runs (AMX-INT8, AVX512-VNNI, and the portable emulated
//! one everywhere), on random convs: 1x1 / 3x3 / 5x5, odd sizes (outputs narrower and wider than
//! 32), channel counts across the 64-channel chunks and 32-channel output blocks, pad values, every
//! fused activation; the emulated kernel bit-identical to the hardware ones; and the precision
//! setting's int8 fallbacks (what `info()` says, which convs run int8).
//!
//! Bounds (absolute, per output element):
//! - on the quantisation grid (weights `k * 2^-7` with each channel's max |k| = 127, so
//!   `sw = 2^-7`; inputs `(j - zp) * 2^-6` with j = 0 and 255 present, so `sa = 2^-6`): the
//!   quantisation is exact and the integer sums too, only the reference's fp32 sums round:
//!   1e-4 * max(1, max |ref|) (checks the layout and indexing);
//! - arbitrary inputs: each product's error is at most `E = wmax * sa / 2 + xmax * sw / 2 +
//!   sa * sw / 4` (rounding of both operands; `sa` the activation step, `sw` the largest weight
//!   step); K independent such errors sum to more than `7 * sqrt(K) * E` with probability below
//!   2 exp(-49/2) (Hoeffding), times 1.1 for the activations' slope (mish's is <= 1.1).
//!
//! Wall time ~1-3 s in release. Seed printed on failure: LUCENT_TEST_SEED=<seed>.
mod common;
use common::*;
use lucent_core::cpu::int8::conv_once;
use lucent_core::cpu::{ConvPolicy, CpuBackend, CpuOptions, Int8Kernel, Precision};
use lucent_core::ncnn::model::{Conv, Op};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Prepared, Tensor};
use std::sync::Arc;

struct Case {
    net: Arc<Net>,
    x: Tensor,
    k: usize,
    pad_value: f32,
}

impl Case {
    fn conv(&self) -> &Conv {
        self.net.layers.iter().find_map(|l| if let Op::Conv(c) = &l.op { Some(c) } else { None }).unwrap()
    }
    fn reference(&self) -> Tensor {
        let (inb, outb) = (self.net.blob("data").unwrap(), self.net.blob("out").unwrap());
        reference::run_net(&self.net, &[(inb, self.x.clone())], &[outb]).unwrap().remove(0)
    }
}

/// data -> conv (kernel k, random act, bias, pad value) -> out. `grid`: weights and input on the
/// quantisation grid (see the module doc).
fn random_case(r: &mut Rng, grid: bool) -> Case {
    let k = [3, 3, 1, 5][r.below(4)];
    let cin = if k == 5 { r.range(8, 40) } else { [r.range(8, 17), r.range(8, 70), r.range(60, 130)][r.below(3)] };
    let cout = [r.range(1, 9), r.range(10, 40), r.range(31, 70)][r.below(3)];
    let (w, h) = (r.range(k + 1, k + 60), r.range(k, k + 12));
    let pad_value = if r.below(4) == 0 { 0.25 } else { 0.0 };
    let act = r.below(6);
    let bias = r.below(4) != 0;
    let wsize = cout * cin * k * k;
    let per = cin * k * k;
    let weights: Vec<f32> = if grid {
        let mut v: Vec<f32> = (0..wsize).map(|_| (r.range(0, 254) as f32 - 127.0) / 128.0).collect();
        for o in 0..cout {
            v[o * per + r.below(per)] = if r.below(2) == 0 { 127.0 / 128.0 } else { -127.0 / 128.0 };
        }
        v
    } else {
        let amp = [0.05, 0.3, 2.0][r.below(3)];
        r.vec(wsize).into_iter().map(|v| v * amp).collect()
    };
    let n = cin * h * w;
    let x: Vec<f32> = if grid {
        let zp = r.range(0, 239) as f32;
        let mut v: Vec<f32> = (0..n).map(|_| (r.range(0, 255) as f32 - zp) / 64.0).collect();
        v[r.below(n / 2)] = -zp / 64.0;
        v[n / 2 + r.below(n / 2)] = (255.0 - zp) / 64.0;
        v
    } else {
        let (amp, off) = ([0.1, 1.0, 6.0][r.below(3)], [0.0, 0.5][r.below(2)]);
        r.vec(n).into_iter().map(|v| (v + off) * amp).collect()
    };
    let pv = if pad_value != 0.0 { " 18=2.500000e-01" } else { "" };
    let lines = vec!["Input in 0 1 data".to_string(), format!("Convolution conv 1 1 data out 0={cout} 1={k} 4={} 5={} 6={wsize}{}{pv}", k / 2, bias as i32, act_params(act))];
    let mut bin = Bin::default();
    bin.tagged(&weights);
    if bias {
        bin.raw(&r.vec(cout));
    }
    Case { net: Arc::new(net(&lines, &bin)), x: Tensor::from_vec(cin, h, w, x), k, pad_value }
}

/// The bound for arbitrary inputs (module doc).
fn rounded_bound(c: &Case) -> f32 {
    let conv = c.conv();
    let wmax = conv.weight.iter().fold(0f32, |m, v| m.max(v.abs()));
    let (lo, hi) = c.x.data.iter().fold((c.pad_value.min(0.0), c.pad_value.max(0.0)), |(a, b), &v| (a.min(v), b.max(v)));
    let (sa, sw) = ((hi - lo) / 255.0, wmax / 127.0);
    let e = wmax * sa / 2.0 + lo.abs().max(hi.abs()) * sw / 2.0 + sa * sw / 4.0;
    let kk = (conv.num_input * c.k * c.k) as f32;
    1.1 * 7.0 * kk.sqrt() * e
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!((a.c, a.h, a.w), (b.c, b.h, b.w));
    a.data.iter().zip(&b.data).fold(0f32, |m, (x, y)| if x.is_nan() != y.is_nan() { f32::INFINITY } else { m.max((x - y).abs()) })
}

fn check_kernel(kernel: Int8Kernel) {
    if let Some(why) = kernel.unsupported_reason() {
        println!("SKIPPED {}: {why}", kernel.name());
        return;
    }
    let (mut r, seed) = Rng::from_env_or_time();
    let (mut worst_grid, mut worst_ratio) = (0f32, 0f32);
    for case in 0..16 {
        let grid = case % 2 == 0;
        let c = random_case(&mut r, grid);
        let want = c.reference();
        let got = conv_once(c.conv(), kernel, &c.x).unwrap();
        let d = max_abs_diff(&got, &want);
        let conv = c.conv();
        let what = format!("seed {seed}: {kernel} case {case} (k {}, {} -> {}, {}x{}, grid {grid})", c.k, conv.num_input, conv.num_output, c.x.w, c.x.h);
        if grid {
            let scale = want.data.iter().fold(1f32, |m, v| m.max(v.abs()));
            worst_grid = worst_grid.max(d / scale);
            assert!(d <= 1e-4 * scale, "{what}: error {d:e} > 1e-4 * {scale}");
        } else {
            let b = rounded_bound(&c);
            worst_ratio = worst_ratio.max(d / b);
            assert!(d <= b, "{what}: error {d:e} > bound {b:e}");
        }
    }
    println!("{kernel}: 16 random convs, worst on-grid error {worst_grid:.1e} (bound 1e-4), arbitrary inputs {worst_ratio:.3} of the bound");
}

#[test]
fn emulated_vs_reference() {
    check_kernel(Int8Kernel::Emulated);
}

#[test]
fn vnni_vs_reference() {
    check_kernel(Int8Kernel::Vnni);
}

#[test]
fn amx_vs_reference() {
    check_kernel(Int8Kernel::Amx);
}

/// The hardware kernels give exactly the emulated kernel's results (the same integer sums).
#[test]
fn hardware_kernels_bit_identical_to_emulated() {
    let (mut r, seed) = Rng::from_env_or_time();
    let hw: Vec<Int8Kernel> = [Int8Kernel::Vnni, Int8Kernel::Amx].into_iter().filter(|k| k.supported()).collect();
    if hw.is_empty() {
        println!("SKIPPED: no int8 unit here");
        return;
    }
    for case in 0..8 {
        let c = random_case(&mut r, case % 2 == 0);
        let emu = conv_once(c.conv(), Int8Kernel::Emulated, &c.x).unwrap();
        for &k in &hw {
            let got = conv_once(c.conv(), k, &c.x).unwrap();
            let same = got.data.iter().zip(&emu.data).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "seed {seed}: case {case}: {k} differs from the emulated kernel (max {:e})", max_abs_diff(&got, &emu));
        }
    }
    println!("{:?}: 8 random convs bit-identical to the emulated kernel", hw);
}

/// Precision::Int8 on a backend: with an int8 unit, convs of >= 8 input channels run int8 (a
/// pinned policy: unmeasured) and the image-input conv fp32, `info()` names the kernel, the result
/// stays near the reference; without one, everything runs fp32 and `info()` says why.
#[test]
fn precision_int8_backend_and_fallbacks() {
    let (mut r, seed) = Rng::from_env_or_time();
    let (c1, c2) = (r.range(8, 24), r.range(8, 40));
    let lines = vec![
        "Input in 0 1 data".to_string(),
        format!("Convolution first 1 1 data a 0={c1} 1=3 4=1 5=1 6={} 9=1", c1 * 3 * 9),
        format!("Convolution second 1 1 a out 0={c2} 1=3 4=1 5=1 6={} 9=2 -23310=1,2.000000e-01", c2 * c1 * 9),
    ];
    let mut bin = Bin::default();
    bin.tagged(&r.vec(c1 * 27));
    bin.raw(&r.vec(c1));
    bin.tagged(&r.vec(c2 * c1 * 9).into_iter().map(|v| v / (c1 as f32 * 9.0).sqrt()).collect::<Vec<_>>());
    bin.raw(&r.vec(c2));
    let n = Arc::new(net(&lines, &bin));
    let x = Tensor::from_vec(3, 19, 37, r.vec(3 * 19 * 37));
    let (inb, outb) = (n.blob("data").unwrap(), n.blob("out").unwrap());
    let want = reference::run_net(&n, &[(inb, x.clone())], &[outb]).unwrap();
    let o = CpuOptions { threads: Some(2), precision: Precision::Int8, policy: ConvPolicy::Winograd, calibration_cache: lucent_core::cpu::CacheFile::Off, ..Default::default() };
    let be = CpuBackend::with_options(&o);
    let info = be.info().cpu_precision.expect("cpu precision");
    let p = be.prepare_net(n.clone()).unwrap();
    let conv = p.conv_precisions();
    match Int8Kernel::best() {
        Some(k) => {
            assert!(info.starts_with("int8") && info.contains(k.name()), "{info}");
            assert_eq!(conv, vec![("first".to_string(), "fp32"), ("second".to_string(), "int8")]);
            let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
            let e = rel_err(&got[0], &want[0]);
            assert!(e < 0.05, "seed {seed}: int8 net error {e}");
            println!("{info}: two-conv net, error {e:.2e} relative to max(1, max |ref|)");
        }
        None => {
            assert!(info.starts_with("fp32 (int8 requested") && info.contains("lacks"), "{info}");
            assert!(conv.iter().all(|(_, pr)| *pr == "fp32"), "{conv:?}");
        }
    }
    for p in [Precision::Fp32, Precision::Bf16, Precision::Auto] {
        assert!(CpuOptions { precision: p, ..o.clone() }.effective_int8().is_none());
    }
    assert_eq!(Precision::parse("INT8"), Some(Precision::Int8));
}
