//! Speed of "bring your own model" networks on the CPU backend: time per run and per output
//! megapixel of each supported architecture at real-size hyperparameters (figures only; not a test).
//! `npm run bench:own-models` (bench/own-models/run.mjs) runs this next to torch + spandrel.
//!
//! ```text
//! cargo run --release -p lucent-models --example own_models_bench -- [--dir bench-out/own-models]
//!     [--threads 2] [--runs 5] [--size 128] [--only span]
//! cargo run --release -p lucent-models --example own_models_bench -- --make DIR --sizes 64,128
//! cargo run --release -p lucent-models --example own_models_bench -- --model FILE --size 128 --threads 2
//!     [--dump OUT.f32] --serve
//! ```
//!
//! `--make DIR` writes one model file per architecture (`esrgan.safetensors`: Real-ESRGAN x4plus
//! shape, nf 64 nb 23; `compact.safetensors`: realesr-general-x4v3, num_feat 64 num_conv 32;
//! `span.safetensors`: SPAN x4 feature 48; `realplksr.safetensors`: RealPLKSR x4 dim 64, 28
//! blocks, kernel 17, LayerNorm), f32 with seeded random weights (uniform +-1/sqrt(fan_in), as
//! torch's default init), keys and shapes taken from tests/goldens/detect.json (what spandrel
//! detects as those community files); and `input.<size>.f32` (3 x size x size, planar RGB in
//! [0, 1]) for each size. They go through the same loader as users' files.
//!
//! Without `--model`: makes DIR's files if missing and times each architecture in turn: one warm-up,
//! `--runs` runs, prints the median ms per run and ms per output megapixel. With `--model`: one
//! file; `--serve` answers `run` lines on stdin with `ms <time>` (after a warm-up run whose output
//! `--dump` writes), `quit` ends it. Threads: `--threads`, default all available cores (as
//! `CpuBackend::new(None)`). LUCENT_CPU_PROFILE=1 prints per-op-kind times of every run.

use lucent_core::cpu::{CpuBackend, CpuNet, CpuOptions};
use lucent_core::{Cancel, Prepared, Tensor};
use lucent_models::{load, Limits};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Bench name, detect.json model name, default input size.
const ARCHS: [(&str, &str, usize); 4] = [
    ("esrgan", "RealESRGAN_x4plus", 64),
    ("compact", "realesr-general-x4v3", 128),
    ("span", "4x_SPAN_48", 128),
    ("realplksr", "4x_RealPLKSR_layernorm", 128),
];

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// xorshift64*: the same weights on every machine.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32
    }
}

/// A safetensors file (f32) with the keys and shapes of `model` in detect.json.
fn make_model(model: &str, path: &Path, seed: u64) {
    let detect: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/detect.json")).expect("detect.json"),
    )
    .expect("detect.json parses");
    let m = detect["models"].as_array().unwrap().iter().find(|m| m["name"] == model).unwrap_or_else(|| panic!("{model} not in detect.json"));
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut header = serde_json::Map::new();
    let mut data: Vec<u8> = Vec::new();
    let keys = m["keys"].as_array().unwrap();
    // fan_in of the weight that precedes each bias (same module).
    let mut fan_in = 1usize;
    for k in keys {
        let name = k[0].as_str().unwrap();
        let shape: Vec<usize> = k[1].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let n: usize = shape.iter().product();
        let vals: Vec<f32> = if shape.len() >= 2 {
            fan_in = shape[1..].iter().product();
            let bound = 1.0 / (fan_in as f32).sqrt();
            (0..n).map(|_| (rng.uniform() * 2.0 - 1.0) * bound).collect()
        } else if name.contains("norm") && name.ends_with(".weight") {
            vec![1.0; n]
        } else if name.ends_with(".bias") {
            let bound = 1.0 / (fan_in as f32).sqrt();
            (0..n).map(|_| (rng.uniform() * 2.0 - 1.0) * bound).collect()
        } else {
            // PReLU slopes (Compact) and other per-channel factors.
            vec![0.25; n]
        };
        let start = data.len();
        for v in vals {
            data.extend_from_slice(&v.to_le_bytes());
        }
        header.insert(
            name.to_string(),
            serde_json::json!({ "dtype": "F32", "shape": shape, "data_offsets": [start, data.len()] }),
        );
    }
    let mut h = serde_json::to_vec(&Value::Object(header)).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut f = Vec::with_capacity(8 + h.len() + data.len());
    f.extend_from_slice(&(h.len() as u64).to_le_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&data);
    std::fs::write(path, f).expect("write model");
}

fn make_input(size: usize, path: &Path) {
    let mut rng = Rng(0xC0FF_EE00 + size as u64);
    let b: Vec<u8> = (0..3 * size * size).flat_map(|_| rng.uniform().to_le_bytes()).collect();
    std::fs::write(path, b).expect("write input");
}

fn make(dir: &Path, sizes: &[usize]) {
    std::fs::create_dir_all(dir).expect("create dir");
    for (i, (name, model, _)) in ARCHS.iter().enumerate() {
        let p = dir.join(format!("{name}.safetensors"));
        if !p.exists() {
            make_model(model, &p, i as u64 + 1);
        }
    }
    for &s in sizes {
        let p = dir.join(format!("input.{s}.f32"));
        if !p.exists() {
            make_input(s, &p);
        }
    }
}

