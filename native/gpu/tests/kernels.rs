//! Every GPU kernel against lucent_core::reference on fresh random inputs.
//! Error metric: max|gpu - ref| / max(1, max|ref|); f32 <= 1e-4, f16 storage <= 2e-3.

mod common;
use common::{backend, conv_net, prelu_residual_net, rel_err, NetBuilder, Rng};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use lucent_gpu::ops::conv_gemm::ConvCfg;
use lucent_gpu::GpuBackend;
use std::sync::Arc;

const F32_BOUND: f32 = 1e-4;
const F16_BOUND: f32 = 2e-3;

fn variants(be: &GpuBackend) -> Vec<(String, GpuBackend, f32)> {
    let mut v = vec![("f32".to_string(), be.with_settings(|s| s.f16 = false), F32_BOUND)];
    if be.f16_available() {
        v.push(("f16".to_string(), be.with_settings(|s| s.f16 = true), F16_BOUND));
    } else {
        eprintln!("adapter {} has no SHADER_F16: f16 path not tested here", be.adapter_name());
    }
    v
}

fn check_on(name: &str, vars: &[(String, GpuBackend, f32)], net: Net, inputs: Vec<(&str, Tensor)>, outs: &[&str]) {
    let ins: Vec<(usize, Tensor)> = inputs.into_iter().map(|(n, t)| (net.blob(n).unwrap(), t)).collect();
    let out_ids: Vec<usize> = outs.iter().map(|n| net.blob(n).unwrap()).collect();
    let want = reference::run_net(&net, &ins, &out_ids).unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
    let net = Arc::new(net);
    let refs: Vec<(usize, &Tensor)> = ins.iter().map(|(i, t)| (*i, t)).collect();
    for (label, be, bound) in vars {
        let p = be.prepare(net.clone()).unwrap_or_else(|e| panic!("{name} [{label}]: prepare: {e}"));
        let got = p.run(&refs, &out_ids, &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: run: {e}"));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let e = rel_err(g, w);
            println!("{name:<40} [{label}] out{k} {:<14} rel err {e:.2e}", g.shape_string());
            assert!(e <= *bound, "{name} [{label}]: rel err {e:.3e} > {bound:.0e}");
        }
    }
}

fn check(name: &str, be: &GpuBackend, net: Net, inputs: Vec<(&str, Tensor)>, outs: &[&str]) {
    check_on(name, &variants(be), net, inputs, outs)
}

/// The convolutions here are the GPU kernels' (implicit GEMM, direct): the register-blocked
/// kernel that CPU adapters default to has its own tests (tests/rb.rs), so it is ruled out.
/// The FMA GEMM (the register-blocked kernel ruled out) in both forms, plain and pipelined.
fn check_gemm(name: &str, be: &GpuBackend, net: Net, inputs: Vec<(&str, Tensor)>, outs: &[&str]) {
    let mut vars = variants(&be.with_settings(|s| s.rb = None));
    for (label, b, bound) in variants(&be.with_settings(|s| {
        s.rb = None;
        s.pipelined = true;
    })) {
        vars.push((format!("{label} pipelined"), b, bound));
    }
    check_on(name, &vars, net, inputs, outs)
}

