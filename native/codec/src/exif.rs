//! Minimal TIFF-structure (IFD) reader and writer, used for EXIF blobs and for TIFF files.
//!
//! An EXIF blob in this crate is the raw TIFF structure ("II*\0" or "MM\0*" header, then IFD0),
//! without the "Exif\0\0" prefix that JPEG APP1 segments carry.

pub(crate) const TAG_IMAGE_WIDTH: u16 = 0x0100;
pub(crate) const TAG_IMAGE_LENGTH: u16 = 0x0101;
pub(crate) const TAG_BITS_PER_SAMPLE: u16 = 0x0102;
pub(crate) const TAG_COMPRESSION: u16 = 0x0103;
pub(crate) const TAG_PHOTOMETRIC: u16 = 0x0106;
pub(crate) const TAG_STRIP_OFFSETS: u16 = 0x0111;
pub(crate) const TAG_ORIENTATION: u16 = 0x0112;
pub(crate) const TAG_SAMPLES_PER_PIXEL: u16 = 0x0115;
pub(crate) const TAG_ROWS_PER_STRIP: u16 = 0x0116;
pub(crate) const TAG_STRIP_BYTE_COUNTS: u16 = 0x0117;
pub(crate) const TAG_X_RESOLUTION: u16 = 0x011A;
pub(crate) const TAG_Y_RESOLUTION: u16 = 0x011B;
pub(crate) const TAG_PLANAR_CONFIG: u16 = 0x011C;
pub(crate) const TAG_RESOLUTION_UNIT: u16 = 0x0128;
pub(crate) const TAG_PREDICTOR: u16 = 0x013D;
pub(crate) const TAG_EXTRA_SAMPLES: u16 = 0x0152;
pub(crate) const TAG_SAMPLE_FORMAT: u16 = 0x0153;
pub(crate) const TAG_ICC: u16 = 0x8773;
pub(crate) const TAG_EXIF_IFD: u16 = 0x8769;
pub(crate) const TAG_GPS_IFD: u16 = 0x8825;
pub(crate) const TAG_INTEROP_IFD: u16 = 0xA005;
pub(crate) const TAG_PIXEL_X_DIMENSION: u16 = 0xA002;
pub(crate) const TAG_PIXEL_Y_DIMENSION: u16 = 0xA003;

pub(crate) const T_BYTE: u16 = 1;
#[allow(dead_code)]
pub(crate) const T_ASCII: u16 = 2;
pub(crate) const T_SHORT: u16 = 3;
pub(crate) const T_LONG: u16 = 4;
pub(crate) const T_RATIONAL: u16 = 5;
pub(crate) const T_UNDEFINED: u16 = 7;

const MAX_ENTRIES: usize = 1000;
const MAX_DEPTH: u8 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

impl Endian {
    pub(crate) fn u16(self, b: &[u8]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes([b[0], b[1]]),
            Endian::Big => u16::from_be_bytes([b[0], b[1]]),
        }
    }
    pub(crate) fn u32(self, b: &[u8]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Endian::Big => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        }
    }
    pub(crate) fn u16_bytes(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    pub(crate) fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    pub(crate) fn header(self) -> [u8; 4] {
        match self {
            Endian::Little => *b"II*\0",
            Endian::Big => *b"MM\0*",
        }
    }
}

pub(crate) fn type_size(t: u16) -> Option<usize> {
    Some(match t {
        1 | 2 | 6 | 7 => 1,
        3 | 8 => 2,
        4 | 9 | 11 | 13 => 4,
        5 | 10 | 12 => 8,
        _ => return None,
    })
}

/// One IFD entry. `data` holds the value bytes in the structure's byte order; `sub` is set for
/// pointer tags (EXIF, GPS, interoperability IFDs), in which case `data` is ignored on write.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub tag: u16,
    pub typ: u16,
    pub count: u32,
    pub data: Vec<u8>,
    pub sub: Option<Ifd>,
}

