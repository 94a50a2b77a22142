//! PixelShuffle (`pshuf`, modes 0 and 1), Interp (`resample`: nearest, bilinear, bicubic from
//! host-computed tap tables) and their sum in one pass (`pshuf_add`: the compact SR networks'
//! last step, which otherwise writes and reads two full-resolution blobs).

use super::{eltwise, ew, ew_main, header, params, pipeline, Io, Words, X_TO_Y};
use crate::rec::Rec;
use crate::shape::{broadcast, Shape};
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::Interp;

params! {
    /// PixelShuffle: X is [out_c * f * f][out_h / f][out_w / f].
    pub(crate) struct PshufParams {
        pub n: u32,
        pub out_c: u32,
        pub out_h: u32,
        pub out_w: u32,
        pub factor: u32,
        /// ncnn's mode 1 (channel order (sy, sx, c) instead of (c, sy, sx)).
        pub mode: bool,
    }
}

params! {
    /// Interp, followed by the tap table: per output column 4 source indices + 4 weights, then
    /// per output row the same ([`interp_taps`]).
    pub(crate) struct ResampleParams {
        pub n: u32,
        /// Channels.
        pub c: u32,
        pub in_h: u32,
        pub in_w: u32,
        pub out_h: u32,
        pub out_w: u32,
        /// Taps used per axis (1, 2 or 4).
        pub taps: u32,
        /// `pshuf_add` only: the PixelShuffle's factor | mode << 16.
        pub shuffle: u32,
    }
}

/// [`PshufParams`]: X input, Y output.
pub fn pshuf(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let oc = P[1]; let oh = P[2]; let ow = P[3]; let f = P[4];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
    let sy = y % f;
    let sx = x % f;
    var ic = c * f * f + sy * f + sx;
    if (P[5] != 0u) { ic = (sy * f + sx) * oc + c; }
    let ih = oh / f;
    let iw = ow / f;
    Y[i] = X[(ic * ih + y / f) * iw + x / f];
}
"#,
    );
    s
}

/// PixelShuffle of X plus Interp of U, summed: Y = pshuf(X) + resample(U), one pass. Parameters:
/// [`ResampleParams`] for U (with `shuffle`); X is [C*f*f][out_h/f][out_w/f].
pub fn pshuf_add(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> U: array<T>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let oc = P[1]; let ih = P[2]; let iw = P[3]; let oh = P[4]; let ow = P[5]; let taps = P[6];
    let f = P[7] & 0xFFFFu;
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
    let sy = y % f;
    let sx = x % f;
    var ic = c * f * f + sy * f + sx;
    if ((P[7] >> 16u) != 0u) { ic = (sy * f + sx) * oc + c; }
    let v = f32(X[(ic * (oh / f) + y / f) * (ow / f) + x / f]);
"#,
    );
    s.push_str(&separable_taps("U"));
    s.push_str("    Y[i] = T(v + s);\n}\n");
    s
}

/// The separable resampling sum `s` of output pixel (c, y, x) over the source array `src` (shared by
/// `resample` and `pshuf_add`): per output column and row, 4 source indices + 4 weights (the table after [`ResampleParams`]).
fn separable_taps(src: &str) -> String {
    r#"    let xt = 8u + x * 8u;
    let yt = 8u + ow * 8u + y * 8u;
    var s = 0.0;
    for (var a = 0u; a < taps; a++) {
        let row = (c * ih + P[yt + a]) * iw;
        var rs = 0.0;
        for (var b = 0u; b < taps; b++) {
            rs = fma(pf(xt + 4u + b), f32(SRC[row + P[xt + b]]), rs);
        }
        s = fma(pf(yt + 4u + a), rs, s);
    }
"#
    .replace("SRC", src)
}

/// [`ResampleParams`] and its tap table: X input, Y output.
pub fn resample(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let ih = P[2]; let iw = P[3]; let oh = P[4]; let ow = P[5]; let taps = P[6];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
"#,
    );
    s.push_str(&separable_taps("X"));
    s.push_str("    Y[i] = T(s);\n}\n");
    s
}

