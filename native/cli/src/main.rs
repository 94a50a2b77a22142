//! `lucent-native`: benchmark and run the Lucent engine.
//!
//!   lucent-native bench --model NAME[,NAME..] --input FILE[,FILE..] [--backend cpu|gpu|auto[,..]]
//!                       [--precision fp32|bf16|int8|auto[,..]] [--runs N] [--json] [--tile N] [--threads N]
//!                       [--model-dir DIR]
//!   lucent-native run --model NAME --input IN --output OUT [--backend ..] [--precision P] [--tile N] [--exif] [--dpi N]
//!   lucent-native catalog [--json]
//!
//! NAME is a photo catalog name (general_4x, generative_4x, ...), `video:NAME` for a video catalog
//! name, or a network file stem (model-dir relative or absolute path to the .param without its
//! extension), run as a bare x-scale network. Catalog names run their pipeline (the engine's
//! `pipelines::for_model`); GFLOP/s figures are given for plain SR runs (one network, the input
//! size) only. `--precision` sets the CPU backend's arithmetic (`LUCENT_CPU_PRECISION` otherwise;
//! `auto`: per network from native/engine/src/precision.tsv); with several, `bench` runs each and
//! gives every later one's PSNR and largest level difference against the first one's output.
//!
//! Engine settings (LUCENT_ADAPTER, LUCENT_GPU_*, LUCENT_CPU_*, LUCENT_HEIF_PRESET,
//! LUCENT_FACE_PROFILE) are read from the environment here, at the binary's process boundary, and
//! passed to the engine as options (`env.rs`); the crates themselves read none.

mod env;

use lucent_codec::{EncodeOptions, Format};
use lucent_engine::photo::{image_to_raster, map_codec, parse_format, raster_to_image};
use lucent_engine::precision::measure;
use lucent_engine::{catalog, flops, pipelines, BackendChoice, Cancel, Engine, EngineOptions, EnhanceOptions, Enhancer, Kind, Pipeline, Samples};
use lucent_core::cpu::Precision;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage:
  lucent-native bench --model NAME[,NAME..] --input FILE[,FILE..] [--backend cpu|gpu|auto[,..]] [--runs N]
                      [--precision fp32|bf16|int8|auto[,..]] [--json] [--tile N] [--threads N] [--model-dir DIR]
  lucent-native run --model NAME --input IN --output OUT [--backend ..] [--precision P] [--tile N] [--exif] [--dpi N]
                    [--model-dir DIR]
  lucent-native catalog [--json]
NAME: a photo catalog name (general_4x, generative_4x, ...), video:NAME for a video model, or a network
file stem (model-dir relative, or a path to the .param without extension) run as a bare network.
--precision: the CPU backend's arithmetic (default $LUCENT_CPU_PRECISION, else auto: per network from
committed measurements); several: each is run, later ones with PSNR against the first one's output.
Model dir: --model-dir, else $LUCENT_MODEL_DIR, else ../shared/models or ./models found from the
current directory upwards. Engine settings: the LUCENT_ADAPTER, LUCENT_GPU_*, LUCENT_CPU_*,
LUCENT_HEIF_PRESET and LUCENT_FACE_PROFILE environment (docs/configuration.md), read here and
passed to the engine as options.";