impl Entry {
    pub(crate) fn short(e: Endian, tag: u16, vals: &[u16]) -> Entry {
        let mut data = Vec::with_capacity(vals.len() * 2);
        for v in vals {
            data.extend_from_slice(&e.u16_bytes(*v));
        }
        Entry { tag, typ: T_SHORT, count: vals.len() as u32, data, sub: None }
    }
    pub(crate) fn long(e: Endian, tag: u16, vals: &[u32]) -> Entry {
        let mut data = Vec::with_capacity(vals.len() * 4);
        for v in vals {
            data.extend_from_slice(&e.u32_bytes(*v));
        }
        Entry { tag, typ: T_LONG, count: vals.len() as u32, data, sub: None }
    }
    pub(crate) fn rational(e: Endian, tag: u16, num: u32, den: u32) -> Entry {
        let mut data = Vec::with_capacity(8);
        data.extend_from_slice(&e.u32_bytes(num));
        data.extend_from_slice(&e.u32_bytes(den));
        Entry { tag, typ: T_RATIONAL, count: 1, data, sub: None }
    }
    pub(crate) fn raw(tag: u16, typ: u16, count: u32, data: Vec<u8>) -> Entry {
        Entry { tag, typ, count, data, sub: None }
    }
    /// First value as an unsigned integer (BYTE, SHORT or LONG).
    pub(crate) fn uint(&self, e: Endian) -> Option<u32> {
        self.uint_at(e, 0)
    }
    pub(crate) fn uint_at(&self, e: Endian, i: usize) -> Option<u32> {
        if i >= self.count as usize {
            return None;
        }
        match self.typ {
            T_BYTE | T_UNDEFINED => self.data.get(i).map(|v| *v as u32),
            T_SHORT => self.data.get(i * 2..i * 2 + 2).map(|b| e.u16(b) as u32),
            T_LONG | 13 => self.data.get(i * 4..i * 4 + 4).map(|b| e.u32(b)),
            _ => None,
        }
    }
    pub(crate) fn rational_value(&self, e: Endian) -> Option<f64> {
        match self.typ {
            T_RATIONAL if self.data.len() >= 8 => {
                let n = e.u32(&self.data[0..4]);
                let d = e.u32(&self.data[4..8]);
                if d == 0 {
                    None
                } else {
                    Some(n as f64 / d as f64)
                }
            }
            T_SHORT | T_LONG => self.uint(e).map(|v| v as f64),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Ifd {
    pub entries: Vec<Entry>,
}

impl Ifd {
    pub(crate) fn get(&self, tag: u16) -> Option<&Entry> {
        self.entries.iter().find(|en| en.tag == tag)
    }
    pub(crate) fn get_mut(&mut self, tag: u16) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|en| en.tag == tag)
    }
    pub(crate) fn set(&mut self, entry: Entry) {
        if let Some(slot) = self.get_mut(entry.tag) {
            *slot = entry;
        } else {
            self.entries.push(entry);
        }
    }
}

fn is_pointer_tag(tag: u16) -> bool {
    matches!(tag, TAG_EXIF_IFD | TAG_GPS_IFD | TAG_INTEROP_IFD)
}

/// Parses the TIFF header; returns the byte order and the offset of IFD0.
pub(crate) fn parse_header(buf: &[u8]) -> Option<(Endian, usize)> {
    if buf.len() < 8 {
        return None;
    }
    let e = match &buf[0..4] {
        b"II*\0" => Endian::Little,
        b"MM\0*" => Endian::Big,
        _ => return None,
    };
    Some((e, e.u32(&buf[4..8]) as usize))
}

/// Reads the IFD at `off`. Returns the IFD and the offset of the next IFD (0 if none).
/// Pointer tags (EXIF/GPS/interop) are followed when `follow` is set.
pub(crate) fn read_ifd(buf: &[u8], e: Endian, off: usize, follow: bool) -> Option<(Ifd, u32)> {
    read_ifd_depth(buf, e, off, follow, 0)
}

fn read_ifd_depth(buf: &[u8], e: Endian, off: usize, follow: bool, depth: u8) -> Option<(Ifd, u32)> {
    if depth > MAX_DEPTH || off < 8 || off.checked_add(2)? > buf.len() {
        return None;
    }
    let n = e.u16(&buf[off..off + 2]) as usize;
    if n > MAX_ENTRIES {
        return None;
    }
    let table_end = off + 2 + n * 12;
    if table_end > buf.len() {
        return None;
    }
    let mut ifd = Ifd::default();
    for i in 0..n {
        let p = off + 2 + i * 12;
        let tag = e.u16(&buf[p..p + 2]);
        let typ = e.u16(&buf[p + 2..p + 4]);
        let count = e.u32(&buf[p + 4..p + 8]);
        let Some(ts) = type_size(typ) else { continue };
        let Some(size) = ts.checked_mul(count as usize) else { continue };
        let data = if size <= 4 {
            buf[p + 8..p + 8 + size].to_vec()
        } else {
            let vo = e.u32(&buf[p + 8..p + 12]) as usize;
            match vo.checked_add(size) {
                Some(end) if end <= buf.len() => buf[vo..end].to_vec(),
                _ => continue, // value points outside the blob: drop this entry
            }
        };
        let mut entry = Entry { tag, typ, count, data, sub: None };
        if follow && is_pointer_tag(tag) {
            match entry.uint(e) {
                Some(so) => match read_ifd_depth(buf, e, so as usize, true, depth + 1) {
                    Some((sub, _)) => entry.sub = Some(sub),
                    None => continue,
                },
                None => continue,
            }
        }
        ifd.entries.push(entry);
    }
    let next = if table_end + 4 <= buf.len() { e.u32(&buf[table_end..table_end + 4]) } else { 0 };
    Some((ifd, next))
}

/// Appends `ifd` to `out` (offsets are relative to the start of `out`, which must begin with
/// the TIFF header) and returns the offset where the IFD starts. Entry values larger than four
/// bytes and sub-IFDs are placed after the entry table. `next` is the next-IFD offset written.
pub(crate) fn write_ifd(out: &mut Vec<u8>, ifd: &Ifd, e: Endian, next: u32) -> usize {
    if out.len() % 2 == 1 {
        out.push(0);
    }
    let start = out.len();
    let mut entries: Vec<&Entry> = ifd.entries.iter().collect();
    entries.sort_by_key(|en| en.tag);
    entries.dedup_by_key(|en| en.tag);
    let n = entries.len();
    out.extend_from_slice(&e.u16_bytes(n as u16));
    let table = out.len();
    out.resize(table + 12 * n, 0);
    out.extend_from_slice(&e.u32_bytes(next));
    for (i, en) in entries.iter().enumerate() {
        let p = table + 12 * i;
        let (typ, count, inline): (u16, u32, Option<[u8; 4]>) = if let Some(sub) = &en.sub {
            let so = write_ifd(out, sub, e, 0) as u32;
            (T_LONG, 1, Some(e.u32_bytes(so)))
        } else if en.data.len() <= 4 {
            let mut v = [0u8; 4];
            v[..en.data.len()].copy_from_slice(&en.data);
            (en.typ, en.count, Some(v))
        } else {
            if out.len() % 2 == 1 {
                out.push(0);
            }
            let vo = out.len() as u32;
            out.extend_from_slice(&en.data);
            (en.typ, en.count, Some(e.u32_bytes(vo)))
        };
        out[p..p + 2].copy_from_slice(&e.u16_bytes(en.tag));
        out[p + 2..p + 4].copy_from_slice(&e.u16_bytes(typ));
        out[p + 4..p + 8].copy_from_slice(&e.u32_bytes(count));
        out[p + 8..p + 12].copy_from_slice(&inline.unwrap());
    }
    start
}

/// A parsed EXIF block: IFD0 with its EXIF/GPS sub-IFDs (IFD1, the thumbnail, is dropped since it
/// would no longer match the processed image).
#[derive(Clone, Debug)]
pub(crate) struct Exif {
    pub endian: Endian,
    pub ifd0: Ifd,
}

/// Strips the prefixes an EXIF payload may carry ("Exif\0\0", or HEIF's 4-byte offset).
pub(crate) fn tiff_start(blob: &[u8]) -> Option<&[u8]> {
    if parse_header(blob).is_some() {
        return Some(blob);
    }
    if blob.len() >= 6 && &blob[..6] == b"Exif\0\0" {
        return tiff_start(&blob[6..]);
    }
    if blob.len() >= 4 {
        let off = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        if let Some(rest) = blob.get(4 + off..) {
            if parse_header(rest).is_some() {
                return Some(rest);
            }
            if rest.len() >= 6 && &rest[..6] == b"Exif\0\0" && parse_header(&rest[6..]).is_some() {
                return Some(&rest[6..]);
            }
        }
    }
    None
}

impl Exif {
    pub(crate) fn new() -> Exif {
        Exif { endian: Endian::Big, ifd0: Ifd::default() }
    }

