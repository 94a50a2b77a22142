//! Format sniffing and header-only probing.

use crate::exif::{self, parse_header, read_ifd};
use crate::{CodecError, Format, Probe};

/// Sniffs the container format from magic numbers. TGA has no magic number, so it is checked
/// last with a plausibility test of its header.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    if bytes.len() >= 8 && &bytes[..8] == b"\x89PNG\r\n\x1a\n" {
        return Some(Format::Png);
    }
    if bytes.len() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF {
        return Some(Format::Jpeg);
    }
    if bytes.len() >= 4 && (&bytes[..4] == b"II*\0" || &bytes[..4] == b"MM\0*") {
        return Some(Format::Tiff);
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Some(Format::Webp);
    }
    if bytes.len() >= 2 && &bytes[..2] == b"BM" {
        return Some(Format::Bmp);
    }
    if is_heif(bytes) {
        return Some(Format::Heif);
    }
    if tga_header(bytes).is_some() {
        return Some(Format::Tga);
    }
    None
}

fn is_heif(b: &[u8]) -> bool {
    if b.len() < 16 || &b[4..8] != b"ftyp" {
        return false;
    }
    let size = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if !(16..=4096).contains(&size) || size > b.len() {
        return false;
    }
    let brands = std::iter::once(&b[8..12]).chain(b[16..size].chunks_exact(4));
    for br in brands {
        if matches!(br, b"heic" | b"heix" | b"heim" | b"heis" | b"hevc" | b"hevx" | b"mif1" | b"msf1" | b"avif") {
            return true;
        }
    }
    false
}

fn err(msg: impl Into<String>) -> CodecError {
    CodecError::decode(msg)
}

pub(crate) fn probe(bytes: &[u8]) -> Result<Probe, CodecError> {
    let format = detect(bytes).ok_or_else(|| CodecError::unsupported("unrecognised image format"))?;
    let p = match format {
        Format::Png => probe_png(bytes)?,
        Format::Jpeg => probe_jpeg(bytes)?,
        Format::Tiff => probe_tiff(bytes)?,
        Format::Webp => probe_webp(bytes)?,
        Format::Bmp => probe_bmp(bytes)?,
        Format::Tga => tga_header(bytes).ok_or_else(|| err("bad TGA header"))?,
        Format::Heif => crate::heif_probe(bytes)?,
    };
    if p.width == 0 || p.height == 0 {
        return Err(err("image has zero width or height"));
    }
    Ok(p)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn probe_png(b: &[u8]) -> Result<Probe, CodecError> {
    if b.len() < 33 || &b[12..16] != b"IHDR" {
        return Err(err("PNG without IHDR"));
    }
    let w = be32(&b[16..20]);
    let h = be32(&b[20..24]);
    let depth = b[24];
    let ct = b[25];
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(err("PNG dimensions out of range"));
    }
    let channels = match ct {
        0 => 1,
        2 => 3,
        3 => 3, // palette; tRNS may add alpha, which the decoder reports as RGBA
        4 => 2,
        6 => 4,
        _ => return Err(err("bad PNG colour type")),
    };
    if !matches!(depth, 1 | 2 | 4 | 8 | 16) {
        return Err(err("bad PNG bit depth"));
    }
    // A tRNS chunk (before IDAT) makes the decoder add an alpha channel.
    let mut channels = channels;
    let mut p = 8usize;
    while p + 12 <= b.len() {
        let len = be32(&b[p..]) as usize;
        let ty = &b[p + 4..p + 8];
        if ty == b"IDAT" {
            break;
        }
        if ty == b"tRNS" && (ct == 0 || ct == 2 || ct == 3) {
            channels += 1;
            break;
        }
        p = match p.checked_add(12 + len) {
            Some(n) => n,
            None => break,
        };
    }
    Ok(Probe { format: Format::Png, width: w, height: h, channels, bit_depth: if depth == 16 { 16 } else { 8 } })
}

fn probe_jpeg(b: &[u8]) -> Result<Probe, CodecError> {
    let mut p = 2usize;
    loop {
        // Skip fill bytes.
        while p < b.len() && b[p] == 0xFF && b.get(p + 1) == Some(&0xFF) {
            p += 1;
        }
        if p + 4 > b.len() {
            return Err(err("JPEG ended before a frame header"));
        }
        if b[p] != 0xFF {
            return Err(err("bad JPEG marker"));
        }
        let m = b[p + 1];
        if m == 0xD8 || (0xD0..=0xD7).contains(&m) || m == 0x01 {
            p += 2;
            continue;
        }
        if m == 0xD9 || m == 0xDA {
            return Err(err("JPEG without frame header"));
        }
        let len = u16::from_be_bytes([b[p + 2], b[p + 3]]) as usize;
        if len < 2 {
            return Err(err("bad JPEG segment length"));
        }
        let is_sof = matches!(m, 0xC0..=0xCF) && !matches!(m, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            if p + 10 > b.len() {
                return Err(err("truncated JPEG frame header"));
            }
            let precision = b[p + 4];
            let h = u16::from_be_bytes([b[p + 5], b[p + 6]]) as u32;
            let w = u16::from_be_bytes([b[p + 7], b[p + 8]]) as u32;
            let comps = b[p + 9];
            let channels = match comps {
                1 => 1,
                3 | 4 => 3, // CMYK/YCCK decode to RGB
                _ => return Err(err("unsupported JPEG component count")),
            };
            let _ = precision;
            return Ok(Probe { format: Format::Jpeg, width: w, height: h, channels, bit_depth: 8 });
        }
        p += 2 + len;
    }
}

