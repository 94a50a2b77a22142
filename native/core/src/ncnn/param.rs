//! Parser for ncnn's text `.param` files.
//!
//! Layout: a magic line `7767517`, a line `layer_count blob_count`, then one line per layer:
//! `Type Name bottom_count top_count bottoms... tops... key=value...`. A key `k` >= 0 holds a
//! scalar; a key written as `-23300 - k` holds an array `count,v1,v2,...`. A value containing
//! '.', 'e' or 'E' is a float, otherwise an integer.

use crate::bail;
use crate::error::{Code, Result};
use std::collections::HashMap;

pub const MAGIC: &str = "7767517";
const ARRAY_KEY_BASE: i32 = -23300;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i32),
    Float(f32),
    IntArray(Vec<i32>),
    FloatArray(Vec<f32>),
}

/// One layer's `key=value` pairs with ncnn's getters (defaults for absent keys).
#[derive(Debug, Clone, Default)]
pub struct ParamDict {
    values: HashMap<i32, Value>,
}

impl ParamDict {
    pub fn contains(&self, id: i32) -> bool {
        self.values.contains_key(&id)
    }
    pub fn get_int(&self, id: i32, default: i32) -> i32 {
        match self.values.get(&id) {
            Some(Value::Int(v)) => *v,
            Some(Value::Float(v)) => *v as i32,
            _ => default,
        }
    }
    pub fn get_float(&self, id: i32, default: f32) -> f32 {
        match self.values.get(&id) {
            Some(Value::Int(v)) => *v as f32,
            Some(Value::Float(v)) => *v,
            _ => default,
        }
    }
    pub fn get_ints(&self, id: i32) -> Vec<i32> {
        match self.values.get(&id) {
            Some(Value::IntArray(v)) => v.clone(),
            Some(Value::FloatArray(v)) => v.iter().map(|x| *x as i32).collect(),
            _ => Vec::new(),
        }
    }
    pub fn get_floats(&self, id: i32) -> Vec<f32> {
        match self.values.get(&id) {
            Some(Value::FloatArray(v)) => v.clone(),
            Some(Value::IntArray(v)) => v.iter().map(|x| *x as f32).collect(),
            _ => Vec::new(),
        }
    }
    pub fn set(&mut self, id: i32, v: Value) {
        self.values.insert(id, v);
    }
}

/// One line of a `.param` file.
#[derive(Debug, Clone)]
pub struct LayerSpec {
    pub kind: String,
    pub name: String,
    pub bottoms: Vec<String>,
    pub tops: Vec<String>,
    pub params: ParamDict,
}

fn is_float_token(s: &str) -> bool {
    s.contains('.') || s.contains('e') || s.contains('E') || s.contains("nan") || s.contains("inf")
}

fn parse_scalar(tok: &str, line_no: usize) -> Result<Value> {
    if is_float_token(tok) {
        match tok.parse::<f32>() {
            Ok(v) => Ok(Value::Float(v)),
            Err(_) => bail!(Code::ModelInvalid, "param line {line_no}: bad float '{tok}'"),
        }
    } else {
        match tok.parse::<i32>() {
            Ok(v) => Ok(Value::Int(v)),
            Err(_) => bail!(Code::ModelInvalid, "param line {line_no}: bad integer '{tok}'"),
        }
    }
}

