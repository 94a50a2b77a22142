//! Hostile inputs: truncation, lying headers, decompression bombs, garbage, mutation fuzzing.
//! A counting allocator records the largest single allocation made by each thread, so the
//! "refused before allocating" claims are checked, not assumed.

mod common;
use common::*;
use lucent_codec::*;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

struct Counting;
thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|c| c.set(c.get().max(l.size())));
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|c| c.set(c.get().max(l.size())));
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|c| c.set(c.get().max(n)));
        System.realloc(p, l, n)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}
#[global_allocator]
static A: Counting = Counting;

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
fn largest_alloc<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let r = f();
    (r, LARGEST.with(|c| c.get()))
}

fn assert_clean_err(r: &Result<Image, CodecError>, what: &str) {
    if let Err(e) = r {
        assert!(!e.message.contains("panicked"), "{what}: decoder panicked: {e}");
    }
}

fn png_chunk(ty: &[u8; 4], data: &[u8]) -> Vec<u8> {
    // Independent CRC implementation (bitwise) for test-made PNGs.
    let mut crc = 0xFFFF_FFFFu32;
    for &b in ty.iter().chain(data) {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    let mut c = (data.len() as u32).to_be_bytes().to_vec();
    c.extend_from_slice(ty);
    c.extend_from_slice(data);
    c.extend_from_slice(&(!crc).to_be_bytes());
    c
}

fn png_with(w: u32, h: u32, color: u8, depth: u8, idat: &[u8]) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[depth, color, 0, 0, 0]);
    b.extend(png_chunk(b"IHDR", &ihdr));
    b.extend(png_chunk(b"IDAT", idat));
    b.extend(png_chunk(b"IEND", &[]));
    b
}

/// zlib stream of `rows` rows of (filter byte 0 + `row_len` zeros), compressed without ever
/// holding the whole raw image in memory.
fn zero_image_zlib(row_len: usize, rows: usize) -> Vec<u8> {
    use miniz_oxide::deflate::core::{compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus};
    let mut c = CompressorOxide::new(create_comp_flags_from_zip_params(9, 15, 0));
    let row = vec![0u8; row_len + 1];
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..rows {
        let flush = if i + 1 == rows { TDEFLFlush::Finish } else { TDEFLFlush::None };
        let mut input: &[u8] = &row;
        loop {
            let (status, used, produced) = compress(&mut c, input, &mut buf, flush);
            out.extend_from_slice(&buf[..produced]);
            input = &input[used..];
            if status == TDEFLStatus::Done || (input.is_empty() && produced < buf.len()) {
                break;
            }
            assert!(status != TDEFLStatus::BadParam && status != TDEFLStatus::PutBufFailed);
        }
    }
    out
}

