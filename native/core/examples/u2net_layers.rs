//! Probe: U²-Net's (full u2net, 320x320) 3x3 conv layers one by one on the CPU backend, each shape as a
//! one-conv net (ReLU fused), under the measured policy, pinned im2col and pinned Winograd, alternating,
//! median (or with `--min` the fastest) of `--runs` (default 5). Prints per-layer medians and the totals per stage, so one sees where a
//! network run's conv time goes and which path each layer takes.
//!
//! `cargo run --release -p lucent-core --example u2net_layers -- [--threads 2] [--runs 5] [--only SUBSTR] [--small] [--min] [--cpu] [--policy P]`
//! (`--small`: u2netp's layers instead.)
use lucent_core::cpu::{ConvPolicy, CpuBackend, CpuOptions};
use lucent_core::ncnn::Net;
use lucent_core::{Backend, Cancel, Tensor};
use std::sync::Arc;
use std::time::Instant;

/// (stage, ic, oc, side, dilation)
type L = (&'static str, usize, usize, usize, usize);

/// An RSU-L block (L = `depth` levels of 3x3 convs, the innermost dilated by 2) at side `s`: in -> out
/// through `mid` channels.
fn rsu(v: &mut Vec<L>, name: &'static str, depth: usize, ic: usize, mid: usize, oc: usize, s: usize) {
    v.push((name, ic, oc, s, 1));
    v.push((name, oc, mid, s, 1));
    for l in 1..depth - 1 {
        v.push((name, mid, mid, s >> l, 1));
    }
    v.push((name, mid, mid, s >> (depth - 2), 2));
    for l in (1..depth - 1).rev() {
        v.push((name, 2 * mid, mid, s >> l, 1));
    }
    v.push((name, 2 * mid, oc, s, 1));
}

/// RSU-4F at side `s`: dilations 1, 2, 4, 8, then 4, 2, 1 on the way back.
fn rsu4f(v: &mut Vec<L>, name: &'static str, ic: usize, mid: usize, oc: usize, s: usize) {
    v.push((name, ic, oc, s, 1));
    v.push((name, oc, mid, s, 1));
    v.push((name, mid, mid, s, 2));
    v.push((name, mid, mid, s, 4));
    v.push((name, mid, mid, s, 8));
    v.push((name, 2 * mid, mid, s, 4));
    v.push((name, 2 * mid, mid, s, 2));
    v.push((name, 2 * mid, oc, s, 1));
}

fn layers(small: bool) -> Vec<L> {
    let mut v = Vec::new();
    let s = 320;
    if small {
        rsu(&mut v, "en1", 7, 3, 16, 64, s);
        rsu(&mut v, "en2", 6, 64, 16, 64, s / 2);
        rsu(&mut v, "en3", 5, 64, 16, 64, s / 4);
        rsu(&mut v, "en4", 4, 64, 16, 64, s / 8);
        rsu4f(&mut v, "en5", 64, 16, 64, s / 16);
        rsu4f(&mut v, "en6", 64, 16, 64, s / 32);
        rsu4f(&mut v, "de5", 128, 16, 64, s / 16);
        rsu(&mut v, "de4", 4, 128, 16, 64, s / 8);
        rsu(&mut v, "de3", 5, 128, 16, 64, s / 4);
        rsu(&mut v, "de2", 6, 128, 16, 64, s / 2);
        rsu(&mut v, "de1", 7, 128, 16, 64, s);
        for (i, c) in [64, 64, 64, 64, 64, 64].into_iter().enumerate() {
            v.push(("side", c, 1, s >> i, 1));
        }
    } else {
        rsu(&mut v, "en1", 7, 3, 32, 64, s);
        rsu(&mut v, "en2", 6, 64, 32, 128, s / 2);
        rsu(&mut v, "en3", 5, 128, 64, 256, s / 4);
        rsu(&mut v, "en4", 4, 256, 128, 512, s / 8);
        rsu4f(&mut v, "en5", 512, 256, 512, s / 16);
        rsu4f(&mut v, "en6", 512, 256, 512, s / 32);
        rsu4f(&mut v, "de5", 1024, 256, 512, s / 16);
        rsu(&mut v, "de4", 4, 1024, 128, 256, s / 8);
        rsu(&mut v, "de3", 5, 512, 64, 128, s / 4);
        rsu(&mut v, "de2", 6, 256, 32, 64, s / 2);
        rsu(&mut v, "de1", 7, 128, 16, 64, s);
        for (i, c) in [64, 64, 128, 256, 512, 512].into_iter().enumerate() {
            v.push(("side", c, 1, s >> i, 1));
        }
    }
    v
}

fn one_conv(ic: usize, oc: usize, d: usize) -> Net {
    let mut bin = Vec::new();
    bin.extend_from_slice(&0u32.to_le_bytes());
    let mut seed = (ic * 7919 + oc * 31 + d) as u64 | 1;
    let mut r = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let scale = 1.0 / ((ic * 9) as f32).sqrt();
    for _ in 0..oc * ic * 9 {
        bin.extend_from_slice(&(r() * scale).to_le_bytes());
    }
    for _ in 0..oc {
        bin.extend_from_slice(&(r() * 0.1).to_le_bytes());
    }
    let text = format!("7767517\n2 2\nInput in 0 1 data\nConvolution conv 1 1 data out 0={oc} 1=3 2={d} 4={d} 5=1 6={} 9=1\n", oc * ic * 9);
    Net::from_parts(&text, &bin).expect("net")
}

/// CPU time of every thread of the process so far, in ms (/proc/self/task/*/schedstat).
fn cpu_ms() -> f64 {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
                .sum::<f64>()
                / 1e6
        })
        .unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |n: &str| args.iter().position(|a| a == n).and_then(|i| args.get(i + 1)).cloned();
    let threads: usize = arg("--threads").and_then(|s| s.parse().ok()).unwrap_or(2);
    let runs: usize = arg("--runs").and_then(|s| s.parse().ok()).unwrap_or(5);
    let only = arg("--only");
    let small = args.iter().any(|a| a == "--small");
    // The fastest run rather than the median (on a loaded machine the least disturbed one).
    let use_min = args.iter().any(|a| a == "--min");
    // Process CPU time per run instead of wall time (less disturbed by other processes' load; with
    // more than one thread it counts the pool's idle spinning too).
    let use_cpu = args.iter().any(|a| a == "--cpu");
    let opts = CpuOptions { threads: Some(threads), ..Default::default() };
    let policies = [("measure", ConvPolicy::Measure), ("im2col", ConvPolicy::Im2col), ("winograd", ConvPolicy::Winograd)];
    // `--policy NAME`: time only that one (the other columns repeat it).
    let pick = arg("--policy");
    let policies: Vec<_> = policies.iter().map(|&(_, p)| pick.as_deref().map_or(p, |q| policies.iter().find(|x| x.0 == q).expect("--policy measure|im2col|winograd").1)).map(|p| (p, ())).collect();
    let backends: Vec<CpuBackend> = policies.iter().map(|&(p, _)| CpuBackend::with_options(&opts).with_policy(p)).collect();
    let mut all = layers(small);
    if let Some(o) = &only {
        all.retain(|l| format!("{} {}x{} @{} d{}", l.0, l.1, l.2, l.3, l.4).contains(o.as_str()));
    }
    // Distinct shapes, with how often each occurs.
    let mut shapes: Vec<(L, usize)> = Vec::new();
    for l in &all {
        match shapes.iter_mut().find(|(s, _)| (s.1, s.2, s.3, s.4) == (l.1, l.2, l.3, l.4)) {
            Some((_, n)) => *n += 1,
            None => shapes.push((*l, 1)),
        }
    }
    let mut tot = [0.0f64; 3];
    let mut by_stage: Vec<(&str, [f64; 3])> = Vec::new();
    println!("{:<6} {:>5} {:>5} {:>4} {:>2} {:>2} {:>9} {:>9} {:>9} {:>7}", "stage", "ic", "oc", "side", "d", "n", "measure", "im2col", "winograd", "GF/s");
    for ((stage, ic, oc, s, d), n) in shapes {
        let net = Arc::new(one_conv(ic, oc, d));
        let prepared: Vec<_> = backends.iter().map(|b| b.prepare(net.clone()).expect("prepare")).collect();
        let x = Tensor::from_vec(ic, s, s, (0..ic * s * s).map(|i| ((i * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0).collect());
        let (inb, outb) = (net.input_blobs()[0], net.output_blobs()[0]);
        let mut t = vec![Vec::new(); 3];
        for rep in 0..=runs {
            for (k, p) in prepared.iter().enumerate() {
                let (t0, c0) = (Instant::now(), cpu_ms());
                p.run(&[(inb, &x)], &[outb], &Cancel::new()).expect("run");
                if rep > 0 {
                    t[k].push(if use_cpu { cpu_ms() - c0 } else { t0.elapsed().as_secs_f64() * 1e3 });
                }
            }
        }
        let med: Vec<f64> = t
            .iter_mut()
            .map(|v| {
                v.sort_by(|a, b| a.total_cmp(b));
                if use_min {
                    v[0]
                } else {
                    v[v.len() / 2]
                }
            })
            .collect();
        let gf = 2.0 * (ic * oc * 9 * s * s) as f64 / med[0] / 1e6;
        println!("{stage:<6} {ic:>5} {oc:>5} {s:>4} {d:>2} {n:>2} {:>9.3} {:>9.3} {:>9.3} {gf:>7.1}", med[0], med[1], med[2]);
        // Every occurrence of the shape, credited to the stages it occurs in.
        for l in all.iter().filter(|l| (l.1, l.2, l.3, l.4) == (ic, oc, s, d)) {
            let e = match by_stage.iter_mut().position(|(st, _)| *st == l.0) {
                Some(i) => &mut by_stage[i].1,
                None => {
                    by_stage.push((l.0, [0.0; 3]));
                    &mut by_stage.last_mut().unwrap().1
                }
            };
            for k in 0..3 {
                e[k] += med[k];
                tot[k] += med[k];
            }
        }
    }
    for (st, e) in &by_stage {
        println!("stage {st:<6} measure {:>8.2} im2col {:>8.2} winograd {:>8.2}", e[0], e[1], e[2]);
    }
    println!("total        measure {:>8.2} im2col {:>8.2} winograd {:>8.2} (ms)", tot[0], tot[1], tot[2]);
}
