//! The real Real-ESRGAN weights, two ways: the catalog's ncnn realesrgan-x4plus and
//! realesr-general-x4v3 (shared/models) hold the same weights as the PyTorch releases. Their
//! convolutions and PReLU slopes, renamed to the PyTorch state-dict keys, must be detected as
//! RRDBNet x4 (nf 64, nb 23) and Compact x4 (nf 64, nc 32), and the networks built from them must
//! give what the ncnn graphs give on the same input.

use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::{Net, Op};
use lucent_core::{Cancel, Prepared, Tensor};
use lucent_models::arch::build;
use lucent_models::{detect, Param, StateDict};
use std::path::PathBuf;
use std::sync::Arc;

fn models_dir() -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dirs = [manifest.join("../../../shared/models"), manifest.join("../../data/test-models")];
    let found = dirs.into_iter().find(|d| d.join("sr/realesrgan-x4plus.param").exists() && d.join("sr/realesr-general-x4v3.param").exists());
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI: shared/models is missing");
        eprintln!("skipped: no shared/models next to the repository");
    }
    found
}

/// (weight shape, weight, bias) of every convolution, and every PReLU's slopes, in graph order.
#[allow(clippy::type_complexity)]
fn params(net: &Net) -> (Vec<(Vec<usize>, Vec<f32>, Vec<f32>)>, Vec<Vec<f32>>) {
    let mut convs = Vec::new();
    let mut prelus = Vec::new();
    for l in &net.layers {
        match &l.op {
            Op::Conv(c) => {
                let shape = vec![c.num_output, c.num_input, c.kernel_h, c.kernel_w];
                convs.push((shape, c.weight.clone(), c.bias.clone().unwrap_or_else(|| vec![0.0; c.num_output])));
            }
            Op::PReLU { slope } => prelus.push(slope.clone()),
            _ => {}
        }
    }
    (convs, prelus)
}

fn put(sd: &mut StateDict, key: &str, c: &(Vec<usize>, Vec<f32>, Vec<f32>)) {
    sd.insert(format!("{key}.weight"), Param { shape: c.0.clone(), data: c.1.clone() });
    sd.insert(format!("{key}.bias"), Param { shape: vec![c.0[0]], data: c.2.clone() });
}

fn input() -> Tensor {
    let (h, w) = (20, 18);
    let data = (0..3 * h * w).map(|i| ((i * 7919 % 1000) as f32 / 1000.0).sin().abs()).collect();
    Tensor::from_vec(3, h, w, data)
}

fn run(net: Net, x: &Tensor) -> Tensor {
    let net = Arc::new(net);
    let (inb, outb) = (net.input_blobs()[0], *net.output_blobs().last().unwrap());
    let p = CpuBackend::new(Some(2)).prepare_net(net).unwrap();
    p.run(&[(inb, x)], &[outb], &Cancel::new()).unwrap().remove(0)
}

fn compare(name: &str, ours: Net, theirs: Net) {
    let x = input();
    let a = run(ours, &x);
    let b = run(theirs, &x);
    assert_eq!((a.c, a.h, a.w), (b.c, b.h, b.w), "{name}");
    let err = a.data.iter().zip(&b.data).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
    eprintln!("{name}: max abs difference to the ncnn graph {err:.2e}");
    assert!(err <= 1e-4, "{name}: {err}");
}

#[test]
fn realesrgan_x4plus_from_state_dict_matches_ncnn() {
    let Some(dir) = models_dir() else { return };
    let ncnn = Net::load_stem(&dir.join("sr/realesrgan-x4plus")).unwrap();
    let (convs, _) = params(&ncnn);
    assert_eq!(convs.len(), 351);
    let mut sd = StateDict::new();
    let mut it = convs.iter();
    put(&mut sd, "conv_first", it.next().unwrap());
    for b in 0..23 {
        for r in 1..=3 {
            for c in 1..=5 {
                put(&mut sd, &format!("body.{b}.rdb{r}.conv{c}"), it.next().unwrap());
            }
        }
    }
    for k in ["conv_body", "conv_up1", "conv_up2", "conv_hr", "conv_last"] {
        put(&mut sd, k, it.next().unwrap());
    }
    let (arch, info) = detect(&sd).unwrap();
    assert_eq!((info.architecture, info.scale, info.in_channels, info.out_channels), ("ESRGAN", 4, 3, 3));
    assert_eq!(info.params["num_filters"], "64");
    assert_eq!(info.params["num_blocks"], "23");
    compare("realesrgan-x4plus", build(&arch, &sd).unwrap(), ncnn);
}

#[test]
fn realesr_general_x4v3_from_state_dict_matches_ncnn() {
    let Some(dir) = models_dir() else { return };
    let ncnn = Net::load_stem(&dir.join("sr/realesr-general-x4v3")).unwrap();
    let (convs, prelus) = params(&ncnn);
    assert_eq!((convs.len(), prelus.len()), (34, 33));
    let mut sd = StateDict::new();
    for (i, c) in convs.iter().enumerate() {
        put(&mut sd, &format!("body.{}", 2 * i), c);
    }
    for (i, s) in prelus.iter().enumerate() {
        sd.insert(format!("body.{}.weight", 2 * i + 1), Param { shape: vec![s.len()], data: s.clone() });
    }
    let (arch, info) = detect(&sd).unwrap();
    assert_eq!((info.architecture, info.scale, info.in_channels, info.out_channels), ("Compact", 4, 3, 3));
    assert_eq!((info.params["num_feat"].as_str(), info.params["num_conv"].as_str()), ("64", "32"));
    compare("realesr-general-x4v3", build(&arch, &sd).unwrap(), ncnn);
}
