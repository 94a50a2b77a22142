//! What runs on a convolution's output rows right after the product, while they are in cache:
//! bias, the conv's own activation, a following PReLU/ReLU, then residual sums
//! (`v = keep * v + add * other`, e.g. RRDB's `x + 0.2 f(x)` Eltwise, twice in a row at the end of
//! each RRDB, and plain BinaryOp adds). [`RowOps::apply`] is compiled once per ISA level.

use super::isa::Isa;
use crate::ncnn::model::Activation;

/// One residual term: `v = keep * v + add * other[o][y][x]` (`other` has the conv output's shape).
#[derive(Clone, Copy)]
pub struct Residual<'a> {
    pub keep: f32,
    pub add: f32,
    pub other: &'a [f32],
}

/// The epilogue of one conv run.
pub struct RowOps<'a> {
    pub isa: Isa,
    pub bias: Option<&'a [f32]>,
    pub act: Activation,
    /// PReLU slopes (one shared or one per channel) of a fused follower.
    pub slope: Option<&'a [f32]>,
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
        (a, s) => row.iter_mut().for_each(|v| {
            let t = a.apply(*v + bias);
            *v = match s {
                Some(s) if t < 0.0 => t * s,
                _ => t,
            };
        }),
    }
    for r in ops.residual {
        let src = &r.other[o * ops.plane + off..o * ops.plane + off + row.len()];
        let (keep, add) = (r.keep, r.add);
        if keep == 1.0 {
            row.iter_mut().zip(src).for_each(|(v, x)| *v += add * x);
        } else {
            row.iter_mut().zip(src).for_each(|(v, x)| *v = keep * *v + add * x);
        }
    }
}
