//! Quality of the CPU backend's narrower arithmetic against fp32, per catalog network (issue 32):
//! the measurements behind `auto` (native/engine/src/precision.tsv, read by precision.rs).
//!
//!   cargo run --release -p lucent-engine --example precision_eval -- [--networks STEM,..]
//!       [--precisions bf16,int8] [--images N] [--threads 2] [--kernel amx|avx512bf16|emulated]
//!       [--rule-images 3] [--no-rule] [--model-dir DIR] [--data DIR] [--write]
//!
//! Each catalog network runs in the pipeline of a catalog model that uses it (the network under test
//! at the narrower precision, every other network of the pipeline at fp32) on centre crops of the
//! shared photos (8-bit RGB; the face detector on the aligned faces shrunk 4x, RIFE on pairs of
//! crops 3 px apart), once at fp32 and once per narrower precision; the 8-bit outputs are compared
//! (PSNR, largest level difference). The narrower run pins the conv policy, so the narrower
//! arithmetic runs on EVERY conv where it applies (at run time the calibration may keep some in
//! fp32: the table is the worst case). `--write` merges the rows whose narrower path really ran
//! (not an fp32 fallback) into precision.tsv with the date and the CPU.
//!
//! The per-layer rule (unless `--no-rule`): where the narrower precision on every conv misses its
//! bound, each conv layer runs alone at it (every other one fp32) on the first `--rule-images`
//! images, its loss the mean squared error against fp32; the layers are ranked by it, and the
//! fewest worst ones whose move one step wider (int8 -> bf16, bf16 -> fp32) lets the whole network
//! meet the bound plus 0.5 dB on every image are found by bisection over that ranking (assuming the
//! losses add up, which noise powers roughly do), at most half of them. The row's figures are
//! measured with them wider, its `wider_layers` names them. Where more than half would be needed,
//! that precision is not for the network (mostly one step wider, it is not running it, and gains
//! nothing): the row keeps the every-conv figures.
//!
//! Models: `--model-dir`, else $LUCENT_MODEL_DIR, else data/models (`npm ci` / `lucent models fetch
//! --all`), then $LUCENT_MODEL_MIRROR or ../shared/models for a network missing there. Data:
//! `--data`, else ../shared/data.
use lucent_core::cpu::{Bf16Kernel, ConvPolicy, CpuBackend, CpuOptions, Precision};
use lucent_core::Backend;
use lucent_engine::photo::image_to_raster;
use lucent_engine::precision::{bound, measure, wider, CpuPrecisions, Row, Table};
use lucent_engine::video::{interpolate_frames, Frames};
use lucent_engine::{catalog, pipelines, Cancel, Kind, Raster, Runtime, Samples};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq)]
enum Input {
    /// Centre crops of shared/data/photos.
    Photos,
    /// shared/data/faces/cropped shrunk 4x (whole faces the detector finds), centre crops.
    Faces,
    /// Two crops of each photo 3 px right and 2 px down of each other, the frame between them.
    FramePairs,
}

struct Job {
    network: &'static str,
    kind: Kind,
    model: &'static str,
    input: Input,
    crop: usize,
}

const fn job(network: &'static str, kind: Kind, model: &'static str, input: Input, crop: usize) -> Job {
    Job { network, kind, model, input, crop }
}

/// One job per catalog network: the model whose pipeline runs it, and the inputs.
const JOBS: &[Job] = &[
    job(catalog::GENERAL_X4V3, Kind::Photo, "general_4x", Input::Photos, 96),
    job(catalog::X4PLUS, Kind::Photo, "generative_4x", Input::Photos, 48),
    job(catalog::ANIME_X2, Kind::Video, "general_restore_2x", Input::Photos, 96),
    job(catalog::ANIME_X4, Kind::Video, "general_restore_4x", Input::Photos, 96),
    job(catalog::SRMDNF_X2, Kind::Photo, "high_fidelity_2x", Input::Photos, 96),
    job(catalog::SRMDNF_X4, Kind::Photo, "high_fidelity_4x", Input::Photos, 64),
    job(catalog::FFDNET_CLIP, Kind::Photo, "detail_denoise_1x", Input::Photos, 128),
    job(catalog::DAT_LIGHT_X2, Kind::Photo, "high_fidelity_v2_2x", Input::Photos, 48),
    job(catalog::DAT_LIGHT_X4, Kind::Photo, "high_fidelity_v2_4x", Input::Photos, 48),
    job(catalog::FACE_DETECTOR, Kind::Video, "face_soft_2x", Input::Faces, 128),
    job(catalog::RIFE, Kind::Video, "frame_interpolation", Input::FramePairs, 128),
];

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn has_network(dir: &Path, stem: &str) -> bool {
    let p = dir.join(stem);
    if lucent_engine::runtime::is_weights_file(&p) { p.is_file() } else { dir.join(format!("{stem}.param")).is_file() }
}

