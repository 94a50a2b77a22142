//! Element-wise layers that were not fused into a conv, run over the rayon pool one channel plane
//! per task, each op's loop written so the compiler vectorises it: BinaryOp with a scalar, with an
//! equal-shaped tensor, with a one-channel (1, h, w) plane shared over channels (RealPLKSR's
//! LayerNorm `y · rstd`) or with a per-channel (c, 1, 1) tensor; Sigmoid ([`super::vmath`]);
//! per-channel affine (Scale); two-input Eltwise sums. Same arithmetic as [`crate::reference`]
//! (the same operation per element, in the same operand order) except Sigmoid's exp (relative
//! error < 2e-7). Anything else (other shapes, 1-D / 2-D blobs, Pow with a tensor) goes to the
//! reference op: [`forward`] returns None.

use super::vmath;
use crate::error::Result;
use crate::ncnn::model::{BinaryOpKind, EltwiseKind, Layer, Op};
use crate::reference::binary_scalar;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Planes at least this big go one per task; smaller tensors run in one task.
const PAR_MIN: usize = 4096;

/// The layer `l` on `xs`, or None when it is not one of the cases above.
pub fn forward(l: &Layer, xs: &[&Tensor]) -> Option<Result<Tensor>> {
    let three = |t: &Tensor| t.dims == 3 && t.data.len() == t.c * t.h * t.w;
    if !xs.iter().all(|t| three(t)) || xs.is_empty() {
        return None;
    }
    let x = xs[0];
    match (&l.op, xs) {
        (Op::BinaryOp { op, scalar: Some(s) }, [_]) => {
            let (op, s) = (*op, *s);
            Some(Ok(per_plane(x, |_, src, dst| binary_row(op, src, Operand::Scalar(s), false, dst))))
        }
        (Op::BinaryOp { op, scalar: None }, [a, b]) => {
            let op = *op;
            // The bigger operand gives the shape; the other is the same shape, one plane or one
            // value per channel.
            let (big, small, swapped) = if a.data.len() >= b.data.len() { (*a, *b, false) } else { (*b, *a, true) };
            if big.h != small.h || big.w != small.w {
                if small.c == big.c && small.h == 1 && small.w == 1 && small.data.len() > 1 {
                    return Some(Ok(per_plane(big, |c, src, dst| binary_row(op, src, Operand::Scalar(small.data[c]), swapped, dst))));
                }
                return None;
            }
            let plane = big.h * big.w;
            if small.c == big.c {
                Some(Ok(per_plane(big, |c, src, dst| binary_row(op, src, Operand::Row(&small.data[c * plane..(c + 1) * plane]), swapped, dst))))
            } else if small.c == 1 {
                Some(Ok(per_plane(big, |_, src, dst| binary_row(op, src, Operand::Row(&small.data), swapped, dst))))
            } else {
                None
            }
        }
        (Op::Sigmoid, [_]) => Some(Ok(per_plane(x, |_, src, dst| dst.iter_mut().zip(src).for_each(|(d, &v)| *d = vmath::sigmoid(v))))),
        (Op::ChannelAffine { scale, bias }, [_]) if scale.len() == bias.len() && (scale.len() == x.c || scale.len() == 1) => {
            let at = |c: usize| if scale.len() == 1 { 0 } else { c };
            Some(Ok(per_plane(x, |c, src, dst| {
                let (s, b) = (scale[at(c)], bias[at(c)]);
                dst.iter_mut().zip(src).for_each(|(d, &v)| *d = v * s + b);
            })))
        }
        (Op::Eltwise { op: EltwiseKind::Sum, coeffs }, [a, b]) if a.c == b.c && a.h == b.h && a.w == b.w && (coeffs.is_empty() || coeffs.len() == 2) => {
            let plane = a.h * a.w;
            let (ka, kb) = if coeffs.is_empty() { (1.0, 1.0) } else { (coeffs[0], coeffs[1]) };
            Some(Ok(per_plane(a, |c, src, dst| {
                let other = &b.data[c * plane..(c + 1) * plane];
                if coeffs.is_empty() {
                    dst.iter_mut().zip(src.iter().zip(other)).for_each(|(d, (&u, &v))| *d = u + v);
                } else {
                    dst.iter_mut().zip(src.iter().zip(other)).for_each(|(d, (&u, &v))| *d = u * ka + v * kb);
                }
            })))
        }
        _ => None,
    }
}

/// A tensor shaped as `x` whose plane `c` is `f(c, x's plane c, out plane c)`.
fn per_plane(x: &Tensor, f: impl Fn(usize, &[f32], &mut [f32]) + Sync) -> Tensor {
    let plane = (x.h * x.w).max(1);
    let mut out = Tensor { dims: x.dims, c: x.c, h: x.h, w: x.w, data: vec![0.0; x.data.len()] };
    let job = |(c, (dst, src)): (usize, (&mut [f32], &[f32]))| f(c, src, dst);
    if x.data.len() >= PAR_MIN && x.c > 1 {
        out.data.par_chunks_mut(plane).zip(x.data.par_chunks(plane)).enumerate().for_each(job);
    } else {
        out.data.chunks_mut(plane).zip(x.data.chunks(plane)).enumerate().for_each(job);
    }
    out
}

