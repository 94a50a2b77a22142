//! What runs on a convolution's output rows right after the product, while they are in cache:
//! bias, the conv's own activation (Sigmoid and Mish through [`super::vmath`]'s vectorisable
//! functions, not libm), a following PReLU/ReLU, then the fused followers in graph order
//! ([`Residual`]): residual sums (`v = keep * v + add * other`, e.g. RRDB's `x + 0.2 f(x)` Eltwise,
//! twice in a row at the end of each RRDB, and plain BinaryOp adds), products with an earlier
//! tensor (RealPLKSR's `x * sigmoid(conv(x))`), SiLU (`v * sigmoid(v)`, SPAN) and SPAN's attention
//! tail `(keep v + add other) * (sigmoid(v) + shift)`. [`RowOps::apply`] is compiled once per ISA
//! level.

use super::isa::Isa;
use super::vmath;
use crate::ncnn::model::Activation;

/// One fused step after the activation (`other` has the conv output's shape).
#[derive(Clone, Copy)]
pub enum Residual<'a> {
    /// `v = keep * v + add * other`.
    Sum { keep: f32, add: f32, other: &'a [f32] },
    /// `v = v * other`.
    Product { other: &'a [f32] },
    /// `v = v * sigmoid(v)`.
    Silu,
    /// `v = (keep * v + add * other) * (sigmoid(v) + shift)`.
    Gate { keep: f32, add: f32, other: &'a [f32], shift: f32 },
}

/// The epilogue of one conv run.
pub struct RowOps<'a> {
    pub isa: Isa,
    pub bias: Option<&'a [f32]>,
    pub act: Activation,
    /// PReLU slopes (one shared or one per channel) of a fused follower.
    pub slope: Option<&'a [f32]>,
    /// The fused steps after the activation and slope, in order.
    pub residual: &'a [Residual<'a>],
    /// Output plane size (h * w), to find a row of `other`.
    pub plane: usize,
}

impl RowOps<'_> {
    /// Apply to `row`, the output of channel `o` starting at offset `off` within its plane.
    #[inline]
    pub fn apply(&self, o: usize, off: usize, row: &mut [f32]) {
        match self.isa {
            // SAFETY: the backend only pins levels the CPU supports (Isa::supported).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { apply_avx512(self, o, off, row) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { apply_avx2(self, o, off, row) },
            _ => apply_body(self, o, off, row),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(ops: &RowOps, o: usize, off: usize, row: &mut [f32]) {
    apply_body(ops, o, off, row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn apply_avx512(ops: &RowOps, o: usize, off: usize, row: &mut [f32]) {
    apply_body(ops, o, off, row)
}

#[inline(always)]
fn apply_body(ops: &RowOps, o: usize, off: usize, row: &mut [f32]) {
    let bias = ops.bias.map(|b| b[o]).unwrap_or(0.0);
    let slope = ops.slope.map(|s| if s.len() == 1 { s[0] } else { s[o] });
    match (ops.act, slope) {
        (Activation::None, None) => {
            if bias != 0.0 {
                row.iter_mut().for_each(|v| *v += bias);
            }
        }
        (Activation::None, Some(s)) | (Activation::LeakyRelu(s), None) => row.iter_mut().for_each(|v| {
            let t = *v + bias;
            *v = if t < 0.0 { t * s } else { t };
        }),
        (Activation::Relu, None) => row.iter_mut().for_each(|v| *v = (*v + bias).max(0.0)),
        (Activation::Sigmoid, None) => row.iter_mut().for_each(|v| *v = vmath::sigmoid(*v + bias)),
        (Activation::Mish, None) => row.iter_mut().for_each(|v| *v = vmath::mish(*v + bias)),
        (a, s) => row.iter_mut().for_each(|v| {
            let t = match a {
                Activation::Sigmoid => vmath::sigmoid(*v + bias),
                Activation::Mish => vmath::mish(*v + bias),
                _ => a.apply(*v + bias),
            };
            *v = match s {
                Some(s) if t < 0.0 => t * s,
                _ => t,
            };
        }),
    }
    let span = o * ops.plane + off..o * ops.plane + off + row.len();
    for r in ops.residual {
        match *r {
            Residual::Sum { keep, add, other } => {
                let src = &other[span.clone()];
                if keep == 1.0 {
                    row.iter_mut().zip(src).for_each(|(v, x)| *v += add * x);
                } else {
                    row.iter_mut().zip(src).for_each(|(v, x)| *v = keep * *v + add * x);
                }
            }
            Residual::Product { other } => row.iter_mut().zip(&other[span.clone()]).for_each(|(v, x)| *v *= x),
            Residual::Silu => row.iter_mut().for_each(|v| *v = vmath::silu(*v)),
            Residual::Gate { keep, add, other, shift } => {
                row.iter_mut().zip(&other[span.clone()]).for_each(|(v, x)| *v = (keep * *v + add * x) * (vmath::sigmoid(*v) + shift))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ISA level this CPU runs (the AVX2 / AVX-512 copies are the vectorised ones) against the
    /// scalar libm reference: relative 1e-6 or absolute 1e-6.
    #[test]
    fn vectorised_activations_and_steps_match_the_scalar_reference() {
        // 20,001 values over [-100, 100] in one plane of 2 channels, bias 0.25 on channel 1.
        let n = 20_001;
        let x: Vec<f32> = (0..2 * n).map(|i| ((i % n) as f32 - 10_000.0) / 100.0).collect();
        let other: Vec<f32> = (0..2 * n).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let bias = [0.0f32, 0.25];
        let close = |got: f32, want: f32| (got - want).abs() <= 1e-6f32.max(1e-6 * want.abs());
        let sig = |v: f32| Activation::Sigmoid.apply(v);
        for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
            for act in [Activation::Sigmoid, Activation::Mish] {
                let steps = [
                    Residual::Silu,
                    Residual::Gate { keep: 1.0, add: 0.5, other: &other, shift: -0.5 },
                    Residual::Product { other: &other },
                    Residual::Sum { keep: 0.5, add: 2.0, other: &other },
                ];
                for k in 0..=steps.len() {
                    let ops = RowOps { isa, bias: Some(&bias), act, slope: None, residual: &steps[..k], plane: n };
                    let mut got = x.clone();
                    for o in 0..2 {
                        // Two rows per channel, split unevenly (tails of every vector width).
                        let (a, b) = got[o * n..(o + 1) * n].split_at_mut(4_999);
                        ops.apply(o, 0, a);
                        ops.apply(o, 4_999, b);
                    }
                    for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
                        let mut want = act.apply(v + bias[i / n]);
                        for s in &steps[..k] {
                            want = match *s {
                                Residual::Silu => want * sig(want),
                                Residual::Gate { keep, add, other, shift } => (keep * want + add * other[i]) * (sig(want) + shift),
                                Residual::Product { other } => want * other[i],
                                Residual::Sum { keep, add, other } => keep * want + add * other[i],
                            };
                        }
                        assert!(close(g, want), "{isa} {act:?} {k} steps, x = {v}: {g} want {want}");
                    }
                }
            }
        }
    }
}
