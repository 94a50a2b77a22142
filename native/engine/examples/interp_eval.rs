//! `npm run bench:interp`: frame interpolation (RIFE v4.6) quality and CPU speed. Prints figures;
//! not a test.
//!
//!   cargo run --release -p lucent-engine --example interp_eval -- [all|clips|video|speed|tiling|scenecut] [--quick]
//!   cargo run --release -p lucent-engine --example interp_eval -- one WxH [--max-pixels N] [--runs N]   (child mode)
//!
//! - clips: still photos of ../shared/data/photos (and two stills of the shared video) moved by
//!   known sub-pixel motion (pans, zooms,
//!   rendered with a Catmull-Rom sampler at positions k = 0, 0.5, 1, 1.5, 2); frames 0 and 2 are
//!   interpolated at t = 0.25 / 0.5 / 0.75 and compared with the rendered k = 0.5 / 1 / 1.5.
//! - video: ../shared/data/video/onepiece_demo.mp4 (decoded with ffmpeg) with every other frame
//!   dropped; each dropped frame is interpolated at t = 0.5 from its neighbours. Pairs the
//!   scene-cut detector flags are listed apart (a server duplicates a frame there).
//! - speed: CPU backend frames per second at 540p and 1080p, and peak memory (VmHWM of a child
//!   process per size; 4K runs as tiles with the default limits, and once whole for comparison).
//! - tiling: the error tiling costs, tiled against whole-frame output on the same frames.
//!
//! PSNR: RGB, 8 bit, whole frame. Baseline: the plain blend (1 - t) f0 + t f1.
//! Env: LUCENT_MODEL_DIR (else ../shared/models), LUCENT_ENGINE_THREADS, LUCENT_FFMPEG.
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::Net;
use lucent_engine::photo::image_to_raster;
use lucent_engine::pipelines::interp::{self, InterpLimits, Rife};
use lucent_engine::pipelines::scenecut::{FrameSignature, DEFAULT_THRESHOLD};
use lucent_engine::{Cancel, Raster, Samples};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data() -> PathBuf {
    std::env::var_os("LUCENT_DATA_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/data"))
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"))
}

fn threads() -> Option<usize> {
    std::env::var("LUCENT_ENGINE_THREADS").ok().and_then(|v| v.parse().ok())
}

fn rife(limits: InterpLimits) -> Rife {
    let be = CpuBackend::new(threads());
    let net = Net::load_stem(&model_dir().join(interp::MODEL_STEM)).expect("RIFE model (LUCENT_MODEL_DIR)");
    Rife::new(&be, Arc::new(net)).unwrap().with_limits(limits)
}

/// 8-bit RGB of a photo (gray replicated, alpha dropped).
fn load_rgb(name: &str) -> Raster {
    let p = data().join("photos").join(name);
    let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let r = image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap()).unwrap().0;
    interp::to_rgb8(r.as_ref()).unwrap()
}

fn px(r: &Raster) -> &[u8] {
    match &r.samples {
        Samples::U8(v) => v,
        _ => panic!("8-bit expected"),
    }
}

