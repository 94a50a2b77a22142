//! Container-level metadata readers and writers (JPEG segments, PNG chunks, RIFF chunks, BMP and
//! TGA headers, TIFF IFD0).

use crate::exif::{self, Exif};
use crate::Metadata;

/// Largest ICC profile / EXIF block we accept when reading (bigger ones are ignored).
const MAX_META: usize = 16 << 20;

/// PNG/BMP store pixels per metre. Integer DPI is written as round(dpi / 0.0254) and read back
/// as the nearest integer when within the rounding error of that conversion.
pub(crate) fn dpi_to_ppm(dpi: f64) -> u32 {
    (dpi / 0.0254).round().clamp(1.0, i32::MAX as f64) as u32
}

pub(crate) fn ppm_to_dpi(ppm: u32) -> f64 {
    let d = ppm as f64 * 0.0254;
    let r = d.round();
    if (d - r).abs() <= 0.0128 {
        r
    } else {
        d
    }
}

fn be16(b: &[u8]) -> usize {
    u16::from_be_bytes([b[0], b[1]]) as usize
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn fill_from_exif(m: &mut Metadata, blob: &[u8]) {
    if blob.len() > MAX_META {
        return;
    }
    if let Some(x) = Exif::parse(blob) {
        if m.dpi.is_none() {
            m.dpi = x.dpi();
        }
        if m.orientation.is_none() {
            m.orientation = x.orientation();
        }
        m.exif = Some(exif::tiff_start(blob).unwrap_or(blob).to_vec());
    }
}

// ---------------------------------------------------------------- JPEG

pub(crate) fn jpeg_read(b: &[u8]) -> Metadata {
    let mut m = Metadata::default();
    let mut icc_parts: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut exif_blob: Option<&[u8]> = None;
    let mut p = 2usize;
    while p + 4 <= b.len() {
        if b[p] != 0xFF {
            break;
        }
        let mk = b[p + 1];
        if mk == 0xFF {
            p += 1;
            continue;
        }
        if mk == 0xD8 || (0xD0..=0xD7).contains(&mk) || mk == 0x01 {
            p += 2;
            continue;
        }
        if mk == 0xDA || mk == 0xD9 {
            break;
        }
        let len = be16(&b[p + 2..]);
        if len < 2 || p + 2 + len > b.len() {
            break;
        }
        let seg = &b[p + 4..p + 2 + len];
        match mk {
            0xE0 if seg.len() >= 12 && &seg[..5] == b"JFIF\0" => {
                let unit = seg[7];
                let x = be16(&seg[8..]) as f64;
                let y = be16(&seg[10..]) as f64;
                if x > 0.0 && y > 0.0 {
                    match unit {
                        1 => m.dpi = Some((x, y)),
                        2 => m.dpi = Some((x * 2.54, y * 2.54)),
                        _ => {}
                    }
                }
            }
            0xE1 if seg.len() > 6 && &seg[..6] == b"Exif\0\0" && exif_blob.is_none() => exif_blob = Some(&seg[6..]),
            0xE2 if seg.len() > 14 && &seg[..12] == b"ICC_PROFILE\0" => icc_parts.push((seg[12], seg[14..].to_vec())),
            _ => {}
        }
        p += 2 + len;
    }
    if let Some(e) = exif_blob {
        fill_from_exif(&mut m, e);
    }
    if !icc_parts.is_empty() {
        icc_parts.sort_by_key(|(i, _)| *i);
        let icc: Vec<u8> = icc_parts.into_iter().flat_map(|(_, d)| d).collect();
        m.icc = Some(icc);
    }
    m
}

// ---------------------------------------------------------------- PNG

fn png_chunks(b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut p = 8usize;
    std::iter::from_fn(move || {
        if p + 12 > b.len() {
            return None;
        }
        let len = be32(&b[p..]) as usize;
        let ty = &b[p + 4..p + 8];
        let end = p.checked_add(12)?.checked_add(len)?;
        if end > b.len() {
            return None;
        }
        let data = &b[p + 8..p + 8 + len];
        p = end;
        Some((ty, data))
    })
}

pub(crate) fn png_read(b: &[u8]) -> Metadata {
    let mut m = Metadata::default();
    for (ty, d) in png_chunks(b) {
        match ty {
            b"pHYs" if d.len() == 9 && d[8] == 1 => {
                let (x, y) = (be32(&d[0..]), be32(&d[4..]));
                if x > 0 && y > 0 {
                    m.dpi = Some((ppm_to_dpi(x), ppm_to_dpi(y)));
                }
            }
            b"eXIf" => fill_from_exif(&mut m, d),
            b"iCCP" => {
                // name (1-79 bytes) \0 method(0) zlib data
                if let Some(z) = d.iter().position(|c| *c == 0) {
                    if z + 2 <= d.len() && d[z + 1] == 0 {
                        if let Ok(v) = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&d[z + 2..], MAX_META) {
                            m.icc = Some(v);
                        }
                    }
                }
            }
            b"IDAT" | b"IEND" => {}
            _ => {}
        }
    }
    m
}

