//! Constant tensors of an ONNX graph: initializers and `Constant` nodes decoded from their
//! `TensorProto` (f32, f16, bf16, f64 and the integer types; raw or typed storage; external data
//! refused), and the folding of the shape arithmetic exporters emit around them (`Shape`,
//! `Gather`, `Unsqueeze`, `Squeeze`, `Concat`, `Slice`, `Cast`, elementwise arithmetic,
//! `ConstantOfShape`), so that a `Resize` whose size comes from `Shape -> Gather -> Concat` ends
//! up with plain numbers. Values are kept as f64 (exact for every integer a shape holds) with a
//! flag telling integer tensors from float ones (integer `Div` truncates).

use super::proto::{tensor_proto::DataLocation, TensorProto};
use crate::tensor::Budget;
use lucent_core::{bail, Code, Result};

/// Folded constants may not grow past this many elements (shape vectors are a handful).
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 20;

/// A constant tensor: its dims and values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    pub dims: Vec<usize>,
    pub data: Vec<f64>,
    /// An integer (or bool) tensor: arithmetic truncates, `Cast` to float clears it.
    pub int: bool,
}

// TensorProto.DataType values (onnx.proto).
const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const INT8: i32 = 3;
const UINT16: i32 = 4;
const INT16: i32 = 5;
const INT32: i32 = 6;
const INT64: i32 = 7;
const BOOL: i32 = 9;
const FLOAT16: i32 = 10;
const DOUBLE: i32 = 11;
const UINT32: i32 = 12;
const UINT64: i32 = 13;
const BFLOAT16: i32 = 16;

/// Whether a data type is an integer (or bool) type; `None` for types the reader does not take.
pub fn is_int_type(t: i32) -> Option<bool> {
    match t {
        FLOAT | FLOAT16 | DOUBLE | BFLOAT16 => Some(false),
        UINT8 | INT8 | UINT16 | INT16 | INT32 | INT64 | BOOL | UINT32 | UINT64 => Some(true),
        _ => None,
    }
}

impl Const {
    pub fn scalar(v: f64, int: bool) -> Const {
        Const { dims: vec![], data: vec![v], int }
    }

