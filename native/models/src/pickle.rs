//! A restricted unpickler: enough of the pickle machine to rebuild a PyTorch state dict, nothing
//! more. Only the opcodes that build plain data (ints, floats, strings, bytes, tuples, lists,
//! dicts), the memo, persistent ids and `REDUCE`/`BUILD` on the few globals that torch's
//! `weights_only` loading allows for tensors are accepted:
//! `collections.OrderedDict` (and `typing.OrderedDict`), `torch._utils._rebuild_tensor_v2`,
//! `torch._utils._rebuild_parameter`, `torch._utils._rebuild_parameter_with_state` and the typed
//! storage classes (`torch.FloatStorage`, ...). Any other global, opcode or call is refused with an
//! error naming it. No Python object is ever created, and nothing outside the given bytes is read.
//!
//! Resource bounds: stack and memo sizes, mark depth, container nesting and the number of value
//! nodes created (copies from the memo included) are all capped, so a crafted pickle cannot make
//! this allocate much more than its own size or recurse deeply.
//! Over 500 lines on purpose: one opcode table with its allowed globals and bounds, read as a whole
//! when reviewing what an untrusted file can make this reader do.

use crate::tensor::DType;
use lucent_core::{bail, Code, Error, Result};
use std::collections::HashMap;

const MAX_STACK: usize = 1 << 20;
const MAX_MARKS: usize = 4096;
const MAX_MEMO: usize = 1 << 20;
const MAX_DEPTH: usize = 64;
/// Values created in all (copies included; every 64 bytes of a string count as one): bounds the
/// unpickler's memory to a few hundred MB whatever the pickle does.
const MAX_NODES: usize = 1 << 21;

/// A global the unpickler knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    OrderedDict,
    RebuildTensorV2,
    RebuildParameter,
    RebuildParameterWithState,
    Storage(DType),
}

impl Global {
    fn resolve(module: &str, name: &str) -> Result<Global> {
        Ok(match (module, name) {
            ("collections", "OrderedDict") | ("typing", "OrderedDict") => Global::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
            ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
            ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
            ("torch", storage) => match DType::from_storage_name(storage) {
                Some(d) => Global::Storage(d),
                None => bail!(Code::ModelInvalid, "pickle global 'torch.{storage}' is not allowed (only tensor rebuilds are)"),
            },
            _ => bail!(Code::ModelInvalid, "pickle global '{}.{}' is not allowed (only tensor rebuilds are)", printable(module), printable(name)),
        })
    }
}

/// A storage a persistent id points at: its element type, key (file name under `data/` or the
/// legacy key) and element count.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageRef {
    pub dtype: DType,
    pub key: String,
    pub numel: u64,
}

/// A tensor view on a storage (`_rebuild_tensor_v2`'s arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRef {
    pub storage: StorageRef,
    pub offset: u64,
    pub shape: Vec<u64>,
    pub stride: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Global(Global),
    Storage(StorageRef),
    Tensor(TensorRef),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Global(_) => "global",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }

    /// (nodes, depth) of this value, visiting about `budget` nodes at most.
    fn measure(&self, budget: usize) -> (usize, usize) {
        let kids: Box<dyn Iterator<Item = &Value>> = match self {
            Value::Tuple(v) | Value::List(v) => Box::new(v.iter()),
            Value::Dict(v) => Box::new(v.iter().flat_map(|(k, v)| [k, v])),
            // Payload bytes count too, so copies of one big string stay bounded.
            Value::Str(s) => return (1 + s.len() / 64, 0),
            Value::Bytes(b) => return (1 + b.len() / 64, 0),
            _ => return (1, 0),
        };
        let (mut n, mut d) = (1usize, 0usize);
        for k in kids {
            if n > budget {
                break;
            }
            let (kn, kd) = k.measure(budget - n);
            n += kn;
            d = d.max(kd + 1);
        }
        (n, d)
    }
}


struct Machine<'a, 'p> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
    nodes: usize,
    persistent: &'p mut (dyn FnMut(Value) -> Result<Value> + 'p),
}

