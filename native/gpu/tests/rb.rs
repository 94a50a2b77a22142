//! The register-blocked direct convolution (src/ops/rb.rs, the default on CPU adapters such as
//! lavapipe) against lucent_core::reference on fresh random inputs: every tile shape tried on
//! sizes that are no multiple of it, strides, dilation, asymmetric pads and pad values, groups,
//! every activation, PReLU (shared and per channel) and the fused residual, f32 and f16 storage
//! (f16 reads packed pairs, so odd widths and odd row starts are covered).
//!
//! Error metric max|gpu - ref| / max(1, max|ref|): f32 <= 1e-4 (f32 products, another summation
//! order); f16 storage <= 2e-3 (inputs, weights and output rounded to f16, f32 accumulation).

mod common;
use common::{backend, conv_geometry_cases, conv_net, prelu_residual_net, rel_err, Rng};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Cancel, Tensor};
use lucent_gpu::ops::rb::RbCfg;
use lucent_gpu::GpuBackend;
use std::sync::Arc;

/// f32 and (where the adapter has it) f16 storage, each with the register-blocked kernel forced
/// with tile `cfg`: (label, handle, bound).
fn handles(be: &GpuBackend, cfg: RbCfg) -> Vec<(String, GpuBackend, f32)> {
    let mut v = Vec::new();
    for f16 in [false, true] {
        if f16 && !be.f16_available() {
            eprintln!("adapter {} has no SHADER_F16: f16 storage not tested here", be.adapter_name());
            continue;
        }
        let h = be.with_settings(|s| {
            s.f16 = f16;
            s.conv = None;
            s.conv_direct = false;
            s.mma = None;
            s.rb = Some(cfg);
        });
        let label = format!("{} rb {}x{}", if f16 { "f16" } else { "f32" }, cfg.mc, cfg.px);
        v.push((label, h, if f16 { 2e-3 } else { 1e-4 }));
    }
    v
}

fn check(name: &str, hs: &[(String, GpuBackend, f32)], net: Net, x: Tensor) {
    let i = net.blob("in").unwrap();
    let o = net.blob("out").unwrap();
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap_or_else(|e| panic!("{name}: reference: {e}"));
    let net = Arc::new(net);
    for (label, h, bound) in hs {
        let p = h.prepare_gpu(net.clone()).unwrap_or_else(|e| panic!("{name} [{label}]: prepare: {e}"));
        let kernels = p.conv_kernels().unwrap();
        assert!(!kernels.is_empty() && kernels.iter().all(|k| k == "rb"), "{name} [{label}]: kernels {kernels:?}");
        let got = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: run: {e}"));
        let e = rel_err(&got[0], &want[0]);
        println!("{name:<34} [{label}] {:<12} rel err {e:.2e}", got[0].shape_string());
        assert!(e <= *bound, "{name} [{label}]: rel err {e:.3e} > {bound:.0e}");
    }
}

#[test]
fn rb_every_tile_shape() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(21);
    // 3x3 pad 1, bias + leaky: 70 outputs (no multiple of 8, 12, 16 or 32), 23x17 pixels (23 no
    // multiple of any PX but 1), 19 inputs.
    let net3 = conv_net(&mut r, "Convolution", 19, 70, 3, 3, 1, "4=1 9=2 -23310=1,0.1", true);
    let x3 = r.tensor(19, 17, 23);
    // 1x1 without bias, sigmoid: 8 outputs (smaller than some MC).
    let net1 = conv_net(&mut r, "Convolution", 32, 8, 1, 1, 1, "9=4", false);
    let x1 = r.tensor(32, 9, 11);
    for (mc, px) in [(4, 1), (4, 3), (8, 16), (12, 5), (16, 8), (32, 2)] {
        let hs = handles(&be, RbCfg { mc, px });
        check("conv3x3 19->70 leaky", &hs, net3.clone(), x3.clone());
        check("conv1x1 32->8 sigmoid", &hs, net1.clone(), x1.clone());
    }
}

#[test]
fn rb_geometry_and_epilogues() {
    let Some(be) = backend() else { return };
    let hs = handles(&be, RbCfg::DEFAULT);
    let mut r = Rng::new(22);
    for (name, net, x) in conv_geometry_cases(&mut r) {
        check(name, &hs, net, x);
    }
    // Fewer outputs than a tile has channels (the SR networks' last 64 -> 3 convolution).
    let net = conv_net(&mut r, "Convolution", 16, 3, 3, 3, 1, "4=1", true);
    check("conv3x3 16->3", &hs, net, r.tensor(16, 11, 19));
    // One row, one column, and a wide row (several thread groups per row plus a partial one).
    let net = conv_net(&mut r, "Convolution", 7, 9, 3, 3, 1, "4=1", true);
    check("conv3x3 7->9 1x41", &hs, net.clone(), r.tensor(7, 1, 41));
    check("conv3x3 7->9 29x1", &hs, net.clone(), r.tensor(7, 29, 1));
    check("conv3x3 7->9 3x70", &hs, net, r.tensor(7, 3, 70));
}

#[test]
fn rb_fused_prelu_and_residual() {
    let Some(be) = backend() else { return };
    let hs = handles(&be, RbCfg::DEFAULT);
    let mut r = Rng::new(23);
    for (slopes, elt) in [(24usize, "Eltwise"), (1, "BinaryOp")] {
        check(&format!("conv+prelu({slopes})+{elt}"), &hs, prelu_residual_net(&mut r, slopes, elt), r.tensor(24, 15, 18));
    }
}

/// On a CPU adapter the default handle runs the register-blocked kernel (no setting forced);
/// realesr-general-x4v3 end to end on it against the reference, f32 storage: <= 1e-4.
#[test]
fn rb_is_the_cpu_adapter_default_and_runs_a_whole_network() {
    let Some(be) = backend() else { return };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/sr/realesr-general-x4v3");
    let net = Arc::new(Net::load_stem(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let p = be.prepare_gpu(net.clone()).unwrap();
    let kernels = p.conv_kernels().unwrap();
    if be.device_type() == "cpu" && std::env::var_os("LUCENT_GPU_CONV").is_none() && be.settings().mma.is_none() {
        assert!(kernels.iter().all(|k| k == "rb"), "CPU adapter default kernels {kernels:?}");
    } else {
        eprintln!("adapter {} ({}): default kernels {kernels:?}", be.adapter_name(), be.device_type());
    }
    let h = be.with_settings(|s| {
        s.f16 = false;
        s.conv = None;
        s.mma = None;
        s.rb = Some(RbCfg::DEFAULT);
    });
    let mut r = Rng::new(24);
    let mut x = r.tensor(3, 12, 10);
    for v in x.data.iter_mut() {
        *v = *v * 0.5 + 0.5;
    }
    let (i, o) = (net.blob("data").unwrap(), net.blob("output").unwrap());
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap();
    let p = h.prepare_gpu(net).unwrap();
    assert!(p.conv_kernels().unwrap().iter().all(|k| k == "rb"));
    let got = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &Cancel::new()).unwrap();
    let e = rel_err(&got[0], &want[0]);
    println!("general-x4v3 12x10, register-blocked kernel, f32 vs reference: rel err {e:.2e}");
    assert!(e <= 1e-4, "rel err {e}");
}