#[test]
fn convolution_gemm_all_tile_configs() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(1);
    let cfgs = [
        ConvCfg::new(64, 128, 16, 8),
        ConvCfg::new(64, 64, 16, 4),
        ConvCfg::new(32, 32, 16, 4),
        ConvCfg::new(16, 128, 16, 4),
        ConvCfg::new(16, 16, 8, 4),
    ];
    let mut vars = Vec::new();
    for c in cfgs.into_iter().flat_map(|c| [c, c.pipelined()]) {
        for (label, b, bound) in variants(&be) {
            let form = if c.pipelined { " pipelined" } else { "" };
            vars.push((format!("{label} {}x{}x{}/{}{form}", c.bm, c.bn, c.bk, c.tm), b.with_settings(|s| {
                s.conv = Some(c);
                s.rb = None;
            }), bound));
        }
    }
    // 3x3 pad 1 with bias + leaky ReLU; K = 19*9 not a multiple of any BK; 70 outputs not a
    // multiple of any BM; 23x17 pixels not a multiple of any BN.
    let net = conv_net(&mut r, "Convolution", 19, 70, 3, 3, 1, "4=1 9=2 -23310=1,0.1", true);
    check_on("conv3x3 19->70 leaky", &vars, net, vec![("in", r.tensor(19, 17, 23))], &["out"]);
    // 1x1 without bias, sigmoid
    let net = conv_net(&mut r, "Convolution", 32, 8, 1, 1, 1, "9=4", false);
    check_on("conv1x1 32->8 sigmoid", &vars, net.clone(), vec![("in", r.tensor(32, 9, 11))], &["out"]);
    // The kernel each form reports (the profile's name for it).
    for (pipelined, want) in [(false, "fma"), (true, "fma+pipelined")] {
        let h = be.with_settings(|s| {
            s.rb = None;
            s.pipelined = pipelined;
        });
        let p = h.prepare_gpu(Arc::new(net.clone())).unwrap();
        assert_eq!(p.conv_kernels().unwrap(), vec![want.to_string()]);
    }
}

/// f16 accumulation (`LUCENT_GPU_F16_MATH=1`: f16 workgroup tiles and vec4<f16> FMAs, packed
/// f16 math on GPUs that have it) in both forms of the FMA GEMM. Products and partial sums are
/// rounded to f16 (relative 2^-11 each, over K = 171 terms here): bound 1e-2.
#[test]
fn convolution_gemm_f16_math() {
    let Some(be) = backend() else { return };
    if !be.f16_available() {
        eprintln!("adapter {} has no SHADER_F16: f16 math not tested here", be.adapter_name());
        return;
    }
    let mut r = Rng::new(6);
    let mut vars = Vec::new();
    for c in [ConvCfg::new(64, 128, 16, 8), ConvCfg::new(32, 32, 16, 4), ConvCfg::new(16, 16, 8, 4)] {
        for c in [c, c.pipelined()] {
            let h = be.with_settings(|s| {
                s.f16 = true;
                s.f16_math = true;
                s.rb = None;
                s.conv = Some(c);
            });
            assert!(h.settings().f16_math);
            let form = if c.pipelined { " pipelined" } else { "" };
            vars.push((format!("f16 math {}x{}x{}/{}{form}", c.bm, c.bn, c.bk, c.tm), h, 1e-2));
        }
    }
    let net = conv_net(&mut r, "Convolution", 19, 70, 3, 3, 1, "4=1 9=2 -23310=1,0.1", true);
    check_on("conv3x3 19->70 leaky", &vars, net, vec![("in", r.tensor(19, 17, 23))], &["out"]);
    check_on("conv+prelu(24)+Eltwise residual", &vars, prelu_residual_net(&mut r, 24, "Eltwise"), vec![("in", r.tensor(24, 15, 18))], &["out"]);
}

#[test]
fn convolution_geometry_variants() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(2);
    // 5x3 kernel, stride 2, dilation 2, asymmetric pads, pad value, clip activation
    let net = conv_net(&mut r, "Convolution", 6, 20, 5, 3, 1, "2=2 3=2 4=1 15=3 14=2 16=0 18=0.25 9=3 -23310=2,-0.5,0.7", true);
    check_gemm("conv5x3 s2 d2 pads", &be, net, vec![("in", r.tensor(6, 21, 19))], &["out"]);
    // SAME_UPPER padding, stride 2, relu
    let net = conv_net(&mut r, "Convolution", 8, 16, 3, 3, 1, "3=2 4=-233 9=1", true);
    check_gemm("conv3x3 s2 same_upper relu", &be, net, vec![("in", r.tensor(8, 14, 15))], &["out"]);
    // grouped convolution (GEMM per group), mish
    let net = conv_net(&mut r, "ConvolutionDepthWise", 16, 32, 3, 3, 4, "4=1 9=5", true);
    check_gemm("conv grouped g4 16->32 mish", &be, net, vec![("in", r.tensor(16, 10, 12))], &["out"]);
    // depthwise (direct kernel), hardswish
    let net = conv_net(&mut r, "ConvolutionDepthWise", 12, 12, 3, 3, 12, "4=1 3=2 9=6 -23310=2,0.2,0.5", true);
    check_gemm("conv depthwise s2 hardswish", &be, net, vec![("in", r.tensor(12, 13, 16))], &["out"]);
}