#[derive(Default)]
struct Args {
    cmd: String,
    models: Vec<String>,
    inputs: Vec<String>,
    output: Option<String>,
    backends: Vec<String>,
    /// `--precision`: CPU arithmetic names (empty: the environment's / default).
    precisions: Vec<String>,
    runs: usize,
    json: bool,
    tile: Option<usize>,
    threads: Option<usize>,
    model_dir: Option<PathBuf>,
    exif: bool,
    dpi: Option<f64>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args { runs: 3, ..Default::default() };
    a.cmd = it.next().ok_or("missing command")?;
    let list = |v: String| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect::<Vec<_>>();
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--model" | "-m" => a.models.extend(list(val()?)),
            "--input" | "-i" => a.inputs.extend(list(val()?)),
            "--output" | "-o" => a.output = Some(val()?),
            "--backend" | "-b" => a.backends.extend(list(val()?)),
            "--precision" | "-p" => {
                for p in list(val()?) {
                    Precision::parse(&p).ok_or_else(|| format!("--precision {p}: expected fp32, bf16, int8 or auto"))?;
                    a.precisions.push(p);
                }
            }
            "--runs" | "-n" => a.runs = val()?.parse().map_err(|_| "--runs: not a number")?,
            "--tile" => a.tile = Some(val()?.parse().map_err(|_| "--tile: not a number")?),
            "--threads" => a.threads = Some(val()?.parse().map_err(|_| "--threads: not a number")?),
            "--model-dir" => a.model_dir = Some(PathBuf::from(val()?)),
            "--dpi" => a.dpi = Some(val()?.parse().map_err(|_| "--dpi: not a number")?),
            "--json" => a.json = true,
            "--exif" => a.exif = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

fn find_model_dir(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(d) = explicit {
        return d;
    }
    if let Some(d) = std::env::var_os("LUCENT_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let mut starts = vec![];
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe() {
        starts.push(exe);
    }
    for s in starts {
        for dir in s.ancestors() {
            for cand in [dir.join("../shared/models"), dir.join("models")] {
                if cand.join("sr").is_dir() {
                    return cand;
                }
            }
        }
    }
    PathBuf::from("../shared/models")
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() { format!("{}", (v * 1000.0).round() / 1000.0) } else { "null".into() }
}

/// What `bench` / `run` run for a NAME.
struct Target {
    pipeline: Box<dyn Enhancer>,
    /// The (first) network's stem.
    stem: String,
    /// One network at the input size (plain SR or a bare network): its FLOPs are the run's.
    plain: bool,
}

/// A catalog name or a bare network stem -> what to run.
fn resolve(engine: &Engine, name: &str) -> lucent_core::Result<Target> {
    let model = if let Some(v) = name.strip_prefix("video:") {
        Some(catalog::lookup(Kind::Video, v)?)
    } else if catalog::find(Kind::Photo, name).is_some() {
        Some(catalog::lookup(Kind::Photo, name)?)
    } else {
        None
    };
    if let Some(m) = model {
        let stem = m.networks.first().map(|s| s.to_string()).unwrap_or_default();
        return Ok(Target { pipeline: pipelines::for_model(m)?, stem, plain: m.pipeline == Pipeline::TiledSr });
    }
    let stem = name.strip_suffix(".param").unwrap_or(name);
    let rt = engine.runtime();
    // A path that exists as given (relative to the cwd, or absolute) wins over the model dir.
    let p = format!("{stem}.param");
    let spec = if Path::new(&p).exists() && !rt.model_dir().join(&p).exists() {
        let abs = std::fs::canonicalize(&p).map_err(|e| lucent_core::Error::new(lucent_core::Code::ModelMissing, format!("{p}: {e}")))?;
        let abs = abs.to_string_lossy();
        rt.spec_for_stem(abs.strip_suffix(".param").unwrap_or(&abs))?
    } else {
        rt.spec_for_stem(stem)?
    };
    Ok(Target { stem: spec.stem.clone(), pipeline: Box::new(spec), plain: true })
}

/// An engine on `backend`; `precision` (a name `parse_args` checked) replaces the environment's.
fn make_engine(a: &Args, backend: &str, precision: Option<&str>) -> lucent_core::Result<Engine> {
    let mut o = env::engine_options(a.threads);
    if let Some(p) = precision.and_then(Precision::parse) {
        o.cpu.precision = p;
    }
    Engine::new(EngineOptions { model_dir: find_model_dir(a.model_dir.clone()), backend: Some(BackendChoice::parse(backend)?), tile: a.tile, ..o })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn bench(a: &Args) -> Result<(), String> {
    if a.models.is_empty() || a.inputs.is_empty() {
        return Err("bench needs --model and --input".into());
    }
    let runs = a.runs.max(1);
    let backends = if a.backends.is_empty() { vec!["auto".to_string()] } else { a.backends.clone() };
    let precisions: Vec<Option<&str>> = if a.precisions.is_empty() { vec![None] } else { a.precisions.iter().map(|p| Some(p.as_str())).collect() };
    // The first precision's 8-bit output per (backend, input, model): what the later ones are compared with.
    let mut first: HashMap<(String, String, String), Vec<u8>> = HashMap::new();
    for (b, precision) in backends.iter().flat_map(|b| precisions.iter().map(move |p| (b, *p))) {
        let engine = make_engine(a, b, precision).map_err(|e| format!("backend {b}: {e}"))?;
        let info = engine.info().clone();
        let precision_name = precision.unwrap_or("default");
        let cpu_precision = info.cpu_precision.clone().unwrap_or_default();
        for input in &a.inputs {
            let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
            let t = Instant::now();
            let img = lucent_codec::decode(&bytes, &Default::default()).map_err(|e| format!("{input}: {}", map_codec(e)))?;
            let decode_ms = t.elapsed().as_secs_f64() * 1e3;
            let in_format = lucent_codec::detect_format(&bytes).unwrap_or(Format::Png);
            let (src, meta) = image_to_raster(img).map_err(|e| e.to_string())?;
            let (w, h) = (src.width, src.height);
            for model in &a.models {
                let target = resolve(&engine, model).map_err(|e| format!("{model}: {e}"))?;
                let rt = engine.runtime();
                let net = rt.network(&target.stem).map_err(|e| format!("{model}: {e}"))?;
                let flop = if target.plain { flops::conv_flops(&net.net, w, h) } else { f64::NAN };
                let cancel = Cancel::new();
                // Warm-up (also loads and prepares the networks).
                let out = target.pipeline.run(rt, src.as_ref(), &cancel, &mut |_, _| {}).map_err(|e| format!("{model}: {e}"))?;
                let mut times = Vec::with_capacity(runs);
                for _ in 0..runs {
                    let t = Instant::now();
                    let o = target.pipeline.run(rt, src.as_ref(), &cancel, &mut |_, _| {}).map_err(|e| format!("{model}: {e}"))?;
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    drop(o);
                }
                // PSNR and largest level difference against the first precision's output (8-bit outputs).
                let key = (b.clone(), input.clone(), model.clone());
                let vs_first = match &out.samples {
                    Samples::U8(v) if precisions.len() > 1 => match first.get(&key) {
                        None => {
                            first.insert(key, v.clone());
                            None
                        }
                        Some(f) if f.len() == v.len() => Some(measure::compare_u8(f, v)),
                        Some(_) => None,
                    },
                    _ => None,
                };
                let (ow, oh) = (out.width, out.height);
                let t = Instant::now();
                let img = raster_to_image(out, meta.clone());
                let enc = lucent_codec::encode(&img, in_format, &EncodeOptions::default()).map_err(|e| format!("encode: {}", map_codec(e)))?;
                let encode_ms = t.elapsed().as_secs_f64() * 1e3;
                drop(enc);
                let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
                let max = times.iter().cloned().fold(0.0, f64::max);
                let med = median(&mut times);
                let mp = (w * h) as f64 / 1e6;
                let mp_per_s = mp / (med / 1e3);
                let gflops = flop / 1e9 / (med / 1e3);
                let tflop_per_mp = flop / 1e12 / mp;
                let tile = rt.tile_for(&net.net);
                let net_precision = rt.cpu_precision_of(&target.stem).map(|p| p.name());
                if a.json {
                    println!(
                        "{{\"model\":{},\"network\":{},\"backend\":{},\"adapter\":{},\"f16\":{},\"width\":{w},\"height\":{h},\"out_width\":{ow},\"out_height\":{oh},\"tile\":{tile},\"runs\":{runs},\"ms_median\":{},\"ms_min\":{},\"ms_max\":{},\"mp_per_s\":{},\"gflops\":{},\"tflop_per_mp\":{},\"decode_ms\":{},\"encode_ms\":{},\"encode_format\":{},\"precision\":{},\"cpu_precision\":{},\"network_precision\":{},\"psnr_vs_first\":{},\"max_diff_vs_first\":{}}}",
                        json_str(model), json_str(&target.stem), json_str(info.kind), json_str(&info.adapter), info.f16,
                        json_num(med), json_num(min), json_num(max), json_num(mp_per_s), json_num(gflops), json_num(tflop_per_mp),
                        json_num(decode_ms), json_num(encode_ms), json_str(in_format.extension()),
                        json_str(precision_name), json_str(&cpu_precision), net_precision.map(json_str).unwrap_or_else(|| "null".into()),
                        vs_first.map(|(db, _)| if db.is_finite() { json_num(db) } else { "\"inf\"".into() }).unwrap_or_else(|| "null".into()),
                        vs_first.map(|(_, d)| d.to_string()).unwrap_or_else(|| "null".into())
                    );
                } else {
                    let flops_txt = if flop.is_finite() { format!(", {gflops:.1} GFLOP/s ({tflop_per_mp:.2} TFLOP/MP)") } else { String::new() };
                    // The CPU's arithmetic: `auto` says what it chose for this network (info() lists them all).
                    let precision_txt = match (net_precision, info.kind) {
                        (Some(n), "cpu") => format!(", precision {precision_name} -> {n}"),
                        (None, "cpu") => format!(", precision {precision_name}: {cpu_precision}"),
                        _ => String::new(),
                    };
                    let vs_txt = match vs_first {
                        Some((db, d)) => format!("; vs {}: PSNR {db:.2} dB, max {d} levels", precisions[0].unwrap_or("default")),
                        None => String::new(),
                    };
                    println!(
                        "{model} ({}) {w}x{h} -> {ow}x{oh} on {} [{}{}{precision_txt}] tile {tile}: median {med:.1} ms (min {min:.1}, max {max:.1}, {runs} runs), {mp_per_s:.4} MP/s{flops_txt}; decode {decode_ms:.1} ms, encode {} {encode_ms:.1} ms{vs_txt}",
                        target.stem, info.kind, info.adapter, if info.f16 { ", f16" } else { "" }, in_format.extension()
                    );
                }
            }
        }
    }
    Ok(())
}

fn run(a: &Args) -> Result<(), String> {
    let (Some(model), Some(input), Some(output)) = (a.models.first(), a.inputs.first(), a.output.as_ref()) else {
        return Err("run needs --model, --input and --output".into());
    };
    let backend = a.backends.first().cloned().unwrap_or_else(|| "auto".into());
    let engine = make_engine(a, &backend, a.precisions.first().map(String::as_str)).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let ext = Path::new(output).extension().map(|e| e.to_string_lossy().to_string()).unwrap_or_else(|| "png".into());
    let t = Instant::now();
    let (data, w, h) = if catalog::find(Kind::Photo, model).is_some() {
        let o = EnhanceOptions { model: model.clone(), format: ext, exif: a.exif, dpi: a.dpi, ..Default::default() };
        let out = engine
            .enhance(&bytes, &o, &Cancel::new(), &|p| eprint!("\r{p:3}%"))
            .map_err(|e| e.to_string())?;
        eprintln!();
        (out.data, out.width as usize, out.height as usize)
    } else {
        let target = resolve(&engine, model).map_err(|e| e.to_string())?;
        let fmt = parse_format(&ext).map_err(|e| e.to_string())?;
        let img = lucent_codec::decode(&bytes, &Default::default()).map_err(|e| map_codec(e).to_string())?;
        let (src, meta) = image_to_raster(img).map_err(|e| e.to_string())?;
        let out = target
            .pipeline
            .run(engine.runtime(), src.as_ref(), &Cancel::new(), &mut |d, t| eprint!("\rstep {d}/{t}"))
            .map_err(|e| e.to_string())?;
        eprintln!();
        let (w, h) = (out.width, out.height);
        let eo = EncodeOptions { keep_exif: a.exif, dpi: a.dpi, ..Default::default() };
        let data = lucent_codec::encode(&raster_to_image(out, meta), fmt, &eo).map_err(|e| map_codec(e).to_string())?;
        (data, w, h)
    };
    std::fs::write(output, &data).map_err(|e| format!("{output}: {e}"))?;
    let info = engine.info();
    eprintln!("{output}: {w}x{h}, {} bytes, {:.0} ms on {} [{}]", data.len(), t.elapsed().as_secs_f64() * 1e3, info.kind, info.adapter);
    Ok(())
}

fn list_catalog(a: &Args) {
    for m in catalog::CATALOG {
        if a.json {
            // One models/catalog.json entry per line.
            println!("{}", catalog::entry_json(m));
        } else {
            println!(
                "{:24} {:5} x{} {:10} {}",
                m.name, m.kind.as_str(), m.scale, m.category.as_str(),
                m.unavailable.map(|r| format!("unavailable: {r}")).unwrap_or_else(|| m.description.to_string())
            );
        }
    }
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = match a.cmd.as_str() {
        "bench" => bench(&a),
        "run" => run(&a),
        "catalog" => {
            list_catalog(&a);
            Ok(())
        }
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
