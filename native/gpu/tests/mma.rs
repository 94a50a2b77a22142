//! The matrix-multiply-accumulate convolution (src/ops/mma.rs) against lucent_core::reference on
//! fresh random inputs: its emulated form on any adapter (lavapipe in CI), and the real
//! cooperative-matrix kernel on an adapter that lists cooperative matrices.
//!
//! The emulated kernel is generated from the same template as the cooperative-matrix one: same
//! workgroup tiles, warp tiles, fragment offsets and strides, A fragments column-major (stride
//! BM), B row-major (stride BN), C stored row-major (stride BN); only the fragment operations
//! are loops over the tile elements, and "subgroups" are runs of `sg` consecutive invocations.
//! Subgroup widths 32 and 64 are both run, so the path where a subgroup holds several warp tiles
//! (wide AMD subgroups) is exercised too.
//!
//! The `real_coop_*` tests are `#[ignore]`d: they need an adapter that lists f16 x f16 -> f32
//! cooperative matrices, which Debian bookworm's lavapipe does not. `bash scripts/mesa-coop.sh
//! test` runs them on Mesa 26's lavapipe (8x8x8; `npm test` does when that is installed), and
//! `cargo test --release -p lucent-gpu --test mma -- --ignored` runs them on a GPU that has them
//! (16x16x16 on NVIDIA / AMD RDNA3). They fail where the adapter has none.
//!
//! Error bounds, metric max|gpu - ref| / max(1, max|ref|): A and B operands are rounded to f16
//! (relative 2^-11 each) and accumulated in f32, which is the numerics of f16 storage: <= 2e-3
//! for f32 and f16 storage alike (f16 storage rounds the same operands already, plus the output).

mod common;
use common::{backend, check_tuned, conv_geometry_cases, conv_net, prelu_residual_net, rel_err, Rng};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Cancel, Tensor};
use lucent_gpu::ops::mma::{cfg_lists, fits_device, MmaCfg, MmaMode};
use lucent_gpu::{GpuBackend, MmaPlan};
use std::sync::Arc;

const BOUND: f32 = 2e-3;

/// Handles: every storage precision the device has x the given MMA plans x plain and
/// pipelined, each labelled.
fn handles_for(be: &GpuBackend, plans: &[MmaPlan]) -> Vec<(String, GpuBackend)> {
    let mut v = Vec::new();
    for (f16, pipelined) in [(false, false), (false, true), (true, false), (true, true)] {
        if f16 && !be.f16_available() {
            eprintln!("adapter {} has no SHADER_F16: f16 storage not tested here", be.adapter_name());
            continue;
        }
        for &plan in plans {
            let h = be.with_settings(|s| {
                s.f16 = f16;
                s.conv = None;
                s.conv_direct = false;
                s.mma = Some(plan);
                s.pipelined = pipelined;
            });
            assert_eq!(h.settings().mma, Some(plan), "MMA plan refused");
            let tiles = match plan.mode {
                MmaMode::Coop { sg_max } => format!("coop sg<={sg_max}"),
                MmaMode::Emulated { sg, f16_tiles } => format!("sg{sg} tiles {}", if f16_tiles { "f16" } else { "f32(rounded)" }),
            };
            let label = format!(
                "{}{} frag{} {tiles}{}",
                if f16 { "f16" } else { "f32" },
                if pipelined { " pipelined" } else { "" },
                plan.frag,
                plan.cfg.map(|c| format!(" {}x{}x{} w{}x{}", c.bm, c.bn, c.bk, c.wm, c.wn)).unwrap_or_default()
            );
            v.push((label, h));
        }
    }
    v
}

/// Handles for the emulation modes asked for, (fragment, subgroup width, f16 tiles).
fn handles(be: &GpuBackend, modes: &[(u32, u32, bool)], cfg: Option<MmaCfg>) -> Vec<(String, GpuBackend)> {
    let plans: Vec<MmaPlan> = modes.iter().map(|&(frag, sg, tiles16)| be.emulated_mma(frag, sg, tiles16, cfg)).collect();
    handles_for(be, &plans)
}

/// The real cooperative-matrix plan; a `real_coop_*` test runs only when asked for (ignored by
/// default), so an adapter without cooperative matrices is a failure, not a skip.
fn coop(be: &GpuBackend, cfg: Option<MmaCfg>) -> MmaPlan {
    be.coop_mma(cfg).unwrap_or_else(|| {
        panic!(
            "adapter {} lists no f16 x f16 -> f32 cooperative matrices (adapters: {:?}); run these on Mesa 26's lavapipe (bash scripts/mesa-coop.sh test) or a GPU that has them",
            be.adapter_name(),
            lucent_gpu::probe_coop()
        )
    })
}

