//! `softmax` along one axis, one line per thread.

use super::{ew, ew_main, header, params, pipeline, Io, Words, X_TO_Y};
use crate::rec::Rec;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};

params! {
    /// The softmax kernel's parameters: `lines` lines of `len` elements `inner` apart.
    pub(crate) struct SoftmaxParams {
        pub lines: u32,
        pub len: u32,
        pub inner: u32,
    }
}

/// [`SoftmaxParams`]: X input, Y output.
pub fn softmax(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let len = P[1]; let inner = P[2];
    let base = (i / inner) * len * inner + i % inner;
    var mx = -3.4028235e38;
    for (var k = 0u; k < len; k++) { mx = max(mx, f32(X[base + k * inner])); }
    var sum = 0.0;
    for (var k = 0u; k < len; k++) { sum += exp(f32(X[base + k * inner]) - mx); }
    for (var k = 0u; k < len; k++) { Y[base + k * inner] = T(exp(f32(X[base + k * inner]) - mx) / sum); }
}
"#,
    );
    s
}

/// Record a Softmax layer along `axis`.
pub(crate) fn record_softmax(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, axis: i32) -> Result<()> {
    let s = io.ins[0];
    let d = s.dims as i32;
    let ax = if axis < 0 { axis + d } else { axis };
    if ax < 0 || ax >= d {
        bail!(Code::ModelInvalid, "layer {}: softmax axis {axis} of a {d}-D blob", io.name);
    }
    let pos = (3 - d + ax) as usize;
    let dimsv = [s.c, s.h, s.w];
    let len = dimsv[pos];
    let inner: usize = dimsv[pos + 1..].iter().product();
    let lines = s.len() / len.max(1);
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], s)?;
    let p = SoftmaxParams { lines: lines as u32, len: len as u32, inner: inner.max(1) as u32 };
    let pipe = pipeline(ctx, rec, "softmax", softmax)?;
    ew(rec, pipe, vec![x, out], &p.words(), lines)
}
