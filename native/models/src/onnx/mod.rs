//! ONNX models: the file decoded with prost from the official `onnx.proto` (see [`proto`]), then
//! its graph mapped node by node onto the ops every Lucent backend runs (a
//! [`lucent_core::ncnn::Net`], input blob `in0`, output blob `out0`, planar (c, h, w) with the
//! batch of 1 dropped). Nothing from the file is executed; sizes are bounded ([`Limits`]) and bad
//! input is an error (`model_invalid`), never a panic.
//!
//! How the mapping works: every ONNX value is either a runtime blob (its shape known: concrete
//! when the graph input is static, as U²-Net's `[1,3,320,320]`; computed at a nominal 64x64 when
//! the input's height and width are free, as SR exports have them) or a constant (initializers,
//! `Constant` nodes, and whatever folds from them: the `Shape -> Gather -> Concat` chains
//! exporters put in front of `Resize`). Shape arithmetic on a free size is mapped at two sizes and
//! must give the same net (a Resize then keeps a fixed scale); otherwise it is refused, as the net
//! would only be right at the nominal size. BatchNormalization after a convolution is folded into it,
//! activations after a convolution are fused into it, and a constant `Pad` in front of a
//! convolution becomes its padding. The ops taken are listed in [`ops`]; any other is refused by
//! its name. Only the first graph output is built (U²-Net's fused map; SR nets have one).

mod consts;
mod layout;
mod node;
mod ops;
pub mod proto;

use crate::detect::ModelInfo;
use crate::tensor::{Budget, Limits};
use consts::Const;
use lucent_core::ncnn::model::{Layer, Net, Op};
use lucent_core::{bail, Code, Error, Result};
use prost::Message;
use std::collections::{BTreeMap, HashMap};

/// No blob may hold more than this many times the input's values (at the input's static or
/// nominal size): bounds what a crafted graph (Resize by 64, again and again) makes a run allocate.
pub const MAX_BLOB_RATIO: usize = 1 << 13;

/// Height and width given to free (symbolic) input dimensions while shapes are worked out.
pub const NOMINAL_SIDE: usize = 64;

/// The second size a graph with shape arithmetic on a free input is mapped at (odd after four
/// halvings, where 64 is not, so a size that only doubles back by luck is caught).
pub const SECOND_NOMINAL_SIDE: usize = 80;

/// Whether `bytes` should be read as ONNX: by the file name, or (for unnamed uploads) by the
/// first byte being the tag of `ModelProto.ir_version` (field 1, varint), which no PyTorch zip,
/// legacy pickle or safetensors header starts with.
pub fn is_onnx(bytes: &[u8], file_name: &str) -> bool {
    file_name.to_ascii_lowercase().ends_with(".onnx") || bytes.first() == Some(&0x08)
}

/// A value of the graph being mapped.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// A runtime blob: its index in the net, its shape (c, h, w), and the layer that made it.
    Blob { b: usize, shape: [usize; 3], layer: Option<usize> },
    /// A runtime blob waiting for a convolution to take its constant padding
    /// (top, left, bottom, right) and pad value.
    Padded { b: usize, shape: [usize; 3], pads: [usize; 4], value: f32 },
    /// A runtime blob of `shape` seen through a Reshape to `dims` (batch included), then a
    /// Transpose by `perm` when given: waiting for the Reshape back to 4-D that makes the pair a
    /// pixel shuffle or unshuffle (how PyTorch exports them before opset 11, and always for
    /// pixel_unshuffle).
    View { b: usize, shape: [usize; 3], dims: Vec<usize>, perm: Option<Vec<usize>> },
    Const(Const),
}

/// The net under construction and what the mapping knows about the graph.
pub(crate) struct Builder {
    pub layers: Vec<Layer>,
    pub blobs: Vec<String>,
    pub values: HashMap<String, Value>,
    /// How many node inputs (and graph outputs) read each value.
    pub uses: HashMap<String, usize>,
    /// The graph input's height and width are symbolic (shapes computed at [`NOMINAL_SIDE`]).
    pub dynamic: bool,
    pub opset: i64,
    pub budget: Budget,
    /// [`MAX_BLOB_RATIO`] times the input's values.
    pub max_blob: usize,
    /// What the input's sides must be a multiple of (SpaceToDepth's block).
    pub size_multiple: usize,
    /// A `Shape` of a runtime blob was folded while the input size is free.
    pub shape_used: bool,
    /// The op types that read each value.
    pub readers: HashMap<String, Vec<String>>,
}

