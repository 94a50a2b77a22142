//! Reader for ncnn `.bin` weight files.
//!
//! Weights are read layer by layer in `.param` order. Each array is either "raw" (plain
//! little-endian f32, used for biases, PReLU slopes, BatchNorm statistics) or "tagged": a 4-byte
//! tag first, then
//! - 0x01306B47: IEEE half floats, padded to a multiple of 4 bytes;
//! - 0x000D4B38: int8 values (not supported by this engine);
//! - 0x0002C056: f32 values;
//! - 0: f32 values;
//! - any other non-zero tag: a 256-entry f32 code book followed by one u8 index per value,
//!   padded to a multiple of 4 bytes.

use crate::bail;
use crate::error::{Code, Result};

pub const TAG_F16: u32 = 0x0130_6B47;
pub const TAG_INT8: u32 = 0x000D_4B38;
pub const TAG_F32: u32 = 0x0002_C056;

pub struct WeightReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

impl<'a> WeightReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        WeightReader { bytes, pos: 0 }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            bail!(
                Code::ModelInvalid,
                "weight file too short: need {n} bytes for {what} at offset {}, {} left",
                self.pos,
                self.remaining()
            );
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// `count` plain f32 values.
    pub fn raw(&mut self, count: usize, what: &str) -> Result<Vec<f32>> {
        let b = self.take(count.saturating_mul(4), what)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// `count` values stored with a leading type tag.
    pub fn tagged(&mut self, count: usize, what: &str) -> Result<Vec<f32>> {
        let t = self.take(4, what)?;
        let tag = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        match tag {
            TAG_F16 => {
                let b = self.take(align4(count * 2), what)?;
                Ok(b[..count * 2]
                    .chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect())
            }
            TAG_INT8 => bail!(Code::ModelInvalid, "{what}: int8-quantised weights are not supported"),
            TAG_F32 | 0 => self.raw(count, what),
            _ => {
                let table = self.raw(256, what)?;
                let idx = self.take(align4(count), what)?;
                Ok(idx[..count].iter().map(|&i| table[i as usize]).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_storage() {
        let mut b = Vec::new();
        // f16 tagged, 3 values -> 6 bytes padded to 8
        b.extend_from_slice(&TAG_F16.to_le_bytes());
        for v in [1.0f32, -2.5, 0.125] {
            b.extend_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        b.extend_from_slice(&[0, 0]);
        // f32 tagged with 0
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&3.5f32.to_le_bytes());
        // raw
        b.extend_from_slice(&7.0f32.to_le_bytes());
        let mut r = WeightReader::new(&b);
        assert_eq!(r.tagged(3, "w").unwrap(), vec![1.0, -2.5, 0.125]);
        assert_eq!(r.tagged(1, "w").unwrap(), vec![3.5]);
        assert_eq!(r.raw(1, "b").unwrap(), vec![7.0]);
        assert_eq!(r.remaining(), 0);
        assert!(r.raw(1, "x").is_err());
    }
}
