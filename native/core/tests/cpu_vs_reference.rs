//! The CPU backend against the plain reference on fresh random inputs and layer shapes.
//! Error measure: max |cpu - ref| / max(1, max |ref|) <= 1e-4 (see common::rel_err).
//! The seed is printed on failure; rerun with LUCENT_TEST_SEED=<seed> to reproduce.
mod common;
use common::*;
use lucent_core::cpu::CpuBackend;
use lucent_core::ncnn::Net;
use lucent_core::{reference, Backend, Cancel, Code, Tensor};
use std::sync::Arc;

const TOL: f32 = 1e-4;

fn compare(net: Net, inputs: Vec<(&str, Tensor)>, what: &str, seed: u64) {
    let net = Arc::new(net);
    let ins: Vec<(usize, Tensor)> = inputs.into_iter().map(|(n, t)| (net.blob(n).unwrap(), t)).collect();
    let outs = net.output_blobs();
    let want = reference::run_net(&net, &ins, &outs).unwrap_or_else(|e| panic!("seed {seed}: {what}: reference failed: {e}"));
    for threads in [1, 3] {
        let be = CpuBackend::new(Some(threads));
        let p = be.prepare(net.clone()).unwrap();
        let refs: Vec<(usize, &Tensor)> = ins.iter().map(|(b, t)| (*b, t)).collect();
        let got = p.run(&refs, &outs, &Cancel::new()).unwrap_or_else(|e| panic!("seed {seed}: {what}: cpu failed: {e}"));
        for (g, w) in got.iter().zip(&want) {
            let e = rel_err(g, w);
            assert!(e <= TOL, "seed {seed}: {what} ({threads} threads): error {e:e} > {TOL:e}");
        }
    }
}

fn act_params(kind: usize) -> String {
    match kind {
        0 => String::new(),
        1 => " 9=1".into(),
        2 => " 9=2 -23310=1,1.000000e-01".into(),
        3 => " 9=3 -23310=2,-5.000000e-01,5.000000e-01".into(),
        4 => " 9=4".into(),
        5 => " 9=5".into(),
        _ => " 9=6 -23310=2,2.000000e-01,5.000000e-01".into(),
    }
}

/// A random convolution (optionally followed by PReLU / ReLU to exercise the fused epilogue).
#[test]
fn conv_random_shapes() {
    let (mut r, seed) = Rng::from_env_or_time();
    for case in 0..60 {
        let kw = r.range(1, 5);
        let kh = if r.below(3) == 0 { r.range(1, 4) } else { kw };
        let (dw, dh) = if r.below(4) == 0 { (r.range(1, 3), r.range(1, 2)) } else { (1, 1) };
        let (sw, sh) = if r.below(3) == 0 { (r.range(1, 3), r.range(1, 3)) } else { (1, 1) };
        let group_kind = r.below(5); // 0: depthwise, 1: group 2, else 1
        let cin = match group_kind {
            0 => r.range(1, 6),
            1 => 2 * r.range(1, 4),
            _ => r.range(1, 20),
        };
        let (group, cout) = match group_kind {
            0 => (cin, cin),
            1 => (2, 2 * r.range(1, 5)),
            _ => (1, r.range(1, 40)),
        };
        let pad = match r.below(4) {
            0 => " 4=-233".to_string(),
            1 => " 4=-234".to_string(),
            2 => format!(" 4={} 15={} 14={} 16={}", r.below(3), r.below(3), r.below(3), r.below(3)),
            _ => format!(" 4={}", r.below(2)),
        };
        let pad_value = if r.below(4) == 0 { " 18=2.500000e-01".to_string() } else { String::new() };
        let bias = r.below(3) != 0;
        let act = r.below(7);
        let extw = dw * (kw - 1) + 1;
        let exth = dh * (kh - 1) + 1;
        let (w, h) = (r.range(extw, extw + 23), r.range(exth, exth + 17));
        let wsize = cout * (cin / group) * kw * kh;
        let kind = if group > 1 { "ConvolutionDepthWise" } else { "Convolution" };
        let mut lines = vec!["Input in 0 1 data".to_string()];
        lines.push(format!(
            "{kind} conv 1 1 data c 0={cout} 1={kw} 11={kh} 2={dw} 12={dh} 3={sw} 13={sh}{pad} 5={} 6={wsize}{}{pad_value}{}",
            bias as i32,
            act_params(act),
            if group > 1 { format!(" 7={group}") } else { String::new() }
        ));
        let mut bin = Bin::default();
        bin.tagged(&r.vec(wsize));
        if bias {
            bin.raw(&r.vec(cout));
        }
        let tail = r.below(3);
        match tail {
            0 => {
                let ns = if r.below(2) == 0 { 1 } else { cout };
                lines.push(format!("PReLU pr 1 1 c out 0={ns}"));
                bin.raw(&r.vec(ns));
            }
            1 => lines.push("ReLU relu 1 1 c out 0=2.000000e-01".into()),
            _ => {}
        }
        let what = format!("case {case}: {}", lines[1..].join(" | "));
        compare(net(&lines, &bin), vec![("data", r.tensor(cin, h, w))], &what, seed);
    }
}