fn psnr(a: &Raster, b: &Raster) -> f64 {
    let (x, y) = (px(a), px(b));
    let mse: f64 = x.iter().zip(y).map(|(&p, &q)| (p as f64 - q as f64).powi(2)).sum::<f64>() / x.len() as f64;
    if mse == 0.0 {
        99.0
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

fn blend(a: &Raster, b: &Raster, t: f32) -> Raster {
    let mut o = Raster::new(a.width, a.height, 3, 8).unwrap();
    interp::blend(a.as_ref(), b.as_ref(), t, &mut o.as_mut()).unwrap();
    o
}

fn cubic(x: f32) -> f32 {
    let x = x.abs();
    if x <= 1.0 {
        (1.5 * x - 2.5) * x * x + 1.0
    } else if x < 2.0 {
        ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    } else {
        0.0
    }
}

/// A fw x fh frame of `src` at motion parameter k: source point = centre + (p - centre) / zoom^k
/// + k * (vx, vy) + (0.37, 0.21) (every frame is resampled, none is the raw photo).
fn render(src: &Raster, fw: usize, fh: usize, k: f32, (vx, vy, zoom): (f32, f32, f32)) -> Raster {
    let s = px(src);
    let (sw, sh) = (src.width as isize, src.height as isize);
    let z = zoom.powf(k);
    let (cx, cy) = (src.width as f32 / 2.0, src.height as f32 / 2.0);
    let mut out = Vec::with_capacity(fw * fh * 3);
    for y in 0..fh {
        for x in 0..fw {
            let sx = cx + (x as f32 - fw as f32 / 2.0) / z + k * vx + 0.37;
            let sy = cy + (y as f32 - fh as f32 / 2.0) / z + k * vy + 0.21;
            let (x0, y0) = (sx.floor(), sy.floor());
            let mut acc = [0f32; 3];
            for j in -1..=2isize {
                let wy = cubic(sy - (y0 + j as f32));
                let yy = (y0 as isize + j).clamp(0, sh - 1) as usize;
                for i in -1..=2isize {
                    let wgt = wy * cubic(sx - (x0 + i as f32));
                    let xx = (x0 as isize + i).clamp(0, sw - 1) as usize;
                    for c in 0..3 {
                        acc[c] += wgt * s[(yy * src.width + xx) * 3 + c] as f32;
                    }
                }
            }
            out.extend(acc.iter().map(|v| (v + 0.5).clamp(0.0, 255.0) as u8));
        }
    }
    Raster::from_u8(fw, fh, 3, out).unwrap()
}

fn clips(r: &Rife) {
    let photos = ["OST_009.png", "00003.png", "ADE_val_00000114.jpg", "0030.jpg", "children-alpha.png"];
    let motions: [(&str, (f32, f32, f32)); 4] = [
        ("pan 3.3,1.7 px/frame", (3.3, 1.7, 1.0)),
        ("pan 8.6,-5.2 px/frame", (8.6, -5.2, 1.0)),
        ("zoom in 1.5 %/frame", (0.0, 0.0, 1.015)),
        ("zoom out 2 % + pan 2.5,0", (2.5, 0.0, 0.98)),
    ];
    println!("\n## Clips from still photos (frames 0 and 2 given; PSNR dB of the interpolated frames vs the rendered truth)\n");
    println!("| motion | photo | t | RIFE | blend | RIFE - blend |");
    println!("|---|---|---|---|---|---|");
    let (mut sr, mut sb, mut n) = (0.0, 0.0, 0);
    let mut per_motion: Vec<(String, f64, f64, usize)> = Vec::new();
    // Two stills of the shared video too (animation: flat colours, hard outlines).
    let (_, _, vframes) = decode_video(&data().join("video/onepiece_demo.mp4"));
    let mut sources: Vec<(String, Raster)> = photos.iter().map(|p| (p.to_string(), load_rgb(p))).collect();
    for k in [20usize, 136] {
        sources.push((format!("video frame {k}"), vframes[k].clone()));
    }
    for (mname, m) in motions {
        let (mut mr, mut mb, mut mn) = (0.0, 0.0, 0);
        for (p, src) in &sources {
            let (fw, fh) = (src.width * 7 / 8, src.height * 7 / 8);
            let f0 = render(src, fw, fh, 0.0, m);
            let f2 = render(src, fw, fh, 2.0, m);
            for (t, k) in [(0.25f32, 0.5f32), (0.5, 1.0), (0.75, 1.5)] {
                let truth = render(src, fw, fh, k, m);
                let out = r.interpolate(f0.as_ref(), f2.as_ref(), t, &Cancel::new()).unwrap();
                let (a, b) = (psnr(&out, &truth), psnr(&blend(&f0, &f2, t), &truth));
                println!("| {mname} | {p} ({fw}x{fh}) | {t} | {a:.2} | {b:.2} | {:+.2} |", a - b);
                (mr, mb, mn) = (mr + a, mb + b, mn + 1);
            }
        }
        per_motion.push((mname.to_string(), mr / mn as f64, mb / mn as f64, mn));
        (sr, sb, n) = (sr + mr, sb + mb, n + mn);
    }
    println!("\n| motion | frames | mean RIFE | mean blend | RIFE - blend |");
    println!("|---|---|---|---|---|");
    for (m, a, b, k) in &per_motion {
        println!("| {m} | {k} | {a:.2} | {b:.2} | {:+.2} |", a - b);
    }
    let (a, b) = (sr / n as f64, sb / n as f64);
    println!("| all | {n} | {a:.2} | {b:.2} | {:+.2} |", a - b);
}

fn decode_video(path: &std::path::Path) -> (usize, usize, Vec<Raster>) {
    let ffprobe = std::env::var("LUCENT_FFPROBE").unwrap_or_else(|_| "ffprobe".into());
    let o = std::process::Command::new(ffprobe)
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe");
    let s = String::from_utf8_lossy(&o.stdout);
    let d: Vec<usize> = s.trim().split(',').map(|v| v.parse().unwrap()).collect();
    let (w, h) = (d[0], d[1]);
    let ffmpeg = std::env::var("LUCENT_FFMPEG").unwrap_or_else(|_| "ffmpeg".into());
    let o = std::process::Command::new(ffmpeg)
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg");
    assert!(o.status.success(), "ffmpeg failed: {}", String::from_utf8_lossy(&o.stderr));
    let frames = o.stdout.chunks_exact(w * h * 3).map(|c| Raster::from_u8(w, h, 3, c.to_vec()).unwrap()).collect();
    (w, h, frames)
}

/// Mean absolute difference of two frames, in 8-bit levels.
fn mad(a: &Raster, b: &Raster) -> f64 {
    px(a).iter().zip(px(b)).map(|(&x, &y)| (x as i32 - y as i32).unsigned_abs() as u64).sum::<u64>() as f64 / px(a).len() as f64
}

/// Frames closer than this (mean absolute difference, levels) show the same picture: the clip's
/// re-encoded repeats differ by codec noise only (0.02..0.5 measured).
const SAME_PICTURE: f64 = 0.6;

#[derive(Default)]
struct Acc {
    n: usize,
    rife: f64,
    blend: f64,
    mse_r: f64,
    mse_b: f64,
}

impl Acc {
    fn add(&mut self, out: &Raster, bl: &Raster, truth: &Raster) {
        let mse = |a: &Raster| px(a).iter().zip(px(truth)).map(|(&p, &q)| (p as f64 - q as f64).powi(2)).sum::<f64>() / px(a).len() as f64;
        self.n += 1;
        self.rife += psnr(out, truth);
        self.blend += psnr(bl, truth);
        self.mse_r += mse(out);
        self.mse_b += mse(bl);
    }
    fn row(&self, label: &str) {
        if self.n == 0 {
            println!("| {label} | 0 | - | - | - | - |");
            return;
        }
        let n = self.n as f64;
        let db = |m: f64| if m == 0.0 { 99.0 } else { 10.0 * (65025.0 / m).log10() };
        println!(
            "| {label} | {} | {:.2} | {:.2} | {:+.2} | {:.2} / {:.2} |",
            self.n,
            self.rife / n,
            self.blend / n,
            (self.rife - self.blend) / n,
            db(self.mse_r / n),
            db(self.mse_b / n)
        );
    }
}

fn video(r: &Rife, quick: bool) {
    let path = data().join("video/onepiece_demo.mp4");
    let (w, h, frames) = decode_video(&path);
    let step = if quick { 8 } else { 2 };
    println!("\n## Shared video, every other frame dropped ({} frames of {w}x{h}; t = 0.5{})\n", frames.len(), if quick { ", every 4th pair (--quick)" } else { "" });
    let sigs: Vec<FrameSignature> = frames.iter().map(|f| FrameSignature::of(f.as_ref()).unwrap()).collect();
    let (mut stat, mut held, mut between, mut all) = (Acc::default(), Acc::default(), Acc::default(), Acc::default());
    let mut cuts = Vec::new();
    let t0 = Instant::now();
    let mut i = 0;
    while i + 2 < frames.len() {
        let (f0, truth, f2) = (&frames[i], &frames[i + 1], &frames[i + 2]);
        let d = sigs[i].distance(&sigs[i + 2]);
        let out = r.interpolate(f0.as_ref(), f2.as_ref(), 0.5, &Cancel::new()).unwrap();
        let bl = blend(f0, f2, 0.5);
        if d >= DEFAULT_THRESHOLD {
            cuts.push((i, d, psnr(&out, truth), psnr(&bl, truth)));
        } else {
            all.add(&out, &bl, truth);
            let acc = if mad(f0, f2) < SAME_PICTURE {
                &mut stat
            } else if mad(f0, truth) < SAME_PICTURE || mad(truth, f2) < SAME_PICTURE {
                &mut held
            } else {
                &mut between
            };
            acc.add(&out, &bl, truth);
        }
        i += step;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("| pairs (scene cuts excluded) | n | mean RIFE | mean blend | RIFE - blend | PSNR of the mean MSE, RIFE / blend |");
    println!("|---|---|---|---|---|---|");
    stat.row("static: frames 0 and 2 show the same picture");
    held.row("held: the dropped frame repeats frame 0 or 2 (animation on twos)");
    between.row("in-between: the dropped frame differs from both");
    all.row("all");
    for (i, d, a, b) in cuts {
        println!("scene cut between frames {i} and {} (distance {d:.3}): RIFE {a:.2} dB, blend {b:.2} dB (a server duplicates instead)", i + 2);
    }
    println!("({:.1} s for the interpolations, {:.2} s each on {w}x{h})", secs, secs / ((frames.len() - 1) / step).max(1) as f64);

    // The clip's own drawings: repeats removed, every other drawing dropped.
    let mut drawings: Vec<usize> = vec![0];
    for k in 1..frames.len() {
        if mad(&frames[*drawings.last().unwrap()], &frames[k]) >= SAME_PICTURE {
            drawings.push(k);
        }
    }
    let mut acc = Acc::default();
    let mut rows = Vec::new();
    for k in 0..drawings.len().saturating_sub(2) {
        let (a, m, b) = (drawings[k], drawings[k + 1], drawings[k + 2]);
        if sigs[a].distance(&sigs[b]) >= DEFAULT_THRESHOLD || sigs[a].distance(&sigs[m]) >= DEFAULT_THRESHOLD {
            continue;
        }
        let t = (m - a) as f32 / (b - a) as f32;
        let out = r.interpolate(frames[a].as_ref(), frames[b].as_ref(), t, &Cancel::new()).unwrap();
        let bl = blend(&frames[a], &frames[b], t);
        rows.push(format!("{a}-{m}-{b}: {:.2} / {:.2}", psnr(&out, &frames[m]), psnr(&bl, &frames[m])));
        acc.add(&out, &bl, &frames[m]);
    }
    println!(
        "\nThe clip's distinct pictures ({} of {} frames; repeats under {SAME_PICTURE} levels removed), every other one dropped, t from the frame numbers, triples across a scene cut skipped:\n",
        drawings.len(),
        frames.len()
    );
    println!("| triples | n | mean RIFE | mean blend | RIFE - blend | PSNR of the mean MSE, RIFE / blend |");
    println!("|---|---|---|---|---|---|");
    acc.row("distinct pictures");
    println!("\nper triple (frames, RIFE / blend dB): {}", rows.join("; "));
}

fn vm_hwm_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Frames of w x h made from the video's frames 110 and 112 (bicubic scaled by ffmpeg): a pair with large
/// motion (mean difference 26 levels), no scene cut.
fn scaled_pair(w: usize, h: usize) -> (Raster, Raster) {
    let path = data().join("video/onepiece_demo.mp4");
    let ffmpeg = std::env::var("LUCENT_FFMPEG").unwrap_or_else(|_| "ffmpeg".into());
    let o = std::process::Command::new(ffmpeg)
        .args(["-v", "error", "-i"])
        .arg(&path)
        .args(["-vf", &format!("select='between(n,110,112)',scale={w}:{h}:flags=bicubic"), "-vsync", "0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg");
    let f: Vec<Raster> = o.stdout.chunks_exact(w * h * 3).map(|c| Raster::from_u8(w, h, 3, c.to_vec()).unwrap()).collect();
    assert_eq!(f.len(), 3, "ffmpeg gave {} frames", f.len());
    (f[0].clone(), f[2].clone())
}

/// Child mode: time `runs` interpolations of a w x h pair and report peak memory.
fn one(w: usize, h: usize, limits: InterpLimits, runs: usize) {
    let (f0, f1) = scaled_pair(w, h);
    let base = vm_hwm_mb();
    let r = rife(limits);
    let tiles = r.plan(w, h).unwrap().len();
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        let _ = r.interpolate(f0.as_ref(), f1.as_ref(), 0.5, &Cancel::new()).unwrap();
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[times.len() / 2];
    println!("RESULT {w}x{h} tiles={tiles} runs={} median_s={med:.3} fps={:.4} peak_mb={:.0} frames_mb={base:.0}", times.len(), 1.0 / med, vm_hwm_mb());
}

fn child(args: &[String]) -> String {
    let exe = std::env::current_exe().unwrap();
    let o = std::process::Command::new(exe).arg("one").args(args).output().expect("child");
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    s.lines().find(|l| l.starts_with("RESULT")).map(|l| l.to_string()).unwrap_or_else(|| format!("FAILED: {}", String::from_utf8_lossy(&o.stderr)))
}

fn speed(quick: bool) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\n## CPU backend speed and memory ({} threads; load average {})\n", threads().map(|t| t.to_string()).unwrap_or("all".into()), load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    println!("GPU speed is not measured here: the only adapter is lavapipe (a CPU rasteriser), used for correctness only.\n");
    let mut cases: Vec<(String, Vec<String>)> = vec![
        ("540p".into(), vec!["960x540".into(), "--runs".into(), if quick { "1" } else { "3" }.into()]),
        ("1080p".into(), vec!["1920x1080".into(), "--runs".into(), if quick { "1" } else { "2" }.into()]),
    ];
    if !quick {
        cases.push(("4K, default limits (tiled)".into(), vec!["3840x2160".into(), "--runs".into(), "1".into()]));
        cases.push(("4K, whole frame".into(), vec!["3840x2160".into(), "--runs".into(), "1".into(), "--max-pixels".into(), "100000000".into()]));
    }
    println!("| size | result (median seconds per interpolated frame, fps, peak RSS of the process, RSS with just the decoded frames) |");
    println!("|---|---|");
    for (label, args) in cases {
        println!("| {label} | {} |", child(&args));
    }
}

fn tiling(quick: bool) {
    println!("\n## What tiling costs (tiled vs whole-frame output on the same pair, t = 0.5)\n");
    println!("| frames | limits | tiles | PSNR tiled vs whole (dB) | max |diff| (levels) | differing pixels |");
    println!("|---|---|---|---|---|---|");
    let mut cases = vec![(1920usize, 1080usize, InterpLimits { max_pixels: 700_000, margin: 128 }), (1920, 1080, InterpLimits { max_pixels: 700_000, margin: 64 })];
    if !quick {
        cases.push((3840, 2160, InterpLimits::default()));
    }
    for (w, h, lim) in cases {
        let (f0, f1) = scaled_pair(w, h);
        let whole = rife(InterpLimits { max_pixels: usize::MAX, margin: 0 }).interpolate(f0.as_ref(), f1.as_ref(), 0.5, &Cancel::new()).unwrap();
        let r = rife(lim);
        let tiled = r.interpolate(f0.as_ref(), f1.as_ref(), 0.5, &Cancel::new()).unwrap();
        let (a, b) = (px(&whole), px(&tiled));
        let maxd = a.iter().zip(b).map(|(&x, &y)| (x as i32 - y as i32).abs()).max().unwrap_or(0);
        let diff = a.chunks_exact(3).zip(b.chunks_exact(3)).filter(|(x, y)| x != y).count();
        println!(
            "| {w}x{h} (video frames 110, 112 scaled) | max {} px, margin {} | {} | {:.2} | {maxd} | {:.2} % |",
            lim.max_pixels,
            lim.margin,
            r.plan(w, h).unwrap().len(),
            psnr(&whole, &tiled),
            100.0 * diff as f64 / (w * h) as f64
        );
    }
}

fn scenecut() {
    println!("\n## Scene-cut distances (threshold {DEFAULT_THRESHOLD})\n");
    let (_, _, frames) = decode_video(&data().join("video/onepiece_demo.mp4"));
    let sigs: Vec<FrameSignature> = frames.iter().map(|f| FrameSignature::of(f.as_ref()).unwrap()).collect();
    for gap in [1usize, 2] {
        let mut d: Vec<(f32, usize)> = (0..sigs.len() - gap).map(|i| (sigs[i].distance(&sigs[i + gap]), i)).collect();
        d.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        println!("video, frames {gap} apart, highest: {}", d.iter().take(5).map(|(v, i)| format!("{i}-{}: {v:.3}", i + gap)).collect::<Vec<_>>().join(", "));
    }
    let names = ["OST_009.png", "00003.png", "ADE_val_00000114.jpg", "0030.jpg", "0014.jpg", "children-alpha.png", "wolf_gray.jpg", "00017_gray.png"];
    let photos: Vec<Raster> = names.iter().map(|n| load_rgb(n)).collect();
    let (fw, fh) = (160, 160);
    let mut cut_min = (f32::MAX, "", "");
    for i in 0..photos.len() {
        for j in i + 1..photos.len() {
            let a = render(&photos[i], fw, fh, 0.0, (0.0, 0.0, 1.0));
            let b = render(&photos[j], fw, fh, 0.0, (0.0, 0.0, 1.0));
            let d = FrameSignature::of(a.as_ref()).unwrap().distance(&FrameSignature::of(b.as_ref()).unwrap());
            if d < cut_min.0 {
                cut_min = (d, names[i], names[j]);
            }
        }
    }
    println!("cuts between two different photos (160x160 centre crops): lowest {:.3} ({} / {})", cut_min.0, cut_min.1, cut_min.2);
    let mut motion_max = (0.0f32, "", "");
    for (p, n) in photos.iter().zip(names) {
        let (fw, fh) = (p.width * 7 / 8, p.height * 7 / 8);
        for (m, mv) in [("pan 8 px", (8.0, 0.0, 1.0)), ("pan 16,8 px", (16.0, 8.0, 1.0)), ("zoom 5 %", (0.0, 0.0, 1.05))] {
            let a = render(p, fw, fh, 0.0, mv);
            let b = render(p, fw, fh, 1.0, mv);
            let d = FrameSignature::of(a.as_ref()).unwrap().distance(&FrameSignature::of(b.as_ref()).unwrap());
            if d > motion_max.0 {
                motion_max = (d, n, m);
            }
        }
    }
    println!("motion of one photo (pans of 8 and 16,8 px, zoom 5 %): highest {:.3} ({} {})", motion_max.0, motion_max.1, motion_max.2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse::<usize>().ok());
    let mode = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or_else(|| "all".into());
    if mode == "one" {
        let size = &args[1];
        let (w, h) = size.split_once('x').map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap())).expect("WxH");
        let lim = InterpLimits { max_pixels: flag("--max-pixels").unwrap_or(interp::DEFAULT_MAX_PIXELS), ..Default::default() };
        one(w, h, lim, flag("--runs").unwrap_or(1));
        return;
    }
    println!("# RIFE v4.6 frame interpolation (CPU backend){}", if quick { " --quick" } else { "" });
    let r = rife(InterpLimits::default());
    if mode == "all" || mode == "clips" {
        clips(&r);
    }
    if mode == "all" || mode == "video" {
        video(&r, quick);
    }
    if mode == "all" || mode == "speed" {
        speed(quick);
    }
    if mode == "all" || mode == "tiling" {
        tiling(quick);
    }
    if mode == "all" || mode == "scenecut" {
        scenecut();
    }
}