    pub fn vector(v: Vec<f64>, int: bool) -> Const {
        Const { dims: vec![v.len()], data: v, int }
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// The values as f32 (weights).
    pub fn f32s(&self) -> Vec<f32> {
        self.data.iter().map(|&v| v as f32).collect()
    }

    /// The values as i64 (saturating; shapes, axes, indices).
    pub fn i64s(&self) -> Vec<i64> {
        self.data.iter().map(|&v| v as i64).collect()
    }

    /// Decode an initializer or a `Constant`'s value, counting it against the budget.
    pub fn from_proto(t: &TensorProto, budget: &mut Budget) -> Result<Const> {
        let name = t.name.as_deref().unwrap_or("(constant)");
        if t.data_location == Some(DataLocation::External as i32) || !t.external_data.is_empty() {
            let loc = t.external_data.iter().find(|e| e.key.as_deref() == Some("location")).and_then(|e| e.value.clone()).unwrap_or_default();
            bail!(Code::ModelInvalid, "tensor '{name}' keeps its data in an external file ('{loc}'): save the model with its weights inside the .onnx file (onnx.save(model, path, save_as_external_data=False))");
        }
        if t.segment.is_some() {
            bail!(Code::ModelInvalid, "tensor '{name}' is segmented: not supported");
        }
        let dt = t.data_type.unwrap_or(0);
        let Some(int) = is_int_type(dt) else {
            bail!(Code::ModelInvalid, "tensor '{name}' has data type {dt}, which this reader does not take");
        };
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            if d < 0 {
                bail!(Code::ModelInvalid, "tensor '{name}' has a negative dimension {d}");
            }
            shape.push(d as u64);
        }
        let n = budget.admit(name, &shape)?;
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let data: Vec<f64> = if let Some(raw) = t.raw_data.as_deref().filter(|r| !r.is_empty() || n == 0) {
            let size = match dt {
                FLOAT | INT32 | UINT32 => 4,
                DOUBLE | INT64 | UINT64 => 8,
                FLOAT16 | BFLOAT16 | INT16 | UINT16 => 2,
                _ => 1,
            };
            if raw.len() != n * size {
                bail!(Code::ModelInvalid, "tensor '{name}': {} bytes of data for {n} elements of {size} bytes", raw.len());
            }
            let it = raw.chunks_exact(size);
            match dt {
                FLOAT => it.map(|b| f32::from_le_bytes(b.try_into().expect("4")) as f64).collect(),
                DOUBLE => it.map(|b| f64::from_le_bytes(b.try_into().expect("8"))).collect(),
                FLOAT16 => it.map(|b| half::f16::from_le_bytes(b.try_into().expect("2")).to_f64()).collect(),
                BFLOAT16 => it.map(|b| half::bf16::from_le_bytes(b.try_into().expect("2")).to_f64()).collect(),
                INT32 => it.map(|b| i32::from_le_bytes(b.try_into().expect("4")) as f64).collect(),
                UINT32 => it.map(|b| u32::from_le_bytes(b.try_into().expect("4")) as f64).collect(),
                INT64 => it.map(|b| i64::from_le_bytes(b.try_into().expect("8")) as f64).collect(),
                UINT64 => it.map(|b| u64::from_le_bytes(b.try_into().expect("8")) as f64).collect(),
                INT16 => it.map(|b| i16::from_le_bytes(b.try_into().expect("2")) as f64).collect(),
                UINT16 => it.map(|b| u16::from_le_bytes(b.try_into().expect("2")) as f64).collect(),
                INT8 => it.map(|b| b[0] as i8 as f64).collect(),
                _ => it.map(|b| b[0] as f64).collect(),
            }
        } else {
            // Typed storage: which repeated field holds the values depends on the type.
            let v: Vec<f64> = match dt {
                FLOAT => t.float_data.iter().map(|&v| v as f64).collect(),
                DOUBLE => t.double_data.clone(),
                INT64 => t.int64_data.iter().map(|&v| v as f64).collect(),
                UINT32 | UINT64 => t.uint64_data.iter().map(|&v| v as f64).collect(),
                // f16 / bf16 bit patterns travel in int32_data, as do the small integer types.
                FLOAT16 => t.int32_data.iter().map(|&v| half::f16::from_bits(v as u16).to_f64()).collect(),
                BFLOAT16 => t.int32_data.iter().map(|&v| half::bf16::from_bits(v as u16).to_f64()).collect(),
                _ => t.int32_data.iter().map(|&v| v as f64).collect(),
            };
            if v.len() != n {
                bail!(Code::ModelInvalid, "tensor '{name}': {} values for {n} elements", v.len());
            }
            v
        };
        Ok(Const { dims, data, int })
    }
}

fn checked_numel(dims: &[usize]) -> Result<usize> {
    match dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) if n <= MAX_FOLDED_ELEMENTS => Ok(n),
        _ => bail!(Code::ModelInvalid, "a folded constant of shape {dims:?} is over {MAX_FOLDED_ELEMENTS} elements"),
    }
}

/// An axis in `[-rank, rank)` made non-negative.
pub fn norm_axis(axis: i64, rank: usize, what: &str) -> Result<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        bail!(Code::ModelInvalid, "{what}: axis {axis} is out of range for rank {rank}");
    }
    Ok(a as usize)
}

/// `Gather(data, indices, axis)`.
pub fn gather(data: &Const, idx: &Const, axis: i64) -> Result<Const> {
    let r = data.dims.len();
    if r == 0 {
        bail!(Code::ModelInvalid, "Gather on a scalar");
    }
    let ax = norm_axis(axis, r, "Gather")?;
    let outer: usize = data.dims[..ax].iter().product();
    let n = data.dims[ax];
    let inner: usize = data.dims[ax + 1..].iter().product();
    let mut dims = data.dims[..ax].to_vec();
    dims.extend_from_slice(&idx.dims);
    dims.extend_from_slice(&data.dims[ax + 1..]);
    checked_numel(&dims)?;
    let mut out = Vec::new();
    for o in 0..outer {
        for &i in &idx.i64s() {
            let j = if i < 0 { i + n as i64 } else { i };
            if j < 0 || j >= n as i64 {
                bail!(Code::ModelInvalid, "Gather index {i} is out of range for {n}");
            }
            let base = (o * n + j as usize) * inner;
            out.extend_from_slice(&data.data[base..base + inner]);
        }
    }
    Ok(Const { dims, data: out, int: data.int })
}

