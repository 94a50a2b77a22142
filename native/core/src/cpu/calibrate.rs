//! Winograd or im2col for each 3x3 conv layer, chosen by measured cost on this machine.
//!
//! At prepare time every distinct (in channels, out channels) shape of a network's Winograd-capable
//! convs is timed both ways on a synthetic 64x64 input in the backend's own pool (one warm-up each,
//! then three alternating runs, the fastest of each kept); Winograd is used where it was not slower.
//! The answers are cached for the life of the process, keyed by shape, ISA level and thread count, so
//! a network is calibrated once per process (and shapes shared between networks once in all): on 2
//! Zen 3 cores 0.13 s (quiet) to 0.7 s (load average 11) for RealESRGAN_x4plus (6 shapes), 0.05-0.15 s
//! for realesr-general-x4v3 (2 shapes). Nothing is written to disk. [`log`] lists what was measured
//! (`cpu_bench` prints it).
//!
//! `LUCENT_CPU_WINOGRAD=0` turns Winograd off, `=1` uses it wherever it applies without measuring
//! ([`ConvPolicy`]; `CpuBackend::with_policy` sets it per backend).

use super::conv::{conv_forward, ConvAlgo};
use super::isa::Isa;
use super::{winograd, Val};
use crate::ncnn::model::{Activation, Conv, Padding};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Side of the synthetic input the two algorithms are timed on.
pub const CALIBRATION_PX: usize = 64;

/// One measured conv shape.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub ic: usize,
    pub oc: usize,
    pub isa: Isa,
    pub threads: usize,
    pub winograd_ms: f64,
    pub im2col_ms: f64,
    /// Wall time the measurement took (both algorithms, warm-ups, packing).
    pub cost_ms: f64,
}

impl Measured {
    pub fn winograd(&self) -> bool {
        self.winograd_ms <= self.im2col_ms
    }
}

type Key = (usize, usize, Isa, usize);

fn cache() -> &'static Mutex<HashMap<Key, Measured>> {
    static C: OnceLock<Mutex<HashMap<Key, Measured>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Everything measured so far in this process.
pub fn log() -> Vec<Measured> {
    let mut v: Vec<Measured> = cache().lock().map(|m| m.values().copied().collect()).unwrap_or_default();
    v.sort_by_key(|m| (m.ic, m.oc, m.isa, m.threads));
    v
}

/// How a backend picks the algorithm of its Winograd-capable convs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPolicy {
    /// By measured cost (the default).
    Measure,
    /// Winograd wherever it applies.
    Winograd,
    /// im2col + GEMM everywhere.
    Im2col,
}

impl ConvPolicy {
    /// `LUCENT_CPU_WINOGRAD`: `0` im2col, `1` Winograd, unset (or anything else) measure.
    pub fn from_env() -> ConvPolicy {
        match std::env::var("LUCENT_CPU_WINOGRAD").as_deref() {
            Ok("0") => ConvPolicy::Im2col,
            Ok("1") => ConvPolicy::Winograd,
            _ => ConvPolicy::Measure,
        }
    }
}

/// The algorithm for `c` (called inside the backend's pool, so the timing sees its threads).
pub fn choose(c: &Conv, isa: Isa, policy: ConvPolicy) -> ConvAlgo {
    if !winograd::applies(c) {
        return ConvAlgo::Im2col;
    }
    let wino = match policy {
        ConvPolicy::Im2col => false,
        ConvPolicy::Winograd => true,
        ConvPolicy::Measure => measure(c.num_input, c.num_output, isa).winograd(),
    };
    if wino {
        ConvAlgo::Winograd(winograd::pack(c, isa))
    } else {
        ConvAlgo::Im2col
    }
}

/// Time (or recall) the shape; the lock is not held while timing, so two threads may measure the
/// same shape at once (the later answer wins; both are valid).
pub fn measure(ic: usize, oc: usize, isa: Isa) -> Measured {
    let threads = rayon::current_num_threads();
    let key = (ic, oc, isa, threads);
    if let Some(m) = cache().lock().ok().and_then(|m| m.get(&key).copied()) {
        return m;
    }
    let t0 = Instant::now();
    let mut seed = 0x9e3779b97f4a7c15u64 ^ (ic * 1000 + oc) as u64;
    let mut rnd = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let c = Conv {
        num_output: oc,
        num_input: ic,
        group: 1,
        kernel_w: 3,
        kernel_h: 3,
        dilation_w: 1,
        dilation_h: 1,
        stride_w: 1,
        stride_h: 1,
        pad: Padding::Explicit { left: 1, right: 1, top: 1, bottom: 1 },
        pad_value: 0.0,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight: (0..oc * ic * 9).map(|_| rnd() * 0.1).collect(),
        bias: Some((0..oc).map(|_| rnd()).collect()),
        activation: Activation::LeakyRelu(0.2),
    };
    let n = CALIBRATION_PX;
    let x = Val::T(Arc::new(Tensor::from_vec(ic, n, n, (0..ic * n * n).map(|_| rnd() + 0.5).collect())));
    let algos = [ConvAlgo::Winograd(winograd::pack(&c, isa)), ConvAlgo::Im2col];
    let mut best = [f64::INFINITY; 2];
    for round in 0..4 {
        for (i, a) in algos.iter().enumerate() {
            let t = Instant::now();
            let out = conv_forward(&c, a, isa, &x, None, &[], &[]);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            debug_assert!(out.is_ok());
            if round > 0 {
                best[i] = best[i].min(ms);
            }
        }
    }
    let m = Measured { ic, oc, isa, threads, winograd_ms: best[0], im2col_ms: best[1], cost_ms: t0.elapsed().as_secs_f64() * 1e3 };
    if let Ok(mut cache) = cache().lock() {
        cache.insert(key, m);
    }
    m
}
