//! PyTorch checkpoints: the zip format of `torch.save` (1.6+) and the legacy stream format
//! (`_use_new_zipfile_serialization=False`), both through the restricted unpickler.
//!
//! Zip: `<archive>/data.pkl` is the pickle; its persistent ids are
//! `('storage', <storage class>, key, location, numel)` and the storage's bytes are the entry
//! `<archive>/data/<key>`. Legacy: five pickles in a row (magic number, protocol version, system
//! info, the object with persistent ids `('storage', class, key, location, numel, view)`, the list
//! of storage keys), then per key an 8-byte element count and the raw little-endian elements.

use crate::pickle::{unpickle, StorageRef, TensorRef, Value};
use crate::tensor::{shape_usize, Budget, Limits, Param, StateDict};
use crate::zipfile;
use lucent_core::{bail, Code, Result};
use std::collections::HashMap;

/// The legacy magic number 0x1950a86a20f9469cfc6c as pickled (LONG1, 10 bytes, little-endian).
const LEGACY_MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
const LEGACY_PROTOCOL: i64 = 1001;

fn storage_from_pid(pid: Value, legacy: bool) -> Result<Value> {
    let Value::Tuple(t) = pid else {
        bail!(Code::ModelInvalid, "persistent id is a {pid:?}, not a storage tuple");
    };
    let want = if legacy { 6 } else { 5 };
    if t.len() != want || t[0] != Value::Str("storage".into()) {
        bail!(Code::ModelInvalid, "persistent id is not a storage reference");
    }
    let Value::Global(crate::pickle::Global::Storage(dtype)) = t[1] else {
        bail!(Code::ModelInvalid, "persistent id names a storage type that is not allowed");
    };
    let Value::Str(key) = &t[2] else {
        bail!(Code::ModelInvalid, "storage key is not a string");
    };
    if key.is_empty() || key.len() > 64 || !key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        bail!(Code::ModelInvalid, "storage key is not a plain name");
    }
    let Value::Int(numel) = t[4] else {
        bail!(Code::ModelInvalid, "storage size is not an int");
    };
    if numel < 0 {
        bail!(Code::ModelInvalid, "storage size is negative");
    }
    if legacy && t[5] != Value::None {
        bail!(Code::ModelInvalid, "legacy storage views are not supported");
    }
    Ok(Value::Storage(StorageRef { dtype, key: key.clone(), numel: numel as u64 }))
}

/// The keys spandrel unwraps, in its order: the state dict may sit under one of them.
const WRAPPERS: [&str; 7] = ["model_state_dict", "state_dict", "params_ema", "params-ema", "params", "model", "net"];

/// The state-dict level of a checkpoint (wrappers unwrapped) as (name, tensor) pairs; non-tensor
/// entries are left out. Common `module.` / `netG.` prefixes are removed later.
fn state_level(root: Value) -> Result<Vec<(String, TensorRef)>> {
    let Value::Dict(mut d) = root else {
        bail!(Code::ModelInvalid, "the checkpoint holds a {} rather than a state dict", kind_of(&root));
    };
    for w in WRAPPERS {
        if let Some(i) = d.iter().rposition(|(k, v)| *k == Value::Str(w.into()) && matches!(v, Value::Dict(_))) {
            let Value::Dict(inner) = d.swap_remove(i).1 else { unreachable!() };
            d = inner;
            break;
        }
    }
    if d.len() == 1 && matches!(d[0].1, Value::Dict(_)) {
        let Value::Dict(inner) = d.pop().expect("one").1 else { unreachable!() };
        d = inner;
    }
    let mut out = Vec::with_capacity(d.len());
    for (k, v) in d {
        if let (Value::Str(k), Value::Tensor(t)) = (k, v) {
            out.push((k, t));
        }
    }
    if out.is_empty() {
        bail!(Code::ModelInvalid, "the checkpoint holds no tensors at its state-dict level");
    }
    Ok(out)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Tensor(_) => "single tensor",
        Value::List(_) => "list",
        Value::Tuple(_) => "tuple",
        _ => "non-dict value",
    }
}