fn printable(s: &str) -> String {
    s.chars().take(80).map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn err(msg: impl Into<String>) -> Error {
    Error::new(Code::ModelInvalid, msg)
}

impl<'a, 'p> Machine<'a, 'p> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| err("pickle is truncated"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn line(&mut self) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let n = rest.iter().take(256).position(|&b| b == b'\n').ok_or_else(|| err("pickle text argument is unterminated or too long"))?;
        let s = std::str::from_utf8(&rest[..n]).map_err(|_| err("pickle text argument is not UTF-8"))?;
        self.pos += n + 1;
        Ok(s)
    }
    fn sized(&mut self, n: u64) -> Result<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| err("pickle string length overflows"))?;
        self.take(n)
    }
    fn string(&mut self, n: u64) -> Result<Value> {
        let b = self.sized(n)?;
        Ok(Value::Str(std::str::from_utf8(b).map_err(|_| err("pickle string is not UTF-8"))?.to_string()))
    }

    fn push(&mut self, v: Value) -> Result<()> {
        if self.stack.len() >= MAX_STACK {
            bail!(Code::ModelInvalid, "pickle stack exceeds {MAX_STACK} entries");
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            bail!(Code::ModelInvalid, "pickle builds more than {MAX_NODES} values");
        }
        self.stack.push(v);
        Ok(())
    }
    fn pop(&mut self) -> Result<Value> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            bail!(Code::ModelInvalid, "pickle stack underflow at byte {}", self.pos);
        }
        Ok(self.stack.pop().expect("checked"))
    }
    fn top(&mut self) -> Result<&mut Value> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            bail!(Code::ModelInvalid, "pickle stack underflow at byte {}", self.pos);
        }
        Ok(self.stack.last_mut().expect("checked"))
    }
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let m = self.marks.pop().ok_or_else(|| err("pickle pops a mark that was never set"))?;
        Ok(self.stack.split_off(m))
    }
    /// Account for `items` going into a container (which sits on the stack, inside nothing):
    /// their nodes count against the budget and their depth against the nesting cap.
    fn admit(&mut self, items: &[Value]) -> Result<()> {
        for v in items {
            let (n, d) = v.measure(MAX_NODES);
            self.nodes = self.nodes.saturating_add(n);
            if d + 1 > MAX_DEPTH {
                bail!(Code::ModelInvalid, "pickle nests containers deeper than {MAX_DEPTH}");
            }
        }
        if self.nodes > MAX_NODES {
            bail!(Code::ModelInvalid, "pickle builds more than {MAX_NODES} values");
        }
        Ok(())
    }
    fn memo_put(&mut self, idx: u32) -> Result<()> {
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&idx) {
            bail!(Code::ModelInvalid, "pickle memo exceeds {MAX_MEMO} entries");
        }
        let v = self.top()?.clone();
        self.admit(std::slice::from_ref(&v))?;
        self.memo.insert(idx, v);
        Ok(())
    }
    fn memo_get(&mut self, idx: u32) -> Result<()> {
        let v = self.memo.get(&idx).ok_or_else(|| err(format!("pickle reads memo entry {idx} that was never stored")))?;
        let (n, _) = v.measure(MAX_NODES);
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            bail!(Code::ModelInvalid, "pickle builds more than {MAX_NODES} values");
        }
        let v = v.clone();
        self.push(v)
    }
    /// Dict items in order; a repeated key is kept twice here and the later one wins where the
    /// dict is read (as in Python).
    fn set_items(&mut self, items: Vec<Value>) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            bail!(Code::ModelInvalid, "pickle SETITEMS with an odd number of values");
        }
        self.admit(&items)?;
        let target = self.top()?;
        let Value::Dict(d) = target else {
            bail!(Code::ModelInvalid, "pickle sets items on a {}", target.kind());
        };
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            d.push((k, v));
        }
        Ok(())
    }
    fn append(&mut self, items: Vec<Value>) -> Result<()> {
        self.admit(&items)?;
        let target = self.top()?;
        let Value::List(l) = target else {
            bail!(Code::ModelInvalid, "pickle appends to a {}", target.kind());
        };
        l.extend(items);
        Ok(())
    }

    fn reduce(&mut self) -> Result<()> {
        let args = self.pop()?;
        let func = self.pop()?;
        let Value::Tuple(args) = args else {
            bail!(Code::ModelInvalid, "pickle REDUCE with {} arguments instead of a tuple", args.kind());
        };
        let Value::Global(g) = func else {
            bail!(Code::ModelInvalid, "pickle REDUCE calls a {}, which is not allowed", func.kind());
        };
        let v = match g {
            Global::OrderedDict => match args.as_slice() {
                [] => Value::Dict(Vec::new()),
                [Value::List(pairs)] => {
                    let mut d = Vec::with_capacity(pairs.len());
                    for p in pairs {
                        match p {
                            Value::Tuple(kv) if kv.len() == 2 => d.push((kv[0].clone(), kv[1].clone())),
                            _ => bail!(Code::ModelInvalid, "OrderedDict built from something other than pairs"),
                        }
                    }
                    Value::Dict(d)
                }
                _ => bail!(Code::ModelInvalid, "OrderedDict called with unexpected arguments"),
            },
            Global::RebuildTensorV2 => rebuild_tensor(args)?,
            Global::RebuildParameter | Global::RebuildParameterWithState => match args.into_iter().next() {
                Some(t @ Value::Tensor(_)) => t,
                _ => bail!(Code::ModelInvalid, "_rebuild_parameter without a tensor"),
            },
            Global::Storage(d) => bail!(Code::ModelInvalid, "pickle calls the storage class {d:?} directly, which is not allowed"),
        };
        self.push(v)
    }

    fn build(&mut self) -> Result<()> {
        let state = self.pop()?;
        let target = self.top()?;
        match (target, &state) {
            // OrderedDict's instance attributes (torch keeps `_metadata` there) and parameter
            // state: nothing a state dict needs.
            (Value::Dict(_), Value::Dict(_) | Value::None) => Ok(()),
            (Value::Tensor(_), Value::Dict(_) | Value::None | Value::Tuple(_)) => Ok(()),
            (t, s) => bail!(Code::ModelInvalid, "pickle BUILD on a {} with a {}, which is not allowed", t.kind(), s.kind()),
        }
    }

    fn run(&mut self) -> Result<Value> {
        loop {
            let at = self.pos;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let p = self.u8()?;
                    if p > 5 {
                        bail!(Code::ModelInvalid, "pickle protocol {p} is not supported");
                    }
                }
                0x95 => {
                    self.u64()?;
                }
                b'.' => {
                    let v = self.pop()?;
                    if !self.marks.is_empty() {
                        bail!(Code::ModelInvalid, "pickle stops with an open mark");
                    }
                    return Ok(v);
                }
                b'(' => {
                    if self.marks.len() >= MAX_MARKS {
                        bail!(Code::ModelInvalid, "pickle sets more than {MAX_MARKS} nested marks");
                    }
                    self.marks.push(self.stack.len());
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.admit(std::slice::from_ref(&v))?;
                    self.push(v)?;
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v as i64))?
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(v as i64))?
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push(Value::Int(v as i64))?
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    let b = self.take(n)?;
                    self.push(long1(b))?
                }
                b'I' => {
                    let s = self.line()?;
                    let v = match s {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        s => Value::Int(s.parse().map_err(|_| err("pickle INT is not a number"))?),
                    };
                    self.push(v)?
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"));
                    self.push(Value::Float(v))?
                }
                b'X' => {
                    let n = self.u32()? as u64;
                    let v = self.string(n)?;
                    self.push(v)?
                }
                0x8c => {
                    let n = self.u8()? as u64;
                    let v = self.string(n)?;
                    self.push(v)?
                }
                0x8d => {
                    let n = self.u64()?;
                    let v = self.string(n)?;
                    self.push(v)?
                }
                b'B' | b'C' | 0x8e => {
                    let n = match op {
                        b'B' => self.u32()? as u64,
                        b'C' => self.u8()? as u64,
                        _ => self.u64()?,
                    };
                    let b = self.sized(n)?.to_vec();
                    self.push(Value::Bytes(b))?
                }
                b')' => self.push(Value::Tuple(Vec::new()))?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.admit(&items)?;
                    self.push(Value::Tuple(items))?
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.admit(&items)?;
                    self.push(Value::Tuple(items))?
                }
                b']' => self.push(Value::List(Vec::new()))?,
                b'l' => {
                    let items = self.pop_mark()?;
                    self.admit(&items)?;
                    self.push(Value::List(items))?
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v])?
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?
                }
                b'}' => self.push(Value::Dict(Vec::new()))?,
                b'd' => {
                    let items = self.pop_mark()?;
                    self.push(Value::Dict(Vec::new()))?;
                    self.set_items(items)?
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let g = Global::resolve(module, name)?;
                    self.push(Value::Global(g))?
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(m), Value::Str(n)) = (&module, &name) else {
                        bail!(Code::ModelInvalid, "pickle STACK_GLOBAL with non-string names");
                    };
                    let g = Global::resolve(m, n)?;
                    self.push(Value::Global(g))?
                }
                b'R' => self.reduce()?,
                b'b' => self.build()?,
                b'Q' => {
                    let pid = self.pop()?;
                    let v = (self.persistent)(pid)?;
                    self.push(v)?
                }
                b'q' => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?
                }
                0x94 => {
                    let i = u32::try_from(self.memo.len()).map_err(|_| err("pickle memo overflow"))?;
                    self.memo_put(i)?
                }
                b'p' => {
                    let i: u32 = self.line()?.parse().map_err(|_| err("pickle PUT index is not a number"))?;
                    self.memo_put(i)?
                }
                b'h' => {
                    let i = self.u8()? as u32;
                    self.memo_get(i)?
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?
                }
                b'g' => {
                    let i: u32 = self.line()?.parse().map_err(|_| err("pickle GET index is not a number"))?;
                    self.memo_get(i)?
                }
                other => bail!(Code::ModelInvalid, "pickle opcode {} (0x{other:02x}) at byte {at} is not allowed", opcode_name(other)),
            }
        }
    }
}