#[test]
fn convolution_fused_prelu_and_residual() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(3);
    for (slopes, elt) in [(24usize, "Eltwise"), (1, "BinaryOp")] {
        check_gemm(&format!("conv+prelu({slopes})+{elt} residual"), &be, prelu_residual_net(&mut r, slopes, elt), vec![("in", r.tensor(24, 15, 18))], &["out"]);
    }
}

#[test]
fn deconvolution_and_inner_product() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(4);
    let net = conv_net(&mut r, "Deconvolution", 8, 6, 4, 4, 1, "3=2 4=1 9=1", true);
    check("deconv k4 s2 p1 relu", &be, net, vec![("in", r.tensor(8, 7, 9))], &["out"]);
    let net = conv_net(&mut r, "DeconvolutionDepthWise", 8, 8, 3, 3, 2, "3=2 2=1 18=1", true);
    check("deconv grouped k3 s2 outpad1", &be, net, vec![("in", r.tensor(8, 5, 6))], &["out"]);
    let mut b = NetBuilder::new();
    b.input("in");
    b.layer("InnerProduct", &["in"], &["out"], "0=10 1=1 2=600 9=4");
    let w = r.vec(600, 0.1);
    let bias = r.vec(10, 0.1);
    b.tagged(&w).raw(&bias);
    check("inner product 60->10 sigmoid", &be, b.build(), vec![("in", r.tensor(6, 2, 5))], &["out"]);
}

#[test]
fn unary_ops() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(5);
    let x = || Rng::new(55).tensor(5, 7, 9);
    let mut b = NetBuilder::new();
    b.input("in").layer("ReLU", &["in"], &["out"], "0=0.1");
    check("leaky relu", &be, b.build(), vec![("in", x())], &["out"]);
    let mut b = NetBuilder::new();
    b.input("in").layer("PReLU", &["in"], &["out"], "0=5");
    b.raw(&r.vec(5, 0.5));
    check("prelu per channel", &be, b.build(), vec![("in", x())], &["out"]);
    let mut b = NetBuilder::new();
    b.input("in").layer("Sigmoid", &["in"], &["s"], "").layer("TanH", &["s"], &["t"], "").layer("Clip", &["in"], &["c"], "0=-0.3 1=0.4");
    check("sigmoid, tanh, clip", &be, b.build(), vec![("in", x())], &["t", "c"]);
    let mut b = NetBuilder::new();
    b.input("in").layer("BatchNorm", &["in"], &["out"], "0=5 1=0.001");
    let (sl, mean) = (r.vec(5, 1.0), r.vec(5, 0.5));
    let var: Vec<f32> = r.vec(5, 0.5).iter().map(|v| v.abs() + 0.1).collect();
    b.raw(&sl).raw(&mean).raw(&var).raw(&r.vec(5, 0.5));
    check("batchnorm", &be, b.build(), vec![("in", x())], &["out"]);
}