impl Builder {
    /// Append a layer with one new top blob; returns the blob.
    pub fn add(&mut self, name: &str, kind: &str, op: Op, bottoms: &[usize]) -> usize {
        let top = self.blobs.len();
        self.blobs.push(format!("{name}#{top}"));
        self.layers.push(Layer { name: name.to_string(), kind: kind.to_string(), op, bottoms: bottoms.to_vec(), tops: vec![top] });
        top
    }

    pub fn value(&self, name: &str, node: &str) -> Result<&Value> {
        self.values.get(name).ok_or_else(|| Error::new(Code::ModelInvalid, format!("node '{node}' reads '{name}', which no earlier node or initializer defines")))
    }

    pub fn uses(&self, name: &str) -> usize {
        self.uses.get(name).copied().unwrap_or(0)
    }
}

/// Read an ONNX model and build its network. The description says "ONNX" as the architecture,
/// the scale and channel counts found by shape inference, and, for a static input, its size.
pub fn load(bytes: &[u8], file_name: &str, limits: &Limits) -> Result<(Net, ModelInfo)> {
    if bytes.len() as u64 > limits.max_file_bytes {
        bail!(Code::ModelInvalid, "{file_name}: {} bytes, over the limit of {}", bytes.len(), limits.max_file_bytes);
    }
    let model = proto::ModelProto::decode(bytes).map_err(|e| Error::new(Code::ModelInvalid, format!("{file_name}: not a readable ONNX model ({e})")))?;
    let Some(graph) = model.graph.as_ref() else {
        bail!(Code::ModelInvalid, "{file_name}: the ONNX model has no graph");
    };
    if !model.functions.is_empty() {
        bail!(Code::ModelInvalid, "{file_name}: model-local functions are not supported");
    }
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.as_deref().unwrap_or("").is_empty() || o.domain.as_deref() == Some("ai.onnx"))
        .and_then(|o| o.version)
        .unwrap_or(0);
    if !(7..=22).contains(&opset) {
        bail!(Code::ModelInvalid, "{file_name}: ONNX opset {opset} is not supported (7 to 22 are)");
    }
    let m = map_graph(graph, opset, limits, file_name, NOMINAL_SIDE)?;
    let (net, shape, out_shape) = (m.net, m.in_shape, m.out_shape);
    if m.dynamic && m.shape_used {
        // Shape arithmetic on a free size (sizes of a Resize computed from Shape): map again at
        // another size; every layer but the weights must come out the same (the Resize scales
        // included), else the graph depends on the size in a way a fixed net cannot follow.
        let again = map_graph(graph, opset, limits, file_name, SECOND_NOMINAL_SIDE)?;
        let differs = net.layers.len() != again.net.layers.len() || net.layers.iter().zip(&again.net.layers).any(|(a, b)| signature(a) != signature(b));
        if differs {
            bail!(Code::ModelInvalid, "{file_name}: the graph computes sizes from its input's free height and width in a way that is not a fixed scale: export it with a fixed input size");
        }
    }
    let (counts, dynamic, size_multiple) = (m.counts, m.dynamic, m.size_multiple);
    let mut params = BTreeMap::new();
    params.insert("opset".to_string(), opset.to_string());
    params.insert("nodes".to_string(), counts.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(","));
    if let Some(p) = model.producer_name.as_ref().filter(|p| !p.is_empty()) {
        params.insert("producer".to_string(), format!("{p} {}", model.producer_version.as_deref().unwrap_or("")).trim().to_string());
    }
    let mut warnings = Vec::new();
    if !dynamic {
        params.insert("input_size".to_string(), format!("{}x{}", shape[2], shape[1]));
        warnings.push(format!("the network takes {}x{} inputs only (its ONNX input is static)", shape[2], shape[1]));
    }
    let scale = if out_shape[1] % shape[1] == 0 && out_shape[1] / shape[1] == out_shape[2] / shape[2].max(1) && out_shape[2] % shape[2] == 0 { out_shape[1] / shape[1] } else { 1 };
    let info = ModelInfo {
        architecture: "ONNX",
        scale: scale.max(1),
        in_channels: shape[0],
        out_channels: out_shape[0],
        params,
        tags: vec!["onnx".to_string()],
        warnings,
        size_multiple,
    };
    Ok((net, info))
}

