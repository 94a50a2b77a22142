//! EXIF orientation: the codec reports the tag but never applies it, so the photo path turns the
//! pixels upright before any network runs and then writes orientation 1 into any EXIF it keeps
//! (a viewer would otherwise rotate the already-upright output a second time, and an output without
//! EXIF would display sideways).

use crate::raster::{Raster, Samples};
use lucent_core::Result;

/// Source (x, y) of output pixel (ox, oy) for orientation `o`, stored image w x h.
#[inline]
fn source(o: u16, ox: usize, oy: usize, w: usize, h: usize) -> (usize, usize) {
    match o {
        2 => (w - 1 - ox, oy),
        3 => (w - 1 - ox, h - 1 - oy),
        4 => (ox, h - 1 - oy),
        5 => (oy, ox),
        6 => (oy, h - 1 - ox),
        7 => (w - 1 - oy, h - 1 - ox),
        8 => (w - 1 - oy, ox),
        _ => (ox, oy),
    }
}

/// The upright raster for EXIF orientation `o` (1..=8; anything else returns a copy).
pub fn apply_orientation(r: &Raster, o: u16) -> Result<Raster> {
    let (w, h, c) = (r.width, r.height, r.channels);
    let (ow, oh) = if (5..=8).contains(&o) { (h, w) } else { (w, h) };
    fn remap<T: Copy>(v: &[T], o: u16, w: usize, h: usize, c: usize, ow: usize, oh: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(v.len());
        for oy in 0..oh {
            for ox in 0..ow {
                let (sx, sy) = source(o, ox, oy, w, h);
                let i = (sy * w + sx) * c;
                out.extend_from_slice(&v[i..i + c]);
            }
        }
        out
    }
    match &r.samples {
        Samples::U8(v) => Raster::from_u8(ow, oh, c, remap(v, o, w, h, c, ow, oh)),
        Samples::U16(v) => Raster::from_u16(ow, oh, c, remap(v, o, w, h, c, ow, oh)),
    }
}

/// Set the Orientation tag (0x0112) of IFD0 in a raw EXIF/TIFF block (optionally "Exif\0\0"
/// prefixed) to 1, in place. Returns whether a tag was rewritten.
pub fn reset_exif_orientation(blob: &mut [u8]) -> bool {
    let start = if blob.starts_with(b"Exif\0\0") { 6 } else { 0 };
    let b = &mut blob[start..];
    if b.len() < 8 {
        return false;
    }
    let le = match &b[0..2] {
        b"II" => true,
        b"MM" => false,
        _ => return false,
    };
    let u16_at = |b: &[u8], i: usize| if le { u16::from_le_bytes([b[i], b[i + 1]]) } else { u16::from_be_bytes([b[i], b[i + 1]]) };
    let u32_at = |b: &[u8], i: usize| {
        let a = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) }
    };
    let ifd = u32_at(b, 4) as usize;
    if ifd + 2 > b.len() {
        return false;
    }
    let n = u16_at(b, ifd) as usize;
    for k in 0..n {
        let e = ifd + 2 + 12 * k;
        if e + 12 > b.len() {
            return false;
        }
        if u16_at(b, e) == 0x0112 && u16_at(b, e + 2) == 3 && u32_at(b, e + 4) >= 1 {
            let one = if le { 1u16.to_le_bytes() } else { 1u16.to_be_bytes() };
            b[e + 8..e + 10].copy_from_slice(&one);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_eight_orientations() {
        // 3 x 2 image, pixel value = 10 * y + x.
        let r = Raster::from_u8(3, 2, 1, vec![0, 1, 2, 10, 11, 12]).unwrap();
        let get = |o| {
            let u = apply_orientation(&r, o).unwrap();
            let Samples::U8(v) = u.samples else { panic!() };
            (u.width, u.height, v)
        };
        assert_eq!(get(1), (3, 2, vec![0, 1, 2, 10, 11, 12]));
        assert_eq!(get(2), (3, 2, vec![2, 1, 0, 12, 11, 10]));
        assert_eq!(get(3), (3, 2, vec![12, 11, 10, 2, 1, 0]));
        assert_eq!(get(4), (3, 2, vec![10, 11, 12, 0, 1, 2]));
        assert_eq!(get(5), (2, 3, vec![0, 10, 1, 11, 2, 12]));
        // 6: stored image rotated 90 degrees clockwise for display.
        assert_eq!(get(6), (2, 3, vec![10, 0, 11, 1, 12, 2]));
        assert_eq!(get(7), (2, 3, vec![12, 2, 11, 1, 10, 0]));
        // 8: rotated 90 degrees counter-clockwise.
        assert_eq!(get(8), (2, 3, vec![2, 12, 1, 11, 0, 10]));
    }

    #[test]
    fn exif_tag_rewritten_both_endians() {
        for le in [true, false] {
            let w16 = |v: u16| if le { v.to_le_bytes() } else { v.to_be_bytes() };
            let w32 = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
            let mut b: Vec<u8> = if le { b"II".to_vec() } else { b"MM".to_vec() };
            b.extend(w16(42));
            b.extend(w32(8));
            b.extend(w16(2));
            // XResolution-like dummy entry, then Orientation = 6.
            b.extend(w16(0x011a));
            b.extend(w16(4));
            b.extend(w32(1));
            b.extend(w32(72));
            b.extend(w16(0x0112));
            b.extend(w16(3));
            b.extend(w32(1));
            b.extend(w16(6));
            b.extend([0, 0]);
            b.extend(w32(0));
            let mut p = b"Exif\0\0".to_vec();
            p.extend(&b);
            assert!(reset_exif_orientation(&mut b));
            assert!(reset_exif_orientation(&mut p));
            assert_eq!(&b[30..32], &w16(1));
            assert_eq!(&p[36..38], &w16(1));
            assert_eq!(&b[18..22], &w32(72), "other entries untouched");
        }
    }
}
