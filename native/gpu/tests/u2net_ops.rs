//! U²-Net's ops on the GPU backend against lucent_core::reference on fresh random inputs. u2netp's
//! ONNX graph (opset 11) maps onto core ops that all have WGSL kernels already, so none is new:
//! 3x3 convolutions with dilation 1, 2, 4 and 8 (pad = dilation) and fused ReLU, one 1x1, MaxPool
//! 2x2 stride 2 with `ceil_mode` (ncnn's pad mode 0, "full"), Resize linear with
//! `pytorch_half_pixel` to the skip connection's size (Interp bilinear, half-pixel, edges clamped),
//! Concat on channels, Add, Sigmoid. Here they run in an RSU-like block on odd sizes (where
//! `ceil_mode` and non-integer resize ratios matter; at 320x320 u2netp only halves even sides):
//! each op alone, then the block, with the default convolution kernel of the adapter (the
//! register-blocked one on lavapipe) and the FMA GEMM (GPUs without cooperative matrices).
//! The whole u2netp on the GPU backend vs the CPU backend: native/engine/tests/segment_gpu.rs.
//!
//! Error metric max|gpu - ref| / max(1, max|ref|): f32 storage <= 1e-4, f16 storage <= 2e-3 (as
//! tests/kernels.rs). `Storage::F32` (Backend::prepare_with, what the segmentation pipeline asks)
//! on an f16 handle gives exactly the f32 handle's output.

mod common;
use common::{backend, rel_err, NetBuilder, Rng};
use lucent_core::backend::Storage;
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use lucent_gpu::GpuBackend;
use std::sync::Arc;

const F32_BOUND: f32 = 1e-4;
const F16_BOUND: f32 = 2e-3;

/// (label, handle, bound): the default kernel and the FMA GEMM, each in f32 and f16 storage.
fn handles(be: &GpuBackend) -> Vec<(String, GpuBackend, f32)> {
    let mut v = Vec::new();
    for (kernel, rb) in [("default", be.settings().rb), ("fma", None)] {
        for f16 in [false, true] {
            if f16 && !be.f16_available() {
                eprintln!("adapter {} has no SHADER_F16: f16 storage not tested here", be.adapter_name());
                continue;
            }
            let h = be.with_settings(|s| {
                s.f16 = f16;
                s.rb = rb;
            });
            v.push((format!("{kernel} {}", if f16 { "f16" } else { "f32" }), h, if f16 { F16_BOUND } else { F32_BOUND }));
        }
    }
    v
}

fn check(name: &str, hs: &[(String, GpuBackend, f32)], net: Net, x: Tensor, outs: &[&str]) {
    let i = net.blob("in").unwrap();
    let o: Vec<usize> = outs.iter().map(|n| net.blob(n).unwrap()).collect();
    let want = reference::run_net(&net, &[(i, x.clone())], &o).unwrap_or_else(|e| panic!("{name}: reference: {e}"));
    let net = Arc::new(net);
    for (label, h, bound) in hs {
        let p = h.prepare(net.clone()).unwrap_or_else(|e| panic!("{name} [{label}]: prepare: {e}"));
        let got = p.run(&[(i, &x)], &o, &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: run: {e}"));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let e = rel_err(g, w);
            println!("{name:<36} [{label:<11}] out{k} {:<12} rel err {e:.2e}", g.shape_string());
            assert!(e <= *bound, "{name} [{label}]: out{k} rel err {e:.3e} > {bound:.0e}");
        }
    }
}

/// A 3x3 convolution `cin -> cout` with dilation `d` (pad `d`, u2net's REBNCONV with its
/// BatchNorm folded) and ReLU unless `act` is false, random weights and bias.
fn conv(b: &mut NetBuilder, r: &mut Rng, from: &str, to: &str, (cin, cout, k, d): (usize, usize, usize, usize), act: bool) {
    let wn = cout * cin * k * k;
    let pad = if k == 1 { 0 } else { d };
    b.layer("Convolution", &[from], &[to], &format!("0={cout} 1={k} 2={d} 4={pad} 5=1 6={wn}{}", if act { " 9=1" } else { "" }));
    let w = r.vec(wn, 1.0 / ((cin * k * k) as f32).sqrt());
    let bias = r.vec(cout, 0.2);
    b.tagged(&w).raw(&bias);
}

/// Interp as the ONNX reader maps u2net's Resize (linear, pytorch_half_pixel) to `h` x `w`.
fn upsample(b: &mut NetBuilder, from: &str, to: &str, h: usize, w: usize) {
    b.layer("Interp", &[from], &[to], &format!("0=2 3={h} 4={w} 6=0"));
}

/// MaxPool 2x2 stride 2 with ceil_mode (pad mode 0, "full": a last window of one row / column).
const POOL: &str = "0=0 1=2 2=2 5=0";