pub fn parse_param(text: &str) -> Result<Vec<LayerSpec>> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, l)) if l.trim() == MAGIC => {}
        _ => bail!(Code::ModelInvalid, "not an ncnn param file (magic {MAGIC} missing)"),
    }
    let (layer_count, _blob_count) = match lines.next() {
        Some((i, l)) => {
            let mut it = l.split_whitespace().map(|t| t.parse::<usize>());
            match (it.next(), it.next()) {
                (Some(Ok(a)), Some(Ok(b))) => (a, b),
                _ => bail!(Code::ModelInvalid, "param line {}: expected 'layer_count blob_count'", i + 1),
            }
        }
        None => bail!(Code::ModelInvalid, "param file truncated after magic"),
    };
    if layer_count > 100_000 {
        bail!(Code::ModelInvalid, "param file claims {layer_count} layers");
    }
    let mut layers = Vec::with_capacity(layer_count);
    for (i, line) in lines {
        let line_no = i + 1;
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() < 4 {
            bail!(Code::ModelInvalid, "param line {line_no}: too few fields");
        }
        let kind = toks[0].to_string();
        let name = toks[1].to_string();
        let nb: usize = toks[2]
            .parse()
            .map_err(|_| crate::error::Error::new(Code::ModelInvalid, format!("param line {line_no}: bad bottom count")))?;
        let nt: usize = toks[3]
            .parse()
            .map_err(|_| crate::error::Error::new(Code::ModelInvalid, format!("param line {line_no}: bad top count")))?;
        if toks.len() < 4 + nb + nt {
            bail!(Code::ModelInvalid, "param line {line_no}: missing blob names");
        }
        let bottoms = toks[4..4 + nb].iter().map(|s| s.to_string()).collect();
        let tops = toks[4 + nb..4 + nb + nt].iter().map(|s| s.to_string()).collect();
        let mut params = ParamDict::default();
        for kv in &toks[4 + nb + nt..] {
            let Some((k, v)) = kv.split_once('=') else {
                bail!(Code::ModelInvalid, "param line {line_no}: expected key=value, got '{kv}'");
            };
            let key: i32 = k
                .parse()
                .map_err(|_| crate::error::Error::new(Code::ModelInvalid, format!("param line {line_no}: bad key '{k}'")))?;
            if key <= ARRAY_KEY_BASE {
                let id = ARRAY_KEY_BASE - key;
                let mut parts = v.split(',');
                let count: usize = parts.next().unwrap_or("").parse().map_err(|_| {
                    crate::error::Error::new(Code::ModelInvalid, format!("param line {line_no}: bad array count in '{kv}'"))
                })?;
                let items: Vec<&str> = parts.collect();
                if items.len() != count {
                    bail!(Code::ModelInvalid, "param line {line_no}: array '{kv}' has {} items, expected {count}", items.len());
                }
                let value = if items.iter().any(|t| is_float_token(t)) {
                    let mut out = Vec::with_capacity(count);
                    for t in items {
                        match parse_scalar(t, line_no)? {
                            Value::Float(f) => out.push(f),
                            Value::Int(n) => out.push(n as f32),
                            _ => unreachable!(),
                        }
                    }
                    Value::FloatArray(out)
                } else {
                    let mut out = Vec::with_capacity(count);
                    for t in items {
                        match parse_scalar(t, line_no)? {
                            Value::Int(n) => out.push(n),
                            _ => unreachable!(),
                        }
                    }
                    Value::IntArray(out)
                };
                params.set(id, value);
            } else {
                params.set(key, parse_scalar(v, line_no)?);
            }
        }
        layers.push(LayerSpec { kind, name, bottoms, tops, params });
    }
    if layers.len() != layer_count {
        bail!(Code::ModelInvalid, "param file declares {layer_count} layers but has {}", layers.len());
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scalars_and_arrays() {
        let text = "7767517\n2 2\nInput in 0 1 data 0=3\nConvolution c 1 1 data out 0=64 1=3 4=1 5=1 6=1728 9=2 -23310=1,2.000000e-01 -23309=2,4,-4\n";
        let l = parse_param(text).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].kind, "Convolution");
        assert_eq!(l[1].bottoms, vec!["data"]);
        assert_eq!(l[1].tops, vec!["out"]);
        assert_eq!(l[1].params.get_int(0, 0), 64);
        assert_eq!(l[1].params.get_int(11, -1), -1);
        assert_eq!(l[1].params.get_floats(10), vec![0.2]);
        assert_eq!(l[1].params.get_ints(9), vec![4, -4]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_param("hello").is_err());
        assert!(parse_param("7767517\n1 1\nInput").is_err());
        assert!(parse_param("7767517\n2 1\nInput in 0 1 data\n").is_err());
        assert!(parse_param("7767517\n1 1\nInput in 0 1 data 0=\n").is_err());
        assert!(parse_param("7767517\n1 1\nInput in 0 1 data -23309=3,1,2\n").is_err());
    }
}