fn opcode_name(op: u8) -> &'static str {
    match op {
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        0x82..=0x84 => "EXT",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'F' => "FLOAT",
        b'L' => "LONG",
        0x8b => "LONG4",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "unknown",
    }
}

fn long1(b: &[u8]) -> Value {
    if b.is_empty() {
        return Value::Int(0);
    }
    if b.len() > 8 {
        // Beyond i64: only its size matters to callers, which refuse it anyway.
        return Value::Float(f64::INFINITY);
    }
    let neg = b[b.len() - 1] & 0x80 != 0;
    let mut buf = if neg { [0xffu8; 8] } else { [0u8; 8] };
    buf[..b.len()].copy_from_slice(b);
    Value::Int(i64::from_le_bytes(buf))
}

fn as_u64(v: &Value, what: &str) -> Result<u64> {
    match v {
        Value::Int(i) if *i >= 0 => Ok(*i as u64),
        _ => bail!(Code::ModelInvalid, "tensor {what} is not a non-negative int"),
    }
}

fn as_dims(v: &Value, what: &str) -> Result<Vec<u64>> {
    match v {
        Value::Tuple(items) if items.len() <= 8 => items.iter().map(|i| as_u64(i, what)).collect(),
        _ => bail!(Code::ModelInvalid, "tensor {what} is not a tuple of at most 8 ints"),
    }
}