/// Read one tensor view out of its storage's bytes (whose length is checked against the
/// storage's declared size), with every index bounds-checked.
fn gather(name: &str, t: &TensorRef, bytes: &[u8], budget: &mut Budget) -> Result<Param> {
    let numel = budget.admit(name, &t.shape)?;
    let es = t.storage.dtype.size();
    let storage_len = bytes.len() / es;
    if (t.storage.numel as u128) * (es as u128) > bytes.len() as u128 {
        bail!(Code::ModelInvalid, "tensor '{name}': storage declares {} elements but holds {} bytes", t.storage.numel, bytes.len());
    }
    // Overlapping views (stride 0) could make a tiny file expand into a huge tensor: a state
    // dict's tensors never hold more elements than their storage.
    if numel as u64 > t.storage.numel {
        bail!(Code::ModelInvalid, "tensor '{name}' declares {numel} elements over a storage of {}", t.storage.numel);
    }
    let shape = shape_usize(&t.shape);
    if numel == 0 {
        return Ok(Param { shape, data: Vec::new() });
    }
    // Highest element index the view touches.
    let mut last: u128 = t.offset as u128;
    for (&d, &s) in t.shape.iter().zip(&t.stride) {
        last += (d as u128 - 1) * s as u128;
    }
    if last >= storage_len.min(t.storage.numel as usize) as u128 {
        bail!(Code::ModelInvalid, "tensor '{name}' reads past the end of its storage");
    }
    let contiguous = {
        let mut expect = 1u64;
        let mut ok = true;
        for (&d, &s) in t.shape.iter().zip(&t.stride).rev() {
            if d != 1 && s != expect {
                ok = false;
            }
            expect *= d;
        }
        ok
    };
    let off = t.offset as usize;
    let data = if contiguous {
        t.storage.dtype.to_f32(&bytes[off * es..(off + numel) * es])
    } else {
        let all = t.storage.dtype.to_f32(&bytes[..(last as usize + 1) * es]);
        let mut out = Vec::with_capacity(numel);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..numel {
            let mut p = off;
            for (i, &s) in idx.iter().zip(&t.stride) {
                p += i * s as usize;
            }
            out.push(all[p]);
            for a in (0..idx.len()).rev() {
                idx[a] += 1;
                if idx[a] < shape[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
        out
    };
    Ok(Param { shape, data })
}

/// A `torch.save` zip archive.
pub fn load_zip(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Param)>> {
    let entries = zipfile::entries(bytes)?;
    let pkl = entries
        .iter()
        .find(|e| e.name.ends_with("/data.pkl") && e.name.matches('/').count() == 1)
        .ok_or_else(|| lucent_core::Error::new(Code::ModelInvalid, "zip archive has no <name>/data.pkl: not a PyTorch checkpoint"))?;
    let prefix = &pkl.name[..pkl.name.len() - "data.pkl".len()];
    if let Some(bo) = entries.iter().find(|e| e.name == format!("{prefix}byteorder")) {
        if bo.data != b"little" {
            bail!(Code::ModelInvalid, "big-endian checkpoints are not supported");
        }
    }
    let storages: HashMap<&str, &[u8]> = entries
        .iter()
        .filter_map(|e| e.name.strip_prefix(prefix).and_then(|n| n.strip_prefix("data/")).map(|k| (k, e.data)))
        .collect();
    let (root, _) = unpickle(pkl.data, &mut |pid| storage_from_pid(pid, false))?;
    let mut budget = Budget::new(*limits);
    let mut out = Vec::new();
    for (name, t) in state_level(root)? {
        let Some(&data) = storages.get(t.storage.key.as_str()) else {
            bail!(Code::ModelInvalid, "tensor '{name}' points at storage '{}', which the archive lacks", t.storage.key);
        };
        out.push((name.clone(), gather(&name, &t, data, &mut budget)?));
    }
    Ok(out)
}

/// Whether `bytes` starts like a legacy torch stream (a pickle of the magic number).
pub fn is_legacy(bytes: &[u8]) -> bool {
    bytes.len() > 14 && bytes[0] == 0x80 && bytes[2] == 0x8a && bytes[3] == 10 && bytes[4..14] == LEGACY_MAGIC
}

/// A legacy (pre-zip) `torch.save` stream.
pub fn load_legacy(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Param)>> {
    if !is_legacy(bytes) {
        bail!(Code::ModelInvalid, "not a PyTorch checkpoint (bad magic number)");
    }
    let mut pos = 0;
    let mut seen: HashMap<String, StorageRef> = HashMap::new();
    let mut next = |pos: &mut usize, legacy_pids: bool| -> Result<Value> {
        let (v, n) = unpickle(&bytes[*pos..], &mut |pid| {
            let s = storage_from_pid(pid, legacy_pids)?;
            if let Value::Storage(r) = &s {
                seen.insert(r.key.clone(), r.clone());
            }
            Ok(s)
        })?;
        *pos += n;
        Ok(v)
    };
    let _magic = next(&mut pos, false)?;
    if next(&mut pos, false)? != Value::Int(LEGACY_PROTOCOL) {
        bail!(Code::ModelInvalid, "unsupported legacy PyTorch protocol version");
    }
    let _sys_info = next(&mut pos, false)?;
    let root = next(&mut pos, true)?;
    let Value::List(keys) = next(&mut pos, false)? else {
        bail!(Code::ModelInvalid, "legacy checkpoint lacks its storage key list");
    };
    // Storages follow in key order: u64 element count, then the elements. Their dtype comes from
    // the persistent ids that named them.
    let tensors = state_level(root)?;
    let dtypes = seen;
    let mut data: HashMap<String, &[u8]> = HashMap::new();
    for k in keys {
        let Value::Str(k) = k else {
            bail!(Code::ModelInvalid, "legacy storage key is not a string");
        };
        let head = bytes.get(pos..pos + 8).ok_or_else(|| lucent_core::Error::new(Code::ModelInvalid, "legacy checkpoint is truncated"))?;
        let n = u64::from_le_bytes(head.try_into().expect("8"));
        pos += 8;
        // A storage no tensor uses: its element size is unknown, so it cannot be skipped.
        let Some(s) = dtypes.get(k.as_str()) else {
            bail!(Code::ModelInvalid, "legacy storage '{k}' was never named by the checkpoint");
        };
        let len = (n as u128) * (s.dtype.size() as u128);
        if len > (bytes.len() - pos) as u128 {
            bail!(Code::ModelInvalid, "legacy storage '{k}' runs past the end of the file: truncated?");
        }
        data.insert(k, &bytes[pos..pos + len as usize]);
        pos += len as usize;
    }
    let mut budget = Budget::new(*limits);
    let mut out = Vec::new();
    for (name, t) in tensors {
        let Some(&d) = data.get(&t.storage.key) else {
            bail!(Code::ModelInvalid, "tensor '{name}' points at storage '{}', which the file lacks", t.storage.key);
        };
        out.push((name.clone(), gather(&name, &t, d, &mut budget)?));
    }
    Ok(out)
}

/// Drop a prefix every key shares (`module.` from DataParallel, `netG.`), as spandrel does.
pub fn strip_common_prefixes(mut v: Vec<(String, Param)>) -> StateDict {
    for p in ["module.", "netG."] {
        if !v.is_empty() && v.iter().all(|(k, _)| k.starts_with(p)) {
            for (k, _) in v.iter_mut() {
                k.drain(..p.len());
            }
        }
    }
    v.into_iter().collect()
}