    pub(crate) fn parse(blob: &[u8]) -> Option<Exif> {
        let buf = tiff_start(blob)?;
        let (e, off) = parse_header(buf)?;
        let (ifd0, _) = read_ifd(buf, e, off, true)?;
        Some(Exif { endian: e, ifd0 })
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&self.endian.header());
        out.extend_from_slice(&self.endian.u32_bytes(8));
        write_ifd(&mut out, &self.ifd0, self.endian, 0);
        out
    }

    pub(crate) fn orientation(&self) -> Option<u16> {
        self.ifd0.get(TAG_ORIENTATION)?.uint(self.endian).map(|v| v as u16).filter(|v| (1..=8).contains(v))
    }

    pub(crate) fn dpi(&self) -> Option<(f64, f64)> {
        ifd_dpi(&self.ifd0, self.endian)
    }

    pub(crate) fn set_dpi(&mut self, x: f64, y: f64) {
        let e = self.endian;
        let (n, d) = dpi_rational(x);
        self.ifd0.set(Entry::rational(e, TAG_X_RESOLUTION, n, d));
        let (n, d) = dpi_rational(y);
        self.ifd0.set(Entry::rational(e, TAG_Y_RESOLUTION, n, d));
        self.ifd0.set(Entry::short(e, TAG_RESOLUTION_UNIT, &[2]));
    }

