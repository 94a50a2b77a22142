//! `.safetensors`: an 8-byte header length, a JSON header, then the tensors' bytes. The
//! `safetensors` crate parses the header and validates it against the buffer before anything is
//! read (offsets contiguous from 0 and ending exactly at the end of the file, each tensor's byte
//! range equal to its shape times its element size, with overflow checks; headers over 100 MB
//! refused); on top of that the header length is held to [`Limits::max_header_bytes`] and
//! every tensor's element count to the [`Budget`].

use crate::tensor::{Budget, DType, Limits, Param};
use lucent_core::{bail, Code, Error, Result};
use safetensors::tensor::SafeTensors;
use safetensors::Dtype;

pub fn is_safetensors(b: &[u8]) -> bool {
    b.len() >= 10 && b[8] == b'{'
}

fn dtype(d: Dtype, name: &str) -> Result<DType> {
    Ok(match d {
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F64 => DType::F64,
        Dtype::I64 => DType::I64,
        Dtype::I32 => DType::I32,
        Dtype::I16 => DType::I16,
        Dtype::I8 => DType::I8,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        other => bail!(Code::ModelInvalid, "tensor '{name}' has element type {other:?}, which is not supported"),
    })
}

pub fn load(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Param)>> {
    let head = bytes.get(..8).ok_or_else(|| Error::new(Code::ModelInvalid, "safetensors file is shorter than its header length"))?;
    let n = u64::from_le_bytes(head.try_into().expect("8"));
    if n > limits.max_header_bytes {
        bail!(Code::ModelInvalid, "safetensors header declares {n} bytes, over the limit of {}", limits.max_header_bytes);
    }
    if n > bytes.len() as u64 - 8 {
        bail!(Code::ModelInvalid, "safetensors header ({n} bytes) runs past the end of the file: truncated?");
    }
    let st = SafeTensors::deserialize(bytes).map_err(|e| Error::new(Code::ModelInvalid, format!("safetensors: {e}")))?;
    let mut budget = Budget::new(*limits);
    let mut out = Vec::new();
    let mut names: Vec<String> = st.names().into_iter().map(|s| s.to_string()).collect();
    names.sort();
    for name in names {
        let view = st.tensor(&name).map_err(|e| Error::new(Code::ModelInvalid, format!("safetensors: {e}")))?;
        let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
        budget.admit(&name, &shape)?;
        let dt = dtype(view.dtype(), &name)?;
        let data = dt.to_f32(view.data());
        out.push((name, Param { shape: view.shape().to_vec(), data }));
    }
    Ok(out)
}
