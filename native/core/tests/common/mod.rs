//! Helpers shared by the lucent-core integration tests: a seeded RNG (seed printed on failure),
//! building small networks from param text + generated weights, and tensor comparison.
#![allow(dead_code)]
use lucent_core::ncnn::Net;
use lucent_core::Tensor;
use std::path::PathBuf;

pub fn shared_models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models")
}

/// xorshift64*; seed from LUCENT_TEST_SEED or the clock.
pub struct Rng(pub u64);

impl Rng {
    pub fn from_env_or_time() -> (Rng, u64) {
        let seed = std::env::var("LUCENT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
        (Rng(seed.max(1)), seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545F4914F6CDD1D)
    }
    /// uniform in [0, n)
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// uniform in [-1, 1)
    pub fn f(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f()).collect()
    }
    pub fn tensor(&mut self, c: usize, h: usize, w: usize) -> Tensor {
        Tensor::from_vec(c, h, w, self.vec(c * h * w))
    }
}

/// Weight file builder: `tagged` = 4-byte f32 tag (0) + values, `raw` = values only.
#[derive(Default)]
pub struct Bin(pub Vec<u8>);

impl Bin {
    pub fn tagged(&mut self, v: &[f32]) {
        self.0.extend_from_slice(&0u32.to_le_bytes());
        self.raw(v);
    }
    pub fn raw(&mut self, v: &[f32]) {
        for x in v {
            self.0.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// Build a net from layer lines (without the header); blob count is computed.
pub fn net(lines: &[String], bin: &Bin) -> Net {
    let mut blobs = std::collections::HashSet::new();
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (nb, nt): (usize, usize) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        for b in &f[4..4 + nb + nt] {
            blobs.insert(b.to_string());
        }
    }
    let text = format!("7767517\n{} {}\n{}\n", lines.len(), blobs.len(), lines.join("\n"));
    Net::from_parts(&text, &bin.0).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// max |a - b| / max(1, max |b|): absolute error for values up to 1, relative above.
pub fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!((a.dims, a.c, a.h, a.w), (b.dims, b.c, b.h, b.w), "shapes differ: {} vs {}", a.shape_string(), b.shape_string());
    let scale = b.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let diff = a.data.iter().zip(&b.data).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    if a.data.iter().any(|v| v.is_nan()) != b.data.iter().any(|v| v.is_nan()) {
        return f32::INFINITY;
    }
    diff / scale
}
