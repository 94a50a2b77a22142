//! Which layers after a conv run inside its epilogue ([`super::epilogue`]), planned at prepare
//! time over the graph: a PReLU/ReLU right after the conv; residual sums (Eltwise Sum / BinaryOp
//! Add) and products (BinaryOp Mul) with a tensor computed before the conv; SiLU (a Sigmoid of the
//! running value and the Mul of the two); SPAN's block tail (a Sigmoid of the running value, an
//! optional scalar add/sub, a residual sum of the running value and the Mul of the two). The
//! running value may reach a two-layer pattern directly or through a two-output Split. Each step's
//! intermediate blobs have no other reader; at run time a requested one stops the fusion there.

use crate::ncnn::model::{BinaryOpKind, EltwiseKind, Layer, Net, Op};

/// Layers that may run inside a conv's epilogue (see the module doc), as one step.
#[derive(Clone, Debug)]
pub enum Follower {
    /// PReLU / ReLU: one slope, or one per channel.
    Slope(Vec<f32>),
    /// `v = keep * v + add * other`.
    Residual { keep: f32, add: f32, other: usize },
    /// `v = v * other` (a BinaryOp Mul with a tensor computed before the conv).
    Product { other: usize },
    /// `v = v * sigmoid(v)`: a Sigmoid of the running value and the Mul of the two.
    Silu,
    /// `v = (keep * v + add * other) * (sigmoid(v) + shift)`: a Sigmoid of the running value, an
    /// optional scalar add/sub on it, a residual sum of the running value and the Mul of the two
    /// (SPAN's block tail).
    Gate { keep: f32, add: f32, other: usize, shift: f32 },
}

/// One epilogue step: the layers it absorbs (graph order; the last one's top is the new running
/// value).
#[derive(Clone, Debug)]
pub struct Step {
    pub layers: Vec<usize>,
    pub f: Follower,
}

impl Step {
    pub fn last(&self) -> usize {
        *self.layers.last().expect("a step absorbs a layer")
    }
}

/// The followers a conv can absorb, in graph order (at run time a prefix of them is fused: up to
/// the first whose input is a requested blob or whose other operand does not fit).
#[derive(Default)]
pub struct Fusion {
    pub followers: Vec<Step>,
}

/// The residual coefficients `(keep, add)` of a two-input sum layer `l` for the running value (blobs
/// `cur`: it and its Split copies), and its other operand, when that was computed before conv `li`.
fn sum_of(l: &Layer, cur: &[usize], producer: &[usize], li: usize) -> Option<(f32, f32, usize)> {
    if l.tops.len() != 1 || l.bottoms.len() != 2 {
        return None;
    }
    let co = match &l.op {
        Op::Eltwise { op: EltwiseKind::Sum, coeffs } if coeffs.len() == 2 => [coeffs[0], coeffs[1]],
        Op::Eltwise { op: EltwiseKind::Sum, coeffs } if coeffs.is_empty() => [1.0, 1.0],
        Op::BinaryOp { op: BinaryOpKind::Add, scalar: None } => [1.0, 1.0],
        _ => return None,
    };
    let me = l.bottoms.iter().position(|b| cur.contains(b))?;
    let other = l.bottoms[1 - me];
    if cur.contains(&other) || producer.get(other).is_none_or(|&p| p >= li) {
        return None;
    }
    Some((co[me], co[1 - me], other))
}

fn is_sigmoid_of(l: &Layer, cur: &[usize]) -> bool {
    matches!(l.op, Op::Sigmoid) && l.bottoms.len() == 1 && cur.contains(&l.bottoms[0]) && l.tops.len() == 1
}

/// `l` is a two-tensor Mul of one of `a` and `b` (either order).
fn is_mul_of(l: &Layer, a: &[usize], b: usize) -> bool {
    matches!(l.op, Op::BinaryOp { op: BinaryOpKind::Mul, scalar: None })
        && l.tops.len() == 1
        && l.bottoms.len() == 2
        && ((a.contains(&l.bottoms[0]) && l.bottoms[1] == b) || (a.contains(&l.bottoms[1]) && l.bottoms[0] == b))
}

