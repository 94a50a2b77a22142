//! Time an ONNX model on Lucent's CPU backend: `cargo run --release -p lucent-models --example
//! onnx_bench -- MODEL.onnx [THREADS] [RUNS] [SIDE]` (input 3 x SIDE x SIDE, default 320, values
//! 0.5; SIDE is ignored for a static input). Prints each run and the median, for comparison with
//! onnxruntime at the same thread count (scripts/onnx-bench.py).

use lucent_core::cpu::CpuBackend;
use lucent_core::{Cancel, Prepared, Tensor};
use lucent_models::{load, Limits};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("MODEL.onnx");
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let runs: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut side: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(320);
    let bytes = std::fs::read(path).expect("read the model");
    let m = load(&bytes, path, &Limits::default()).expect("load");
    if let Some(s) = m.info.params.get("input_size") {
        side = s.split('x').next().and_then(|v| v.parse().ok()).unwrap_or(side);
    }
    let net = Arc::new(m.net);
    let (i, o) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
    let t0 = std::time::Instant::now();
    let prepared = CpuBackend::new(Some(threads)).prepare_net(net.clone()).expect("prepare");
    println!("prepare {:.3} s", t0.elapsed().as_secs_f64());
    let x = Tensor::from_vec(m.info.in_channels, side, side, vec![0.5; m.info.in_channels * side * side]);
    let mut times = Vec::new();
    for r in 0..runs + 1 {
        let t = std::time::Instant::now();
        prepared.run(&[(i, &x)], &[o], &Cancel::new()).expect("run");
        let s = t.elapsed().as_secs_f64();
        println!("run {r}{} {s:.3} s", if r == 0 { " (warm-up)" } else { "" });
        if r > 0 {
            times.push(s);
        }
    }
    times.sort_by(f64::total_cmp);
    println!("lucent cpu, {threads} threads, {side}x{side}: median {:.3} s", times[times.len() / 2]);
}
