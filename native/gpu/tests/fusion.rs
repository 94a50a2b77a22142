//! The fused PixelShuffle + Interp + add step (the compact SR networks' last step) against
//! lucent_core::reference on fresh random inputs: nearest and bilinear upsampling, both
//! PixelShuffle modes, both operand orders, and a broadcasting add (run as the three kernels in turn).
//! That the step was fused is checked through its intermediate blobs, which a fused run does not
//! produce (asking for one is an `invalid_argument` error).
//! Error metric max|gpu - ref| / max(1, max|ref|): f32 <= 1e-5 (one f32 sum of exact values and
//! interpolation weights), f16 storage <= 2e-3.

mod common;
use common::{backend, rel_err, NetBuilder, Rng};
use lucent_core::error::Code;
use lucent_core::{reference, Backend, Cancel, Tensor};
use std::sync::Arc;

fn check(name: &str, b: &NetBuilder, ins: Vec<(&str, Tensor)>, fused: bool) {
    let Some(be) = backend() else { return };
    let net = b.build();
    let ins: Vec<(usize, Tensor)> = ins.into_iter().map(|(n, t)| (net.blob(n).unwrap(), t)).collect();
    let out = net.blob("out").unwrap();
    let want = reference::run_net(&net, &ins, &[out]).unwrap_or_else(|e| panic!("{name}: reference: {e}"));
    let net = Arc::new(net);
    let refs: Vec<(usize, &Tensor)> = ins.iter().map(|(i, t)| (*i, t)).collect();
    let mut vars = vec![("f32", be.with_settings(|s| s.f16 = false), 1e-5f32)];
    if be.f16_available() {
        vars.push(("f16", be.with_settings(|s| s.f16 = true), 2e-3));
    }
    for (label, h, bound) in vars {
        let p = h.prepare(net.clone()).unwrap();
        let got = p.run(&refs, &[out], &Cancel::new()).unwrap_or_else(|e| panic!("{name} [{label}]: {e}"));
        let e = rel_err(&got[0], &want[0]);
        println!("{name:<40} [{label}] {:<12} rel err {e:.2e}", got[0].shape_string());
        assert!(e <= bound, "{name} [{label}]: rel err {e:.3e} > {bound:.0e}");
        let ps = net.blob("ps").unwrap();
        let inner = p.run(&refs, &[ps], &Cancel::new());
        if fused {
            let err = inner.err().unwrap_or_else(|| panic!("{name}: 'ps' computed, so the step was not fused"));
            assert_eq!(err.code, Code::InvalidArgument, "{name}: {err}");
        } else {
            assert!(inner.is_ok(), "{name}: unfused path should expose 'ps'");
        }
    }
}

/// in (c*f*f, h, w) -> PixelShuffle -> ps; small (c', h', w') -> Interp -> up; add -> out.
fn net(r: &mut Rng, f: usize, mode: i32, interp: &str, ps_first: bool, small_c: usize) -> (NetBuilder, Vec<(&'static str, Tensor)>) {
    let (c, h, w) = (3, 7, 9);
    let mut b = NetBuilder::new();
    b.input("in").input("small");
    b.layer("PixelShuffle", &["in"], &["ps"], &format!("0={f} 1={mode}"));
    b.layer("Interp", &["small"], &["up"], interp);
    if ps_first {
        b.layer("BinaryOp", &["ps", "up"], &["out"], "0=0");
    } else {
        b.layer("Eltwise", &["up", "ps"], &["out"], "0=1");
    }
    let ins = vec![("in", r.tensor(c * f * f, h, w)), ("small", r.tensor(small_c, h, w))];
    (b, ins)
}

#[test]
fn pixelshuffle_interp_add_fused() {
    let mut r = Rng::new(21);
    let (b, ins) = net(&mut r, 4, 0, "0=1 1=4.0 2=4.0", true, 3);
    check("pshuf x4 + nearest x4 (BinaryOp)", &b, ins, true);
    let (b, ins) = net(&mut r, 2, 1, "0=2 1=2.0 2=2.0", false, 3);
    check("pshuf x2 mode 1 + bilinear x2 (Eltwise)", &b, ins, true);
    let (b, ins) = net(&mut r, 3, 0, "0=3 3=21 4=27", true, 3);
    check("pshuf x3 + bicubic to 21x27", &b, ins, true);
}

#[test]
fn pixelshuffle_interp_add_broadcast_takes_the_unfused_path() {
    let mut r = Rng::new(22);
    // One-channel upsampled image added to every channel: shapes differ at run time.
    let (b, ins) = net(&mut r, 2, 0, "0=1 1=2.0 2=2.0", true, 1);
    check("pshuf x2 + nearest (1 channel, broadcast)", &b, ins, true);
}