    pub(crate) fn set_pixel_dimensions(&mut self, w: u32, h: u32) {
        let e = self.endian;
        let mut sub = self.ifd0.get(TAG_EXIF_IFD).and_then(|en| en.sub.clone()).unwrap_or_default();
        sub.set(Entry::long(e, TAG_PIXEL_X_DIMENSION, &[w]));
        sub.set(Entry::long(e, TAG_PIXEL_Y_DIMENSION, &[h]));
        self.ifd0.set(Entry { tag: TAG_EXIF_IFD, typ: T_LONG, count: 1, data: vec![0; 4], sub: Some(sub) });
    }

    pub(crate) fn pixel_dimensions(&self) -> Option<(u32, u32)> {
        let sub = self.ifd0.get(TAG_EXIF_IFD)?.sub.as_ref()?;
        Some((sub.get(TAG_PIXEL_X_DIMENSION)?.uint(self.endian)?, sub.get(TAG_PIXEL_Y_DIMENSION)?.uint(self.endian)?))
    }
}

/// DPI from XResolution/YResolution/ResolutionUnit of an IFD (unit absent = inch, as TIFF says).
pub(crate) fn ifd_dpi(ifd: &Ifd, e: Endian) -> Option<(f64, f64)> {
    let x = ifd.get(TAG_X_RESOLUTION)?.rational_value(e)?;
    let y = ifd.get(TAG_Y_RESOLUTION).and_then(|en| en.rational_value(e)).unwrap_or(x);
    let unit = ifd.get(TAG_RESOLUTION_UNIT).and_then(|en| en.uint(e)).unwrap_or(2);
    let f = match unit {
        2 => 1.0,
        3 => 2.54,
        _ => return None,
    };
    let (x, y) = (x * f, y * f);
    if x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0 {
        Some((x, y))
    } else {
        None
    }
}

/// A rational that reads back exactly for integer DPI and to 1e-4 otherwise.
pub(crate) fn dpi_rational(dpi: f64) -> (u32, u32) {
    let dpi = dpi.clamp(0.0001, 1_000_000.0);
    if (dpi - dpi.round()).abs() < 1e-9 {
        (dpi.round() as u32, 1)
    } else {
        ((dpi * 10000.0).round() as u32, 10000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exif_write_read_both_endians() {
        for e in [Endian::Little, Endian::Big] {
            let mut x = Exif { endian: e, ifd0: Ifd::default() };
            x.ifd0.set(Entry::short(e, TAG_ORIENTATION, &[6]));
            x.ifd0.set(Entry::raw(0x010F, T_ASCII, 6, b"Canon\0".to_vec()));
            x.set_dpi(300.0, 300.0);
            x.set_pixel_dimensions(1234, 567);
            let bytes = x.to_bytes();
            let y = Exif::parse(&bytes).unwrap();
            assert_eq!(y.endian, e);
            assert_eq!(y.orientation(), Some(6));
            assert_eq!(y.dpi(), Some((300.0, 300.0)));
            assert_eq!(y.pixel_dimensions(), Some((1234, 567)));
            assert_eq!(y.ifd0.get(0x010F).unwrap().data, b"Canon\0");
            let mut prefixed = b"Exif\0\0".to_vec();
            prefixed.extend_from_slice(&bytes);
            assert_eq!(Exif::parse(&prefixed).unwrap().orientation(), Some(6));
        }
    }

    #[test]
    fn hostile_ifds_do_not_panic() {
        // IFD pointing at itself through the EXIF pointer, huge counts, offsets out of range.
        let e = Endian::Little;
        let mut b = b"II*\0\x08\0\0\0".to_vec();
        b.extend_from_slice(&e.u16_bytes(2));
        b.extend_from_slice(&e.u16_bytes(TAG_EXIF_IFD));
        b.extend_from_slice(&e.u16_bytes(T_LONG));
        b.extend_from_slice(&e.u32_bytes(1));
        b.extend_from_slice(&e.u32_bytes(8));
        b.extend_from_slice(&e.u16_bytes(0x010F));
        b.extend_from_slice(&e.u16_bytes(T_ASCII));
        b.extend_from_slice(&e.u32_bytes(u32::MAX));
        b.extend_from_slice(&e.u32_bytes(4));
        b.extend_from_slice(&[0, 0, 0, 0]);
        let x = Exif::parse(&b).unwrap();
        assert!(x.ifd0.get(0x010F).is_none());
        for cut in 0..b.len() {
            let _ = Exif::parse(&b[..cut]);
        }
    }

    #[test]
    fn dpi_rationals() {
        assert_eq!(dpi_rational(72.0), (72, 1));
        assert_eq!(dpi_rational(72.5), (725000, 10000));
    }
}