#[test]
fn binary_and_eltwise_broadcasting() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(6);
    for (op, name) in [(0, "add"), (1, "sub"), (2, "mul"), (3, "div"), (4, "max"), (5, "min"), (7, "rsub"), (8, "rdiv")] {
        let mut b = NetBuilder::new();
        b.input("a").input("b").layer("BinaryOp", &["a", "b"], &["out"], &format!("0={op}"));
        let a = r.tensor(4, 6, 7);
        let mut bb = r.tensor(4, 6, 7);
        if op == 3 || op == 8 {
            for v in bb.data.iter_mut() {
                *v = v.signum() * (v.abs() + 0.5);
            }
        }
        let a2 = if op == 8 { bb.clone() } else { a };
        let b2 = if op == 8 { r.tensor(4, 6, 7) } else { bb };
        check(&format!("binary {name} same shape"), &be, b.build(), vec![("a", a2), ("b", b2)], &["out"]);
    }
    // 3-D op 1-D per channel, and the vector first
    let mut b = NetBuilder::new();
    b.input("a").input("v").layer("BinaryOp", &["a", "v"], &["o1"], "0=2").layer("BinaryOp", &["v", "a"], &["o2"], "0=1");
    check("binary 3d*1d per channel", &be, b.build(), vec![("a", r.tensor(4, 5, 6)), ("v", Tensor::vector(r.vec(4, 1.0)))], &["o1", "o2"]);
    // 3-D op (1,h,w) and (c,1,1)
    let mut b = NetBuilder::new();
    b.input("a").input("p").input("q").layer("BinaryOp", &["a", "p"], &["o1"], "0=0").layer("BinaryOp", &["a", "q"], &["o2"], "0=4");
    check("binary 3d op (1,h,w) / (c,1,1)", &be, b.build(), vec![("a", r.tensor(3, 5, 6)), ("p", r.tensor(1, 5, 6)), ("q", r.tensor(3, 1, 1))], &["o1", "o2"]);
    // scalar forms
    let mut b = NetBuilder::new();
    b.input("a").layer("BinaryOp", &["a"], &["o1"], "0=7 1=1 2=0.75").layer("BinaryOp", &["a"], &["o2"], "0=2 1=1 2=-1.5");
    check("binary with scalar", &be, b.build(), vec![("a", r.tensor(3, 4, 5))], &["o1", "o2"]);
    // eltwise with three inputs
    for (op, name) in [("0=0", "prod"), ("0=1 -23301=3,0.5,-1.0,2.0", "sum coeffs"), ("0=2", "max")] {
        let mut b = NetBuilder::new();
        b.input("a").input("b").input("c").layer("Eltwise", &["a", "b", "c"], &["out"], op);
        check(&format!("eltwise {name}"), &be, b.build(), vec![("a", r.tensor(3, 4, 5)), ("b", r.tensor(3, 4, 5)), ("c", r.tensor(3, 4, 5))], &["out"]);
    }
}