/// `Unsqueeze` with (possibly negative) axes of the output.
pub fn unsqueeze(x: &Const, axes: &[i64]) -> Result<Const> {
    let r = x.dims.len() + axes.len();
    let mut ins = Vec::new();
    for &a in axes {
        ins.push(norm_axis(a, r, "Unsqueeze")?);
    }
    ins.sort_unstable();
    ins.dedup();
    if ins.len() != axes.len() {
        bail!(Code::ModelInvalid, "Unsqueeze repeats an axis");
    }
    let mut dims = Vec::with_capacity(r);
    let mut src = x.dims.iter();
    for i in 0..r {
        dims.push(if ins.contains(&i) { 1 } else { *src.next().expect("rank") });
    }
    Ok(Const { dims, data: x.data.clone(), int: x.int })
}

/// `Squeeze`: the given axes (all of size 1) or every axis of size 1.
pub fn squeeze(x: &Const, axes: &[i64]) -> Result<Const> {
    let r = x.dims.len();
    let mut drop = Vec::new();
    for &a in axes {
        let a = norm_axis(a, r, "Squeeze")?;
        if x.dims[a] != 1 {
            bail!(Code::ModelInvalid, "Squeeze of axis {a} of size {}", x.dims[a]);
        }
        drop.push(a);
    }
    let dims = x.dims.iter().enumerate().filter(|(i, &d)| if axes.is_empty() { d != 1 } else { !drop.contains(i) }).map(|(_, &d)| d).collect();
    Ok(Const { dims, data: x.data.clone(), int: x.int })
}

/// `Concat` of constants along `axis`.
pub fn concat(xs: &[&Const], axis: i64) -> Result<Const> {
    let first = xs.first().ok_or_else(|| lucent_core::Error::new(Code::ModelInvalid, "Concat without inputs"))?;
    let r = first.dims.len();
    let ax = norm_axis(axis, r.max(1), "Concat")?;
    if r == 0 {
        return Ok(Const::vector(xs.iter().flat_map(|x| x.data.clone()).collect(), first.int));
    }
    let mut dims = first.dims.clone();
    dims[ax] = 0;
    for x in xs {
        if x.dims.len() != r || (0..r).any(|i| i != ax && x.dims[i] != first.dims[i]) {
            bail!(Code::ModelInvalid, "Concat of constants of shapes {:?} and {:?}", first.dims, x.dims);
        }
        dims[ax] += x.dims[ax];
    }
    checked_numel(&dims)?;
    let outer: usize = first.dims[..ax].iter().product();
    let mut data = Vec::new();
    for o in 0..outer {
        for x in xs {
            let chunk = x.dims[ax..].iter().product::<usize>();
            data.extend_from_slice(&x.data[o * chunk..(o + 1) * chunk]);
        }
    }
    Ok(Const { dims, data, int: first.int })
}

/// Clamp ONNX `Slice` bounds for an axis of length `n` (step 1 or -1 not needed here: step 1).
pub fn slice_bounds(start: i64, end: i64, n: usize) -> (usize, usize) {
    let n = n as i64;
    let fix = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let (s, e) = (fix(start), fix(end));
    (s as usize, e.max(s) as usize)
}

/// `Slice` of a 1-D constant (shape vectors), step 1.
pub fn slice_1d(x: &Const, start: i64, end: i64, step: i64) -> Result<Const> {
    if x.dims.len() != 1 || step != 1 {
        bail!(Code::ModelInvalid, "Slice of a constant of shape {:?} with step {step} is not supported", x.dims);
    }
    let (s, e) = slice_bounds(start, end, x.dims[0]);
    Ok(Const::vector(x.data[s..e].to_vec(), x.int))
}