fn decode(p: &Path) -> Raster {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap_or_else(|e| panic!("{}: {e:?}", p.display()))).unwrap().0
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

fn bytes(r: &Raster) -> &[u8] {
    match &r.samples {
        Samples::U8(v) => v,
        Samples::U16(_) => panic!("8-bit output expected"),
    }
}

/// The job's inputs: one raster per image (FramePairs: the two frames side by side in one raster
/// of width 2 * side, split again when run).
fn inputs(job: &Job, data: &Path, n: usize) -> Vec<(String, Raster)> {
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().to_string();
    match job.input {
        Input::Photos => files(&data.join("photos")).iter().take(n).map(|p| (name(p), measure::rgb8_crop(&decode(p), job.crop).unwrap())).collect(),
        Input::Faces => files(&data.join("faces/cropped"))
            .iter()
            .take(n)
            .map(|p| {
                let full = measure::rgb8_crop(&decode(p), usize::MAX).unwrap();
                (name(p), measure::rgb8_crop(&measure::shrink(&full, 4).unwrap(), job.crop).unwrap())
            })
            .collect(),
        Input::FramePairs => files(&data.join("photos"))
            .iter()
            .take(n)
            .map(|p| {
                let s = job.crop;
                let big = measure::rgb8_crop(&decode(p), s + 4).unwrap();
                assert!(big.width >= s + 3 && big.height >= s + 2, "{}: smaller than {s} px", p.display());
                let v = bytes(&big);
                let mut pair = Vec::with_capacity(2 * s * s * 3);
                for (dx, dy) in [(0, 0), (3, 2)] {
                    for y in 0..s {
                        let o = ((y + dy) * big.width + dx) * 3;
                        pair.extend_from_slice(&v[o..o + s * 3]);
                    }
                }
                (name(p), Raster::from_u8(s, 2 * s, 3, pair).unwrap())
            })
            .collect(),
    }
}

/// (min PSNR, mean PSNR, max diff, per-image MSE) of `network` under `precisions` against `reference`.
fn score(job: &Job, dir: &Path, fp32: &Arc<dyn Backend>, precisions: CpuPrecisions, imgs: &[(String, Raster)], reference: &[Vec<u8>], verbose: bool) -> (f64, f64, u32, Vec<f64>) {
    let rt = Runtime::new(fp32.clone(), dir, None).unwrap().with_cpu_precisions(precisions);
    let (mut min, mut sum, mut maxd, mut mse) = (f64::INFINITY, 0.0, 0u32, Vec::new());
    for ((name, x), r) in imgs.iter().zip(reference) {
        let (db, d) = measure::compare_u8(r, &run(&rt, job, x));
        if verbose {
            eprintln!("  {} {name}: {db:.3} dB, max {d}", job.network);
        }
        min = min.min(db);
        sum += if db.is_finite() { db } else { 99.0 };
        maxd = maxd.max(d);
        mse.push(if db.is_finite() { 255.0f64 * 255.0 / 10f64.powf(db / 10.0) } else { 0.0 });
    }
    (min, if min.is_finite() { sum / imgs.len() as f64 } else { f64::INFINITY }, maxd, mse)
}

