//! The zip container of PyTorch's `torch.save` (since 1.6): a plain zip whose entries torch always
//! writes uncompressed ("stored"). This reader takes the central directory (zip64 records
//! included), checks every entry's local header, range and CRC-32 against the file, and hands out
//! slices of the input; compressed or encrypted entries are refused. Written here rather than
//! taken from the `zip` crate: torch needs only stored entries, the bounds are all in view, and
//! the current `zip` releases need a newer Rust than this workspace's 1.85.

use lucent_core::{bail, Code, Error, Result};

const EOCD: u32 = 0x0605_4b50;
const EOCD64: u32 = 0x0606_4b50;
const EOCD64_LOCATOR: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;
const MAX_ENTRIES: u64 = 200_000;

pub struct Entry<'a> {
    pub name: String,
    pub data: &'a [u8],
}

fn bad(msg: impl Into<String>) -> Error {
    Error::new(Code::ModelInvalid, format!("zip: {}", msg.into()))
}

struct Rd<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Rd<'a> {
    fn at(b: &'a [u8], p: u64) -> Result<Self> {
        let p = usize::try_from(p).map_err(|_| bad("offset overflows"))?;
        if p > b.len() {
            bail!(Code::ModelInvalid, "zip: offset {p} is past the end of the file ({} bytes): truncated?", b.len());
        }
        Ok(Rd { b, p })
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let e = self.p.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| bad("record runs past the end of the file: truncated?"))?;
        let s = &self.b[self.p..e];
        self.p = e;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
}

pub fn is_zip(b: &[u8]) -> bool {
    b.len() >= 4 && u32::from_le_bytes(b[..4].try_into().expect("4")) == LOCAL
}

fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    let mut c = !0u32;
    for &b in data {
        c = t[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// All entries of a zip held in memory, each checked.
pub fn entries(b: &[u8]) -> Result<Vec<Entry<'_>>> {
    // End of central directory: the last 22+ bytes, with up to 64 KiB of comment after it.
    if b.len() < 22 {
        bail!(Code::ModelInvalid, "zip: file is too short to be a zip archive: truncated?");
    }
    let lo = b.len().saturating_sub(22 + 0xffff);
    let eocd = (lo..=b.len() - 22)
        .rev()
        .find(|&i| u32::from_le_bytes(b[i..i + 4].try_into().expect("4")) == EOCD)
        .ok_or_else(|| bad("no end-of-central-directory record: the file is truncated or not a zip"))?;
    let mut r = Rd::at(b, eocd as u64 + 4)?;
    let _disk = r.u16()?;
    let _cd_disk = r.u16()?;
    let _n_here = r.u16()?;
    let mut count = r.u16()? as u64;
    let mut cd_size = r.u32()? as u64;
    let mut cd_off = r.u32()? as u64;
    if count == 0xffff || cd_size == 0xffff_ffff || cd_off == 0xffff_ffff {
        // zip64: the locator sits right before the EOCD record.
        let loc = eocd.checked_sub(20).ok_or_else(|| bad("zip64 locator missing"))?;
        let mut l = Rd::at(b, loc as u64)?;
        if l.u32()? != EOCD64_LOCATOR {
            bail!(Code::ModelInvalid, "zip: zip64 locator missing");
        }
        l.u32()?;
        let e64 = l.u64()?;
        let mut e = Rd::at(b, e64)?;
        if e.u32()? != EOCD64 {
            bail!(Code::ModelInvalid, "zip: zip64 end record missing");
        }
        e.take(8 + 2 + 2 + 4 + 4 + 8)?;
        count = e.u64()?;
        cd_size = e.u64()?;
        cd_off = e.u64()?;
    }
    if count > MAX_ENTRIES {
        bail!(Code::ModelInvalid, "zip: {count} entries, over the limit of {MAX_ENTRIES}");
    }
    if cd_off.checked_add(cd_size).is_none_or(|e| e > b.len() as u64) {
        bail!(Code::ModelInvalid, "zip: central directory runs past the end of the file: truncated?");
    }
    let mut r = Rd::at(b, cd_off)?;
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if r.u32()? != CENTRAL {
            bail!(Code::ModelInvalid, "zip: bad central directory entry");
        }
        r.take(4)?;
        let flags = r.u16()?;
        let method = r.u16()?;
        r.take(4)?;
        let crc = r.u32()?;
        let mut csize = r.u32()? as u64;
        let mut usize_ = r.u32()? as u64;
        let nlen = r.u16()? as usize;
        let xlen = r.u16()? as usize;
        let clen = r.u16()? as usize;
        r.take(8)?;
        let mut off = r.u32()? as u64;
        let name = String::from_utf8_lossy(r.take(nlen)?).into_owned();
        let mut x = Rd { b: r.take(xlen)?, p: 0 };
        r.take(clen)?;
        // zip64 extended information: the fields that were 0xffffffff, in order.
        while x.p + 4 <= x.b.len() {
            let id = x.u16()?;
            let len = x.u16()? as usize;
            let mut f = Rd { b: x.take(len)?, p: 0 };
            if id == 1 {
                if usize_ == 0xffff_ffff {
                    usize_ = f.u64()?;
                }
                if csize == 0xffff_ffff {
                    csize = f.u64()?;
                }
                if off == 0xffff_ffff {
                    off = f.u64()?;
                }
            }
        }
        if flags & 1 != 0 {
            bail!(Code::ModelInvalid, "zip: entry '{name}' is encrypted");
        }
        if method != 0 || csize != usize_ {
            bail!(Code::ModelInvalid, "zip: entry '{name}' is compressed (method {method}); torch writes stored entries only");
        }
        let mut l = Rd::at(b, off)?;
        if l.u32()? != LOCAL {
            bail!(Code::ModelInvalid, "zip: entry '{name}' has no local header at {off}");
        }
        l.take(22)?;
        let ln = l.u16()? as usize;
        let lx = l.u16()? as usize;
        l.take(ln + lx)?;
        let data = l.take(usize::try_from(csize).map_err(|_| bad("entry size overflows"))?).map_err(|_| {
            bad(format!("entry '{name}' ({csize} bytes) runs past the end of the file: truncated?"))
        })?;
        if crc32(data) != crc {
            bail!(Code::ModelInvalid, "zip: entry '{name}' fails its CRC check: the file is damaged");
        }
        out.push(Entry { name, data });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_of_known_string() {
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}
