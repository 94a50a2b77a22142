//! Lucent engine core: the ncnn model format, tensors, the stable error codes, and the backends'
//! common ground. No napi and no GPU code here.
pub mod backend;
pub mod error;
pub mod ncnn;
pub mod options;
pub mod reference;
pub mod cpu;
pub mod tensor;

pub use backend::{Backend, BackendInfo, Cancel, Prepared};
pub use error::{Code, Error, Result};
pub use tensor::Tensor;