#[test]
fn layout_ops() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(7);
    for mode in [0, 1] {
        let mut b = NetBuilder::new();
        b.input("in").layer("PixelShuffle", &["in"], &["out"], &format!("0=3 1={mode}"));
        check(&format!("pixel shuffle x3 mode {mode}"), &be, b.build(), vec![("in", r.tensor(18, 4, 5))], &["out"]);
    }
    for axis in [0, 1, 2, -1] {
        let mut b = NetBuilder::new();
        b.input("a").input("b").layer("Concat", &["a", "b"], &["out"], &format!("0={axis}"));
        let (x, y) = match axis {
            0 => (r.tensor(3, 4, 5), r.tensor(2, 4, 5)),
            1 => (r.tensor(3, 4, 5), r.tensor(3, 2, 5)),
            _ => (r.tensor(3, 4, 5), r.tensor(3, 4, 3)),
        };
        check(&format!("concat axis {axis}"), &be, b.build(), vec![("a", x), ("b", y)], &["out"]);
    }
    // Channel concat runs as buffer copies where offsets and sizes are whole 4-byte words and
    // through the copy kernel where not (f16 with odd planes): both in one layer here, also
    // with per-step profiling on (a copy step gets its own timestamp passes).
    for profile in [false, true] {
        let mut b = NetBuilder::new();
        b.input("a").input("b").input("c").layer("Concat", &["a", "b", "c"], &["out"], "0=0");
        let ins = vec![("a", r.tensor(2, 3, 5)), ("b", r.tensor(1, 3, 5)), ("c", r.tensor(2, 3, 5))];
        let be = be.with_settings(|s| s.profile = profile);
        check(&format!("concat 3 inputs, odd planes, profile {profile}"), &be, b.build(), ins, &["out"]);
    }
    let mut b = NetBuilder::new();
    b.input("in").layer("Crop", &["in"], &["out"], "0=2 1=1 13=1 3=5 4=4 5=2");
    check("crop offsets + sizes", &be, b.build(), vec![("in", r.tensor(4, 9, 10))], &["out"]);
    let mut b = NetBuilder::new();
    b.input("in").layer("Crop", &["in"], &["out"], "-23309=2,1,-6 -23310=2,-1,-1 -23311=2,0,2");
    check("crop starts/ends/axes", &be, b.build(), vec![("in", r.tensor(4, 9, 10))], &["out"]);
    let mut b = NetBuilder::new();
    b.input("in").input("ref").layer("Crop", &["in", "ref"], &["out"], "0=1 1=2");
    check("crop to reference blob", &be, b.build(), vec![("in", r.tensor(4, 9, 10)), ("ref", r.tensor(4, 5, 6))], &["out"]);
    for order in 0..6 {
        let mut b = NetBuilder::new();
        b.input("in").layer("Permute", &["in"], &["out"], &format!("0={order}"));
        check(&format!("permute order {order}"), &be, b.build(), vec![("in", r.tensor(3, 4, 5))], &["out"]);
    }
    let mut b = NetBuilder::new();
    b.input("in")
        .layer("Reshape", &["in"], &["r"], "0=-1 1=6")
        .layer("Permute", &["r"], &["p"], "0=1")
        .layer("Softmax", &["p"], &["s1"], "0=1")
        .layer("Flatten", &["in"], &["f"], "")
        .layer("Softmax", &["in"], &["s0"], "0=0")
        .layer("Softmax", &["in"], &["s2"], "0=-2");
    check("reshape/2-D permute/flatten/softmax", &be, b.build(), vec![("in", r.tensor(4, 3, 6))], &["s1", "f", "s0", "s2"]);
}

#[test]
fn interp_ops() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(8);
    for (p, name) in [
        ("0=1 1=2.0 2=2.0", "nearest x2"),
        ("0=1 3=11 4=7", "nearest to 7x11"),
        ("0=2 1=2.0 2=3.0", "bilinear x2,x3"),
        ("0=2 3=5 4=4 6=1", "bilinear down align_corner"),
        ("0=3 1=2.0 2=2.0", "bicubic x2"),
        ("0=3 3=13 4=17 6=1", "bicubic to 17x13 align_corner"),
    ] {
        let mut b = NetBuilder::new();
        b.input("in").layer("Interp", &["in"], &["out"], p);
        check(&format!("interp {name}"), &be, b.build(), vec![("in", r.tensor(3, 6, 7))], &["out"]);
    }
}

#[test]
fn pooling_ops() {
    let Some(be) = backend() else { return };
    let mut r = Rng::new(9);
    for (p, name) in [
        ("0=0 1=3 2=2 3=1", "max 3x3 s2 p1 full"),
        ("0=1 1=3 2=2 5=0", "avg 3x3 s2 full (tail pad) exclude pad"),
        ("0=1 1=2 2=2 3=1 6=1", "avg 2x2 s2 p1 include pad"),
        ("0=0 1=2 11=3 2=1 12=2 5=1", "max 2x3 s(1,2) valid"),
        ("0=1 1=3 2=2 5=2", "avg 3x3 s2 same upper"),
        ("0=0 4=1", "global max"),
        ("0=1 4=1", "global avg"),
        ("0=1 7=1 8=3 18=2", "adaptive avg 3x2"),
        ("0=0 7=1 8=4 18=4", "adaptive max 4x4"),
    ] {
        let mut b = NetBuilder::new();
        b.input("in").layer("Pooling", &["in"], &["out"], p);
        check(&format!("pool {name}"), &be, b.build(), vec![("in", r.tensor(3, 9, 10))], &["out"]);
    }
}
