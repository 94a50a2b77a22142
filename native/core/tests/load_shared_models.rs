//! Every ncnn model shipped in ../shared/models parses, and its weight file is consumed exactly.
use lucent_core::ncnn::{Net, Op};
use std::path::PathBuf;

fn shared_models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models")
}

#[test]
fn all_shared_ncnn_models_load() {
    let root = shared_models();
    assert!(root.is_dir(), "shared models not found at {}", root.display());
    let mut stack = vec![root];
    let mut loaded = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().map(|x| x == "param").unwrap_or(false) {
                let bin = p.with_extension("bin");
                let net = Net::load(&p, &bin).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(!net.layers.is_empty());
                assert!(!net.input_blobs().is_empty(), "{} has no input", p.display());
                loaded += 1;
            }
        }
    }
    assert!(loaded >= 20, "only {loaded} models found");
}

#[test]
fn general_x4v3_structure() {
    let net = Net::load_stem(&shared_models().join("sr/realesr-general-x4v3")).unwrap();
    let convs = net.layers.iter().filter(|l| matches!(l.op, Op::Conv(_))).count();
    assert_eq!(convs, 34);
    if let Op::Conv(c) = &net.layers[2].op {
        assert_eq!((c.num_output, c.num_input, c.kernel_w, c.kernel_h), (64, 3, 3, 3));
        assert_eq!(c.weight.len(), 1728);
        assert!(c.weight.iter().all(|v| v.is_finite()));
        assert!(c.bias.is_some());
    } else {
        panic!("layer 2 is not a convolution");
    }
    let outs = net.output_blobs();
    assert_eq!(outs.len(), 1);
    assert_eq!(net.blob_names[outs[0]], "output");
}

#[test]
fn truncated_weights_are_model_invalid() {
    let root = shared_models().join("sr/srmdnf_x2");
    let text = std::fs::read_to_string(root.with_extension("param")).unwrap();
    let bin = std::fs::read(root.with_extension("bin")).unwrap();
    let err = Net::from_parts(&text, &bin[..bin.len() / 2]).unwrap_err();
    assert_eq!(err.code, lucent_core::Code::ModelInvalid);
    let mut longer = bin.clone();
    longer.extend_from_slice(&[0u8; 8]);
    assert_eq!(Net::from_parts(&text, &longer).unwrap_err().code, lucent_core::Code::ModelInvalid);
}