fn probe_tiff(b: &[u8]) -> Result<Probe, CodecError> {
    let (e, off) = parse_header(b).ok_or_else(|| err("bad TIFF header"))?;
    let (ifd, _) = read_ifd(b, e, off, false).ok_or_else(|| err("bad TIFF IFD"))?;
    let w = ifd.get(exif::TAG_IMAGE_WIDTH).and_then(|en| en.uint(e)).ok_or_else(|| err("TIFF without width"))?;
    let h = ifd.get(exif::TAG_IMAGE_LENGTH).and_then(|en| en.uint(e)).ok_or_else(|| err("TIFF without height"))?;
    let spp = ifd.get(exif::TAG_SAMPLES_PER_PIXEL).and_then(|en| en.uint(e)).unwrap_or(1);
    let bps = ifd.get(exif::TAG_BITS_PER_SAMPLE).and_then(|en| en.uint(e)).unwrap_or(1);
    let photometric = ifd.get(exif::TAG_PHOTOMETRIC).and_then(|en| en.uint(e)).unwrap_or(2);
    let channels = match (photometric, spp) {
        (3, _) => 3,              // palette
        (5, 4) => 3,              // CMYK
        (5, n) if n >= 5 => 4,    // CMYK + alpha
        (_, 0) => return Err(err("TIFF with zero samples per pixel")),
        (_, n) => n.min(4) as u8,
    };
    let bit_depth = if bps > 8 { 16 } else { 8 };
    Ok(Probe { format: Format::Tiff, width: w, height: h, channels, bit_depth })
}

fn probe_webp(b: &[u8]) -> Result<Probe, CodecError> {
    if b.len() < 30 {
        return Err(err("truncated WebP"));
    }
    let c = &b[12..];
    let fourcc = &c[0..4];
    let d = &c[8..];
    let le24 = |x: &[u8]| x[0] as u32 | (x[1] as u32) << 8 | (x[2] as u32) << 16;
    let (w, h, alpha) = match fourcc {
        b"VP8X" => {
            let flags = d[0];
            (le24(&d[4..7]) + 1, le24(&d[7..10]) + 1, flags & 0x10 != 0)
        }
        b"VP8L" => {
            if d[0] != 0x2F {
                return Err(err("bad VP8L signature"));
            }
            let bits = u32::from_le_bytes([d[1], d[2], d[3], d[4]]);
            ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, (bits >> 28) & 1 == 1)
        }
        b"VP8 " => {
            if d[3..6] != [0x9D, 0x01, 0x2A] {
                return Err(err("bad VP8 start code"));
            }
            let w = u16::from_le_bytes([d[6], d[7]]) as u32 & 0x3FFF;
            let h = u16::from_le_bytes([d[8], d[9]]) as u32 & 0x3FFF;
            (w, h, false)
        }
        _ => return Err(err("unknown WebP chunk")),
    };
    Ok(Probe { format: Format::Webp, width: w, height: h, channels: if alpha { 4 } else { 3 }, bit_depth: 8 })
}

fn probe_bmp(b: &[u8]) -> Result<Probe, CodecError> {
    if b.len() < 26 {
        return Err(err("truncated BMP"));
    }
    let hsize = u32::from_le_bytes([b[14], b[15], b[16], b[17]]);
    let (w, h, bpp) = if hsize == 12 {
        (u16::from_le_bytes([b[18], b[19]]) as u32, u16::from_le_bytes([b[20], b[21]]) as u32, u16::from_le_bytes([b[24], b[25]]))
    } else {
        if b.len() < 30 || hsize < 40 {
            return Err(err("bad BMP info header"));
        }
        let w = i32::from_le_bytes([b[18], b[19], b[20], b[21]]);
        let h = i32::from_le_bytes([b[22], b[23], b[24], b[25]]);
        if w <= 0 || h == i32::MIN {
            return Err(err("bad BMP dimensions"));
        }
        (w as u32, h.unsigned_abs(), u16::from_le_bytes([b[28], b[29]]))
    };
    let channels = match bpp {
        32 => 4,
        1 | 4 | 8 | 16 | 24 => 3,
        _ => return Err(err("bad BMP bit count")),
    };
    Ok(Probe { format: Format::Bmp, width: w, height: h, channels, bit_depth: 8 })
}

/// Parses and sanity-checks an 18-byte TGA header.
pub(crate) fn tga_header(b: &[u8]) -> Option<Probe> {
    if b.len() < 18 {
        return None;
    }
    let cmap_type = b[1];
    let img_type = b[2];
    let cmap_len = u16::from_le_bytes([b[5], b[6]]);
    let cmap_depth = b[7];
    let w = u16::from_le_bytes([b[12], b[13]]) as u32;
    let h = u16::from_le_bytes([b[14], b[15]]) as u32;
    let depth = b[16];
    let desc = b[17];
    if cmap_type > 1 || !matches!(img_type, 1 | 2 | 3 | 9 | 10 | 11) || w == 0 || h == 0 || desc & 0xC0 != 0 {
        return None;
    }
    let alpha_bits = desc & 0x0F;
    let channels = match img_type {
        1 | 9 => {
            if cmap_type != 1 || depth != 8 || cmap_len == 0 || !matches!(cmap_depth, 15 | 16 | 24 | 32) {
                return None;
            }
            if cmap_depth == 32 { 4 } else { 3 }
        }
        2 | 10 => match depth {
            15 | 16 => if alpha_bits > 0 { 4 } else { 3 },
            24 => 3,
            32 => 4,
            _ => return None,
        },
        _ => match depth {
            8 => 1,
            16 => 2,
            _ => return None,
        },
    };
    if img_type != 1 && img_type != 9 && cmap_type != 0 && cmap_len == 0 {
        return None;
    }
    Some(Probe { format: Format::Tga, width: w, height: h, channels, bit_depth: 8 })
}