#[test]
fn deconv_random_shapes() {
    let (mut r, seed) = Rng::from_env_or_time();
    for case in 0..30 {
        let kw = r.range(1, 4);
        let kh = if r.below(3) == 0 { r.range(1, 4) } else { kw };
        let (sw, sh) = (r.range(1, 3), r.range(1, 3));
        let (dw, dh) = if r.below(4) == 0 { (2, r.range(1, 2)) } else { (1, 1) };
        let depthwise = r.below(4) == 0;
        let cin = r.range(1, 8);
        let (group, cout) = if depthwise { (cin, cin) } else { (1, r.range(1, 12)) };
        let pad = match r.below(3) {
            0 => format!(" 4={} 15={} 14={} 16={}", r.below(2), r.below(2), r.below(2), r.below(2)),
            1 => format!(" 18={} 19={}", r.below(2), r.below(2)),
            _ => String::new(),
        };
        let bias = r.below(2) == 0;
        let act = r.below(7);
        let (w, h) = (r.range(3, 13), r.range(3, 11)); // >= 3 so the pads never cut everything
        let wsize = cout * (cin / group) * kw * kh;
        let kind = if depthwise { "DeconvolutionDepthWise" } else { "Deconvolution" };
        let lines = vec![
            "Input in 0 1 data".to_string(),
            format!(
                "{kind} deconv 1 1 data out 0={cout} 1={kw} 11={kh} 2={dw} 12={dh} 3={sw} 13={sh}{pad} 5={} 6={wsize}{}{}",
                bias as i32,
                act_params(act),
                if depthwise { format!(" 7={group}") } else { String::new() }
            ),
        ];
        let mut bin = Bin::default();
        bin.tagged(&r.vec(wsize));
        if bias {
            bin.raw(&r.vec(cout));
        }
        let what = format!("case {case}: {}", lines[1]);
        compare(net(&lines, &bin), vec![("data", r.tensor(cin, h, w))], &what, seed);
    }
}

/// Concats of concats feeding convolutions (the lazy-concat path), a concat read by a non-conv op
/// (materialised), Split fan-out, Eltwise sum with coefficients, and a blob requested while its
/// PReLU is fused.
#[test]
fn dense_block_graph() {
    let (mut r, seed) = Rng::from_env_or_time();
    for case in 0..4 {
        let c = r.range(2, 6);
        let g = r.range(1, 5);
        let (w, h) = (r.range(3, 20), r.range(3, 20));
        let mut bin = Bin::default();
        let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 3 data d0 d1 d2".to_string()];
        let conv = |lines: &mut Vec<String>, bin: &mut Bin, r: &mut Rng, name: &str, input: &str, out: &str, cin: usize, cout: usize, act: &str| {
            lines.push(format!("Convolution {name} 1 1 {input} {out} 0={cout} 1=3 4=1 5=1 6={}{act}", cout * cin * 9));
            bin.tagged(&r.vec(cout * cin * 9));
            bin.raw(&r.vec(cout));
        };
        conv(&mut lines, &mut bin, &mut r, "c1", "d0", "x1", c, g, " 9=2 -23310=1,2.000000e-01");
        lines.push("Split s1 1 2 x1 x1a x1b".into());
        lines.push("Concat cat1 2 1 d1 x1a cat1".into());
        conv(&mut lines, &mut bin, &mut r, "c2", "cat1", "x2p", c + g, g, "");
        lines.push(format!("PReLU p2 1 1 x2p x2 0={g}"));
        bin.raw(&r.vec(g));
        lines.push("Concat cat2 3 1 d2 x1b x2 cat2".into());
        lines.push("Split s2 1 2 cat2 cat2a cat2b".into());
        conv(&mut lines, &mut bin, &mut r, "c3", "cat2a", "x3", c + 2 * g, c + 2 * g, "");
        lines.push("Eltwise sum 2 1 x3 cat2b y 0=1 -23301=2,2.000000e-01,1.000000e+00".into());
        lines.push("Sigmoid sig 1 1 y out".into());
        let n = net(&lines, &bin);
        // also request the pre-PReLU blob: the fusion must step aside for it
        let n = Arc::new(n);
        let x = r.tensor(c, h, w);
        let inb = n.blob("data").unwrap();
        let outs = vec![n.blob("out").unwrap(), n.blob("x2p").unwrap(), n.blob("cat2").unwrap()];
        let want = reference::run_net(&n, &[(inb, x.clone())], &outs).unwrap();
        let be = CpuBackend::new(Some(2));
        let got = be.prepare(n.clone()).unwrap().run(&[(inb, &x)], &outs, &Cancel::new()).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let e = rel_err(g, w);
            assert!(e <= TOL, "seed {seed}: case {case} output {i}: error {e:e}");
        }
        compare(Arc::try_unwrap(n).unwrap(), vec![("data", x)], &format!("dense case {case}"), seed);
    }
}