/// Output shape and parameters of a PixelShuffle by `r`.
fn pshuf_params(s: Shape, r: usize, mode: i32, lname: &str) -> Result<(Shape, PshufParams)> {
    if s.dims != 3 || r == 0 || !s.c.is_multiple_of(r * r) {
        bail!(Code::ModelInvalid, "layer {lname}: PixelShuffle of {} channels by {r}", s.c);
    }
    let os = Shape::d3(s.c / (r * r), s.h * r, s.w * r);
    Ok((os, PshufParams { n: os.len() as u32, out_c: os.c as u32, out_h: os.h as u32, out_w: os.w as u32, factor: r as u32, mode: mode != 0 }))
}

/// Output shape, parameters and tap table of an Interp.
fn resample_params(ip: &Interp, s: Shape, lname: &str) -> Result<(Shape, ResampleParams, Vec<u32>)> {
    if s.dims != 3 {
        bail!(Code::ModelInvalid, "layer {lname}: Interp of a {}-D blob is not supported", s.dims);
    }
    let (oh, ow) = interp_size(ip, s);
    if oh == 0 || ow == 0 {
        bail!(Code::ModelInvalid, "layer {lname}: Interp to an empty size");
    }
    let os = Shape::d3(s.c, oh, ow);
    let sized = ip.output_w > 0 && ip.output_h > 0;
    let (taps, xt) = interp_taps(ip.resize_type, s.w, ow, ip.width_scale, sized, ip.align_corner, lname)?;
    let (_, yt) = interp_taps(ip.resize_type, s.h, oh, ip.height_scale, sized, ip.align_corner, lname)?;
    let p = ResampleParams {
        n: os.len() as u32,
        c: s.c as u32,
        in_h: s.h as u32,
        in_w: s.w as u32,
        out_h: oh as u32,
        out_w: ow as u32,
        taps,
        shuffle: 0,
    };
    let mut table = Vec::new();
    for t in xt.iter().chain(yt.iter()) {
        t.0.push_words(&mut table);
        t.1.push_words(&mut table);
    }
    Ok((os, p, table))
}

/// The parameter words followed by the tap table.
fn with_table(p: ResampleParams, table: &[u32]) -> Vec<u32> {
    let mut w = p.words();
    w.extend_from_slice(table);
    w
}

/// The output size (h, w) of an Interp.
pub(crate) fn interp_size(ip: &Interp, s: Shape) -> (usize, usize) {
    if ip.output_h > 0 && ip.output_w > 0 {
        (ip.output_h, ip.output_w)
    } else {
        ((s.h as f32 * ip.height_scale) as usize, (s.w as f32 * ip.width_scale) as usize)
    }
}

type Taps = Vec<([u32; 4], [f32; 4])>;

/// Source indices and weights of each output position along one axis, as ncnn's Interp does it.
pub(crate) fn interp_taps(kind: i32, n_in: usize, n_out: usize, scale: f32, sized: bool, align: bool, lname: &str) -> Result<(u32, Taps)> {
    let last = n_in as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as u32;
    let mut v = Vec::with_capacity(n_out);
    match kind {
        1 => {
            let s = if sized { n_in as f32 / n_out as f32 } else { 1.0 / scale };
            for o in 0..n_out {
                let i = ((o as f32 * s) as i64).min(last);
                v.push(([i.max(0) as u32, 0, 0, 0], [1.0, 0.0, 0.0, 0.0]));
            }
            Ok((1, v))
        }
        2 | 3 => {
            let sc = if align && n_out > 1 { (n_in as f64 - 1.0) / (n_out as f64 - 1.0) } else { n_in as f64 / n_out as f64 };
            for o in 0..n_out {
                let mut fx = if align { (o as f64 * sc) as f32 } else { ((o as f64 + 0.5) * sc - 0.5) as f32 };
                let mut sx = fx.floor() as i64;
                fx -= sx as f32;
                if kind == 2 {
                    if n_in == 1 {
                        v.push(([0, 0, 0, 0], [1.0, 0.0, 0.0, 0.0]));
                        continue;
                    }
                    if sx < 0 {
                        sx = 0;
                        fx = 0.0;
                    }
                    if sx >= last {
                        sx = last - 1;
                        fx = 1.0;
                    }
                    v.push(([sx as u32, sx as u32 + 1, 0, 0], [1.0 - fx, fx, 0.0, 0.0]));
                } else {
                    let a = -0.75f32;
                    let x0 = fx + 1.0;
                    let x1 = fx;
                    let x2 = 1.0 - fx;
                    let c0 = ((a * x0 - 5.0 * a) * x0 + 8.0 * a) * x0 - 4.0 * a;
                    let c1 = ((a + 2.0) * x1 - (a + 3.0)) * x1 * x1 + 1.0;
                    let c2 = ((a + 2.0) * x2 - (a + 3.0)) * x2 * x2 + 1.0;
                    let c3 = 1.0 - c0 - c1 - c2;
                    v.push(([clamp(sx - 1), clamp(sx), clamp(sx + 1), clamp(sx + 2)], [c0, c1, c2, c3]));
                }
            }
            Ok((if kind == 2 { 2 } else { 4 }, v))
        }
        t => bail!(Code::ModelInvalid, "layer {lname}: Interp resize type {t} is not supported"),
    }
}

