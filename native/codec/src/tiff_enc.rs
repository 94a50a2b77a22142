//! Baseline TIFF writer: chunky samples, Deflate compression with horizontal predictor,
//! resolution in inches, optional ICC profile and EXIF data merged into IFD0.

use crate::exif::*;
use crate::{Exif, Pixels};

const STRIP_TARGET_BYTES: usize = 256 * 1024;

pub(crate) struct TiffInput<'a> {
    pub width: u32,
    pub height: u32,
    pub channels: u8,
    pub pixels: &'a Pixels,
    pub dpi: Option<(f64, f64)>,
    pub orientation: Option<u16>,
    pub exif: Option<&'a Exif>,
    pub icc: Option<&'a [u8]>,
}

pub(crate) fn encode(inp: &TiffInput) -> Vec<u8> {
    let e = inp.exif.map(|x| x.endian).unwrap_or(Endian::Little);
    let ch = inp.channels as usize;
    let w = inp.width as usize;
    let h = inp.height as usize;
    let bps: u16 = match inp.pixels {
        Pixels::U8(_) => 8,
        Pixels::U16(_) => 16,
    };
    let sample_bytes = bps as usize / 8;
    let row_bytes = w * ch * sample_bytes;
    let rows_per_strip = (STRIP_TARGET_BYTES / row_bytes.max(1)).clamp(1, h.max(1));
    let mut out = Vec::with_capacity(row_bytes * h / 3 + 4096);
    out.extend_from_slice(&e.header());
    out.extend_from_slice(&[0, 0, 0, 0]); // IFD offset, patched below
    let mut offsets = Vec::new();
    let mut counts = Vec::new();
    let mut raw = Vec::with_capacity(rows_per_strip * row_bytes);
    let mut y = 0;
    while y < h {
        let rows = rows_per_strip.min(h - y);
        raw.clear();
        for r in y..y + rows {
            let base = r * w * ch;
            match inp.pixels {
                Pixels::U8(d) => {
                    let row = &d[base..base + w * ch];
                    for i in 0..w * ch {
                        let prev = if i >= ch { row[i - ch] } else { 0 };
                        raw.push(row[i].wrapping_sub(prev));
                    }
                }
                Pixels::U16(d) => {
                    let row = &d[base..base + w * ch];
                    for i in 0..w * ch {
                        let prev = if i >= ch { row[i - ch] } else { 0 };
                        raw.extend_from_slice(&e.u16_bytes(row[i].wrapping_sub(prev)));
                    }
                }
            }
        }
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&raw, 5);
        if out.len() % 2 == 1 {
            out.push(0);
        }
        offsets.push(out.len() as u32);
        counts.push(z.len() as u32);
        out.extend_from_slice(&z);
        y += rows;
    }

    let mut ifd = Ifd::default();
    ifd.set(Entry::long(e, TAG_IMAGE_WIDTH, &[inp.width]));
    ifd.set(Entry::long(e, TAG_IMAGE_LENGTH, &[inp.height]));
    ifd.set(Entry::short(e, TAG_BITS_PER_SAMPLE, &vec![bps; ch]));
    ifd.set(Entry::short(e, TAG_COMPRESSION, &[8]));
    ifd.set(Entry::short(e, TAG_PHOTOMETRIC, &[if ch <= 2 { 1 } else { 2 }]));
    ifd.set(Entry::long(e, TAG_STRIP_OFFSETS, &offsets));
    ifd.set(Entry::short(e, TAG_SAMPLES_PER_PIXEL, &[ch as u16]));
    ifd.set(Entry::long(e, TAG_ROWS_PER_STRIP, &[rows_per_strip as u32]));
    ifd.set(Entry::long(e, TAG_STRIP_BYTE_COUNTS, &counts));
    ifd.set(Entry::short(e, TAG_PLANAR_CONFIG, &[1]));
    ifd.set(Entry::short(e, TAG_PREDICTOR, &[2]));
    ifd.set(Entry::short(e, TAG_SAMPLE_FORMAT, &vec![1; ch]));
    if ch == 2 || ch == 4 {
        ifd.set(Entry::short(e, TAG_EXTRA_SAMPLES, &[2])); // unassociated alpha
    }
    if let Some(d) = inp.dpi {
        let (n, dd) = dpi_rational(d.0);
        ifd.set(Entry::rational(e, TAG_X_RESOLUTION, n, dd));
        let (n, dd) = dpi_rational(d.1);
        ifd.set(Entry::rational(e, TAG_Y_RESOLUTION, n, dd));
        ifd.set(Entry::short(e, TAG_RESOLUTION_UNIT, &[2]));
    }
    if let Some(o) = inp.orientation {
        ifd.set(Entry::short(e, TAG_ORIENTATION, &[o]));
    }
    if let Some(icc) = inp.icc {
        ifd.set(Entry::raw(TAG_ICC, T_UNDEFINED, icc.len() as u32, icc.to_vec()));
    }
    if let Some(x) = inp.exif {
        // Descriptive tags and sub-IFDs only: anything describing the pixel layout is ours.
        for en in &x.ifd0.entries {
            let structural = matches!(en.tag, 0x00FE..=0x0109 | 0x0111..=0x0119 | 0x011C | 0x013D..=0x0159 | 0x0200..=0x0214);
            let ours = matches!(en.tag, TAG_X_RESOLUTION | TAG_Y_RESOLUTION | TAG_RESOLUTION_UNIT | TAG_ORIENTATION | TAG_ICC);
            if !structural && (!ours || ifd.get(en.tag).is_none()) {
                ifd.entries.push(en.clone());
            }
        }
    }
    let at = write_ifd(&mut out, &ifd, e, 0) as u32;
    out[4..8].copy_from_slice(&e.u32_bytes(at));
    out
}
