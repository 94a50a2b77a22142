//! Time per run of the transformer ops at DAT-light x2's shapes on a 128 x 128 input (60 channels,
//! 6 heads; spatial branches of 3 heads, d = 10, 8x32 and 32x8 windows padded to 32), and of HAT's
//! overlapping cross-attention at its real shape (180 channels, 6 heads, window 16, overlap window
//! 24, with bias) on 64 x 64 and 128 x 128, on the CPU backend and on the plain reference (figures
//! only; not a test).
//!
//! ```text
//! cargo run --release -p lucent-core --example attention_bench -- [--threads 2] [--runs 5] [--size 128]
//!     [--only Overlap] [--isa avx2] [--cpu-only]
//! ```
//!
//! `--only`: the cases whose name contains it; `--isa`: an ISA level (default the best);
//! `--cpu-only`: no reference runs (for profiling).
//!
//! The whole network: `cargo run --release -p lucent-models --example own_models_bench --
//! --model data/test-models/sr/dat-light/DAT_light_x2.pth --size 128 --threads 2 --runs 3` (a
//! small HAT: `--model native/models/tests/goldens/hat_x4_w8_o50_identity.0.safetensors --size 64`).
use lucent_core::cpu::{CpuBackend, Isa};
use lucent_core::ncnn::model::{Layer, Op, OverlapAttention, WindowAttention};
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Tensor};
use std::sync::Arc;
use std::time::Instant;

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Deterministic values in [-1, 1).
fn tensor(c: usize, h: usize, w: usize, seed: u64) -> Tensor {
    let mut s = seed | 1;
    let data = (0..c * h * w)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    Tensor::from_vec(c, h, w, data)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads = arg(&args, "--threads").unwrap_or(2);
    let runs = arg(&args, "--runs").unwrap_or(5).max(1);
    let size = arg(&args, "--size").unwrap_or(128);
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned().unwrap_or_default();
    let (c, heads, d) = (60, 3, 10);
    let n = 8 * 32;
    let wa = |win_h: usize, win_w: usize, shift: bool| WindowAttention {
        heads,
        win_h,
        win_w,
        shift_y: if shift { win_h / 2 } else { 0 },
        shift_x: if shift { win_w / 2 } else { 0 },
        pad_multiple: 32,
        scale: 1.0 / (d as f32).sqrt(),
        bias: tensor(1, 1, heads * n * n, 9).data,
        masked: shift,
        mask_value: -100.0,
    };
    let ones = vec![1.0; c];
    // HAT's OCAB: 180 channels (input q, k, v: 540), 6 heads of 30, 16x16 query windows, 24x24 keys.
    let oca = || Op::OverlapAttention(OverlapAttention { heads: 6, window: 16, overlap: 24, scale: 1.0 / 30f32.sqrt(), bias: tensor(1, 1, 6 * 256 * 576, 11).data });
    let cases: Vec<(&str, Op, usize, usize)> = vec![
        ("LayerNorm (60 ch)", Op::LayerNorm { weight: ones.clone(), bias: vec![0.0; c], eps: 1e-5 }, c, size),
        ("GELU (120 ch)", Op::Gelu, 2 * c, size),
        ("WindowAttention 8x32 (3 heads, d 10)", Op::WindowAttention(wa(8, 32, false)), 3 * heads * d, size),
        ("WindowAttention 32x8 shifted + masked", Op::WindowAttention(wa(32, 8, true)), 3 * heads * d, size),
        ("ChannelAttention (6 heads, d 10)", Op::ChannelAttention { heads: 6, temperature: vec![1.0; 6] }, 3 * c, size),
        ("PadToMultiple 32 (60 ch, +1 px)", Op::PadToMultiple { multiple: 32 }, c, size + 1),
        ("OverlapAttention 16/24 (6 x 30) 64x64", oca(), 540, 64),
        ("OverlapAttention 16/24 (6 x 30) 128x128", oca(), 540, 128),
    ];
    let isa = args.iter().position(|a| a == "--isa").and_then(|i| args.get(i + 1)).and_then(|v| Isa::parse(v)).unwrap_or_else(Isa::best);
    let be = CpuBackend::with_isa(Some(threads), isa).expect("this ISA level");
    println!("{size}x{size} (unless named), {threads} threads, isa {}, median of {runs} runs (ms):", be.isa());
    for (name, op, ch, side) in cases.into_iter().filter(|k| k.0.contains(&only)) {
        let x = tensor(ch, side, side, 7);
        let input = Layer { name: "in".into(), kind: "Input".into(), op: Op::Input { w: side as i32, h: side as i32, c: ch as i32 }, bottoms: vec![], tops: vec![0] };
        let layer = Layer { name: "op".into(), kind: name.into(), op, bottoms: vec![0], tops: vec![1] };
        let net = Arc::new(Net::from_layers(vec![input, layer], vec!["in".into(), "out".into()]));
        let p = be.prepare(net.clone()).expect("prepare");
        let time = |f: &dyn Fn()| {
            f();
            median((0..runs).map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            }).collect())
        };
        let cpu = time(&|| {
            p.run(&[(0, &x)], &[1], &Cancel::new()).expect("cpu run");
        });
        if args.iter().any(|a| a == "--cpu-only") {
            println!("  {name:40} cpu {cpu:8.2}");
            continue;
        }
        let reference = time(&|| {
            reference::run_net(&net, &[(0, x.clone())], &[1]).expect("reference run");
        });
        println!("  {name:40} cpu {cpu:8.2}   reference {reference:8.2}   x{:.1}", reference / cpu);
    }
}