fn rebuild_tensor(args: Vec<Value>) -> Result<Value> {
    if !(6..=7).contains(&args.len()) {
        bail!(Code::ModelInvalid, "_rebuild_tensor_v2 with {} arguments", args.len());
    }
    let Value::Storage(storage) = &args[0] else {
        bail!(Code::ModelInvalid, "_rebuild_tensor_v2 on a {} instead of a storage", args[0].kind());
    };
    let offset = as_u64(&args[1], "storage offset")?;
    let shape = as_dims(&args[2], "size")?;
    let stride = as_dims(&args[3], "stride")?;
    if shape.len() != stride.len() {
        bail!(Code::ModelInvalid, "tensor size and stride differ in rank");
    }
    Ok(Value::Tensor(TensorRef { storage: storage.clone(), offset, shape, stride }))
}

/// Unpickle one pickle from the start of `data`; returns the value and the bytes it took.
/// `persistent` resolves a persistent id (the value `BINPERSID` pops) to a value (a storage).
pub fn unpickle(data: &[u8], persistent: &mut dyn FnMut(Value) -> Result<Value>) -> Result<(Value, usize)> {
    let mut m = Machine { data, pos: 0, stack: Vec::new(), marks: Vec::new(), memo: HashMap::new(), nodes: 0, persistent };
    let v = m.run()?;
    Ok((v, m.pos))
}
