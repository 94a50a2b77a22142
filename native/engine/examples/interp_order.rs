//! `npm run bench:interp-order`: which order costs less for a video model with frame interpolation,
//! RIFE before super-resolution (at the input size, then every output frame through the model) or
//! after it (the source frames through the model, then RIFE at the output size). Runs both orders
//! with the engine's own entry points (`enhance_frames`, `interpolate_frames`, as the server's video
//! jobs do) on the same frames of the shared video, CPU backend, and prints the times. Not a test.
//!
//!   cargo run --release -p lucent-engine --example interp_order -- [WxH] [--frames N] [--factor F] [--models a,b]
//!
//! Defaults: 320x180, 4 source frames, 2x the frame rate, general_restore_2x, general_restore_1x,
//! general_restore_4x. Env: LUCENT_MODEL_DIR (else ../shared/models), LUCENT_ENGINE_THREADS, LUCENT_FFMPEG.
use lucent_core::cpu::CpuBackend;
use lucent_engine::{catalog, Cancel, Engine, Frames, Kind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"))
}

/// `n` frames of the shared video from frame 100 on, scaled to w x h, packed RGB24.
fn frames(w: usize, h: usize, n: usize) -> Vec<u8> {
    let ffmpeg = std::env::var("LUCENT_FFMPEG").unwrap_or_else(|_| "ffmpeg".into());
    let video = root().join("../shared/data/video/onepiece_demo.mp4");
    let o = std::process::Command::new(ffmpeg)
        .args(["-v", "error", "-i"])
        .arg(&video)
        .args(["-vf", &format!("select=gte(n\\,100),scale={w}:{h}:flags=bicubic"), "-fps_mode", "passthrough"])
        .args(["-frames:v", &n.to_string(), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg");
    assert!(o.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), w * h * 3 * n, "ffmpeg gave {} bytes", o.stdout.len());
    o.stdout
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let size = args.iter().find(|a| a.contains('x') && !a.starts_with("--")).cloned().unwrap_or_else(|| "320x180".into());
    let (w, h): (usize, usize) = size.split_once('x').map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap())).expect("WxH");
    let n: usize = flag("--frames").and_then(|v| v.parse().ok()).unwrap_or(4);
    let f: usize = flag("--factor").and_then(|v| v.parse().ok()).unwrap_or(2);
    let models = flag("--models").unwrap_or_else(|| "general_restore_2x,general_restore_1x,general_restore_4x".into());
    let threads = std::env::var("LUCENT_ENGINE_THREADS").ok().and_then(|v| v.parse().ok());
    let e = Engine::with_backend(Arc::new(CpuBackend::new(threads)), &model_dir(), None).expect("engine");
    let src = frames(w, h, n);
    // Output positions: (n - 1) * f + 1 frames, k / f (the source frames and f - 1 in-betweens per pair).
    let positions: Vec<f64> = (0..=(n - 1) * f).map(|k| k as f64 / f as f64).collect();
    let made = positions.len() - n;
    let c = Cancel::new();
    println!("# interpolate before or after super-resolution: {w}x{h}, {n} source frames, {f}x the rate ({} output frames, {made} made by RIFE), CPU backend", positions.len());
    println!("| model | scale | before: RIFE at {w}x{h}, then SR of {} frames | after: SR of {n} frames, then RIFE at the output size | after / before |", positions.len());
    println!("|---|---|---|---|---|");
    // Warm-up: load and prepare the networks once (not timed).
    let warm = e.interpolate_frames(Frames::new(&src, w, h, n), &positions[..2], &c).expect("RIFE");
    drop(warm);
    for model in models.split(',') {
        let s = catalog::lookup(Kind::Video, model).expect("video model").scale;
        e.enhance_frames(Frames::new(&src[..w * h * 3], w, h, 1), model, None, &c).expect("warm-up");
        let t0 = Instant::now();
        let mid = e.interpolate_frames(Frames::new(&src, w, h, n), &positions, &c).unwrap();
        let t_rife_in = t0.elapsed().as_secs_f64();
        e.enhance_frames(Frames::new(&mid.rgb24, w, h, mid.count), model, None, &c).unwrap();
        let before = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let sr = e.enhance_frames(Frames::new(&src, w, h, n), model, None, &c).unwrap();
        let t_sr = t1.elapsed().as_secs_f64();
        e.interpolate_frames(Frames::new(&sr.rgb24, sr.width, sr.height, n), &positions, &c).unwrap();
        let after = t1.elapsed().as_secs_f64();
        println!(
            "| {model} | {s} | {before:.2} s (RIFE {t_rife_in:.2} + SR {:.2}) | {after:.2} s (SR {t_sr:.2} + RIFE {:.2} at {}x{}) | {:.2} |",
            before - t_rife_in,
            after - t_sr,
            sr.width,
            sr.height,
            after / before
        );
    }
}