/// The kernel name a handle's convolutions must report.
fn expected_kernel(h: &GpuBackend) -> String {
    let base = match h.settings().mma.map(|p| p.mode) {
        Some(MmaMode::Coop { .. }) => "coop",
        _ => "mma-emulated",
    };
    format!("{base}{}", if h.settings().pipelined { "+pipelined" } else { "" })
}

fn check(name: &str, hs: &[(String, GpuBackend)], net: Net, x: Tensor) {
    let i = net.blob("in").unwrap();
    let o = net.blob("out").unwrap();
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap_or_else(|e| panic!("{name}: reference: {e}"));
    let net = Arc::new(net);
    for (label, h) in hs {
        let expect = expected_kernel(h);
        let p = h.prepare_gpu(net.clone()).unwrap_or_else(|e| panic!("{name} [{label}]: prepare: {e}"));
        let kernels = p.conv_kernels().unwrap();
        assert!(!kernels.is_empty() && kernels.iter().all(|k| *k == expect), "{name} [{label}]: kernels {kernels:?}");
        let got = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: run: {e}"));
        let e = rel_err(&got[0], &want[0]);
        println!("{name:<34} [{label}] {:<12} rel err {e:.2e}", got[0].shape_string());
        assert!(e <= BOUND, "{name} [{label}]: rel err {e:.3e} > {BOUND:.0e}");
    }
}

const MODES: [(u32, u32, bool); 4] = [(16, 32, true), (16, 64, true), (8, 32, true), (16, 32, false)];

#[test]
fn emulated_mma_every_tile_config() {
    let Some(be) = backend() else { return };
    for frag in [16, 8] {
        every_tile_config(&be, frag, |c| be.emulated_mma(frag, 32, true, Some(c)));
    }
}

#[test]
#[ignore = "needs cooperative matrices: bash scripts/mesa-coop.sh test, or -- --ignored on such a GPU"]
fn real_coop_every_tile_config() {
    let Some(be) = backend() else { return };
    let frag = coop(&be, None).frag;
    every_tile_config(&be, frag, |c| coop(&be, Some(c)));
}

/// 3x3 pad 1, bias + leaky: K = 19*9 (not a multiple of BK), 70 outputs (not a multiple of BM),
/// 23x17 pixels (not a multiple of BN), on every tile configuration of fragment size `frag`
/// (f32 storage).
fn every_tile_config(be: &GpuBackend, frag: u32, plan: impl Fn(MmaCfg) -> MmaPlan) {
    let mut r = Rng::new(11);
    let net = conv_net(&mut r, "Convolution", 19, 70, 3, 3, 1, "4=1 9=2 -23310=1,0.1", true);
    let x = r.tensor(19, 17, 23);
    let (wide, narrow) = cfg_lists(frag);
    for c in wide.into_iter().chain(narrow) {
        let p = plan(c);
        // f32 storage, plain and (where its double tiles fit this device) pipelined
        let mut hs = handles_for(be, &[p]);
        hs.truncate(2);
        if !fits_device(&c.pipelined(), be.limits(), p.mode) {
            println!("{c:?}: the pipelined form does not fit this device's workgroup memory; plain only");
            hs.truncate(1);
        }
        check(&format!("conv3x3 19->70 leaky f{frag}"), &hs, net.clone(), x.clone());
    }
}

#[test]
fn emulated_mma_geometry_and_epilogues() {
    let Some(be) = backend() else { return };
    geometry_and_epilogues(&handles(&be, &MODES, None));
}

#[test]
#[ignore = "needs cooperative matrices: bash scripts/mesa-coop.sh test, or -- --ignored on such a GPU"]
fn real_coop_geometry_and_epilogues() {
    let Some(be) = backend() else { return };
    geometry_and_epilogues(&handles_for(&be, &[coop(&be, None)]));
}

/// 1x1 without bias + sigmoid (narrow-M tiles), the shared geometry cases (strides, dilation,
/// asymmetric pads, SAME_UPPER, groups, odd sizes, every activation), and PReLU (shared and per
/// channel) fused with an Eltwise (coefficients) or BinaryOp residual.
fn geometry_and_epilogues(hs: &[(String, GpuBackend)]) {
    let mut r = Rng::new(12);
    let net = conv_net(&mut r, "Convolution", 32, 8, 1, 1, 1, "9=4", false);
    check("conv1x1 32->8 sigmoid", hs, net, r.tensor(32, 9, 11));
    for (name, net, x) in conv_geometry_cases(&mut r) {
        check(name, hs, net, x);
    }
    let mut r = Rng::new(13);
    for (slopes, elt) in [(24usize, "Eltwise"), (1, "BinaryOp")] {
        check(&format!("conv+prelu({slopes})+{elt}"), hs, prelu_residual_net(&mut r, slopes, elt), r.tensor(24, 15, 18));
    }
}

