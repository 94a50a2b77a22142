//! State-dict tensors as the loaders hand them over: a shape and f32 values (f16, bf16, f64 and
//! integer storages are converted), keyed by name. Also the size limits every loader applies.

use lucent_core::{bail, Code, Result};
use std::collections::BTreeMap;

/// Element types found in checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// torch's typed storage class names (`torch.FloatStorage`, ...).
    pub fn from_storage_name(name: &str) -> Option<DType> {
        Some(match name {
            "FloatStorage" => DType::F32,
            "HalfStorage" => DType::F16,
            "BFloat16Storage" => DType::BF16,
            "DoubleStorage" => DType::F64,
            "LongStorage" => DType::I64,
            "IntStorage" => DType::I32,
            "ShortStorage" => DType::I16,
            "CharStorage" => DType::I8,
            "ByteStorage" => DType::U8,
            "BoolStorage" => DType::Bool,
            _ => return None,
        })
    }

    /// Decode `bytes` (little-endian, a whole number of elements) to f32.
    pub fn to_f32(self, bytes: &[u8]) -> Vec<f32> {
        let n = self.size();
        let it = bytes.chunks_exact(n);
        match self {
            DType::F32 => it.map(|b| f32::from_le_bytes(b.try_into().expect("4"))).collect(),
            DType::F16 => it.map(|b| half::f16::from_le_bytes(b.try_into().expect("2")).to_f32()).collect(),
            DType::BF16 => it.map(|b| half::bf16::from_le_bytes(b.try_into().expect("2")).to_f32()).collect(),
            DType::F64 => it.map(|b| f64::from_le_bytes(b.try_into().expect("8")) as f32).collect(),
            DType::I64 => it.map(|b| i64::from_le_bytes(b.try_into().expect("8")) as f32).collect(),
            DType::I32 => it.map(|b| i32::from_le_bytes(b.try_into().expect("4")) as f32).collect(),
            DType::I16 => it.map(|b| i16::from_le_bytes(b.try_into().expect("2")) as f32).collect(),
            DType::I8 => it.map(|b| b[0] as i8 as f32).collect(),
            DType::U8 | DType::Bool => it.map(|b| b[0] as f32).collect(),
        }
    }
}

/// One named tensor of a state dict.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Param {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Name -> tensor, sorted by name.
pub type StateDict = BTreeMap<String, Param>;

/// Bounds on what a model file may make the loader do.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole file.
    pub max_file_bytes: u64,
    /// Elements of one tensor.
    pub max_tensor_elements: u64,
    /// Elements of all tensors together (each becomes 4 bytes of f32).
    pub max_total_elements: u64,
    /// A safetensors JSON header.
    pub max_header_bytes: u64,
    /// Tensors in one file.
    pub max_tensors: usize,
}

impl Default for Limits {
    /// 2 GiB files, 256 M elements per tensor, 512 M in all (2 GiB of f32), 16 MiB headers,
    /// 100,000 tensors: far above any image model (4x-UltraSharp is 67 MB).
    fn default() -> Self {
        Limits {
            max_file_bytes: 2 << 30,
            max_tensor_elements: 256 << 20,
            max_total_elements: 512 << 20,
            max_header_bytes: 16 << 20,
            max_tensors: 100_000,
        }
    }
}

/// Running totals checked against [`Limits`] while tensors are added.
pub struct Budget {
    limits: Limits,
    total: u64,
    count: usize,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Budget { limits, total: 0, count: 0 }
    }

    /// Account for one tensor of `shape`; returns its element count.
    pub fn admit(&mut self, name: &str, shape: &[u64]) -> Result<usize> {
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(numel) = numel.filter(|&n| n <= self.limits.max_tensor_elements) else {
            bail!(Code::ModelInvalid, "tensor '{name}' declares {shape:?} elements, over the limit of {}", self.limits.max_tensor_elements);
        };
        self.total += numel;
        self.count += 1;
        if self.total > self.limits.max_total_elements {
            bail!(Code::ModelInvalid, "the model's tensors hold more than {} elements in all", self.limits.max_total_elements);
        }
        if self.count > self.limits.max_tensors {
            bail!(Code::ModelInvalid, "the model holds more than {} tensors", self.limits.max_tensors);
        }
        Ok(numel as usize)
    }
}

/// Shape as usize, checked against the budget.
pub fn shape_usize(shape: &[u64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}