enum Operand<'a> {
    Scalar(f32),
    Row(&'a [f32]),
}

/// `dst = op(src, other)` (or `op(other, src)` when `swapped`), one loop per op kind.
fn binary_row(op: BinaryOpKind, src: &[f32], other: Operand, swapped: bool, dst: &mut [f32]) {
    macro_rules! each {
        ($f:expr) => {
            match other {
                Operand::Scalar(s) => dst.iter_mut().zip(src).for_each(|(d, &a)| *d = if swapped { $f(s, a) } else { $f(a, s) }),
                Operand::Row(r) => dst.iter_mut().zip(src.iter().zip(r)).for_each(|(d, (&a, &b))| *d = if swapped { $f(b, a) } else { $f(a, b) }),
            }
        };
    }
    match op {
        BinaryOpKind::Add => each!(|a: f32, b: f32| a + b),
        BinaryOpKind::Sub => each!(|a: f32, b: f32| a - b),
        BinaryOpKind::Mul => each!(|a: f32, b: f32| a * b),
        BinaryOpKind::Div => each!(|a: f32, b: f32| a / b),
        op => each!(|a: f32, b: f32| binary_scalar(op, a, b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    fn t(c: usize, h: usize, w: usize, seed: usize) -> Tensor {
        Tensor::from_vec(c, h, w, (0..c * h * w).map(|i| (((i + seed) * 2_654_435_761) % 2001) as f32 / 500.0 - 2.0 + 0.001).collect())
    }

    fn layer(op: Op, n: usize) -> Layer {
        Layer { name: "l".into(), kind: "k".into(), op, bottoms: (0..n).collect(), tops: vec![n] }
    }

    /// Each handled case against the reference op: bit-identical except Sigmoid (relative or
    /// absolute 1e-6); an unhandled broadcast is declined (None).
    #[test]
    fn matches_the_reference_ops() {
        let (a, same, plane, chan) = (t(5, 37, 71, 1), t(5, 37, 71, 2), t(1, 37, 71, 3), t(5, 1, 1, 4));
        let ops = [BinaryOpKind::Add, BinaryOpKind::Sub, BinaryOpKind::Mul, BinaryOpKind::Div, BinaryOpKind::Max, BinaryOpKind::Pow, BinaryOpKind::RSub, BinaryOpKind::RDiv];
        let mut cases: Vec<(Layer, Vec<&Tensor>)> = Vec::new();
        for op in ops {
            cases.push((layer(Op::BinaryOp { op, scalar: Some(-0.5) }, 1), vec![&a]));
            for other in [&same, &plane, &chan] {
                cases.push((layer(Op::BinaryOp { op, scalar: None }, 2), vec![&a, other]));
                cases.push((layer(Op::BinaryOp { op, scalar: None }, 2), vec![other, &a]));
            }
        }
        cases.push((layer(Op::ChannelAffine { scale: vec![1.5, -2.0, 0.5, 3.0, 0.25], bias: vec![0.1, 0.2, 0.3, 0.4, 0.5] }, 1), vec![&a]));
        cases.push((layer(Op::Eltwise { op: EltwiseKind::Sum, coeffs: vec![1.0, 0.2] }, 2), vec![&a, &same]));
        cases.push((layer(Op::Eltwise { op: EltwiseKind::Sum, coeffs: vec![] }, 2), vec![&a, &same]));
        for (l, xs) in &cases {
            let want = reference::forward_layer(l, xs).unwrap().remove(0);
            let got = forward(l, xs).expect("handled").unwrap();
            assert_eq!((got.c, got.h, got.w), (want.c, want.h, want.w));
            for (g, w) in got.data.iter().zip(&want.data) {
                assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{:?}: {g} want {w}", l.op);
            }
        }
        let l = layer(Op::Sigmoid, 1);
        let big = Tensor::from_vec(3, 50, 80, (0..12_000).map(|i| (i as f32 - 6000.0) / 60.0).collect());
        let want = reference::forward_layer(&l, &[&big]).unwrap().remove(0);
        let got = forward(&l, &[&big]).expect("handled").unwrap();
        for (g, w) in got.data.iter().zip(&want.data) {
            assert!((g - w).abs() <= 1e-6f32.max(1e-6 * w.abs()), "sigmoid: {g} want {w}");
        }
        // (5, 37, 71) with (5, 37, 1): not a case handled here.
        assert!(forward(&layer(Op::BinaryOp { op: BinaryOpKind::Add, scalar: None }, 2), &[&a, &t(5, 37, 1, 5)]).is_none());
    }
}
