//! What every compute backend (CPU in this crate, wgpu in lucent-gpu) offers the engine.
//!
//! A backend turns a loaded [`Net`] into a [`Prepared`] network once (weights packed / uploaded),
//! then runs it many times on inputs of any spatial size (one call per tile or frame).

use crate::error::{Code, Error, Result};
use crate::ncnn::Net;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Cooperative cancellation, checked by backends between layers / tiles.
#[derive(Clone, Default, Debug)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// `Err(aborted)` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::new(Code::Aborted, "cancelled"))
        } else {
            Ok(())
        }
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
}

pub trait Backend: Send + Sync {
    fn info(&self) -> BackendInfo;
    /// Pack / upload a network's weights for repeated runs.
    fn prepare(&self, net: Arc<Net>) -> Result<Arc<dyn Prepared>>;
    /// Largest input tile side (pixels, before the network's own padding) this backend wants for
    /// image-to-image networks with `channels` wide feature maps; bounded by device limits.
    fn max_tile(&self, net: &Net) -> usize;
}

pub trait Prepared: Send + Sync {
    /// Run with the given input blobs (blob index, tensor) and return the requested output blobs
    /// in the order asked.
    fn run(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>>;
}
