//! Detection at the community's real hyperparameters (Real-ESRGAN x4plus / x2plus, old-arch 4x
//! and 8x ESRGAN, 1x pixel-unshuffle ESRGAN, realesr-general-x4v3, SPAN 48 ...): state dicts with
//! the real keys and shapes (tests/goldens/detect.json, from scripts/byom-goldens.py, zeros as
//! values) are detected as spandrel detects them, and their networks build.

use lucent_models::arch::build;
use lucent_models::{detect, Param, StateDict};
use serde_json::Value;
use std::path::PathBuf;

#[test]
fn real_size_models_are_detected_as_spandrel_detects_them() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/detect.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let models = doc["models"].as_array().unwrap();
    assert!(models.len() >= 10);
    for m in models {
        let name = m["name"].as_str().unwrap();
        let mut sd = StateDict::new();
        for kv in m["keys"].as_array().unwrap() {
            let shape: Vec<usize> = kv[1].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let n = shape.iter().product();
            sd.insert(kv[0].as_str().unwrap().to_string(), Param { shape, data: vec![0.0; n] });
        }
        let (arch, info) = detect(&sd).unwrap_or_else(|e| panic!("{name}: {e}"));
        let sp = &m["spandrel"];
        assert_eq!(info.architecture, sp["architecture"].as_str().unwrap(), "{name}");
        assert_eq!(info.scale as u64, sp["scale"].as_u64().unwrap(), "{name}: scale");
        assert_eq!(info.in_channels as u64, sp["in_channels"].as_u64().unwrap(), "{name}: in channels");
        assert_eq!(info.out_channels as u64, sp["out_channels"].as_u64().unwrap(), "{name}: out channels");
        let tags: Vec<&str> = sp["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert_eq!(info.tags, tags, "{name}: tags");
        for (k, v) in sp["hyperparameters"].as_object().unwrap() {
            if let Some(ours) = info.params.get(k) {
                let theirs = match v {
                    Value::Null => "none".to_string(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert_eq!(ours, &theirs, "{name}: hyperparameter {k}");
            }
        }
        let net = build(&arch, &sd).unwrap_or_else(|e| panic!("{name}: build: {e}"));
        assert!(net.blob("in0").is_some() && net.blob("out0").is_some(), "{name}");
        eprintln!("{name}: {} {}x, {} layers", info.architecture, info.scale, net.layers.len());
    }
}
