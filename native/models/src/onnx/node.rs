//! Reading one ONNX node: its attributes, its inputs as the builder's values (constants, blobs), and
//! recording its result (`set`, `emit`). Shared by the op mappings of ops.rs and layout.rs.

use super::consts::Const;
use super::proto::{AttributeProto, NodeProto};
use super::{Builder, Value};
use lucent_core::ncnn::model::Op;
use lucent_core::{bail, Code, Result};

pub(super) fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name.as_deref() == Some(name))
}
pub(super) fn attr_i(n: &NodeProto, name: &str, d: i64) -> i64 {
    attr(n, name).and_then(|a| a.i).unwrap_or(d)
}
pub(super) fn attr_f(n: &NodeProto, name: &str, d: f32) -> f32 {
    attr(n, name).and_then(|a| a.f).unwrap_or(d)
}
pub(super) fn attr_ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(n, name).map(|a| a.ints.clone())
}
pub(super) fn attr_s(n: &NodeProto, name: &str, d: &str) -> String {
    attr(n, name).and_then(|a| a.s.as_ref()).map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_else(|| d.to_string())
}

/// The node's `i`-th input, `None` when absent or empty (an omitted optional input).
pub(super) fn input<'a>(b: &'a Builder, n: &NodeProto, i: usize) -> Result<Option<&'a Value>> {
    match n.input.get(i).filter(|s| !s.is_empty()) {
        Some(name) => Ok(Some(b.value(name, n.name.as_deref().unwrap_or(""))?)),
        None => Ok(None),
    }
}

pub(super) fn need<'a>(b: &'a Builder, n: &NodeProto, i: usize) -> Result<&'a Value> {
    match input(b, n, i)? {
        Some(v) => Ok(v),
        None => bail!(Code::ModelInvalid, "input {i} is missing"),
    }
}

pub(super) fn need_const(b: &Builder, n: &NodeProto, i: usize, what: &str) -> Result<Const> {
    match need(b, n, i)? {
        Value::Const(c) => Ok(c.clone()),
        _ => bail!(Code::ModelInvalid, "the {what} (input {i}) must be a constant"),
    }
}

pub(super) fn opt_const(b: &Builder, n: &NodeProto, i: usize, what: &str) -> Result<Option<Const>> {
    match input(b, n, i)? {
        None => Ok(None),
        Some(Value::Const(c)) => Ok(Some(c.clone())),
        Some(_) => bail!(Code::ModelInvalid, "the {what} (input {i}) must be a constant"),
    }
}

/// A runtime input: (blob, shape, producing layer). A pending padding is refused here: only a
/// convolution takes one.
pub(super) fn need_blob(b: &Builder, n: &NodeProto, i: usize) -> Result<(usize, [usize; 3], Option<usize>)> {
    match need(b, n, i)? {
        Value::Blob { b, shape, layer } => Ok((*b, *shape, *layer)),
        Value::Padded { .. } => bail!(Code::ModelInvalid, "a Pad is only supported right before a convolution"),
        Value::View { .. } => bail!(Code::ModelInvalid, "a Reshape / Transpose is only supported as a pixel shuffle or unshuffle"),
        Value::Const(_) => bail!(Code::ModelInvalid, "input {i} is a constant where an image was expected"),
    }
}

pub(super) fn set(b: &mut Builder, n: &NodeProto, v: Value) -> Result<()> {
    let Some(out) = n.output.first().filter(|o| !o.is_empty()) else {
        bail!(Code::ModelInvalid, "the node has no output");
    };
    if b.values.insert(out.clone(), v).is_some() {
        bail!(Code::ModelInvalid, "value '{out}' is defined twice");
    }
    Ok(())
}

pub(super) fn node_name(n: &NodeProto) -> String {
    n.name.clone().filter(|s| !s.is_empty()).or_else(|| n.output.first().cloned()).unwrap_or_else(|| "node".to_string())
}

/// A layer with one runtime result of `shape`.
pub(super) fn emit(b: &mut Builder, n: &NodeProto, kind: &str, op: Op, bottoms: &[usize], shape: [usize; 3]) -> Result<()> {
    let elems = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if elems.is_none_or(|e| e == 0 || e > b.max_blob) {
        bail!(Code::ModelInvalid, "its result {shape:?} is empty or over {} values ({}x the input's): not an image model this reader runs", b.max_blob, super::MAX_BLOB_RATIO);
    }
    let top = b.add(&node_name(n), kind, op, bottoms);
    let layer = Some(b.layers.len() - 1);
    set(b, n, Value::Blob { b: top, shape, layer })
}
