//! Prints encode/decode times and sizes per format for a synthetic photo-like image.
//! Run: cargo run --release -p lucent-codec --example codec_bench [-- WIDTH HEIGHT]

use lucent_codec::*;
use std::time::Instant;

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (w, h) = (args.first().copied().unwrap_or(2048), args.get(1).copied().unwrap_or(1536));
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    let mut s = 0x1234_5678u32;
    for y in 0..h {
        for x in 0..w {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let n = (s % 9) as i32 - 4;
            let v = |base: u32| (base as i32 + n).clamp(0, 255) as u8;
            data.extend_from_slice(&[v(x * 255 / w), v(y * 255 / h), v(((x / 64 + y / 64) % 2) * 120 + 60)]);
        }
    }
    let img = Image::from_u8(w, h, 3, data);
    println!("{w}x{h} RGB8, {:.1} MP", (w * h) as f64 / 1e6);
    println!("{:<6} {:>10} {:>10} {:>12} {:>9}", "format", "enc ms", "dec ms", "bytes", "PSNR dB");
    for f in Format::ALL {
        if f == Format::Heif && !heif_encode_supported() {
            println!("{:<6} (no HEIF encoder)", f.extension());
            continue;
        }
        let t = Instant::now();
        let bytes = encode(&img, f, &EncodeOptions { dpi: Some(300.0), ..Default::default() }).expect("encode");
        let enc = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let back = decode(&bytes, &Limits::default()).expect("decode");
        let dec = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!((back.width, back.height), (w, h));
        let (Pixels::U8(a), Pixels::U8(b)) = (&img.data, &back.data) else { unreachable!() };
        let mse = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum::<f64>() / a.len() as f64;
        let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64.powi(2) / mse).log10() };
        println!("{:<6} {:>10.1} {:>10.1} {:>12} {:>9.2}", f.extension(), enc, dec, bytes.len(), psnr);
    }
}
