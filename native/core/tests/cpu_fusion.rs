//! The CPU backend's element-wise fusions beyond PReLU and residual sums (see `cpu.rs`), on every
//! ISA level this machine runs, against the reference executor: SiLU (`Sigmoid` + `Mul` of the conv
//! output), SPAN's block tail (`(y + x) * (sigmoid(y) - 0.5)`), RealPLKSR's attention product
//! (`x * conv(x)` with the conv's own Sigmoid) and a Mish conv. Each net is run once with only
//! its output requested (everything fused: the planned count is checked) and once with an
//! intermediate blob requested too (that step must then stay out of the conv).
//!
//! Error bound: max |cpu - ref| / max(1, max |ref|) <= 1e-4 (as cpu_isa.rs; inputs and weights in
//! [-1, 1), 3x3 convs over 16 channels).
mod common;
use common::*;
use lucent_core::cpu::{CpuBackend, Isa};
use lucent_core::{reference, Cancel, Prepared};
use std::sync::Arc;

const TOL: f32 = 1e-4;
const C: usize = 16;

/// Layers after `Input` + a side conv `x` (1x1, computed before the main conv) + the main 3x3 conv
/// `c` (with `act`): `tail` lines (all fusable, Splits included), the result in blob `out`.
fn build(act: &str, tail: &[&str], r: &mut Rng) -> lucent_core::ncnn::Net {
    let mut bin = Bin::default();
    let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 2 data d0 d1".to_string()];
    lines.push(format!("Convolution side 1 1 d1 x 0={C} 1=1 5=1 6={}", C * C));
    bin.tagged(&r.vec(C * C));
    bin.raw(&r.vec(C));
    lines.push(format!("Convolution conv 1 1 d0 c 0={C} 1=3 4=1 5=1 6={}{act}", C * C * 9));
    bin.tagged(&r.vec(C * C * 9));
    bin.raw(&r.vec(C));
    lines.extend(tail.iter().map(|s| s.to_string()));
    net(&lines, &bin)
}

#[test]
fn silu_gate_and_product_fuse_into_the_conv() {
    let (mut r, seed) = Rng::from_env_or_time();
    // (name, conv activation, tail layers, an intermediate blob to request in the second run)
    let cases: [(&str, &str, Vec<&str>, &str); 4] = [
        ("silu", "", vec!["Split sc 1 2 c c0 c1", "Sigmoid sig 1 1 c0 s", "BinaryOp mul 2 1 c1 s out 0=2"], "s"),
        (
            "span tail",
            "",
            vec![
                "Split sc 1 2 c c0 c1",
                "Sigmoid sig 1 1 c0 s",
                "BinaryOp sub 1 1 s a 0=1 1=1 2=5.000000e-01",
                "Eltwise res 2 1 c1 x e 0=1 -23301=2,1.000000e+00,1.000000e+00",
                "BinaryOp mul 2 1 e a out 0=2",
            ],
            "e",
        ),
        ("product", " 9=4", vec!["BinaryOp mul 2 1 x c out 0=2"], "c"),
        ("mish + silu", " 9=5", vec!["Split sc 1 2 c c0 c1", "Sigmoid sig 1 1 c0 s", "BinaryOp mul 2 1 s c1 out 0=2"], "c1"),
    ];
    for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
        for (name, act, tail, mid) in &cases {
            let n = Arc::new(build(act, tail, &mut r));
            let x = r.tensor(C, 13, 21);
            let (inb, outb, midb) = (n.blob("data").unwrap(), n.blob("out").unwrap(), n.blob(mid).unwrap());
            let want = reference::run_net(&n, &[(inb, x.clone())], &[outb, midb]).unwrap();
            let p = CpuBackend::with_isa(Some(2), isa).unwrap().prepare_net(n.clone()).unwrap();
            assert_eq!(p.fusable_followers(), tail.len(), "{name}: every tail layer is planned into the conv");
            let got = p.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap();
            let e = rel_err(&got[0], &want[0]);
            assert!(e <= TOL, "seed {seed}: {isa} {name}: error {e:e}");
            // With the intermediate requested: same results for both blobs.
            let got = p.run(&[(inb, &x)], &[outb, midb], &Cancel::new()).unwrap();
            for (g, w) in got.iter().zip(&want) {
                let e = rel_err(g, w);
                assert!(e <= TOL, "seed {seed}: {isa} {name} (with '{mid}' requested): error {e:e}");
            }
        }
    }
}
