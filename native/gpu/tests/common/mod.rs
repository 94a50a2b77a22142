#![allow(dead_code)]
//! Shared test helpers: the lavapipe-capable backend, tiny network builder, random data, error metric.

use lucent_core::ncnn::Net;
use lucent_core::Tensor;
use lucent_gpu::{GpuBackend, GpuOptions};

/// The GPU backend (a CPU adapter such as lavapipe is allowed). Fails loudly when no adapter
/// exists; only LUCENT_SKIP_GPU_TESTS=1 opts out (returns None).
pub fn backend() -> Option<GpuBackend> {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        eprintln!("LUCENT_SKIP_GPU_TESTS=1: skipping GPU test");
        return None;
    }
    match GpuBackend::new(GpuOptions { allow_cpu_adapter: true, ..Default::default() }) {
        Ok(b) => Some(b),
        Err(e) => panic!(
            "no GPU adapter for the tests ({e}); adapters: {:?}. Install mesa-vulkan-drivers (lavapipe) or set LUCENT_SKIP_GPU_TESTS=1",
            lucent_gpu::probe_adapters()
        ),
    }
}

/// max|a-b| / max(1, max|ref|)
pub fn rel_err(got: &Tensor, want: &Tensor) -> f32 {
    assert_eq!(
        (got.dims, got.c, got.h, got.w),
        (want.dims, want.c, want.h, want.w),
        "shape mismatch: got {} want {}",
        got.shape_string(),
        want.shape_string()
    );
    let mut md = 0.0f32;
    let mut mr = 0.0f32;
    for (a, b) in got.data.iter().zip(&want.data) {
        md = md.max((a - b).abs());
        mr = mr.max(b.abs());
        assert!(a.is_finite() == b.is_finite(), "non-finite mismatch {a} vs {b}");
    }
    md / mr.max(1.0)
}

/// xorshift random numbers, seeded per test.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next_f32() * scale).collect()
    }
    pub fn tensor(&mut self, c: usize, h: usize, w: usize) -> Tensor {
        Tensor::from_vec(c, h, w, self.vec(c * h * w, 1.0))
    }
}

/// Builds `.param` text + `.bin` bytes for a small network.
#[derive(Default)]
pub struct NetBuilder {
    lines: Vec<String>,
    blobs: Vec<String>,
    pub bin: Vec<u8>,
}

impl NetBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a layer; `params` is ncnn's "k=v" list.
    pub fn layer(&mut self, kind: &str, bottoms: &[&str], tops: &[&str], params: &str) -> &mut Self {
        for t in tops {
            self.blobs.push(t.to_string());
        }
        let name = format!("l{}", self.lines.len());
        self.lines.push(format!("{kind} {name} {} {} {} {} {params}", bottoms.len(), tops.len(), bottoms.join(" "), tops.join(" ")));
        self
    }
    pub fn input(&mut self, name: &str) -> &mut Self {
        self.layer("Input", &[], &[name], "")
    }
    /// Weights with the f32 tag.
    pub fn tagged(&mut self, w: &[f32]) -> &mut Self {
        self.bin.extend_from_slice(&0u32.to_le_bytes());
        self.raw(w)
    }
    pub fn raw(&mut self, w: &[f32]) -> &mut Self {
        for v in w {
            self.bin.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
    pub fn build(&self) -> Net {
        let text = format!("7767517\n{} {}\n{}\n", self.lines.len(), self.blobs.len(), self.lines.join("\n"));
        Net::from_parts(&text, &self.bin).unwrap_or_else(|e| panic!("bad test net: {e}\n{text}"))
    }
}
