//! RIFE v4.6 (`shared/models/interp/rife-v4.6/flownet`, three inputs: in0 = frame 0, in1 =
//! frame 1, in2 = a 1-channel plane holding the timestep) as a whole network, on the reference
//! interpreter and the CPU backend.
//!
//! Golden: `golden/rife_v46_ost009_t025_ref.f32` = out0 for the frames `rife_ost009_f0` /
//! `rife_ost009_f1` of `golden/inputs.json` (two 128x96 crops of photos/OST_009.png, the second
//! 4 px right and 2 px down of the first) at t = 0.25, made by the real ncnn (PyPI `ncnn`
//! 1.0.20261020, CPU, fp32 storage and arithmetic) with `rife.Warp` as a float64 numpy custom layer
//! (see golden/README.md). Bounds (max |diff| on 0..1 values, 1/8 of an 8-bit level): reference
//! and CPU vs golden 5e-4, CPU vs reference 5e-4 (measured: 1.4e-4, 7.6e-5, 1.2e-4: f32
//! summation order in the convolutions, amplified where a warp samples a steep edge).
mod common;
#[path = "common/golden_input.rs"]
mod golden_input;
use common::shared_models;
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Code, Tensor};
use std::path::PathBuf;
use std::sync::Arc;

fn rife() -> Arc<Net> {
    let stem = shared_models().join("interp/rife-v4.6/flownet");
    Arc::new(Net::load_stem(&stem).unwrap_or_else(|e| panic!("cannot load {}: {e}", stem.display())))
}

fn frame(name: &str) -> Option<Tensor> {
    let gi = golden_input::golden_input(name)?;
    Some(Tensor::from_vec(3, gi.h, gi.w, gi.chw_f32()))
}

fn timestep(t: f32, h: usize, w: usize) -> Tensor {
    Tensor::from_vec(1, h, w, vec![t; h * w])
}

fn inputs(net: &Net, f0: &Tensor, f1: &Tensor, t: f32) -> Vec<(usize, Tensor)> {
    vec![
        (net.blob("in0").unwrap(), f0.clone()),
        (net.blob("in1").unwrap(), f1.clone()),
        (net.blob("in2").unwrap(), timestep(t, f0.h, f0.w)),
    ]
}

fn cpu_run(net: &Arc<Net>, ins: &[(usize, Tensor)]) -> lucent_core::Result<Tensor> {
    let p = CpuBackend::new(None).prepare(net.clone())?;
    let refs: Vec<(usize, &Tensor)> = ins.iter().map(|(b, t)| (*b, t)).collect();
    Ok(p.run(&refs, &[net.blob("out0").unwrap()], &Cancel::new())?.remove(0))
}

fn max_abs(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!((a.c, a.h, a.w), (b.c, b.h, b.w));
    a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn psnr(a: &Tensor, b: &Tensor) -> f64 {
    let mse: f64 = a.data.iter().zip(&b.data).map(|(x, y)| ((x.clamp(0.0, 1.0) - y.clamp(0.0, 1.0)) as f64).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (1.0 / mse.max(1e-20)).log10()
}

fn golden() -> Tensor {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/rife_v46_ost009_t025_ref.f32");
    let b = std::fs::read(&p).unwrap();
    Tensor::from_vec(3, 96, 128, b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[test]
fn golden_reference_and_cpu() {
    let (Some(f0), Some(f1)) = (frame("rife_ost009_f0"), frame("rife_ost009_f1")) else { return };
    let net = rife();
    let ins = inputs(&net, &f0, &f1, 0.25);
    let want = golden();
    let t0 = std::time::Instant::now();
    let r = reference::run_net(&net, &ins, &[net.blob("out0").unwrap()]).unwrap().remove(0);
    let tr = t0.elapsed();
    let t0 = std::time::Instant::now();
    let c = cpu_run(&net, &ins).unwrap();
    let tc = t0.elapsed();
    let (er, ec, ecr) = (max_abs(&r, &want), max_abs(&c, &want), max_abs(&c, &r));
    println!(
        "rife golden 128x96 t=0.25: reference max|d| {er:.2e} ({:.1} dB), cpu {ec:.2e} ({:.1} dB), cpu vs reference {ecr:.2e}; reference {tr:?}, cpu {tc:?}",
        psnr(&r, &want),
        psnr(&c, &want)
    );
    assert!(er <= 5e-4, "reference vs golden {er:e}");
    assert!(ec <= 5e-4, "cpu vs golden {ec:e}");
    assert!(ecr <= 5e-4, "cpu vs reference {ecr:e}");
}

/// Two identical frames interpolate to (nearly) that frame, at any t. The model itself is not
/// exact here: ncnn gives the same 46.1 dB (t = 0.5) and 42.1 dB (t = 0.125) on this crop, its
/// flows on a static 128x96 picture being small but not zero; bound 40 dB and 0.1.
#[test]
fn identical_frames_give_the_frame() {
    let Some(f0) = frame("rife_ost009_f0") else { return };
    let net = rife();
    for t in [0.5f32, 0.125] {
        let out = cpu_run(&net, &inputs(&net, &f0, &f0, t)).unwrap();
        let (d, p) = (max_abs(&out, &f0), psnr(&out, &f0));
        println!("identical frames, t={t}: max|d| {d:.2e}, {p:.1} dB");
        assert!(p >= 40.0 && d <= 0.1, "t={t}: {p:.1} dB, max {d}");
    }
}

/// The timestep plane matters: t near 0 gives (nearly) frame 0, near 1 frame 1.
#[test]
fn timestep_moves_between_the_frames() {
    let (Some(f0), Some(f1)) = (frame("rife_ost009_f0"), frame("rife_ost009_f1")) else { return };
    let net = rife();
    let near0 = cpu_run(&net, &inputs(&net, &f0, &f1, 0.02)).unwrap();
    let near1 = cpu_run(&net, &inputs(&net, &f0, &f1, 0.98)).unwrap();
    let (a, b) = (psnr(&near0, &f0), psnr(&near0, &f1));
    let (c, d) = (psnr(&near1, &f1), psnr(&near1, &f0));
    println!("t=0.02: {a:.1} dB to frame 0, {b:.1} to frame 1; t=0.98: {c:.1} to frame 1, {d:.1} to frame 0");
    assert!(a > b + 6.0 && c > d + 6.0);
}

/// Sides must be multiples of 32: the coarsest block works at 1/32 (an Interp to 1/8 then two
/// stride-2 convolutions) and its flow is brought back up by exact factors, so any other side
/// gives blobs that no longer add up. The error is a clean invalid_argument.
#[test]
fn sides_must_be_multiples_of_32() {
    let net = rife();
    for (h, w) in [(80, 128), (96, 112)] {
        let f = Tensor::zeros(3, h, w);
        let e = cpu_run(&net, &inputs(&net, &f, &f, 0.5)).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument, "{h}x{w}: {e}");
        let e = reference::run_net(&net, &inputs(&net, &f, &f, 0.5), &[net.blob("out0").unwrap()]).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument, "{h}x{w}: {e}");
    }
    let f = Tensor::zeros(3, 64, 32);
    assert!(cpu_run(&net, &inputs(&net, &f, &f, 0.5)).is_ok());
}
