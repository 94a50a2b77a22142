//! Blob shapes and the shape rules that are not one kernel's: broadcasting (BinaryOp, Eltwise,
//! a residual that cannot be fused) and Reshape.

use lucent_core::bail;
use lucent_core::error::{Code, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub dims: u8,
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    pub fn d3(c: usize, h: usize, w: usize) -> Shape {
        Shape { dims: 3, c, h, w }
    }
    pub fn len(&self) -> usize {
        self.c * self.h * self.w
    }
    pub fn plane(&self) -> usize {
        match self.dims {
            3 => self.h * self.w,
            2 => self.w,
            _ => 1,
        }
    }
}

/// Broadcast two blobs: output shape and element strides (c, h, w) of each operand.
/// Equal ranks broadcast axes of size 1; a vector against a 3-D blob is per channel when its
/// length equals the channel count (ncnn), otherwise it aligns with the last axis; a vector
/// against a matrix is per row when its length equals the row count; a matrix against a 3-D blob
/// aligns with (h, w).
pub(crate) fn broadcast(a: Shape, b: Shape, lname: &str) -> Result<(Shape, [usize; 3], [usize; 3])> {
    let lift = |s: Shape, big: Shape| -> [usize; 3] {
        if s.dims == big.dims {
            return [s.c, s.h, s.w];
        }
        match (s.dims, big.dims) {
            (1, 3) if s.w == big.c && s.w != 1 => [s.w, 1, 1],
            (1, 2) if s.w == big.h && s.w != 1 => [1, s.w, 1],
            (1, _) => [1, 1, s.w],
            (2, 3) => [1, s.h, s.w],
            _ => [s.c, s.h, s.w],
        }
    };
    let big = if a.dims >= b.dims { a } else { b };
    let la = lift(a, big);
    let lb = lift(b, big);
    let mut o = [0usize; 3];
    for i in 0..3 {
        o[i] = if la[i] == lb[i] || lb[i] == 1 {
            la[i]
        } else if la[i] == 1 {
            lb[i]
        } else {
            bail!(Code::ModelInvalid, "layer {lname}: cannot broadcast {:?} with {:?}", a, b)
        };
    }
    let strides = |l: [usize; 3]| {
        let full = [l[1] * l[2], l[2], 1];
        let mut s = [0usize; 3];
        for i in 0..3 {
            s[i] = if l[i] == 1 && o[i] != 1 { 0 } else { full[i] };
        }
        s
    };
    let os = Shape { dims: big.dims, c: o[0], h: o[1], w: o[2] };
    Ok((os, strides(la), strides(lb)))
}

/// The shape of a Reshape (ncnn: 0 keeps the axis, -1 is inferred, -233 absent).
pub(crate) fn reshape_shape(s: Shape, w: i32, h: i32, c: i32, lname: &str) -> Result<Shape> {
    let total = s.len();
    let keep = |v: i32, from: usize| if v == 0 { from as i32 } else { v };
    let (dims, mut v) = if c != -233 {
        (3u8, vec![keep(c, s.c), keep(h, s.h), keep(w, s.w)])
    } else if h != -233 {
        (2, vec![keep(h, s.h), keep(w, s.w)])
    } else {
        (1, vec![keep(w, s.w)])
    };
    let known: usize = v.iter().filter(|&&x| x > 0).map(|&x| x as usize).product();
    if let Some(i) = v.iter().position(|&x| x < 0) {
        if known == 0 || !total.is_multiple_of(known) {
            bail!(Code::ModelInvalid, "layer {lname}: cannot reshape {total} elements");
        }
        v[i] = (total / known) as i32;
    }
    let v: Vec<usize> = v.iter().map(|&x| x as usize).collect();
    let out = match dims {
        1 => Shape { dims: 1, c: 1, h: 1, w: v[0] },
        2 => Shape { dims: 2, c: 1, h: v[0], w: v[1] },
        _ => Shape::d3(v[0], v[1], v[2]),
    };
    if out.len() != total {
        bail!(Code::ModelInvalid, "layer {lname}: reshape of {total} elements to {:?}", out);
    }
    Ok(out)
}
