//! Lucent's side of the segmentation bench (bench/segmentation/run.mjs, `npm run bench:segment`):
//! a child process that loads one U²-Net model on the CPU backend and answers timing requests on
//! stdin, one per line, so the bench can alternate it with ONNX Runtime run by run.
//!
//!   cargo run --release -p lucent-engine --example seg_bench -- --model-dir DIR --model u2netp \
//!       --threads 2 --photo PHOTO --dump OUTDIR
//!
//! At start: the network is loaded and prepared (its conv calibration runs here, not in a timed
//! run), PHOTO is resized to 320x320 as the pipeline does and written to OUTDIR/<model>.rgb320 (8-bit
//! RGB) with the network's map on it (OUTDIR/<model>.map.f32, 320x320 little-endian f32), then
//! `ready` is printed. Requests:
//! - `map`: [`network_map_rgb8`] on that 320x320 photo (normalisation + the network; no resize),
//!   answers `ms <milliseconds>`;
//! - `e2e <path>`: the file's bytes (read before the clock starts) through [`segment`] (decode,
//!   orientation, network, bilinear resize back, guided-filter refinement, RGBA + mask PNG), answers
//!   `ms <milliseconds> <matted bytes> <mask bytes>`; the first answer also writes
//!   OUTDIR/<model>.lucent.png and OUTDIR/<model>.lucent.mask.png.
//!
//! - `stages <path>`: the same work step by step, answering `ms <total>` and printing each step's
//!   milliseconds to stderr (decode, rgb8, network incl. the resize to 320, bilinear back, guided
//!   filter, RGBA, mask PNG, RGBA PNG).
//!
//! LUCENT_CPU_PROFILE (set at all): per-op-kind times of every run to stderr.

use lucent_core::cpu::{CpuBackend, CpuOptions};
use lucent_engine::photo::image_to_raster;
use lucent_engine::pipelines::segment::{model_stem, network_map_rgb8, rgb8};
use lucent_engine::resample::resize;
use lucent_engine::segment::{segment, SegmentOptions};
use lucent_engine::{Cancel, Engine, Samples};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let model_dir = PathBuf::from(opt("--model-dir").unwrap_or_else(|| "data/test-models".into()));
    let model = opt("--model").unwrap_or_else(|| "u2netp".into());
    let threads: usize = opt("--threads").map(|t| t.parse().expect("--threads N")).unwrap_or(2);
    let photo = PathBuf::from(opt("--photo").expect("--photo PATH"));
    let dump = PathBuf::from(opt("--dump").unwrap_or_else(|| "bench-out/segmentation".into()));
    std::fs::create_dir_all(&dump).expect("dump dir");

    let profile = std::env::var_os("LUCENT_CPU_PROFILE").is_some();
    let cpu = CpuBackend::with_options(&CpuOptions { threads: Some(threads), profile, ..Default::default() });
    let engine = Engine::with_backend(Arc::new(cpu), &model_dir, None).expect("engine");
    let rt = engine.runtime();
    let stem = model_stem(&model).expect("model");
    let t0 = Instant::now();
    rt.network(stem).expect("load network");
    eprintln!("seg_bench: {model} loaded and prepared in {:.0} ms ({threads} threads)", t0.elapsed().as_secs_f64() * 1e3);

    let cancel = Cancel::new();
    let bytes = std::fs::read(&photo).expect("photo");
    let src = image_to_raster(lucent_codec::decode(&bytes, &Default::default()).expect("decode")).expect("raster").0;
    let rgb = rgb8(src.as_ref());
    let small = resize(lucent_engine::RasterRef::new_u8(src.width, src.height, 3, &rgb).expect("rgb"), 320, 320, &cancel).expect("resize");
    let Samples::U8(rgb320) = small.samples else { panic!("8-bit resize gave 16 bits") };
    let map = network_map_rgb8(rt, stem, &rgb320, 320, 320, &cancel).expect("map");
    std::fs::write(dump.join(format!("{model}.rgb320")), &rgb320).expect("write");
    std::fs::write(dump.join(format!("{model}.map.f32")), map.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).expect("write");
    println!("ready");

    let mut wrote = false;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let mut words = line.split_whitespace();
        let answer = match words.next() {
            Some("map") => {
                let t = Instant::now();
                network_map_rgb8(rt, stem, &rgb320, 320, 320, &cancel).expect("map");
                format!("ms {:.3}", t.elapsed().as_secs_f64() * 1e3)
            }
            Some("e2e") => {
                let path = words.next().expect("e2e PATH");
                let input = std::fs::read(path).expect("input");
                let t = Instant::now();
                let out = segment(rt, &input, &SegmentOptions { model: model.clone(), format: "png".into() }, &cancel).expect("segment");
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if !wrote {
                    std::fs::write(dump.join(format!("{model}.lucent.png")), &out.matted).expect("write");
                    std::fs::write(dump.join(format!("{model}.lucent.mask.png")), &out.mask).expect("write");
                    wrote = true;
                }
                format!("ms {ms:.3} {} {}", out.matted.len(), out.mask.len())
            }
            Some("stages") => stages(rt, &model, words.next().expect("stages PATH"), &cancel),
            Some("quit") | None => break,
            Some(other) => format!("error unknown request {other}"),
        };
        let mut o = stdout.lock();
        writeln!(o, "{answer}").expect("stdout");
        o.flush().expect("stdout");
    }
}

