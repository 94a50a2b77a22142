//! `pool`: max and average pooling (also global and adaptive), one output per thread.

use super::{ew, ew_main, header, params, pipeline, Io, Words, X_TO_Y};
use crate::rec::Rec;
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::{PoolKind, Pooling};

params! {
    /// The pooling kernel's parameters.
    pub(crate) struct PoolParams {
        pub n: u32,
        pub c: u32,
        pub in_h: u32,
        pub in_w: u32,
        pub out_h: u32,
        pub out_w: u32,
        pub kh: u32,
        pub kw: u32,
        pub sh: u32,
        pub sw: u32,
        pub pad_top: u32,
        pub pad_left: u32,
        /// Average (else max).
        pub avg: bool,
        pub count_include_pad: bool,
        /// Bottom / right limit of the area counted when excluding pads (exclusive).
        pub hi_y: i32,
        pub hi_x: i32,
        pub adaptive: bool,
        /// Its top / left.
        pub lo_y: i32,
        pub lo_x: i32,
    }
}

/// [`PoolParams`]: X input, Y output.
pub fn pool(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let ih = i32(P[2]); let iw = i32(P[3]); let oh = P[4]; let ow = P[5];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let oy = r / ow;
    let ox = r - oy * ow;
    var y0: i32; var y1: i32; var x0: i32; var x1: i32;
    if (P[16] != 0u) {
        y0 = i32((oy * P[2]) / oh);
        y1 = i32(((oy + 1u) * P[2] + oh - 1u) / oh);
        x0 = i32((ox * P[3]) / ow);
        x1 = i32(((ox + 1u) * P[3] + ow - 1u) / ow);
    } else {
        y0 = i32(oy * P[8]) - i32(P[10]);
        y1 = y0 + i32(P[6]);
        x0 = i32(ox * P[9]) - i32(P[11]);
        x1 = x0 + i32(P[7]);
    }
    let ya = max(y0, 0); let yb = min(y1, ih);
    let xa = max(x0, 0); let xb = min(x1, iw);
    let base = c * P[2] * P[3];
    var mx = -3.4028235e38;
    var sum = 0.0;
    for (var y = ya; y < yb; y++) {
        for (var x = xa; x < xb; x++) {
            let v = f32(X[base + u32(y) * P[3] + u32(x)]);
            mx = max(mx, v);
            sum += v;
        }
    }
    var o = mx;
    if (P[12] == 1u) {
        var cnt = f32((yb - ya) * (xb - xa));
        if (P[16] == 0u) {
            if (P[13] != 0u) {
                cnt = f32(P[6] * P[7]);
            } else {
                let cy = max(min(y1, i32(P[14])) - max(y0, i32(P[17])), 0);
                let cx = max(min(x1, i32(P[15])) - max(x0, i32(P[18])), 0);
                cnt = f32(cy * cx);
            }
        }
        o = sum / max(cnt, 1.0);
    }
    Y[i] = T(o);
}
"#,
    );
    s
}

/// The geometry of a pooling layer on input `s`.
pub(crate) struct PoolGeom {
    pub out: Shape,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    pub include_pad: bool,
    pub hi_y: i64,
    pub hi_x: i64,
    pub lo_y: i64,
    pub lo_x: i64,
    pub adaptive: bool,
}

