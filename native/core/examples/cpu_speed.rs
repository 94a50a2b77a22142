//! Time a model on the CPU backend: `cargo run --release -p lucent-core --example cpu_speed -- [stem] [size] [threads] [runs]`
//! Default: realesr-general-x4v3 on a 256x256 input (padded by 10 px like the real pipeline: 276x276).
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::{Net, Op};
use lucent_core::{Backend, Cancel, Tensor};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models");
    let stem = args.get(1).cloned().unwrap_or_else(|| "sr/realesr-general-x4v3".into());
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(276);
    let threads: Option<usize> = args.get(3).and_then(|s| s.parse().ok());
    let runs: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(3);
    let net = Arc::new(Net::load_stem(&models.join(&stem)).expect("load"));
    let be = CpuBackend::new(threads);
    let prepared = be.prepare(net.clone()).expect("prepare");
    let inb = net.input_blobs()[0];
    let outb = net.output_blobs()[0];
    let mut seed = 12345u64;
    let data: Vec<f32> = (0..3 * size * size)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let x = Tensor::from_vec(3, size, size, data);
    // MACs: run the reference shape logic by a dry pass over conv layers (stride 1 same-size nets).
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let o = prepared.run(&[(inb, &x)], &[outb], &Cancel::new()).expect("run");
        let dt = t.elapsed().as_secs_f64();
        best = best.min(dt);
        println!("run: {:.1} ms", dt * 1e3);
        out = Some(o);
    }
    let o = &out.unwrap()[0];
    // FLOPs of the convs, assuming each conv runs at the input resolution or, after an
    // upsampling layer, at the scaled one (true for the SR nets here).
    let mut scale2 = 1.0f64;
    let mut macs = 0.0f64;
    for l in &net.layers {
        match &l.op {
            Op::Conv(c) => macs += c.macs_per_output_pixel() as f64 * (size * size) as f64 * scale2 / (c.stride_w * c.stride_h) as f64,
            Op::Interp(i) if l.bottoms.len() == 1 && matches!(net.layers.iter().find(|m| m.tops.contains(&l.bottoms[0])).map(|m| &m.op), Some(Op::Conv(_)) | Some(Op::ReLU { .. }) | Some(Op::PReLU { .. })) => scale2 *= (i.height_scale * i.width_scale) as f64,
            _ => {}
        }
    }
    println!(
        "{stem} {size}x{size} -> {}x{}x{}, threads {}: best {:.1} ms, {:.1} GFLOP conv, {:.1} GFLOP/s",
        o.c, o.h, o.w, be.threads(), best * 1e3, 2.0 * macs / 1e9, 2.0 * macs / 1e9 / best
    );
}