#[test]
fn u2net_ops_alone() {
    let Some(be) = backend() else { return };
    let hs = handles(&be);
    // Pooling, Interp and Sigmoid have one kernel whatever the convolution kernel.
    let no_conv: Vec<_> = hs.iter().filter(|h| h.0.starts_with("default")).cloned().collect();
    let mut r = Rng::new(31);
    for (h, w) in [(9, 11), (10, 12), (3, 5)] {
        let mut b = NetBuilder::new();
        b.input("in").layer("Pooling", &["in"], &["out"], POOL);
        check(&format!("maxpool 2x2 s2 ceil {h}x{w}"), &no_conv, b.build(), r.tensor(5, h, w), &["out"]);
    }
    // The sizes _upsample_like meets: x2 (10 -> 20), the side outputs' x8 and x32 (to 320 from 40
    // and 10, one channel), and the ratios ceil_mode leaves on odd inputs (5x6 -> 9x11).
    for ((ih, iw), (oh, ow), c) in [((10, 10), (20, 20), 8), ((5, 6), (9, 11), 6), ((40, 40), (320, 320), 1), ((10, 10), (320, 320), 1), ((1, 2), (3, 5), 2)] {
        let mut b = NetBuilder::new();
        b.input("in");
        upsample(&mut b, "in", "out", oh, ow);
        check(&format!("bilinear half-pixel {ih}x{iw} -> {oh}x{ow}"), &no_conv, b.build(), r.tensor(c, ih, iw), &["out"]);
    }
    // Dilated 3x3 (RSU4F: dilation 2, 4, 8), also where the dilation exceeds the map (d 8 on 5x6).
    for (d, (h, w)) in [(2, (20, 20)), (4, (10, 10)), (8, (10, 10)), (8, (5, 6))] {
        let mut b = NetBuilder::new();
        b.input("in");
        conv(&mut b, &mut r, "in", "out", (16, 16, 3, d), true);
        check(&format!("conv3x3 d{d} relu {h}x{w}"), &hs, b.build(), r.tensor(16, h, w), &["out"]);
    }
    let mut b = NetBuilder::new();
    b.input("in").layer("Sigmoid", &["in"], &["out"], "");
    check("sigmoid", &no_conv, b.build(), Tensor::from_vec(2, 7, 9, r.vec(2 * 7 * 9, 12.0)), &["out"]);
}

/// An RSU-like block on an odd-sized input (19x23): encoder convs and ceil-mode pools, dilated
/// convs at the bottom, decoder with bilinear upsampling to each skip's size and channel concats,
/// the residual add, two side outputs (one upsampled from 5x6) fused by a 1x1 conv and sigmoids.
fn rsu_block(r: &mut Rng) -> Net {
    let mut b = NetBuilder::new();
    b.input("in");
    conv(&mut b, r, "in", "hxin", (4, 8, 3, 1), true);
    b.layer("Split", &["hxin"], &["hxin_a", "hxin_b"], "");
    conv(&mut b, r, "hxin_a", "hx1", (8, 6, 3, 1), true);
    b.layer("Split", &["hx1"], &["hx1_a", "hx1_b"], "");
    b.layer("Pooling", &["hx1_a"], &["p1"], POOL); // 10x12
    conv(&mut b, r, "p1", "hx2", (6, 6, 3, 1), true);
    b.layer("Split", &["hx2"], &["hx2_a", "hx2_b"], "");
    b.layer("Pooling", &["hx2_a"], &["p2"], POOL); // 5x6
    conv(&mut b, r, "p2", "hx3", (6, 6, 3, 2), true);
    b.layer("Split", &["hx3"], &["hx3_a", "hx3_b"], "");
    conv(&mut b, r, "hx3_a", "hx4", (6, 6, 3, 8), true);
    b.layer("Concat", &["hx4", "hx3_b"], &["c3"], "0=0");
    conv(&mut b, r, "c3", "hx3d", (12, 6, 3, 1), true);
    b.layer("Split", &["hx3d"], &["hx3d_a", "hx3d_b"], "");
    upsample(&mut b, "hx3d_a", "u3", 10, 12);
    b.layer("Concat", &["u3", "hx2_b"], &["c2"], "0=0");
    conv(&mut b, r, "c2", "hx2d", (12, 6, 3, 1), true);
    upsample(&mut b, "hx2d", "u2", 19, 23);
    b.layer("Concat", &["u2", "hx1_b"], &["c1"], "0=0");
    conv(&mut b, r, "c1", "hx1d", (12, 8, 3, 1), true);
    b.layer("BinaryOp", &["hx1d", "hxin_b"], &["res"], "0=0");
    conv(&mut b, r, "res", "d1", (8, 1, 3, 1), false);
    b.layer("Split", &["d1"], &["d1_a", "d1_b"], "");
    conv(&mut b, r, "hx3d_b", "d3", (6, 1, 3, 1), false);
    upsample(&mut b, "d3", "d3u", 19, 23);
    b.layer("Concat", &["d1_a", "d3u"], &["sides"], "0=0");
    conv(&mut b, r, "sides", "d0", (2, 1, 1, 1), false);
    b.layer("Sigmoid", &["d0"], &["out"], "");
    b.layer("Sigmoid", &["d1_b"], &["side1"], "");
    b.build()
}

#[test]
fn u2net_rsu_block() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(32);
    let net = rsu_block(&mut r);
    let x = r.tensor(4, 19, 23);
    check("RSU-like block 19x23", &handles(&be), net.clone(), x.clone(), &["out", "side1"]);

    // Storage::F32 on an f16 handle: the f32 handle's output, bit for bit.
    if !be.f16_available() {
        eprintln!("adapter {} has no SHADER_F16: Storage::F32 is the default there", be.adapter_name());
        return;
    }
    let net = Arc::new(net);
    let (i, o) = (net.blob("in").unwrap(), net.blob("out").unwrap());
    let run = |h: &GpuBackend, storage: Storage| h.prepare_with(net.clone(), storage).unwrap().run(&[(i, &x)], &[o], &Cancel::new()).unwrap().remove(0);
    let f16 = be.with_settings(|s| s.f16 = true);
    let f32 = be.with_settings(|s| s.f16 = false);
    let asked = run(&f16, Storage::F32);
    assert_eq!(asked.data, run(&f32, Storage::Default).data, "Storage::F32 on an f16 handle differs from f32 storage");
    let default = run(&f16, Storage::Default);
    let drift = asked.data.iter().zip(&default.data).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    println!("RSU-like block: f16 storage vs Storage::F32 max abs {drift:.2e}");
    assert!(drift > 0.0, "the f16 handle's default storage should be f16");
}