/// The next epilogue step for running value `cur` of conv `li` (with `oc` outputs), if the layers
/// reading it form one. `first`: no step yet (a PReLU/ReLU is fused only right after the conv).
pub fn next_step(net: &Net, readers: &[Vec<usize>], producer: &[usize], li: usize, oc: usize, cur: usize, first: bool) -> Option<Step> {
    let layer = |j: usize| &net.layers[j];
    if let [j] = readers[cur][..] {
        let l = layer(j);
        if matches!(l.op, Op::Split) {
            return two_readers(net, readers, producer, li, &[cur], Some(j));
        }
        if l.tops.len() != 1 {
            return None;
        }
        let f = match &l.op {
            Op::PReLU { slope } if first && l.bottoms.len() == 1 && (slope.len() == 1 || slope.len() == oc) => Follower::Slope(slope.clone()),
            Op::ReLU { slope } if first && l.bottoms.len() == 1 => Follower::Slope(vec![*slope]),
            Op::BinaryOp { op: BinaryOpKind::Mul, scalar: None } if l.bottoms.len() == 2 => {
                let me = l.bottoms.iter().position(|&b| b == cur)?;
                let other = l.bottoms[1 - me];
                if other == cur || producer.get(other).is_none_or(|&p| p >= li) {
                    return None;
                }
                Follower::Product { other }
            }
            _ => {
                let (keep, add, other) = sum_of(l, &[cur], producer, li)?;
                Follower::Residual { keep, add, other }
            }
        };
        return Some(Step { layers: vec![j], f });
    }
    two_readers(net, readers, producer, li, &[cur], None)
}

/// SiLU or a gate (see [`Follower`]) on the running value `cur[0]`, read by two layers directly or
/// through the two-output Split `split`.
fn two_readers(net: &Net, readers: &[Vec<usize>], producer: &[usize], li: usize, cur: &[usize], split: Option<usize>) -> Option<Step> {
    let layer = |j: usize| &net.layers[j];
    let only = |b: usize| match readers[b][..] {
        [j] => Some(j),
        _ => None,
    };
    let (cur, a, b): (Vec<usize>, usize, usize) = match split {
        None => match readers[cur[0]][..] {
            [a, b] => (cur.to_vec(), a, b),
            _ => return None,
        },
        Some(sp) => match layer(sp).tops[..] {
            [t0, t1] => (vec![t0, t1], only(t0)?, only(t1)?),
            _ => return None,
        },
    };
    if a == b {
        return None;
    }
    let (s, e) = if is_sigmoid_of(layer(a), &cur) { (a, b) } else { (b, a) };
    if !is_sigmoid_of(layer(s), &cur) {
        return None;
    }
    let mut layers: Vec<usize> = split.into_iter().chain([s, e]).collect();
    let st = layer(s).tops[0];
    // SiLU: Mul(cur, sigmoid(cur)).
    if is_mul_of(layer(e), &cur, st) && only(st) == Some(e) {
        layers.sort_unstable();
        return Some(Step { layers, f: Follower::Silu });
    }
    // Gate: Mul(sum(cur, other), sigmoid(cur) [+- c]).
    let (keep, add, other) = sum_of(layer(e), &cur, producer, li)?;
    let mut g = st;
    let mut shift = 0.0;
    let a = only(st)?;
    if let Op::BinaryOp { op: op @ (BinaryOpKind::Add | BinaryOpKind::Sub), scalar: Some(c) } = layer(a).op {
        if layer(a).bottoms != [st] || layer(a).tops.len() != 1 {
            return None;
        }
        shift = if op == BinaryOpKind::Add { c } else { -c };
        g = layer(a).tops[0];
        layers.push(a);
    }
    let et = layer(e).tops[0];
    let m = only(g)?;
    if only(et) != Some(m) || !is_mul_of(layer(m), &[et], g) {
        return None;
    }
    layers.push(m);
    layers.sort_unstable();
    if layers.last() != Some(&m) {
        return None;
    }
    Some(Step { layers, f: Follower::Gate { keep, add, other, shift } })
}

