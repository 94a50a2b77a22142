//! `npm run bench:resize`: the output-size resampler (`resample::resize`, the photo path's
//! target_width / target_height) against `image::imageops::resize` (Lanczos3, the image crate
//! lucent-codec already uses) on the same RGB 8-bit picture, one thread each. Prints figures; not a
//! test. Both use pixel-centre alignment and a Lanczos3 window stretched when shrinking, so their
//! outputs should agree closely (printed as the max / mean absolute difference in 8-bit steps); at
//! 3x shrink and more ours averages areas instead (the difference there is the filter's).
//!
//!   cargo run --release -p lucent-engine --example resize_bench -- [--runs N]
use image::imageops::{resize as image_resize, FilterType};
use image::RgbImage;
use lucent_engine::resample::resize;
use lucent_engine::{Cancel, Raster};
use std::time::Instant;

fn picture(w: usize, h: usize) -> Vec<u8> {
    // Smooth gradients plus fine detail (a xorshift noise and a fine sine grating): enough high
    // frequencies that the filters' differences show.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let n = (s >> 59) as f32;
            let g = ((x as f32 * 0.9).sin() * 40.0) + ((y as f32 * 0.37).cos() * 30.0);
            v.push((x * 200 / w) as f32 + n + g);
            v.push((y * 200 / h) as f32 + n - g * 0.5);
            v.push(128.0 + g);
        }
    }
    v.into_iter().map(|f| f.clamp(0.0, 255.0) as u8).collect()
}

fn best_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(3);
    let (w, h) = (1600usize, 1200usize);
    let data = picture(w, h);
    let ours_src = Raster::from_u8(w, h, 3, data.clone()).unwrap();
    let peer_src = RgbImage::from_raw(w as u32, h as u32, data).unwrap();
    println!("resize of a {w}x{h} RGB 8-bit picture, best of {runs} runs, one thread each");
    println!("{:<22} {:>10} {:>12} {:>8} {:>14}", "to", "ours ms", "image ms", "ratio", "|diff| max/mean");
    for (tw, th) in [(2400usize, 1800usize), (3200, 2400), (4000, 3000), (1067, 800), (800, 600), (400, 300)] {
        let c = Cancel::new();
        let mut ours = None;
        let t_ours = best_ms(runs, || ours = Some(resize(ours_src.as_ref(), tw, th, &c).unwrap()));
        let mut peer = None;
        let t_peer = best_ms(runs, || peer = Some(image_resize(&peer_src, tw as u32, th as u32, FilterType::Lanczos3)));
        let (ours, peer) = (ours.unwrap(), peer.unwrap());
        let lucent_engine::Samples::U8(a) = &ours.samples else { unreachable!() };
        let b = peer.as_raw();
        let (mut max, mut sum) = (0u32, 0u64);
        for (x, y) in a.iter().zip(b.iter()) {
            let d = (*x as i32 - *y as i32).unsigned_abs();
            max = max.max(d);
            sum += d as u64;
        }
        let kind = if w >= tw * 3 { "area" } else { "lanczos3" };
        println!(
            "{:<22} {:>10.1} {:>12.1} {:>7.2}x {:>7} / {:.3}",
            format!("{tw}x{th} ({kind})"),
            t_ours,
            t_peer,
            t_peer / t_ours,
            max,
            sum as f64 / a.len() as f64
        );
    }
}