/// The per-layer rule (see the header) at precision `p`, for a network where `p` on every conv
/// misses its bound: the conv layers of `job.network` (of `narrow_layers`, those that run `p`) to
/// run one step wider so that `p` meets it, fewest first; None when more than half of them would
/// be needed (then `p` is not for this network: its row keeps the every-conv figures).
#[allow(clippy::too_many_arguments)]
fn layer_rule(job: &Job, p: Precision, dir: &Path, fp32: &Arc<dyn Backend>, pinned: &CpuOptions, narrow_layers: &[String], imgs: &[(String, Raster)], reference: &[Vec<u8>], rule_images: usize) -> Option<Vec<String>> {
    let goal = bound(p).unwrap_or(f64::INFINITY) + 0.5;
    let per_net = |layers: Vec<(String, Precision)>, p: Precision| CpuPrecisions::with_table(pinned.clone(), Table::default()).with(job.network, p).with_layers(job.network, layers);
    let t = Instant::now();
    let n = rule_images.clamp(1, imgs.len());
    let mut loss: Vec<(f64, &String)> = narrow_layers
        .iter()
        .map(|l| {
            let (_, _, _, mse) = score(job, dir, fp32, per_net(vec![(l.clone(), p)], Precision::Fp32), &imgs[..n], &reference[..n], false);
            (mse.iter().sum::<f64>() / n as f64, l)
        })
        .collect();
    loss.sort_by(|a, b| b.0.total_cmp(&a.0));
    eprintln!("  {}: {} layers ranked in {:.1} s; worst: {}", job.network, loss.len(), t.elapsed().as_secs_f64(), loss.iter().take(5).map(|(m, l)| format!("{l} (mse {m:.3})")).collect::<Vec<_>>().join(", "));
    let apart = |k: usize| -> Vec<String> { loss[..k].iter().map(|(_, l)| (*l).clone()).collect() };
    let meets = |k: usize| -> bool {
        let layers = apart(k).into_iter().map(|l| (l, wider(p))).collect();
        let (min, ..) = score(job, dir, fp32, per_net(layers, p), imgs, reference, false);
        eprintln!("  {} {}: {k} of {} layers in {}: min {min:.2} dB", job.network, p.name(), loss.len(), wider(p).name());
        min >= goal
    };
    // Smallest k that meets the goal (k = 0 does not: the caller measured it), at most half of
    // the layers: a network mostly one step wider is not running `p` any more (and gains nothing
    // from it).
    let (mut lo, mut hi) = (0, loss.len() / 2);
    if hi == 0 || !meets(hi) {
        eprintln!("  {}: setting apart half of its {} layers does not meet {goal} dB: {} stays below its bound", job.network, p.name(), p.name());
        return None;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if meets(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(apart(hi))
}

/// The job's 8-bit output for one input on `rt`.
fn run(rt: &Runtime, job: &Job, input: &Raster) -> Vec<u8> {
    let cancel = Cancel::new();
    if job.input == Input::FramePairs {
        let s = input.width;
        let out = interpolate_frames(rt, Frames::new(bytes(input), s, s, 2), &[0.5], &cancel).unwrap_or_else(|e| panic!("{}: {e}", job.model));
        assert!(out.cuts.is_empty(), "{}: the pair was taken for a scene cut", job.model);
        return out.rgb24;
    }
    let m = catalog::lookup(job.kind, job.model).unwrap();
    let p = pipelines::for_model(m).unwrap();
    let out = p.run(rt, input.as_ref(), &cancel, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", job.model));
    bytes(&out).to_vec()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let list = |name: &str| arg(&args, name).map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect::<Vec<_>>());
    let networks = list("--networks");
    let precisions: Vec<Precision> = list("--precisions")
        .unwrap_or_else(|| vec!["bf16".into(), "int8".into()])
        .iter()
        .map(|p| match Precision::parse(p) {
            Some(q @ (Precision::Bf16 | Precision::Int8)) => q,
            _ => panic!("--precisions: '{p}' (bf16, int8)"),
        })
        .collect();
    let n_images: usize = arg(&args, "--images").and_then(|v| v.parse().ok()).unwrap_or(usize::MAX);
    let threads: usize = arg(&args, "--threads").and_then(|v| v.parse().ok()).unwrap_or(2);
    let kernel = arg(&args, "--kernel").map(|k| Bf16Kernel::parse(&k).unwrap_or_else(|| panic!("--kernel {k}: amx, avx512bf16, emulated")));
    let write = args.iter().any(|a| a == "--write");
    let rule = !args.iter().any(|a| a == "--no-rule");
    let rule_images: usize = arg(&args, "--rule-images").and_then(|v| v.parse().ok()).unwrap_or(3);
    let data = arg(&args, "--data").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/data"));
    let primary = arg(&args, "--model-dir").or_else(|| std::env::var("LUCENT_MODEL_DIR").ok()).map(PathBuf::from).unwrap_or_else(|| root().join("data/models"));
    let mirror = std::env::var("LUCENT_MODEL_MIRROR").map(PathBuf::from).unwrap_or_else(|_| root().join("../shared/models"));

    // Every network of the catalog has a job here.
    for m in catalog::CATALOG.iter().filter(|m| m.available()) {
        for n in m.networks {
            if !JOBS.iter().any(|j| j.network == *n) {
                eprintln!("warning: catalog network {n} ({}) has no job in precision_eval", m.name);
            }
        }
    }

    let base = CpuOptions { threads: Some(threads), bf16_kernel: kernel, ..Default::default() };
    let fp32: Arc<dyn Backend> = Arc::new(CpuBackend::with_options(&CpuOptions { precision: Precision::Fp32, ..base.clone() }));
    // Narrower arithmetic on every conv where it applies (the pinned policy skips the calibration's
    // bf16-vs-fp32 timing, which would keep some convs fp32).
    let pinned = CpuOptions { policy: ConvPolicy::Winograd, ..base.clone() };
    let (date, cpu) = (measure::utc_date(), measure::cpu_model());
    println!("{cpu}, {threads} threads, {date}; fp32 backend: {}", fp32.info().cpu_precision.unwrap_or_default());
    println!("| network | model | precision | kernel | min PSNR dB | mean PSNR dB | max diff | images | crop | fp32 s | narrow s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for job in JOBS.iter().filter(|j| networks.as_ref().is_none_or(|n| n.iter().any(|x| x == j.network))) {
        let Some(dir) = [&primary, &mirror].into_iter().find(|d| has_network(d, job.network)) else {
            println!("| {} | {} | - | skipped: not in {} nor {} | | | | | | | |", job.network, job.model, primary.display(), mirror.display());
            continue;
        };
        let imgs = inputs(job, &data, n_images);
        let rt = Runtime::new(fp32.clone(), dir, None).unwrap();
        let t = Instant::now();
        let reference: Vec<Vec<u8>> = imgs.iter().map(|(_, x)| run(&rt, job, x)).collect();
        let fp32_s = t.elapsed().as_secs_f64();
        let net = rt.network(job.network).unwrap().net;
        for &p in &precisions {
            let opts = CpuOptions { precision: p, ..pinned.clone() };
            let convs = CpuBackend::with_options(&opts).prepare_net(net.clone()).unwrap().conv_precisions();
            let narrow = convs.iter().filter(|(_, q)| *q != "fp32").count();
            let (k, line) = opts.effective_bf16();
            let kernel = match (p, k) {
                (Precision::Bf16, Some(k)) => format!("bf16 ({}) on {narrow} of {} convs", k.name(), convs.len()),
                (Precision::Int8, _) if narrow > 0 => format!("int8 ({}) on {narrow} of {} convs", opts.effective_int8().map_or("?", |k| k.name()), convs.len()),
                _ => line,
            };
            let narrow_layers: Vec<String> = convs.iter().filter(|(_, q)| *q == p.name()).map(|(l, _)| l.clone()).collect();
            let per_net = |layers: Vec<(String, Precision)>| CpuPrecisions::with_table(pinned.clone(), Table::default()).with(job.network, p).with_layers(job.network, layers);
            let t = Instant::now();
            let (mut min, mut mean, mut maxd, _) = score(job, dir, &fp32, per_net(Vec::new()), &imgs, &reference, true);
            let mut narrow_s = t.elapsed().as_secs_f64();
            let misses = bound(p).is_some_and(|b| min < b);
            let apart = if rule && misses && !narrow_layers.is_empty() { layer_rule(job, p, dir, &fp32, &pinned, &narrow_layers, &imgs, &reference, rule_images).unwrap_or_default() } else { Vec::new() };
            let kernel = if apart.is_empty() {
                kernel
            } else {
                let t = Instant::now();
                (min, mean, maxd, _) = score(job, dir, &fp32, per_net(apart.iter().map(|l| (l.clone(), wider(p))).collect()), &imgs, &reference, true);
                narrow_s = t.elapsed().as_secs_f64();
                format!("{kernel}; {} on {} of them (per-layer rule)", wider(p).name(), apart.len())
            };
            let row = Row {
                network: job.network.to_string(),
                precision: p,
                min_psnr: min,
                mean_psnr: mean,
                max_diff: maxd,
                images: imgs.len(),
                crop: format!("{}px", job.crop),
                kernel,
                date: date.clone(),
                cpu: cpu.clone(),
                wider_layers: apart,
            };
            let db = |v: f64| if v.is_finite() { format!("{v:.2}") } else { "inf".into() };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {fp32_s:.1} | {narrow_s:.1} |",
                row.network,
                job.model,
                p.name(),
                row.kernel,
                db(row.min_psnr),
                db(row.mean_psnr),
                row.max_diff,
                row.images,
                row.crop
            );
            if row.ran_narrow() && narrow > 0 {
                rows.push(row);
            } else {
                eprintln!("  not written: {} {} did not run narrower ({})", job.network, p.name(), row.kernel);
            }
        }
    }
    if write {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/precision.tsv");
        // An unreadable table stops here: merging into an empty one would drop its other rows.
        let mut table = match std::fs::read_to_string(&path) {
            Ok(text) => Table::parse(&text).unwrap_or_else(|e| panic!("{}: {e}; not written", path.display())),
            Err(_) => Table::default(),
        };
        let n = rows.len();
        table.merge(rows);
        std::fs::write(&path, table.to_tsv()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("wrote {n} row(s) to {}", path.display());
    }
}