#[test]
fn png_ihdr_claiming_60000_squared_is_refused_without_allocating() {
    let bytes = png_with(60000, 60000, 6, 8, &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    assert!(bytes.len() < 100);
    let p = probe(&bytes).unwrap();
    assert_eq!((p.width, p.height, p.channels), (60000, 60000, 4));
    let (r, largest) = largest_alloc(|| decode(&bytes, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 1 << 20, "largest allocation {largest} bytes");
}

#[test]
fn png_zero_bomb_is_refused_by_limits() {
    // 12000 x 12000 gray, all zero: 144 MB of pixels in a small file.
    let (w, h) = (12000usize, 12000usize);
    let z = zero_image_zlib(w, h);
    let bytes = png_with(w as u32, h as u32, 0, 8, &z);
    assert!(bytes.len() < 1 << 20, "bomb is {} bytes", bytes.len());

    // Over the pixel limit.
    let (r, largest) = largest_alloc(|| decode(&bytes, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 4 << 20, "largest allocation {largest}");

    // Pixel count allowed, but the allocation budget is not.
    let lim = Limits { max_pixels: 1_000_000_000, max_alloc_bytes: 64 << 20 };
    let (r, largest) = largest_alloc(|| decode(&bytes, &lim));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest <= (64 << 20), "largest allocation {largest}");
}

#[test]
fn limits_apply_to_every_format() {
    let mut fs = vec![Format::Png, Format::Jpeg, Format::Bmp, Format::Tga, Format::Tiff, Format::Webp];
    if heif_ok() {
        fs.push(Format::Heif);
    }
    for f in fs {
        let bytes = encode(&synth_u8(64, 64, 3), f, &EncodeOptions::default()).unwrap();
        let tight = Limits { max_pixels: 64 * 64 - 1, max_alloc_bytes: 1 << 30 };
        assert_eq!(decode(&bytes, &tight).unwrap_err().code, CodecErrorCode::ImageTooLarge, "{f:?}");
        let tight = Limits { max_pixels: 1 << 20, max_alloc_bytes: 64 * 64 * 3 - 1 };
        assert_eq!(decode(&bytes, &tight).unwrap_err().code, CodecErrorCode::ImageTooLarge, "{f:?}");
        // Exactly at the pixel limit decodes; the allocation budget also covers the decoder's
        // working memory, so it gets some room over the output size.
        let exact = Limits { max_pixels: 64 * 64, max_alloc_bytes: 64 * 64 * 3 * 4 };
        let r = decode(&bytes, &exact);
        assert!(r.is_ok(), "{f:?} at exactly the pixel limit: {r:?}");
    }
}

#[test]
fn lying_headers_in_other_formats() {
    // BMP claiming 50000 x 50000 x 32 bpp with no pixel data.
    let mut bmp = b"BM".to_vec();
    bmp.extend_from_slice(&[0; 12]);
    bmp.extend_from_slice(&40u32.to_le_bytes());
    bmp.extend_from_slice(&50000i32.to_le_bytes());
    bmp.extend_from_slice(&50000i32.to_le_bytes());
    bmp.extend_from_slice(&1u16.to_le_bytes());
    bmp.extend_from_slice(&32u16.to_le_bytes());
    bmp.extend_from_slice(&[0; 24]);
    let (r, largest) = largest_alloc(|| decode(&bmp, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 1 << 20);

    // Same BMP within the pixel limit but without its pixel data: decode_failed, small allocations only.
    bmp[18..22].copy_from_slice(&2000i32.to_le_bytes());
    bmp[22..26].copy_from_slice(&2000i32.to_le_bytes());
    let lim = Limits { max_pixels: 20_000_000, max_alloc_bytes: 32 << 20 };
    let (r, largest) = largest_alloc(|| decode(&bmp, &lim));
    assert_eq!(r.as_ref().unwrap_err().code, CodecErrorCode::DecodeFailed, "{r:?}");
    assert!(largest <= 32 << 20, "largest allocation {largest}");

    // TGA 65535 x 65535 RGBA header only.
    let mut tga = vec![0u8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    tga.extend_from_slice(&65535u16.to_le_bytes());
    tga.extend_from_slice(&65535u16.to_le_bytes());
    tga.extend_from_slice(&[32, 8]);
    let (r, largest) = largest_alloc(|| decode(&tga, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 1 << 20);

    // JPEG SOF claiming 65000 x 65000.
    let mut jpg = encode(&synth_u8(16, 16, 3), Format::Jpeg, &EncodeOptions::default()).unwrap();
    let sof = jpg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    jpg[sof + 5..sof + 7].copy_from_slice(&65000u16.to_be_bytes());
    jpg[sof + 7..sof + 9].copy_from_slice(&65000u16.to_be_bytes());
    let (r, largest) = largest_alloc(|| decode(&jpg, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 1 << 20);

    // TIFF claiming 100000 x 100000.
    let mut tif = encode(&synth_u8(16, 16, 3), Format::Tiff, &EncodeOptions::default()).unwrap();
    let off = u32::from_le_bytes([tif[4], tif[5], tif[6], tif[7]]) as usize;
    let n = u16::from_le_bytes([tif[off], tif[off + 1]]) as usize;
    for i in 0..n {
        let p = off + 2 + 12 * i;
        let tag = u16::from_le_bytes([tif[p], tif[p + 1]]);
        if tag == 256 || tag == 257 {
            tif[p + 8..p + 12].copy_from_slice(&100000u32.to_le_bytes());
        }
    }
    let (r, largest) = largest_alloc(|| decode(&tif, &Limits::default()));
    assert_eq!(r.unwrap_err().code, CodecErrorCode::ImageTooLarge);
    assert!(largest < 1 << 20);

    // Zero dimensions.
    let zero = png_with(0, 10, 2, 8, &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    assert_eq!(decode(&zero, &Limits::default()).unwrap_err().code, CodecErrorCode::DecodeFailed);
    assert!(probe(&zero).is_err());
}

#[test]
fn garbage_and_empty_inputs() {
    let mut rng = Rng(0x5eed_1234);
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        b"hello world, definitely not an image".to_vec(),
        (0..4096).map(|_| rng.next() as u8).collect(),
        b"\x89PNG\r\n\x1a\n".to_vec(),
        vec![0xFF, 0xD8, 0xFF],
        b"RIFF\0\0\0\0WEBP".to_vec(),
        b"II*\0\x08\0\0\0".to_vec(),
        b"MM\0*\xff\xff\xff\xff".to_vec(),
        b"BM".to_vec(),
        b"\0\0\0\x18ftypheic\0\0\0\0mif1heic".to_vec(),
    ];
    for (i, c) in cases.iter().enumerate() {
        let r = decode(c, &Limits::default());
        let e = r.as_ref().expect_err(&format!("case {i} decoded"));
        assert!(matches!(e.code, CodecErrorCode::DecodeFailed | CodecErrorCode::UnsupportedFormat), "case {i}: {e}");
        assert_clean_err(&r, &format!("case {i}"));
        assert!(probe(c).is_err(), "case {i} probed");
    }
    assert_eq!(decode(b"hello world", &Limits::default()).unwrap_err().code, CodecErrorCode::UnsupportedFormat);
}

fn sample_files() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = vec![];
    let mut fs = vec![Format::Png, Format::Jpeg, Format::Bmp, Format::Tga, Format::Tiff, Format::Webp];
    if heif_decode_supported() && heif_encode_supported() {
        fs.push(Format::Heif);
    }
    for f in fs {
        let mut img = synth_u8(24, 16, 4);
        img.meta.exif = Some(test_exif(1));
        let b = encode(&img, f, &EncodeOptions { keep_exif: true, dpi: Some(300.0), quality: 80 }).unwrap();
        v.push((format!("synthetic.{}", f.extension()), b));
    }
    for (p, b) in real_files() {
        if b.len() < 400_000 {
            v.push((p.file_name().unwrap().to_string_lossy().into_owned(), b));
        }
    }
    v
}

#[test]
fn truncated_files_fail_cleanly() {
    let lim = Limits { max_pixels: 8_000_000, max_alloc_bytes: 256 << 20 };
    for (name, bytes) in sample_files() {
        let n = bytes.len();
        // Every offset in the first 300 bytes (headers), then ~40 spread over the rest.
        let mut cuts: Vec<usize> = (0..n.min(300)).collect();
        let step = (n / 40).max(1);
        cuts.extend((300..n).step_by(step));
        for cut in cuts {
            let t = &bytes[..cut];
            let r = decode(t, &lim);
            assert_clean_err(&r, &format!("{name} cut at {cut}"));
            if let Err(e) = &r {
                assert!(
                    matches!(e.code, CodecErrorCode::DecodeFailed | CodecErrorCode::UnsupportedFormat),
                    "{name} cut at {cut}: {e}"
                );
            }
            let _ = probe(t);
        }
    }
}

#[test]
fn flipped_header_bytes_fail_cleanly() {
    let lim = Limits { max_pixels: 8_000_000, max_alloc_bytes: 256 << 20 };
    for (name, bytes) in sample_files() {
        // Headers of our own encodings in full; real files: their first bytes, small ones only.
        let span = if name.starts_with("synthetic") { 160 } else if bytes.len() < 120_000 { 48 } else { 0 };
        for i in 0..bytes.len().min(span) {
            for v in [0x00u8, 0xFF, bytes[i] ^ 0x80, bytes[i].wrapping_add(1)] {
                let mut m = bytes.clone();
                m[i] = v;
                let (r, largest) = largest_alloc(|| decode(&m, &lim));
                assert_clean_err(&r, &format!("{name} byte {i} = {v:#x}"));
                assert!(largest as u64 <= lim.max_alloc_bytes, "{name} byte {i}: allocation {largest}");
            }
        }
    }
}

#[test]
fn seeded_mutation_fuzz() {
    let lim = Limits { max_pixels: 4_000_000, max_alloc_bytes: 64 << 20 };
    let files = sample_files();
    let mut rng = Rng(0xC0DE_C0DE_1234_5678);
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut runs = 0;
    while Instant::now() < deadline && runs < 3000 {
        let (name, src) = &files[rng.below(files.len())];
        let mut m = src.clone();
        for _ in 0..1 + rng.below(8) {
            let n = m.len();
            if n == 0 {
                break;
            }
            match rng.below(5) {
                0 => m[rng.below(n)] = rng.next() as u8,
                1 => m[rng.below(n)] ^= 1 << rng.below(8),
                2 => m.truncate(rng.below(n)),
                3 => {
                    let at = rng.below(n);
                    let len = rng.below(64);
                    let ins: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    m.splice(at..at, ins);
                }
                _ => {
                    let at = rng.below(n);
                    let len = rng.below(16).min(n - at);
                    m.drain(at..at + len);
                }
            }
        }
        let (r, largest) = largest_alloc(|| decode(&m, &lim));
        assert_clean_err(&r, &format!("mutated {name} (run {runs})"));
        assert!(largest as u64 <= lim.max_alloc_bytes, "mutated {name}: allocation {largest}");
        let _ = probe(&m);
        runs += 1;
    }
    eprintln!("fuzz: {runs} mutated inputs decoded without panics");
    assert!(runs >= 50);
}

#[test]
fn encode_rejects_inconsistent_images() {
    let bad = Image::from_u8(4, 4, 3, vec![0; 10]);
    assert_eq!(encode(&bad, Format::Png, &EncodeOptions::default()).unwrap_err().code, CodecErrorCode::EncodeFailed);
    let bad = Image::from_u8(0, 4, 3, vec![]);
    assert_eq!(encode(&bad, Format::Png, &EncodeOptions::default()).unwrap_err().code, CodecErrorCode::EncodeFailed);
    let mut bad = Image::from_u8(1, 1, 3, vec![0; 3]);
    bad.bit_depth = 16;
    assert_eq!(encode(&bad, Format::Png, &EncodeOptions::default()).unwrap_err().code, CodecErrorCode::EncodeFailed);
    let bad = Image::from_u8(1, 1, 5, vec![0; 5]);
    assert_eq!(encode(&bad, Format::Png, &EncodeOptions::default()).unwrap_err().code, CodecErrorCode::EncodeFailed);
    let ok = Image::from_u8(1, 1, 3, vec![1, 2, 3]);
    assert_eq!(
        encode(&ok, Format::Png, &EncodeOptions { dpi: Some(-3.0), ..Default::default() }).unwrap_err().code,
        CodecErrorCode::EncodeFailed
    );
}

#[test]
fn png_transparency_chunk_probe_matches_decode() {
    // 3x2 palette image (8-bit indices) with a tRNS chunk, and a gray image with tRNS.
    let raw = [0u8, 0, 1, 2, 0, 2, 1, 0];
    let z = miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6);
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 3u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&2u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 3, 0, 0, 0]);
    b.extend(png_chunk(b"IHDR", &ihdr));
    b.extend(png_chunk(b"PLTE", &[255, 0, 0, 0, 255, 0, 0, 0, 255]));
    b.extend(png_chunk(b"tRNS", &[0, 128]));
    b.extend(png_chunk(b"IDAT", &z));
    b.extend(png_chunk(b"IEND", &[]));
    let p = probe(&b).unwrap();
    let img = decode(&b, &Limits::default()).unwrap();
    assert_eq!((p.channels, img.channels), (4, 4));
    assert_eq!(img.data, Pixels::U8(vec![255, 0, 0, 0, 0, 255, 0, 128, 0, 0, 255, 255, 0, 0, 255, 255, 0, 255, 0, 128, 255, 0, 0, 0]));

    let raw = [0u8, 10, 20, 30, 0, 40, 50, 60];
    let z = miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6);
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 3u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&2u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    b.extend(png_chunk(b"IHDR", &ihdr));
    b.extend(png_chunk(b"tRNS", &[0, 20]));
    b.extend(png_chunk(b"IDAT", &z));
    b.extend(png_chunk(b"IEND", &[]));
    let p = probe(&b).unwrap();
    let img = decode(&b, &Limits::default()).unwrap();
    assert_eq!((p.channels, img.channels), (2, 2));
    assert_eq!(img.data, Pixels::U8(vec![10, 255, 20, 0, 30, 255, 40, 255, 50, 255, 60, 255]));
}