/// realesr-general-x4v3 end to end with every convolution on the emulated MMA kernel, against
/// the reference (f32 storage; operands rounded to f16 in each of its 18 convolutions, so the
/// bound is looser than one layer's: <= 1e-2).
#[test]
fn emulated_mma_whole_network() {
    let Some(be) = backend() else { return };
    let plan = be.emulated_mma(16, 32, true, None);
    whole_network(&be, plan, "mma-emulated");
}

/// The same on the real cooperative-matrix kernel.
#[test]
#[ignore = "needs cooperative matrices: bash scripts/mesa-coop.sh test, or -- --ignored on such a GPU"]
fn real_coop_whole_network() {
    let Some(be) = backend() else { return };
    let plan = coop(&be, None);
    whole_network(&be, plan, "coop");
}

/// The default choice on an adapter that lists cooperative matrices: GPUs use them; CPU adapters
/// keep the register-blocked kernel unless `LUCENT_GPU_COOP=1` (scripts/mesa-coop.sh runs this
/// once without and once with it, each in its own process: the device is opened once).
#[test]
#[ignore = "needs cooperative matrices: bash scripts/mesa-coop.sh test, or -- --ignored on such a GPU"]
fn real_coop_default_choice() {
    let Some(be) = backend() else { return };
    let _ = coop(&be, None);
    let forced = std::env::var("LUCENT_GPU_COOP").as_deref() == Ok("1");
    let want = if be.device_type() != "cpu" || forced { "coop" } else { "rb" };
    let mut r = Rng::new(15);
    let net = Arc::new(conv_net(&mut r, "Convolution", 16, 32, 3, 3, 1, "4=1 9=1", true));
    let p = be.prepare_gpu(net).unwrap();
    let kernels = p.conv_kernels().unwrap();
    println!("{} ({}), LUCENT_GPU_COOP={:?}: default convolution kernel {kernels:?}", be.adapter_name(), be.device_type(), std::env::var("LUCENT_GPU_COOP").ok());
    assert_eq!(kernels, vec![want.to_string()]);
}

/// The measured choice among the real cooperative-matrix tiles and forms (tests/tune.rs checks
/// the FMA and emulated ones): every candidate timed, the fastest run, exact within the bound.
#[test]
#[ignore = "needs cooperative matrices: bash scripts/mesa-coop.sh test, or -- --ignored on such a GPU"]
fn real_coop_tuned() {
    let Some(be) = backend() else { return };
    check_tuned(&be, Some(coop(&be, None)), false, 44, "coop", BOUND);
    check_tuned(&be, Some(coop(&be, None)), true, 47, "coop", BOUND);
}

fn whole_network(be: &GpuBackend, plan: MmaPlan, kernel: &str) {
    whole_network_form(be, plan, kernel, false);
    whole_network_form(be, plan, &format!("{kernel}+pipelined"), true);
}

fn whole_network_form(be: &GpuBackend, plan: MmaPlan, kernel: &str, pipelined: bool) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/sr/realesr-general-x4v3");
    let net = Arc::new(Net::load_stem(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let h = be.with_settings(|s| {
        s.f16 = false;
        s.mma = Some(plan);
        s.pipelined = pipelined;
    });
    let mut r = Rng::new(14);
    let mut x = r.tensor(3, 12, 10);
    for v in x.data.iter_mut() {
        *v = *v * 0.5 + 0.5;
    }
    let (i, o) = (net.blob("data").unwrap(), net.blob("output").unwrap());
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap();
    let p = h.prepare_gpu(net.clone()).unwrap();
    let kernels = p.conv_kernels().unwrap();
    let n = kernels.iter().filter(|k| *k == kernel).count();
    assert!(n >= 16, "kernels {kernels:?}");
    let got = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &Cancel::new()).unwrap();
    let e = rel_err(&got[0], &want[0]);
    println!("general-x4v3 12x10, {kernel} ({n} of {} convolutions) vs reference: rel err {e:.2e}", kernels.len());
    assert!(e <= 1e-2, "rel err {e}");
}
