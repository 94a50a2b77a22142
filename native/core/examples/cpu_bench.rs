//! CPU backend benchmark peer for the side-by-side with ONNX Runtime (bench/onnx/side-by-side.mjs).
//!
//! `cargo run --release -p lucent-core --example cpu_bench -- [--stem sr/realesr-general-x4v3] [--size 276]
//!  [--threads 2] [--dump DIR] [--runs N | --serve] [--precision fp32,bf16] [--image PHOTO]`
//!
//! `--precision` (`fp32`, `bf16`, `int8`, `auto`; default fp32): with one value, the backend runs it;
//! with several (comma-separated), one backend per precision is prepared and the timed runs
//! alternate between them (same process, same input), then each median, its ratio to the first's
//! and the PSNR of each output against the first's (8-bit, clamped to 0..1) are printed. `--image`
//! takes the input from a photo (centre crop, size x size) instead of the pseudo-random tensor.
//! `--serve` uses the first precision. `--bf16-kernel amx|avx512bf16|emulated` caps the bf16 kernel
//! (e.g. the AVX512-BF16 one on an AMX machine). `--phases` (with several precisions): after the
//! timed runs, runs each precision `--runs` more times and prints the mean time per run of the bf16
//! and int8 convs' phases (conversion of the input, kernels, epilogue); `--profile` prints the
//! backend's per-op-kind times of every run.
//! The input is a deterministic pseudo-random 3 x size x size tensor in 0..1. `--dump DIR` writes it and
//! our output as raw little-endian f32 (`DIR/<name>.in.f32`, `DIR/<name>.out.f32`) so another engine
//! can run the same input and compare. `--runs N` times N runs (after one warm-up) and prints each and
//! the median; `--serve` prints `ready <gflop>` and then runs once per `run` line on stdin, answering
//! `ms <milliseconds>`, so a driver can alternate us with another engine in one process tree.
use lucent_core::cpu::{Bf16Kernel, CpuBackend, CpuOptions, Int8Kernel, Precision};
use lucent_core::ncnn::{Net, Op};
use lucent_core::{Backend, Cancel, Tensor};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// Direct-convolution FLOPs (2 per MAC) of the net's convs, for SR nets whose convs run at the
/// input resolution or, after an upsampling Interp/PixelShuffle fed by a conv, the scaled one.
fn conv_gflop(net: &Net, size: usize) -> f64 {
    let mut scale2 = 1.0f64;
    let mut macs = 0.0f64;
    for l in &net.layers {
        match &l.op {
            Op::Conv(c) => macs += c.macs_per_output_pixel() as f64 * (size * size) as f64 * scale2 / (c.stride_w * c.stride_h) as f64,
            Op::Interp(i)
                if l.bottoms.len() == 1
                    && matches!(
                        net.layers.iter().find(|m| m.tops.contains(&l.bottoms[0])).map(|m| &m.op),
                        Some(Op::Conv(_)) | Some(Op::ReLU { .. }) | Some(Op::PReLU { .. }) | Some(Op::BinaryOp { .. })
                    ) =>
            {
                scale2 *= (i.height_scale * i.width_scale) as f64
            }
            _ => {}
        }
    }
    2.0 * macs / 1e9
}

/// CPU time of this process so far, in ms: the sum of its threads' run times from
/// /proc/self/task/*/schedstat (nanoseconds), else user + system from /proc/self/stat (10 ms ticks);
/// under a loaded machine it tracks the work done better than wall time.
fn cpu_ms() -> f64 {
    let ns: Option<f64> = std::fs::read_dir("/proc/self/task").ok().map(|d| {
        d.flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
            .sum()
    });
    if let Some(ns) = ns.filter(|&n| n > 0.0) {
        return ns / 1e6;
    }
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) * 10.0
}