pub(crate) fn pool_geometry(p: &Pooling, s: Shape, lname: &str) -> Result<PoolGeom> {
    if s.dims != 3 {
        bail!(Code::ModelInvalid, "layer {lname}: pooling of a {}-D blob", s.dims);
    }
    if p.global {
        return Ok(PoolGeom {
            out: Shape { dims: 1, c: 1, h: 1, w: s.c },
            oh: 1,
            ow: 1,
            kh: s.h,
            kw: s.w,
            sh: 1,
            sw: 1,
            pt: 0,
            pl: 0,
            include_pad: false,
            hi_y: s.h as i64,
            hi_x: s.w as i64,
            lo_y: 0,
            lo_x: 0,
            adaptive: false,
        });
    }
    if p.adaptive {
        let oh = if p.out_h == 0 { s.h } else { p.out_h };
        let ow = if p.out_w == 0 { s.w } else { p.out_w };
        return Ok(PoolGeom { out: Shape::d3(s.c, oh, ow), oh, ow, kh: 0, kw: 0, sh: 1, sw: 1, pt: 0, pl: 0, include_pad: false, hi_y: s.h as i64, hi_x: s.w as i64, lo_y: 0, lo_x: 0, adaptive: true });
    }
    let (kw, kh, sw, sh) = (p.kernel_w, p.kernel_h, p.stride_w.max(1), p.stride_h.max(1));
    let (mut pl, mut pr, mut pt, mut pb) = (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom);
    let (opr, opb) = (pr, pb);
    match p.pad_mode {
        0 => {
            let wt = (s.w + pl + pr).saturating_sub(kw) % sw;
            if wt != 0 {
                pr += sw - wt;
            }
            let ht = (s.h + pt + pb).saturating_sub(kh) % sh;
            if ht != 0 {
                pb += sh - ht;
            }
        }
        2 | 3 => {
            let wpad = (kw + (s.w - 1) / sw * sw).saturating_sub(s.w);
            let hpad = (kh + (s.h - 1) / sh * sh).saturating_sub(s.h);
            if p.pad_mode == 2 {
                (pl, pr, pt, pb) = (wpad / 2, wpad - wpad / 2, hpad / 2, hpad - hpad / 2);
            } else {
                (pl, pr, pt, pb) = (wpad - wpad / 2, wpad / 2, hpad - hpad / 2, hpad / 2);
            }
        }
        _ => {}
    }
    let tail_h = if p.pad_mode == 0 { pb - opb } else { 0 };
    let tail_w = if p.pad_mode == 0 { pr - opr } else { 0 };
    if s.w + pl + pr < kw || s.h + pt + pb < kh {
        bail!(Code::ModelInvalid, "layer {lname}: pooling window larger than the input");
    }
    let ow = (s.w + pl + pr - kw) / sw + 1;
    let oh = (s.h + pt + pb - kh) / sh + 1;
    Ok(PoolGeom {
        out: Shape::d3(s.c, oh, ow),
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        include_pad: p.count_include_pad,
        hi_y: (s.h + pb) as i64 - (p.pad_bottom + tail_h) as i64,
        hi_x: (s.w + pr) as i64 - (p.pad_right + tail_w) as i64,
        lo_y: p.pad_top as i64 - pt as i64,
        lo_x: p.pad_left as i64 - pl as i64,
        adaptive: false,
    })
}

/// Record a Pooling layer.
pub(crate) fn record_pool(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, pl: &Pooling) -> Result<()> {
    let s = io.ins[0];
    let g = pool_geometry(pl, s, io.name)?;
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], g.out)?;
    let n = g.out.len();
    let p = PoolParams {
        n: n as u32,
        c: s.c as u32,
        in_h: s.h as u32,
        in_w: s.w as u32,
        out_h: g.oh as u32,
        out_w: g.ow as u32,
        kh: g.kh as u32,
        kw: g.kw as u32,
        sh: g.sh as u32,
        sw: g.sw as u32,
        pad_top: g.pt as u32,
        pad_left: g.pl as u32,
        avg: pl.kind == PoolKind::Avg,
        count_include_pad: g.include_pad,
        hi_y: g.hi_y as i32,
        hi_x: g.hi_x as i32,
        adaptive: g.adaptive,
        lo_y: g.lo_y as i32,
        lo_x: g.lo_x as i32,
    };
    let pipe = pipeline(ctx, rec, "pool", pool)?;
    ew(rec, pipe, vec![x, out], &p.words(), n)
}