/// Record a PixelShuffle layer.
pub(crate) fn record_pshuf(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, factor: usize, mode: i32) -> Result<()> {
    let (os, p) = pshuf_params(io.ins[0], factor, mode, io.name)?;
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let pipe = pipeline(ctx, rec, "pshuf", pshuf)?;
    ew(rec, pipe, vec![x, out], &p.words(), os.len())
}

/// Record an Interp layer.
pub(crate) fn record_interp(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, ip: &Interp) -> Result<()> {
    let (os, p, table) = resample_params(ip, io.ins[0], io.name)?;
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let pipe = pipeline(ctx, rec, "resample", resample)?;
    ew(rec, pipe, vec![x, out], &with_table(p, &table), os.len())
}

/// Record PixelShuffle (by `factor`, `mode`) of input 0 plus Interp `ip` of input 1: one kernel
/// where the two have the same shape; otherwise the three kernels one after another
/// (`ps_first`: the PixelShuffle output is the add's first operand).
pub(crate) fn record_pshuf_add(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, (factor, mode): (usize, i32), ip: &Interp, ps_first: bool) -> Result<()> {
    let lname = io.name;
    let (pos, pp) = pshuf_params(io.ins[0], factor, mode, lname)?;
    let (uos, mut up, table) = resample_params(ip, io.ins[1], lname)?;
    let x = rec.buf_of(io.bottoms[0]);
    let u = rec.buf_of(io.bottoms[1]);
    if pos == uos {
        let out = rec.alloc_blob(ctx, io.tops[0], pos)?;
        up.c = pos.c as u32;
        up.shuffle = (factor as u32) | (((mode != 0) as u32) << 16);
        let pipe = pipeline(ctx, rec, "pshuf_add", pshuf_add)?;
        ew(rec, pipe, vec![x, u, out], &with_table(up, &table), pos.len())
    } else {
        // Shapes differ (a broadcasting add): the three kernels one after another.
        let t1 = rec.alloc_temp(ctx, pos)?;
        let pipe = pipeline(ctx, rec, "pshuf", pshuf)?;
        ew(rec, pipe, vec![x, t1.clone()], &pp.words(), pos.len())?;
        let t2 = rec.alloc_temp(ctx, uos)?;
        let pipe = pipeline(ctx, rec, "resample", resample)?;
        ew(rec, pipe, vec![u, t2.clone()], &with_table(up, &table), uos.len())?;
        let (a, b, sa_shape, sb_shape) = if ps_first { (t1, t2, pos, uos) } else { (t2, t1, uos, pos) };
        let (os, sa, sb) = broadcast(sa_shape, sb_shape, lname)?;
        let out = rec.alloc_blob(ctx, io.tops[0], os)?;
        eltwise::record_binary(ctx, rec, [a, b, out], eltwise::BinaryParams::new(os, sa, sb, 0, 1.0, 1.0, None))
    }
}