fn write_f32(path: &PathBuf, data: &[f32]) {
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The centre size x size crop of a photo as a 3 x size x size tensor in 0..1 (RGB).
fn photo(path: &str, size: usize) -> Tensor {
    let img = image::open(path).unwrap_or_else(|e| panic!("open {path}: {e}")).to_rgb8();
    let (w, h) = (img.width() as usize, img.height() as usize);
    assert!(w >= size && h >= size, "{path} is {w}x{h}, smaller than {size}");
    let (x0, y0) = ((w - size) / 2, (h - size) / 2);
    let mut data = vec![0f32; 3 * size * size];
    for y in 0..size {
        for x in 0..size {
            let p = img.get_pixel((x0 + x) as u32, (y0 + y) as u32);
            for c in 0..3 {
                data[(c * size + y) * size + x] = p[c] as f32 / 255.0;
            }
        }
    }
    Tensor::from_vec(3, size, size, data)
}

/// PSNR (dB) of `a` against `b` as 8-bit images (values clamped to 0..1, rounded to 1/255).
fn psnr8(a: &Tensor, b: &Tensor) -> f64 {
    let q = |v: f32| (v.clamp(0.0, 1.0) * 255.0).round() as f64;
    let mse = a.data.iter().zip(&b.data).map(|(&x, &y)| (q(x) - q(y)).powi(2)).sum::<f64>() / a.data.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

/// `--kernels IC,OC,K,W,ROWS`: the bf16 and int8 kernels alone (one thread, the fastest of 20
/// passes over the blocks of ROWS output rows W wide), as ns per pass and the share of the tile
/// peak (TDPBF16PS 512, TDPBSSD 1024 multiply-adds a cycle) at `--ghz` (default 2.0).
fn kernels(spec: &str, ghz: f64) {
    let v: Vec<usize> = spec.split(',').map(|s| s.parse().expect("--kernels IC,OC,K,W,ROWS")).collect();
    let [ic, oc, k, w, rows] = v[..] else { panic!("--kernels IC,OC,K,W,ROWS") };
    let macs = (ic.div_ceil(32) * 32 * oc.div_ceil(32) * 32 * k * k * w.div_ceil(32) * 32 * rows) as f64;
    for kern in Bf16Kernel::ALL.into_iter().filter(|&k| k != Bf16Kernel::Emulated) {
        if let Some(ns) = lucent_core::cpu::bf16::probe_kernel_ns(kern, ic, oc, k, w, rows, 20) {
            println!("kernel {kern} {ic}->{oc} {k}x{k} {w}x{rows}: {:.1} us, {:.0}% of 512 MAC/cycle at {ghz} GHz", ns / 1e3, 100.0 * macs / (ns * ghz * 512.0));
        }
    }
    for kern in Int8Kernel::ALL.into_iter().filter(|&k| k != Int8Kernel::Emulated) {
        if let Some(ns) = lucent_core::cpu::int8::probe_kernel_ns(kern, ic, oc, k, w, rows, 20) {
            println!("kernel {kern} {ic}->{oc} {k}x{k} {w}x{rows}: {:.1} us, {:.0}% of 1024 MAC/cycle at {ghz} GHz", ns / 1e3, 100.0 * macs / (ns * ghz * 1024.0));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(spec) = arg(&args, "--kernels") {
        return kernels(&spec, arg(&args, "--ghz").and_then(|s| s.parse().ok()).unwrap_or(2.0));
    }
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models");
    let stem = arg(&args, "--stem").unwrap_or_else(|| "sr/realesr-general-x4v3".into());
    let size: usize = arg(&args, "--size").and_then(|s| s.parse().ok()).unwrap_or(276);
    let threads: Option<usize> = arg(&args, "--threads").and_then(|s| s.parse().ok());
    let runs: usize = arg(&args, "--runs").and_then(|s| s.parse().ok()).unwrap_or(3);
    let serve = args.iter().any(|a| a == "--serve");
    let net = Arc::new(Net::load_stem(&models.join(&stem)).expect("load model"));
    let precisions: Vec<Precision> = arg(&args, "--precision")
        .unwrap_or_else(|| "fp32".into())
        .split(',')
        .map(|p| Precision::parse(p).unwrap_or_else(|| panic!("--precision {p}: expected fp32, bf16, int8 or auto")))
        .collect();
    let bf16_kernel = arg(&args, "--bf16-kernel").map(|k| Bf16Kernel::parse(&k).unwrap_or_else(|| panic!("--bf16-kernel {k}: expected amx, avx512bf16 or emulated")));
    let backends: Vec<CpuBackend> = precisions.iter().map(|&precision| CpuBackend::with_options(&CpuOptions { threads, precision, bf16_kernel, profile: args.iter().any(|a| a == "--profile"), ..Default::default() })).collect();
    let be = &backends[0];
    let t_prep = Instant::now();
    let prepared_all: Vec<_> = backends.iter().map(|b| b.prepare(net.clone()).expect("prepare")).collect();
    let prepared = prepared_all[0].clone();
    let prep_ms = t_prep.elapsed().as_secs_f64() * 1e3;
    for m in lucent_core::cpu::calibrate::log_narrow() {
        eprintln!(
            "calibration {}x{} {}x{} -> {}: {} {:.2} ms, fp32 {:.2} ms ({} threads), took {:.0} ms{}",
            m.ic,
            m.oc,
            m.kh,
            m.kw,
            if m.faster() { m.precision } else { "fp32" },
            m.kernel,
            m.narrow_ms,
            m.fp32_ms,
            m.threads,
            m.cost_ms,
            if m.cached { " (cached)" } else { "" }
        );
    }
    for (p, b) in precisions.iter().zip(&backends) {
        eprintln!("precision {}: {}", p.name(), b.precision());
    }
    // What the per-layer Winograd / im2col calibration measured (and what it cost), on stderr.
    let cal = lucent_core::cpu::calibrate::log();
    let cal_ms: f64 = cal.iter().map(|m| m.cost_ms).sum();
    for m in &cal {
        eprintln!(
            "calibration {}x{} -> {}: winograd {:.2} ms, im2col {:.2} ms on {px}x{px} ({} threads, {}), took {:.0} ms",
            m.ic,
            m.oc,
            if m.winograd() { "winograd" } else { "im2col" },
            m.winograd_ms,
            m.im2col_ms,
            m.threads,
            m.isa,
            m.cost_ms,
            px = lucent_core::cpu::calibrate::CALIBRATION_PX
        );
    }
    eprintln!("prepare {prep_ms:.0} ms (calibration {cal_ms:.0} ms of it), isa {}", be.isa());
    let inb = net.input_blobs()[0];
    let outb = net.output_blobs()[0];
    let mut seed = 12345u64;
    let data: Vec<f32> = (0..3 * size * size)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let x = match arg(&args, "--image") {
        Some(path) => photo(&path, size),
        None => Tensor::from_vec(3, size, size, data),
    };
    let gflop = conv_gflop(&net, size);
    let once = || {
        let t = Instant::now();
        let o = prepared.run(&[(inb, &x)], &[outb], &Cancel::new()).expect("run");
        (t.elapsed().as_secs_f64() * 1e3, o.into_iter().next().expect("one output"))
    };
    // Warm-up (also the run whose output is dumped).
    let (_, out) = once();
    if let Some(dir) = arg(&args, "--dump") {
        let name = stem.rsplit('/').next().unwrap_or(&stem);
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create dump dir");
        write_f32(&dir.join(format!("{name}.{size}.in.f32")), &x.data);
        write_f32(&dir.join(format!("{name}.{size}.out.f32")), &out.data);
    }
    if serve {
        let stdout = std::io::stdout();
        writeln!(stdout.lock(), "ready {gflop:.3} {} {} {} {} {cal_ms:.0}", out.c, out.h, out.w, be.isa()).ok();
        for line in std::io::stdin().lock().lines() {
            let line = line.unwrap_or_default();
            match line.trim() {
                "run" => {
                    let (ms, _) = once();
                    writeln!(stdout.lock(), "ms {ms:.3}").ok();
                }
                "quit" | "" => break,
                other => eprintln!("unknown command {other:?}"),
            }
        }
        return;
    }
    if prepared_all.len() > 1 {
        fn med(t: &mut [f64]) -> f64 {
            t.sort_by(|a, b| a.total_cmp(b));
            t[t.len() / 2]
        }
        // (wall ms, cpu ms of the process: all threads; on a loaded machine it tracks the work better)
        let run_with = |p: &Arc<dyn lucent_core::Prepared>| {
            let (t, c0) = (Instant::now(), cpu_ms());
            let o = p.run(&[(inb, &x)], &[outb], &Cancel::new()).expect("run");
            (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c0, o.into_iter().next().expect("one output"))
        };
        let outs: Vec<Tensor> = prepared_all.iter().map(|p| run_with(p).2).collect();
        let mut times = vec![Vec::new(); prepared_all.len()];
        let mut cpu = vec![Vec::new(); prepared_all.len()];
        for _ in 0..runs.max(1) {
            for (i, p) in prepared_all.iter().enumerate() {
                let (t, c, _) = run_with(p);
                times[i].push(t);
                cpu[i].push(c);
            }
        }
        let cbase = med(&mut cpu[0].clone());
        let base = med(&mut times[0]);
        for (i, p) in precisions.iter().enumerate() {
            let m = med(&mut times[i]);
            let c = med(&mut cpu[i]);
            println!(
                "{stem} {size}x{size} threads {} {}: median {m:.1} ms wall of {} (runs {:?}), {c:.1} ms cpu; x{:.2} wall, x{:.2} cpu vs {}, PSNR vs {} {:.1} dB",
                be.threads(),
                p.name(),
                times[i].len(),
                times[i].iter().map(|t| (t * 10.0).round() / 10.0).collect::<Vec<_>>(),
                base / m,
                cbase / c,
                precisions[0].name(),
                precisions[0].name(),
                psnr8(&outs[i], &outs[0])
            );
        }
        if args.iter().any(|a| a == "--phases") {
            use lucent_core::cpu::bf16::phases;
            phases::set_phase_timing(true);
            for (p, prep) in precisions.iter().zip(&prepared_all) {
                phases::take_ms();
                let n = runs.max(1);
                let (t, c0) = (Instant::now(), cpu_ms());
                for _ in 0..n {
                    run_with(prep);
                }
                let (wall, cpu) = (t.elapsed().as_secs_f64() * 1e3 / n as f64, (cpu_ms() - c0) / n as f64);
                let ph = phases::take_ms();
                let parts: Vec<String> = phases::NAMES.iter().zip(ph).map(|(k, v)| format!("{k} {:.1}", v / n as f64)).collect();
                println!("phases {}: run {wall:.1} ms wall, {cpu:.1} ms cpu; narrow convs per run (ms): {}", p.name(), parts.join(", "));
            }
            phases::set_phase_timing(false);
        }
        return;
    }
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let c0 = cpu_ms();
        let (t, _) = once();
        println!("run: {t:.1} ms wall, {:.0} ms cpu", cpu_ms() - c0);
        times.push(t);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let med = times[times.len() / 2];
    println!(
        "{stem} {size}x{size} -> {}x{}x{}, threads {}: median {med:.1} ms of {}, {gflop:.1} GFLOP direct conv, {:.1} GFLOP/s",
        out.c,
        out.h,
        out.w,
        be.threads(),
        times.len(),
        gflop / (med / 1e3)
    );
}