struct Bench {
    net: CpuNet,
    inb: usize,
    outb: usize,
    x: Tensor,
    out_px: usize,
    desc: String,
}

impl Bench {
    fn new(cpu: &CpuBackend, model: &Path, size: usize) -> Bench {
        let bytes = std::fs::read(model).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let m = load(&bytes, &model.to_string_lossy(), &Limits::default()).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let params: Vec<String> = m.info.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let desc = format!("{} x{} ({})", m.info.architecture, m.info.scale, params.join(" "));
        let scale = m.info.scale;
        let net = Arc::new(m.net);
        let (inb, outb) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
        let input = model.with_file_name(format!("input.{size}.f32"));
        let x = match std::fs::read(&input) {
            Ok(b) => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
            Err(_) => {
                let mut rng = Rng(0xC0FF_EE00 + size as u64);
                (0..3 * size * size).map(|_| rng.uniform()).collect()
            }
        };
        let x = Tensor::from_vec(3, size, size, x);
        let t0 = Instant::now();
        let net = cpu.prepare_net(net).expect("prepare");
        eprintln!("lucent: {desc}: prepared in {:.0} ms", t0.elapsed().as_secs_f64() * 1e3);
        Bench { net, inb, outb, x, out_px: size * scale * size * scale, desc }
    }

    fn run(&self) -> (f64, Tensor) {
        let t0 = Instant::now();
        let out = self.net.run(&[(self.inb, &self.x)], &[self.outb], &Cancel::new()).expect("run").remove(0);
        (t0.elapsed().as_secs_f64() * 1e3, out)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if !n.is_multiple_of(2) {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads = arg(&args, "--threads").and_then(|t| t.parse().ok());
    if let Some(dir) = arg(&args, "--make") {
        let sizes: Vec<usize> = arg(&args, "--sizes").unwrap_or_else(|| "64,128".into()).split(',').map(|s| s.parse().expect("--sizes")).collect();
        make(Path::new(&dir), &sizes);
        println!("made {dir}");
        return;
    }
    // LUCENT_CPU_PROFILE (set at all): per-op-kind times of every run, as the CLI reads it.
    let cpu = CpuBackend::with_options(&CpuOptions { threads, profile: std::env::var_os("LUCENT_CPU_PROFILE").is_some(), ..Default::default() });
    let size_arg: Option<usize> = arg(&args, "--size").map(|s| s.parse().expect("--size"));
    if let Some(model) = arg(&args, "--model") {
        let size = size_arg.unwrap_or(128);
        let b = Bench::new(&cpu, Path::new(&model), size);
        let (_, out) = b.run();
        if let Some(p) = arg(&args, "--dump") {
            let bytes: Vec<u8> = out.data.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(&p, bytes).expect("dump");
        }
        let mut stdout = std::io::stdout();
        if args.iter().any(|a| a == "--serve") {
            writeln!(stdout, "ready {} threads {} isa {:?} {}", b.out_px, cpu.threads(), cpu.isa(), b.desc).unwrap();
            stdout.flush().unwrap();
            for line in std::io::stdin().lock().lines() {
                match line.expect("stdin").trim() {
                    "run" => {
                        let (ms, _) = b.run();
                        writeln!(stdout, "ms {ms:.3}").unwrap();
                        stdout.flush().unwrap();
                    }
                    "quit" | "" => break,
                    other => panic!("unknown command {other:?}"),
                }
            }
            return;
        }
        let runs: usize = arg(&args, "--runs").map(|r| r.parse().expect("--runs")).unwrap_or(5);
        let mut t: Vec<f64> = (0..runs).map(|_| b.run().0).collect();
        let med = median(&mut t);
        println!("{}: {size}x{size}: median {med:.1} ms, {:.1} ms/MP", b.desc, med / (b.out_px as f64 / 1e6));
        return;
    }
    let dir = PathBuf::from(arg(&args, "--dir").unwrap_or_else(|| "bench-out/own-models".into()));
    let runs: usize = arg(&args, "--runs").map(|r| r.parse().expect("--runs")).unwrap_or(5);
    let only = arg(&args, "--only");
    let sizes: Vec<usize> = ARCHS.iter().map(|a| size_arg.unwrap_or(a.2)).collect();
    make(&dir, &sizes);
    println!("lucent cpu backend: {} threads, {:?}; {runs} runs after a warm-up, median", cpu.threads(), cpu.isa());
    for ((name, _, _), &size) in ARCHS.iter().zip(&sizes) {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let b = Bench::new(&cpu, &dir.join(format!("{name}.safetensors")), size);
        b.run();
        let mut t: Vec<f64> = (0..runs).map(|_| b.run().0).collect();
        let med = median(&mut t);
        println!(
            "{name:<10} {size}x{size} -> {:.2} MP: {med:>9.1} ms/run {:>9.1} ms/MP   {}",
            b.out_px as f64 / 1e6,
            med / (b.out_px as f64 / 1e6),
            b.desc
        );
    }
}