fn png_chunk(ty: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(data.len() + 12);
    c.extend_from_slice(&(data.len() as u32).to_be_bytes());
    c.extend_from_slice(ty);
    c.extend_from_slice(data);
    let crc = crc32(&c[4..]);
    c.extend_from_slice(&crc.to_be_bytes());
    c
}

pub(crate) fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (n, slot) in t.iter_mut().enumerate() {
            let mut c = n as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    let mut c = 0xFFFF_FFFFu32;
    for &x in data {
        c = t[((c ^ x as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

/// Rewrites a PNG: drops any pHYs/eXIf chunks, then inserts the given ones right after IHDR.
pub(crate) fn png_set(png: &[u8], dpi: Option<(f64, f64)>, exif: Option<&[u8]>) -> Vec<u8> {
    let mut extra = Vec::new();
    if let Some((dx, dy)) = dpi {
        let mut data = Vec::with_capacity(9);
        data.extend_from_slice(&dpi_to_ppm(dx).to_be_bytes());
        data.extend_from_slice(&dpi_to_ppm(dy).to_be_bytes());
        data.push(1);
        extra.extend(png_chunk(b"pHYs", &data));
    }
    if let Some(e) = exif {
        extra.extend(png_chunk(b"eXIf", e));
    }
    let mut out = Vec::with_capacity(png.len() + extra.len());
    out.extend_from_slice(&png[..8]);
    let mut p = 8usize;
    while p + 12 <= png.len() {
        let len = be32(&png[p..]) as usize;
        let end = p + 12 + len;
        if end > png.len() {
            break;
        }
        let ty = &png[p + 4..p + 8];
        if ty != b"pHYs" && ty != b"eXIf" {
            out.extend_from_slice(&png[p..end]);
        }
        if ty == b"IHDR" {
            out.extend_from_slice(&extra);
        }
        p = end;
    }
    out
}

// ---------------------------------------------------------------- WebP (RIFF)

fn riff_chunks(b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut p = 12usize;
    std::iter::from_fn(move || {
        if p + 8 > b.len() {
            return None;
        }
        let len = le32(&b[p + 4..]) as usize;
        let ty = &b[p..p + 4];
        let start = p + 8;
        let end = start.checked_add(len)?;
        if end > b.len() {
            return None;
        }
        p = end + (len & 1);
        Some((ty, &b[start..end]))
    })
}

pub(crate) fn webp_read(b: &[u8]) -> Metadata {
    let mut m = Metadata::default();
    for (ty, d) in riff_chunks(b) {
        match ty {
            b"EXIF" => fill_from_exif(&mut m, d),
            b"ICCP" if d.len() <= MAX_META => m.icc = Some(d.to_vec()),
            _ => {}
        }
    }
    m
}

// ---------------------------------------------------------------- BMP

pub(crate) fn bmp_read(b: &[u8]) -> Metadata {
    let mut m = Metadata::default();
    if b.len() >= 46 && le32(&b[14..]) >= 40 {
        let x = le32(&b[38..]) as i32;
        let y = le32(&b[42..]) as i32;
        if x > 0 && y > 0 {
            m.dpi = Some((ppm_to_dpi(x as u32), ppm_to_dpi(y as u32)));
        }
    }
    m
}

pub(crate) fn bmp_set_dpi(bmp: &mut [u8], dpi: (f64, f64)) {
    if bmp.len() >= 46 && le32(&bmp[14..]) >= 40 {
        bmp[38..42].copy_from_slice(&dpi_to_ppm(dpi.0).to_le_bytes());
        bmp[42..46].copy_from_slice(&dpi_to_ppm(dpi.1).to_le_bytes());
    }
}

// ---------------------------------------------------------------- TGA

const TGA_SIGNATURE: &[u8; 18] = b"TRUEVISION-XFILE.\0";
/// Developer-area tag under which we store an EXIF block (developer tags are 0..=32767).
const TGA_EXIF_TAG: u16 = 0x4578;

pub(crate) fn tga_read(b: &[u8]) -> Metadata {
    let mut m = Metadata::default();
    if b.len() < 18 + 26 || &b[b.len() - 18..] != TGA_SIGNATURE {
        return m;
    }
    let f = b.len() - 26;
    let dir = le32(&b[f + 4..]) as usize;
    if dir == 0 || dir + 2 > f {
        return m;
    }
    let n = u16::from_le_bytes([b[dir], b[dir + 1]]) as usize;
    for i in 0..n {
        let p = dir + 2 + i * 10;
        if p + 10 > f {
            break;
        }
        let tag = u16::from_le_bytes([b[p], b[p + 1]]);
        let off = le32(&b[p + 2..]) as usize;
        let size = le32(&b[p + 6..]) as usize;
        if tag == TGA_EXIF_TAG {
            if let Some(end) = off.checked_add(size) {
                if end <= f {
                    fill_from_exif(&mut m, &b[off..end]);
                }
            }
        }
    }
    m
}

/// Appends a TGA 2.0 developer area holding `exif` plus the TGA 2.0 footer.
pub(crate) fn tga_append_exif(tga: &mut Vec<u8>, exif: &[u8]) {
    let off = tga.len() as u32;
    tga.extend_from_slice(exif);
    let dir = tga.len() as u32;
    tga.extend_from_slice(&1u16.to_le_bytes());
    tga.extend_from_slice(&TGA_EXIF_TAG.to_le_bytes());
    tga.extend_from_slice(&off.to_le_bytes());
    tga.extend_from_slice(&(exif.len() as u32).to_le_bytes());
    tga.extend_from_slice(&0u32.to_le_bytes()); // no extension area
    tga.extend_from_slice(&dir.to_le_bytes());
    tga.extend_from_slice(TGA_SIGNATURE);
}

// ---------------------------------------------------------------- TIFF

pub(crate) fn tiff_read(b: &[u8]) -> Metadata {
    use exif::*;
    let mut m = Metadata::default();
    let Some((e, off)) = parse_header(b) else { return m };
    let Some((ifd0, _)) = read_ifd(b, e, off, true) else { return m };
    m.dpi = ifd_dpi(&ifd0, e);
    m.orientation = ifd0.get(TAG_ORIENTATION).and_then(|en| en.uint(e)).map(|v| v as u16).filter(|v| (1..=8).contains(v));
    if let Some(icc) = ifd0.get(TAG_ICC) {
        if icc.data.len() <= MAX_META {
            m.icc = Some(icc.data.clone());
        }
    }
    // Build an EXIF block from IFD0's descriptive tags and its EXIF/GPS sub-IFDs.
    const KEEP: &[u16] = &[
        0x010E, 0x010F, 0x0110, TAG_ORIENTATION, TAG_X_RESOLUTION, TAG_Y_RESOLUTION, TAG_RESOLUTION_UNIT, 0x0131,
        0x0132, 0x013B, 0x8298, TAG_EXIF_IFD, TAG_GPS_IFD,
    ];
    let mut x = Exif { endian: e, ifd0: Ifd::default() };
    for en in &ifd0.entries {
        if KEEP.contains(&en.tag) {
            x.ifd0.entries.push(en.clone());
        }
    }
    if x.ifd0.get(TAG_EXIF_IFD).is_some() || x.ifd0.entries.iter().any(|en| matches!(en.tag, 0x010F | 0x0110 | 0x0132 | TAG_GPS_IFD)) {
        m.exif = Some(x.to_bytes());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_known_value() {
        // CRC-32 of "IEND" as found in every PNG.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn ppm_integer_dpi_round_trip() {
        for dpi in 1..=2400u32 {
            assert_eq!(ppm_to_dpi(dpi_to_ppm(dpi as f64)), dpi as f64, "dpi {dpi}");
        }
    }
}
