//! What the golden suites (goldens.rs on the CPU, gpu_goldens.rs on the wgpu backend) share: the golden files
//! made by scripts/byom-goldens.py and their readers.

use serde_json::Value;
use std::path::PathBuf;

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens")
}

/// A little-endian f32 file of the golden folder.
pub fn read_f32(name: &str) -> Vec<f32> {
    let b = std::fs::read(dir().join(name)).unwrap();
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A `[c, h, w]` array of index.json.
pub fn shape3(v: &Value) -> (usize, usize, usize) {
    let a: Vec<usize> = v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    (a[0], a[1], a[2])
}