/// Every non-conv op through the CPU backend's executor, in one graph.
#[test]
fn other_ops_graph() {
    let (mut r, seed) = Rng::from_env_or_time();
    let (c, h, w) = (4, r.range(4, 12), r.range(4, 12));
    let mut bin = Bin::default();
    let mut lines = vec!["Input in 0 1 data".to_string(), "Split sp 1 8 data a0 a1 a2 a3 a4 a5 a6 a7".to_string()];
    lines.push("Interp up 1 1 a0 up 0=3 1=2.000000e+00 2=2.000000e+00".into());
    lines.push("Pooling pool 1 1 up pool 0=1 1=2 2=2".into()); // back to h x w
    lines.push("BinaryOp add 2 1 pool a1 s1 0=0".into());
    lines.push("PixelShuffle ps 1 1 a2 ps 0=2".into());
    lines.push("Interp down 1 1 ps psd 0=2 1=5.000000e-01 2=5.000000e-01".into());
    lines.push("Reshape rs 1 1 psd rs 0=0 1=-1 2=1".into()); // (1, h, w)
    lines.push("BinaryOp bm 2 1 s1 rs e0 0=2".into()); // (c,h,w) * (1,h,w)
    lines.push("Eltwise prod 2 1 e0 a3 e 0=0".into());
    lines.push(format!("BatchNorm bn 1 1 e bn 0={c} 1=1.000000e-05"));
    bin.raw(&r.vec(c));
    bin.raw(&r.vec(c));
    bin.raw(&r.vec(c).iter().map(|v| v.abs() + 0.5).collect::<Vec<_>>());
    bin.raw(&r.vec(c));
    lines.push("TanH th 1 1 bn th".into());
    lines.push("Clip cl 1 1 th cl 0=-5.000000e-01 1=7.000000e-01".into());
    lines.push("Permute pm 1 1 a4 pm 0=3".into()); // (h, c, w)
    lines.push("Permute pm2 1 1 pm pm2 0=4".into()); // the inverse of order 3
    lines.push("Softmax sm 1 1 a5 sm 0=0".into());
    lines.push("Crop cr 1 1 a6 cr -23309=1,1 -23310=1,-1 -23311=1,2".into());
    lines.push("Pooling gp 1 1 a7 gp 0=1 4=1".into());
    lines.push("Split spc 1 2 cl cl0 cl1".into());
    lines.push("Concat cat 3 1 cl0 sm pm2 cat 0=0".into());
    lines.push("BinaryOp gpm 2 1 cl1 gp out2 0=3".into()); // per-channel divide by the global max
    lines.push("Flatten fl 1 1 cr fl".into());
    lines.push("InnerProduct ip 1 1 fl ip 0=5 1=1 2=".to_string() + &format!("{}", 5 * c * h * (w - 2)));
    bin.tagged(&r.vec(5 * c * h * (w - 2)));
    bin.raw(&r.vec(5));
    lines.push("Noop nop 1 1 cat out1".into());
    let n = net(&lines, &bin);
    let outs: Vec<(&str, Tensor)> = vec![("data", r.tensor(c, h, w))];
    compare(n, outs, "other ops", seed);
}

#[test]
fn errors_not_panics() {
    let mut bin = Bin::default();
    bin.tagged(&[0.5; 2 * 3 * 9]);
    let n = Arc::new(net(&["Input in 0 1 data".into(), "Convolution c 1 1 data out 0=2 1=3 6=54".into()], &bin));
    let be = CpuBackend::new(Some(2));
    let p = be.prepare(n.clone()).unwrap();
    let inb = n.blob("data").unwrap();
    let out = n.blob("out").unwrap();
    // wrong channel count
    let e = p.run(&[(inb, &Tensor::zeros(4, 8, 8))], &[out], &Cancel::new()).err().unwrap();
    assert_eq!(e.code, Code::InvalidArgument);
    // smaller than the kernel
    let e = p.run(&[(inb, &Tensor::zeros(3, 2, 8))], &[out], &Cancel::new()).err().unwrap();
    assert_eq!(e.code, Code::InvalidArgument);
    // missing input
    let e = p.run(&[], &[out], &Cancel::new()).err().unwrap();
    assert_eq!(e.code, Code::InvalidArgument);
    // cancelled
    let cancel = Cancel::new();
    cancel.cancel();
    let e = p.run(&[(inb, &Tensor::zeros(3, 8, 8))], &[out], &cancel).err().unwrap();
    assert_eq!(e.code, Code::Aborted);
    // the same run succeeds when not cancelled, and matches the reference
    let x = Tensor::from_vec(3, 8, 8, (0..192).map(|i| i as f32 / 192.0).collect());
    let got = p.run(&[(inb, &x)], &[out], &Cancel::new()).unwrap();
    let want = reference::run_net(&n, &[(inb, x)], &[out]).unwrap();
    assert!(rel_err(&got[0], &want[0]) <= TOL);
}
