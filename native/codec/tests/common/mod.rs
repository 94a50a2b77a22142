#![allow(dead_code)]

use lucent_codec::*;
use std::path::PathBuf;

pub const LOSSLESS: [Format; 5] = [Format::Png, Format::Bmp, Format::Tga, Format::Tiff, Format::Webp];

/// Deterministic test picture: smooth gradients plus some texture, so both lossless and lossy
/// codecs have something real to do. Alpha varies across the image.
pub fn synth_u8(w: u32, h: u32, ch: u8) -> Image {
    let mut d = Vec::with_capacity((w * h * ch as u32) as usize);
    for y in 0..h {
        for x in 0..w {
            let r = (x * 255 / w.max(2).saturating_sub(1).max(1)).min(255) as u8;
            let g = (y * 255 / h.max(2).saturating_sub(1).max(1)).min(255) as u8;
            let b = (((x + y) * 7) % 256) as u8 / 4 + 100;
            let a = (255 - (x * 200 / w.max(1))) as u8;
            match ch {
                1 => d.push(r / 2 + g / 2),
                2 => d.extend_from_slice(&[r / 2 + g / 2, a]),
                3 => d.extend_from_slice(&[r, g, b]),
                _ => d.extend_from_slice(&[r, g, b, a]),
            }
        }
    }
    Image::from_u8(w, h, ch, d)
}

pub fn synth_u16(w: u32, h: u32, ch: u8) -> Image {
    let mut d = Vec::with_capacity((w * h * ch as u32) as usize);
    for y in 0..h {
        for x in 0..w {
            // Values that are not multiples of 257, so an 8-bit detour would be visible.
            let r = ((x * 65535 / w) as u16) ^ 0x0123;
            let g = ((y * 65535 / h) as u16) | 0x0001;
            let b = (x * 31 + y * 17) as u16 * 13;
            let a = 65535 - (x * 40000 / w) as u16;
            match ch {
                1 => d.push(r),
                2 => d.extend_from_slice(&[r, a]),
                3 => d.extend_from_slice(&[r, g, b]),
                _ => d.extend_from_slice(&[r, g, b, a]),
            }
        }
    }
    Image::from_u16(w, h, ch, d)
}

/// Pixels as RGBA 8-bit (gray replicated, missing alpha opaque, 16-bit rounded).
pub fn rgba8(img: &Image) -> Vec<[u8; 4]> {
    let ch = img.channels as usize;
    let get = |i: usize| -> u8 {
        match &img.data {
            Pixels::U8(v) => v[i],
            Pixels::U16(v) => ((v[i] as u32 * 255 + 32767) / 65535) as u8,
        }
    };
    let n = (img.width * img.height) as usize;
    (0..n)
        .map(|p| {
            let b = p * ch;
            match ch {
                1 => [get(b), get(b), get(b), 255],
                2 => [get(b), get(b), get(b), get(b + 1)],
                3 => [get(b), get(b + 1), get(b + 2), 255],
                _ => [get(b), get(b + 1), get(b + 2), get(b + 3)],
            }
        })
        .collect()
}

pub fn psnr_rgb(a: &Image, b: &Image) -> f64 {
    let (pa, pb) = (rgba8(a), rgba8(b));
    assert_eq!(pa.len(), pb.len());
    let mut se = 0f64;
    for (x, y) in pa.iter().zip(&pb) {
        for c in 0..3 {
            let d = x[c] as f64 - y[c] as f64;
            se += d * d;
        }
    }
    let mse = se / (pa.len() * 3) as f64;
    if mse == 0.0 {
        return 99.0;
    }
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

pub fn data_dir() -> Option<PathBuf> {
    let p = std::env::var_os("LUCENT_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("shared/data not found at {}: skipping real-image checks", p.display());
        None
    }
}

/// Real image files (png/jpg) from shared/data: photos plus Set5 HR.
pub fn real_files() -> Vec<(PathBuf, Vec<u8>)> {
    let Some(d) = data_dir() else { return vec![] };
    let mut out = vec![];
    for sub in ["photos", "sr/Set5/HR"] {
        if let Ok(rd) = std::fs::read_dir(d.join(sub)) {
            let mut v: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
            v.sort();
            for p in v {
                let b = std::fs::read(&p).unwrap();
                out.push((p, b));
            }
        }
    }
    out
}

/// A hand-built big-endian EXIF block: Make, Orientation, X/YResolution 72 dpi, an EXIF sub-IFD
/// with PixelXDimension/PixelYDimension 10x10 and DateTimeOriginal.
pub fn test_exif(orientation: u16) -> Vec<u8> {
    let mut b: Vec<u8> = b"MM\0*\0\0\0\x08".to_vec();
    // IFD0: 6 entries at offset 8 -> table ends at 8+2+72+4 = 86
    let make = b"TestCam\0"; // 8 bytes at 86
    let xres_off = 94u32; // 8 bytes
    let yres_off = 102u32; // 8 bytes
    let exif_ifd = 110u32;
    let entry = |b: &mut Vec<u8>, tag: u16, typ: u16, count: u32, val: [u8; 4]| {
        b.extend_from_slice(&tag.to_be_bytes());
        b.extend_from_slice(&typ.to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(&val);
    };
    b.extend_from_slice(&6u16.to_be_bytes());
    entry(&mut b, 0x010F, 2, 8, 86u32.to_be_bytes());
    let o = orientation.to_be_bytes();
    entry(&mut b, 0x0112, 3, 1, [o[0], o[1], 0, 0]);
    entry(&mut b, 0x011A, 5, 1, xres_off.to_be_bytes());
    entry(&mut b, 0x011B, 5, 1, yres_off.to_be_bytes());
    entry(&mut b, 0x0128, 3, 1, [0, 2, 0, 0]);
    entry(&mut b, 0x8769, 4, 1, exif_ifd.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    assert_eq!(b.len(), 86);
    b.extend_from_slice(make);
    b.extend_from_slice(&72u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&72u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    assert_eq!(b.len(), 110);
    // EXIF IFD: 3 entries -> table ends at 110+2+36+4 = 152; date string (20 bytes) at 152
    b.extend_from_slice(&3u16.to_be_bytes());
    entry(&mut b, 0x9003, 2, 20, 152u32.to_be_bytes());
    entry(&mut b, 0xA002, 4, 1, 10u32.to_be_bytes());
    entry(&mut b, 0xA003, 4, 1, 10u32.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(b"2024:01:02 03:04:05\0");
    b
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// xorshift64* — a tiny seeded RNG for the fuzz-style tests.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub fn heif_ok() -> bool {
    let ok = heif_decode_supported() && heif_encode_supported();
    if !ok {
        eprintln!("HEIF not available here (decode {}, encode {}): skipping HEIF part", heif_decode_supported(), heif_encode_supported());
    }
    ok
}