/// The graph mapped at one size of a free input: the net and what shape inference found.
struct Mapped {
    net: Net,
    in_shape: [usize; 3],
    out_shape: [usize; 3],
    counts: BTreeMap<String, usize>,
    dynamic: bool,
    shape_used: bool,
    size_multiple: usize,
}

fn map_graph(graph: &proto::GraphProto, opset: i64, limits: &Limits, file_name: &str, nominal: usize) -> Result<Mapped> {
    let mut b = Builder { layers: Vec::new(), blobs: Vec::new(), values: HashMap::new(), uses: HashMap::new(), dynamic: false, opset, budget: Budget::new(*limits), max_blob: 0, size_multiple: 1, shape_used: false, readers: HashMap::new() };
    if graph.node.len() > limits.max_tensors {
        bail!(Code::ModelInvalid, "{file_name}: {} nodes, over the limit of {}", graph.node.len(), limits.max_tensors);
    }
    for t in &graph.initializer {
        let name = t.name.clone().unwrap_or_default();
        let c = Const::from_proto(t, &mut b.budget)?;
        b.values.insert(name, Value::Const(c));
    }
    if !graph.sparse_initializer.is_empty() {
        bail!(Code::ModelInvalid, "{file_name}: sparse initializers are not supported");
    }
    // The one runtime input: graph inputs that are not initializers.
    let inputs: Vec<&proto::ValueInfoProto> = graph.input.iter().filter(|i| !b.values.contains_key(i.name.as_deref().unwrap_or(""))).collect();
    let [input] = inputs[..] else {
        bail!(Code::ModelInvalid, "{file_name}: the graph has {} runtime inputs; an image model has one", inputs.len());
    };
    let in_shape = input_shape(input)?;
    b.dynamic = in_shape[1] == 0 || in_shape[2] == 0;
    let shape = [in_shape[0], if in_shape[1] == 0 { nominal } else { in_shape[1] }, if in_shape[2] == 0 { nominal } else { in_shape[2] }];
    b.max_blob = shape.iter().product::<usize>() * MAX_BLOB_RATIO;
    b.blobs.push("in0".to_string());
    b.layers.push(Layer { name: "in0".to_string(), kind: "Input".to_string(), op: Op::Input { w: 0, h: 0, c: 0 }, bottoms: vec![], tops: vec![0] });
    b.values.insert(input.name.clone().unwrap_or_default(), Value::Blob { b: 0, shape, layer: None });
    for n in &graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *b.uses.entry(i.clone()).or_default() += 1;
            b.readers.entry(i.clone()).or_default().push(n.op_type.clone().unwrap_or_default());
        }
    }
    let Some(out_name) = graph.output.first().and_then(|o| o.name.clone()) else {
        bail!(Code::ModelInvalid, "{file_name}: the graph has no output");
    };
    for o in &graph.output {
        *b.uses.entry(o.name.clone().unwrap_or_default()).or_default() += 1;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for n in &graph.node {
        *counts.entry(n.op_type.clone().unwrap_or_default()).or_default() += 1;
        ops::map_node(&mut b, n).map_err(|e| {
            let name = n.name.clone().filter(|s| !s.is_empty()).or_else(|| n.output.first().cloned()).unwrap_or_default();
            Error::new(e.code, format!("{file_name}: node '{name}' ({}): {}", n.op_type.as_deref().unwrap_or("?"), e.message))
        })?;
    }
    let (out_blob, out_shape) = match b.values.get(&out_name) {
        Some(Value::Blob { b: ob, shape, .. }) if *ob != 0 => (*ob, *shape),
        Some(Value::Blob { .. }) => bail!(Code::ModelInvalid, "{file_name}: the output is the input unchanged"),
        Some(_) => bail!(Code::ModelInvalid, "{file_name}: the first output '{out_name}' is a constant or an unfinished padding, not an image"),
        None => bail!(Code::ModelInvalid, "{file_name}: no node computes the output '{out_name}'"),
    };
    let net = finish(b.layers, b.blobs, out_blob);
    Ok(Mapped { net, in_shape: shape, out_shape, counts, dynamic: b.dynamic, shape_used: b.shape_used, size_multiple: b.size_multiple })
}