/// Elementwise arithmetic between constants: equal shapes or a one-element operand.
pub fn binary(op: &str, a: &Const, b: &Const) -> Result<Const> {
    let (dims, n) = if a.dims == b.dims || b.numel() == 1 {
        (a.dims.clone(), a.numel())
    } else if a.numel() == 1 {
        (b.dims.clone(), b.numel())
    } else {
        bail!(Code::ModelInvalid, "{op} of constants of shapes {:?} and {:?} is not supported", a.dims, b.dims);
    };
    let int = a.int && b.int;
    let at = |c: &Const, i: usize| if c.numel() == 1 { c.data[0] } else { c.data[i] };
    let mut data = Vec::with_capacity(n);
    for i in 0..n {
        let (x, y) = (at(a, i), at(b, i));
        data.push(match op {
            "Add" => x + y,
            "Sub" => x - y,
            "Mul" => x * y,
            "Div" if int => {
                if y == 0.0 {
                    bail!(Code::ModelInvalid, "integer division by zero in a constant");
                }
                (x / y).trunc()
            }
            "Div" => x / y,
            _ => bail!(Code::ModelInvalid, "constant op {op} is not supported"),
        });
    }
    Ok(Const { dims, data, int })
}

/// Elementwise unary ops on constants.
pub fn unary(op: &str, x: &Const) -> Result<Const> {
    let f = match op {
        "Floor" => f64::floor,
        "Ceil" => f64::ceil,
        "Neg" => |v: f64| -v,
        "Sqrt" => f64::sqrt,
        _ => bail!(Code::ModelInvalid, "constant op {op} is not supported"),
    };
    Ok(Const { dims: x.dims.clone(), data: x.data.iter().map(|&v| f(v)).collect(), int: x.int })
}

/// `Cast` to data type `to`.
pub fn cast(x: &Const, to: i32) -> Result<Const> {
    let Some(int) = is_int_type(to) else {
        bail!(Code::ModelInvalid, "Cast to data type {to} is not supported");
    };
    let data = if int && !x.int { x.data.iter().map(|v| v.trunc()).collect() } else { x.data.clone() };
    Ok(Const { dims: x.dims.clone(), data, int })
}

/// `ConstantOfShape(shape)` filled with `value`.
pub fn constant_of_shape(shape: &Const, value: &Const) -> Result<Const> {
    let mut dims = Vec::new();
    for v in shape.i64s() {
        if v < 0 {
            bail!(Code::ModelInvalid, "ConstantOfShape with a negative dimension {v}");
        }
        dims.push(v as usize);
    }
    let n = checked_numel(&dims)?;
    Ok(Const { dims, data: vec![value.data.first().copied().unwrap_or(0.0); n], int: value.int })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_the_shape_chain_a_resize_size_comes_from() {
        // Shape -> Gather(2), Gather(3) -> Unsqueeze -> Concat, as PyTorch exports F.interpolate(size=...).
        let shape = Const::vector(vec![1.0, 64.0, 40.0, 30.0], true);
        let h = unsqueeze(&gather(&shape, &Const::scalar(2.0, true), 0).unwrap(), &[0]).unwrap();
        let w = unsqueeze(&gather(&shape, &Const::scalar(-1.0, true), 0).unwrap(), &[0]).unwrap();
        let hw = concat(&[&h, &w], 0).unwrap();
        assert_eq!(hw, Const::vector(vec![40.0, 30.0], true));
        let nc = slice_1d(&shape, 0, 2, 1).unwrap();
        let sizes = concat(&[&nc, &hw], 0).unwrap();
        assert_eq!(sizes.i64s(), vec![1, 64, 40, 30]);
        assert_eq!(binary("Div", &Const::scalar(7.0, true), &Const::scalar(2.0, true)).unwrap().data, vec![3.0]);
        assert_eq!(binary("Div", &Const::scalar(7.0, false), &Const::scalar(2.0, false)).unwrap().data, vec![3.5]);
        assert!(gather(&shape, &Const::scalar(4.0, true), 0).is_err());
        assert!(constant_of_shape(&Const::vector(vec![1e9, 1e9], true), &Const::scalar(0.0, false)).is_err());
    }
}
