//! What every compute backend (CPU in this crate, wgpu in lucent-gpu) offers the engine.
//!
//! A backend turns a loaded [`Net`] into a [`Prepared`] network once (weights packed / uploaded),
//! then runs it many times on inputs of any spatial size (one call per tile or frame).

use crate::error::{Code, Error, Result};
use crate::ncnn::Net;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One call's control token, checked by backends between layers / tiles and by the pipelines
/// before each network run: cooperative cancellation, and the call's work meter (issue 29).
///
/// The meter counts work units in output pixels: the pixels each network run delivers to the
/// call's result, at the output's scale (the engine's pipelines say what they charge; tile overlap
/// and a network's internal scale above the model's are the engine's own cost and do not count).
/// With a budget ([`Cancel::with_budget`]) a charge that would take the count past it fails with
/// `budget_exceeded` BEFORE the network runs, and nothing is counted for it. Clones share both
/// the flag and the meter.
#[derive(Clone, Default, Debug)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    meter: Arc<Meter>,
}

#[derive(Default, Debug)]
struct Meter {
    /// Output pixels the call may spend; None: unbounded.
    budget: Option<u64>,
    spent: AtomicU64,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    /// A token whose meter allows `budget` output pixels (None: unbounded, counting only).
    pub fn with_budget(budget: Option<u64>) -> Self {
        Cancel { flag: Arc::default(), meter: Arc::new(Meter { budget, spent: AtomicU64::new(0) }) }
    }
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst)
    }
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
    /// `Err(aborted)` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::new(Code::Aborted, "cancelled"))
        } else {
            Ok(())
        }
    }
    /// Count `px` output pixels of work about to be done for `what`: `Err(budget_exceeded)` (and
    /// nothing counted) when that would pass the budget. Call it before the work, never after.
    pub fn charge(&self, px: u64, what: &str) -> Result<()> {
        let m = &self.meter;
        let mut cur = m.spent.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(px);
            if let Some(b) = m.budget {
                if next > b {
                    return Err(Error::new(
                        Code::BudgetExceeded,
                        format!("{what} needs {px} px of work; {cur} of the call's budget of {b} px are spent"),
                    ));
                }
            }
            match m.spent.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(v) => cur = v,
            }
        }
    }
    /// Output pixels charged so far.
    pub fn work(&self) -> u64 {
        self.meter.spent.load(Ordering::Relaxed)
    }
    /// The budget in output pixels (None: unbounded).
    pub fn budget(&self) -> Option<u64> {
        self.meter.budget
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// "cpu" or "gpu".
    pub kind: &'static str,
    /// Adapter name ("cpu" for the CPU backend).
    pub adapter: String,
    /// Whether f16 storage/arithmetic is in use.
    pub f16: bool,
    /// The CPU backend's SIMD level ([`crate::cpu::Isa::name`]); None for the GPU.
    pub cpu_isa: Option<&'static str>,
    /// The CPU backend's worker threads; None for the GPU.
    pub threads: Option<usize>,
    /// What the CPU backend's convolutions run (`fp32`, `bf16 (amx-bf16) ...`, or fp32 and why a
    /// narrower precision asked for does not run); None for the GPU.
    pub cpu_precision: Option<String>,
}

/// The storage precision a network asks of a backend (feature maps and weights in memory; the
/// arithmetic stays the backend's). The CPU backend stores f32 whatever is asked; the GPU backend
/// stores f16 where the device has SHADER_F16 unless told otherwise (its options, or
/// [`Storage::F32`] for one network).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Storage {
    /// The backend's own choice.
    #[default]
    Default,
    /// f32 whatever the backend's default: networks whose output drifts in f16 (U²-Net's map:
    /// 8.5e-2 from onnxruntime's with f16 storage on the GPU backend, 4e-5 with f32).
    F32,
}

pub trait Backend: Send + Sync {
    fn info(&self) -> BackendInfo;
    /// Pack / upload a network's weights for repeated runs.
    fn prepare(&self, net: Arc<Net>) -> Result<Arc<dyn Prepared>>;
    /// [`Self::prepare`] with a storage precision for this network ([`Storage`]); a backend that
    /// stores only f32 ignores it.
    fn prepare_with(&self, net: Arc<Net>, storage: Storage) -> Result<Arc<dyn Prepared>> {
        let _ = storage;
        self.prepare(net)
    }
    /// Largest input tile side (pixels, before the network's own padding) this backend wants for
    /// image-to-image networks with `channels` wide feature maps; bounded by device limits.
    fn max_tile(&self, net: &Net) -> usize;
}

pub trait Prepared: Send + Sync {
    /// Run with the given input blobs (blob index, tensor) and return the requested output blobs
    /// in the order asked.
    fn run(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>>;
}