/// A layer's description without its weights (what may depend on the input size).
fn signature(l: &Layer) -> String {
    match &l.op {
        Op::Conv(c) | Op::Deconv(c) => format!(
            "{} {} {} {} {}x{} d{}x{} s{}x{} {:?} {} op{}x{} o{}x{} {:?}",
            l.kind, c.num_output, c.num_input, c.group, c.kernel_w, c.kernel_h, c.dilation_w, c.dilation_h, c.stride_w, c.stride_h, c.pad, c.pad_value, c.output_pad_right, c.output_pad_bottom, c.output_w, c.output_h, c.activation
        ),
        op => format!("{} {op:?} {:?}", l.kind, l.bottoms),
    }
}

/// (c, h, w) of the graph input, 0 for a free height or width; the batch must be 1 or free.
fn input_shape(v: &proto::ValueInfoProto) -> Result<[usize; 3]> {
    let name = v.name.as_deref().unwrap_or("");
    let tt = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(proto::type_proto::Value::TensorType(tt)) => tt,
        _ => bail!(Code::ModelInvalid, "input '{name}' is not a tensor"),
    };
    if consts::is_int_type(tt.elem_type.unwrap_or(1)) != Some(false) {
        bail!(Code::ModelInvalid, "input '{name}' is not a float tensor");
    }
    let dims: Vec<Option<i64>> = tt
        .shape
        .as_ref()
        .map(|s| s.dim.iter().map(|d| match d.value {
            Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if v > 0 => Some(v),
            _ => None,
        }).collect())
        .unwrap_or_default();
    let [n, c, h, w] = dims[..] else {
        bail!(Code::ModelInvalid, "input '{name}' has rank {}; an image model takes (batch, channels, height, width)", dims.len());
    };
    if n.is_some_and(|n| n != 1) {
        bail!(Code::ModelInvalid, "input '{name}' has a fixed batch of {}; Lucent runs a batch of 1", n.unwrap_or(0));
    }
    let Some(c) = c.filter(|&c| c <= 64) else {
        bail!(Code::ModelInvalid, "input '{name}' does not fix its channel count (or has over 64)");
    };
    let side = |v: Option<i64>| -> Result<usize> {
        match v {
            None => Ok(0),
            Some(v) if v <= 8192 => Ok(v as usize),
            Some(v) => bail!(Code::ModelInvalid, "input '{name}' has a side of {v}"),
        }
    };
    Ok([c as usize, side(h)?, side(w)?])
}

/// Keep only the layers the output depends on, renumber their blobs, and name the output `out0`.
fn finish(layers: Vec<Layer>, blobs: Vec<String>, out: usize) -> Net {
    let mut needed = vec![false; blobs.len()];
    needed[out] = true;
    needed[0] = true;
    let mut keep = vec![false; layers.len()];
    for (li, l) in layers.iter().enumerate().rev() {
        if l.tops.iter().any(|&t| needed[t]) {
            keep[li] = true;
            for &x in &l.bottoms {
                needed[x] = true;
            }
        }
    }
    let mut index = vec![usize::MAX; blobs.len()];
    let mut names = Vec::new();
    let mut kept = Vec::new();
    for (li, mut l) in layers.into_iter().enumerate() {
        if !keep[li] {
            continue;
        }
        for t in &mut l.tops {
            index[*t] = names.len();
            names.push(if *t == out { "out0".to_string() } else { blobs[*t].clone() });
            *t = index[*t];
        }
        for x in &mut l.bottoms {
            *x = index[*x];
        }
        kept.push(l);
    }
    Net::from_layers(kept, names)
}