/// `segment`'s steps one by one (no orientation: the bench photo has none), timed.
fn stages(rt: &lucent_engine::Runtime, model: &str, path: &str, cancel: &Cancel) -> String {
    use lucent_engine::pipelines::segment::refine::{guided_filter, Guide, GuidedParams};
    use lucent_engine::pipelines::segment::{min_max, to_u8, upsample_bilinear};
    use lucent_engine::photo::raster_to_image;
    let input = std::fs::read(path).expect("input");
    let t = Instant::now();
    let mut last = Instant::now();
    let mut steps: Vec<(&str, f64)> = Vec::new();
    let mut lap = |name: &'static str, steps: &mut Vec<(&str, f64)>| {
        steps.push((name, last.elapsed().as_secs_f64() * 1e3));
        last = Instant::now();
    };
    let img = lucent_codec::decode(&input, &Default::default()).expect("decode");
    let (src, meta) = image_to_raster(img).expect("raster");
    lap("decode", &mut steps);
    let (w, h) = (src.width, src.height);
    let rgb = rgb8(src.as_ref());
    drop(src);
    lap("rgb8", &mut steps);
    let mut map = network_map_rgb8(rt, model_stem(model).expect("model"), &rgb, w, h, cancel).expect("map");
    lap("resize to 320 + network", &mut steps);
    min_max(&mut map);
    let coarse = upsample_bilinear(&map, 320, 320, w, h);
    lap("bilinear back", &mut steps);
    let alpha = guided_filter(Guide::Rgb8(&rgb), &coarse, w, h, GuidedParams::for_mask(w, h)).expect("filter");
    lap("guided filter", &mut steps);
    let mut rgba = Vec::with_capacity(w * h * 4);
    for (p, a) in rgb.chunks_exact(3).zip(&alpha) {
        rgba.extend_from_slice(p);
        rgba.push(to_u8(*a));
    }
    let mask_px: Vec<u8> = alpha.iter().map(|&a| to_u8(a)).collect();
    lap("RGBA + mask bytes", &mut steps);
    let eo = lucent_codec::EncodeOptions::default();
    let mask = lucent_engine::Raster::from_u8(w, h, 1, mask_px).expect("mask");
    lucent_codec::encode(&raster_to_image(mask, meta.clone()), lucent_codec::Format::Png, &eo).expect("png");
    lap("mask PNG", &mut steps);
    let rgba = lucent_engine::Raster::from_u8(w, h, 4, rgba).expect("rgba");
    lucent_codec::encode(&raster_to_image(rgba, meta), lucent_codec::Format::Png, &eo).expect("png");
    lap("RGBA PNG", &mut steps);
    let total = t.elapsed().as_secs_f64() * 1e3;
    let parts: Vec<String> = steps.iter().map(|(n, ms)| format!("{n} {ms:.0}")).collect();
    eprintln!("seg_bench stages (ms, {w}x{h}): {}; total {total:.0}", parts.join(", "));
    format!("ms {total:.3}")
}
