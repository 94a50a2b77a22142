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

// ---- one op on the CPU backend against the reference (cpu_attention.rs, cpu_overlap.rs)

use lucent_core::cpu::{CpuBackend, Isa};
use lucent_core::ncnn::model::{Layer, Op};
use lucent_core::{reference, Backend, Cancel};
use std::sync::Arc;

/// in -> `op` -> out, for a (c, h, w) input.
pub fn one_op_net(op: Op, c: usize, h: usize, w: usize) -> Arc<Net> {
    let input = Layer { name: "in".into(), kind: "Input".into(), op: Op::Input { w: w as i32, h: h as i32, c: c as i32 }, bottoms: vec![], tops: vec![0] };
    let layer = Layer { name: "op".into(), kind: "Op".into(), op, bottoms: vec![0], tops: vec![1] };
    Arc::new(Net::from_layers(vec![input, layer], vec!["in".into(), "out".into()]))
}

pub fn backends() -> Vec<CpuBackend> {
    let mut v = Vec::new();
    for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
        for threads in [2, 3] {
            v.push(CpuBackend::with_isa(Some(threads), isa).unwrap());
        }
    }
    v
}

/// The worst error of the CPU backends (every ISA this CPU has, 2 and 3 threads) against the reference for `op` on `x`.
pub fn worst_error(op: Op, x: &Tensor, what: &str) -> f32 {
    let net = one_op_net(op, x.c, x.h, x.w);
    let want = reference::run_net(&net, &[(0, x.clone())], &[1]).unwrap_or_else(|e| panic!("{what}: reference: {e}")).remove(0);
    let mut worst = 0f32;
    for be in backends() {
        let p = be.prepare(net.clone()).unwrap();
        let got = p.run(&[(0, x)], &[1], &Cancel::new()).unwrap_or_else(|e| panic!("{what}: cpu: {e}")).remove(0);
        assert_eq!((got.c, got.h, got.w), (want.c, want.h, want.w), "{what}: shape");
        for (g, r) in got.data.iter().zip(&want.data) {
            assert!(g.is_finite() == r.is_finite(), "{what} ({}): {g} vs {r}", be.isa());
            let e = (g - r).abs() / r.abs().max(1.0);
            worst = worst.max(if r.is_finite() { e } else { 0.0 });
        }
    }
    worst
}

/// Fixed seeds and one from the environment or the clock.
pub fn seeds() -> Vec<u64> {
    let (_, s) = Rng::from_env_or_time();
    vec![1, 2, 3, 0x5eed, s]
}

pub fn tensor(r: &mut Rng, c: usize, h: usize, w: usize, amp: f32) -> Tensor {
    Tensor::from_vec(c, h, w, (0..c * h * w).map(|_| r.f() * amp).collect())
}

/// The ncnn Convolution params of activation `kind` (0 none, 1 ReLU, 2 leaky ReLU 0.2, 3 clip
/// -0.5..0.5, 4 sigmoid, 5 Mish, 6 hard-swish), for random conv nets.
pub fn act_params(kind: usize) -> &'static str {
    match kind {
        0 => "",
        1 => " 9=1",
        2 => " 9=2 -23310=1,2.000000e-01",
        3 => " 9=3 -23310=2,-5.000000e-01,5.000000e-01",
        4 => " 9=4",
        5 => " 9=5",
        _ => " 9=6 -23310=2,2.000000e-01,5.000000e-01",
    }
}
