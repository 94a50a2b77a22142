//! Lucent against torch + spandrel (goldens from scripts/byom-goldens.py): every saved file's
//! detected architecture, scale, channels and hyperparameters equal spandrel's, and the CPU
//! backend's output (f32) is within 1e-3 of torch's on a random input and a real image crop.

use lucent_core::cpu::CpuBackend;
use lucent_core::{reference, Cancel, Prepared, Tensor};
use lucent_models::{load, Limits};
use serde_json::Value;
use std::sync::Arc;

mod common;
use common::{dir, read_f32, shape3};

/// spandrel's hyperparameter value as Lucent prints it.
fn py(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn goldens_match_torch_and_spandrel() {
    let index: Value = serde_json::from_str(&std::fs::read_to_string(dir().join("index.json")).unwrap()).unwrap();
    let cpu = CpuBackend::new(Some(2));
    let mut checked = 0;
    let mut worst = 0f32;
    let mut failures = Vec::new();
    for cfg in index["configs"].as_array().unwrap() {
        let name = cfg["name"].as_str().unwrap();
        for f in cfg["files"].as_array().unwrap() {
            let file = f["file"].as_str().unwrap();
            let bytes = std::fs::read(dir().join(file)).unwrap();
            let m = load(&bytes, file, &Limits::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
            let sp = &f["spandrel"];
            assert_eq!(m.format.as_str().replace("pytorch-legacy", "legacy").replace("pytorch", "zip"), f["format"].as_str().unwrap(), "{file}");
            assert_eq!(m.info.architecture, sp["architecture"].as_str().unwrap(), "{file}: architecture");
            assert_eq!(m.info.scale as u64, sp["scale"].as_u64().unwrap(), "{file}: scale");
            assert_eq!(m.info.in_channels as u64, sp["in_channels"].as_u64().unwrap(), "{file}: input channels");
            assert_eq!(m.info.out_channels as u64, sp["out_channels"].as_u64().unwrap(), "{file}: output channels");
            let tags: Vec<String> = sp["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
            assert_eq!(m.info.tags, tags, "{file}: tags");
            let mut compared = 0;
            for (k, v) in sp["hyperparameters"].as_object().unwrap() {
                if let Some(ours) = m.info.params.get(k) {
                    assert_eq!(ours, &py(v), "{file}: hyperparameter {k}");
                    compared += 1;
                }
            }
            assert!(compared >= 4, "{file}: only {compared} hyperparameters compared");
            let dtype = f["dtype"].as_str().unwrap();
            let net = Arc::new(m.net);
            let (inb, outb) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
            let prepared = cpu.prepare_net(net.clone()).unwrap();
            for case in cfg["cases"].as_array().unwrap().iter().filter(|c| c["dtype"] == dtype) {
                let (c, h, w) = shape3(&case["input_shape"]);
                let x = Tensor::from_vec(c, h, w, read_f32(case["input"].as_str().unwrap()));
                let (oc, oh, ow) = shape3(&case["output_shape"]);
                let want = read_f32(case["output"].as_str().unwrap());
                let got = prepared.run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap().remove(0);
                assert_eq!((got.c, got.h, got.w), (oc, oh, ow), "{file}: output shape");
                let err = got.data.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                // The plain reference executor agrees too.
                let r = reference::run_net(&net, &[(inb, x.clone())], &[outb]).unwrap().remove(0);
                let rerr = r.data.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                eprintln!("{name} {file} {}: max abs error cpu {err:.2e} reference {rerr:.2e}", case["input"]);
                if !(err <= 1e-3 && rerr <= 1e-3) {
                    failures.push(format!("{file} on {}: max abs error {err} (reference {rerr})", case["input"]));
                }
                worst = worst.max(err);
                checked += 1;
            }
        }
    }
    eprintln!("{checked} outputs checked, worst max abs error {worst:.2e}");
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked >= 36, "only {checked} outputs checked");
}
