//! `copy3`: a strided 3-D box copy, one element per thread, for Concat (where a plain
//! buffer-to-buffer copy does not do), Crop and Permute.

use super::{ew, ew_main, header, params, pipeline, Io, Words, X_TO_Y};
use crate::rec::Rec;
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::Crop;

params! {
    /// A box of (c, h, w) elements from X at `src_ofs` with strides `src` to Y at `dst_ofs` with
    /// strides `dst` (elements).
    pub(crate) struct CopyParams {
        pub n: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
        pub src_ofs: u32,
        pub src: [u32; 3],
        pub dst_ofs: u32,
        pub dst: [u32; 3],
    }
}

impl CopyParams {
    fn new(region: Shape, src_ofs: usize, src: [usize; 3], dst_ofs: usize, dst: [usize; 3]) -> CopyParams {
        let u = |s: [usize; 3]| s.map(|x| x as u32);
        CopyParams {
            n: region.len() as u32,
            c: region.c as u32,
            h: region.h as u32,
            w: region.w as u32,
            src_ofs: src_ofs as u32,
            src: u(src),
            dst_ofs: dst_ofs as u32,
            dst: u(dst),
        }
    }
}

/// [`CopyParams`]: X input, Y output.
pub fn copy3(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let hw = P[2] * P[3];
    let c = i / hw;
    let r = i - c * hw;
    let y = r / P[3];
    let x = r - y * P[3];
    Y[P[8] + c * P[9] + y * P[10] + x * P[11]] = X[P[4] + c * P[5] + y * P[6] + x * P[7]];
}
"#,
    );
    s
}

/// Region of a Crop: output shape and (c, h, w) offsets into the input.
pub(crate) fn crop_region(cr: &Crop, s: Shape, refs: Option<Shape>, lname: &str) -> Result<(Shape, [usize; 3])> {
    let d = s.dims as i32;
    let size = [s.c as i64, s.h as i64, s.w as i64];
    let mut off = [0i64; 3];
    let mut len = size;
    if let Some(r) = refs {
        off[2] = cr.woffset as i64;
        len[2] = r.w as i64;
        if d >= 2 {
            off[1] = cr.hoffset as i64;
            len[1] = r.h as i64;
        }
        if d == 3 {
            off[0] = cr.coffset as i64;
            len[0] = if r.dims == 3 { r.c as i64 } else { size[0] };
        }
    } else if !cr.starts.is_empty() && !cr.ends.is_empty() {
        let n = if cr.axes.is_empty() { d as usize } else { cr.axes.len() };
        if cr.starts.len() < n || cr.ends.len() < n {
            bail!(Code::ModelInvalid, "layer {lname}: crop has fewer starts/ends than axes");
        }
        for i in 0..n {
            let ax = if cr.axes.is_empty() { i as i32 } else { cr.axes[i] };
            let ax = if ax < 0 { ax + d } else { ax };
            if ax < 0 || ax >= d {
                bail!(Code::ModelInvalid, "layer {lname}: crop axis out of range");
            }
            let pos = (3 - d + ax) as usize;
            let n = size[pos];
            let mut st = cr.starts[i] as i64;
            let mut en = cr.ends[i] as i64;
            if st == -233 {
                st = 0;
            }
            if en == -233 {
                en = n;
            }
            let o = if st >= 0 { st } else { n + st };
            off[pos] = o;
            len[pos] = n.min(if en > 0 { en } else { n + en }) - o;
        }
    } else {
        let o = [cr.coffset as i64, cr.hoffset as i64, cr.woffset as i64];
        let o2 = [cr.coffset2 as i64, cr.hoffset2 as i64, cr.woffset2 as i64];
        let want = [cr.outc as i64, cr.outh as i64, cr.outw as i64];
        for pos in (3 - d as usize)..3 {
            off[pos] = o[pos];
            len[pos] = size[pos] - o[pos] - o2[pos];
            if want[pos] != -233 && want[pos] > 0 {
                len[pos] = len[pos].min(want[pos]);
            }
        }
    }
    for i in 0..3 {
        if off[i] < 0 || len[i] <= 0 || off[i] + len[i] > size[i] {
            bail!(Code::ModelInvalid, "layer {lname}: crop outside the input {:?}", s);
        }
    }
    let os = Shape { dims: s.dims, c: len[0] as usize, h: len[1] as usize, w: len[2] as usize };
    Ok((os, [off[0] as usize, off[1] as usize, off[2] as usize]))
}

/// Record a Concat layer along `axis`: along channels each input is one contiguous run of the
/// output (a buffer copy where 4-byte aligned), otherwise a box copy per input.
pub(crate) fn record_concat(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, axis: i32) -> Result<()> {
    let (ins, lname) = (io.ins, io.name);
    let es = rec.es;
    let s0 = ins[0];
    let d = s0.dims as i32;
    let ax = if axis < 0 { axis + d } else { axis };
    if ax < 0 || ax >= d {
        bail!(Code::ModelInvalid, "layer {lname}: concat axis {axis} of a {d}-D blob");
    }
    // Position in (c, h, w).
    let pos = (3 - d + ax) as usize;
    let dim = |s: &Shape| [s.c, s.h, s.w][pos];
    let mut os = s0;
    let mut total = 0;
    for s in ins {
        let mut a = [s.c, s.h, s.w];
        let mut b = [s0.c, s0.h, s0.w];
        a[pos] = 0;
        b[pos] = 0;
        if s.dims != s0.dims || a != b {
            bail!(Code::ModelInvalid, "layer {lname}: concat of mismatched blobs");
        }
        total += dim(s);
    }
    match pos {
        0 => os.c = total,
        1 => os.h = total,
        _ => os.w = total,
    }
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let pipe = pipeline(ctx, rec, "copy3", copy3)?;
    let dst_strides = [os.h * os.w, os.w, 1];
    let mut ofs = 0;
    for (i, s) in ins.iter().enumerate() {
        let x = rec.buf_of(io.bottoms[i]);
        let (dst_ofs, bytes) = ((ofs * dst_strides[pos]) as u64 * es, s.len() as u64 * es);
        if pos == 0 && dst_ofs % 4 == 0 && bytes % 4 == 0 {
            // Along channels each input is one contiguous run of the output.
            rec.copy(x, 0, out.clone(), dst_ofs, bytes);
        } else {
            let p = CopyParams::new(*s, 0, [s.h * s.w, s.w, 1], ofs * dst_strides[pos], dst_strides);
            ew(rec, pipe.clone(), vec![x, out.clone()], &p.words(), s.len())?;
        }
        ofs += dim(s);
    }
    Ok(())
}

/// Record a Crop layer (input 1, where given, is the reference blob).
pub(crate) fn record_crop(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, cr: &Crop) -> Result<()> {
    let ins = io.ins;
    let refs = if ins.len() > 1 { Some(ins[1]) } else { None };
    let (os, off) = crop_region(cr, ins[0], refs, io.name)?;
    let s = ins[0];
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let src_ofs = (off[0] * s.h + off[1]) * s.w + off[2];
    let p = CopyParams::new(os, src_ofs, [s.h * s.w, s.w, 1], 0, [os.h * os.w, os.w, 1]);
    let pipe = pipeline(ctx, rec, "copy3", copy3)?;
    ew(rec, pipe, vec![x, out], &p.words(), os.len())
}

/// Record a Permute layer (ncnn's `order_type`).
pub(crate) fn record_permute(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, order_type: i32) -> Result<()> {
    let s = io.ins[0];
    let (hw, w1) = (s.h * s.w, 1usize);
    let (os, src) = match (s.dims, order_type) {
        (1, _) | (_, 0) => (s, [hw, s.w, w1]),
        (2, 1) => (Shape { dims: 2, c: 1, h: s.w, w: s.h }, [0, w1, s.w]),
        (3, 1) => (Shape::d3(s.c, s.w, s.h), [hw, w1, s.w]),
        (3, 2) => (Shape::d3(s.h, s.c, s.w), [s.w, hw, w1]),
        (3, 3) => (Shape::d3(s.h, s.w, s.c), [s.w, w1, hw]),
        (3, 4) => (Shape::d3(s.w, s.c, s.h), [w1, hw, s.w]),
        (3, 5) => (Shape::d3(s.w, s.h, s.c), [w1, s.w, hw]),
        _ => bail!(Code::ModelInvalid, "layer {}: Permute order {order_type} of a {}-D blob", io.name, s.dims),
    };
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let p = CopyParams::new(os, 0, src, 0, [os.h * os.w, os.w, 1]);
    let pipe = pipeline(ctx, rec, "copy3", copy3)?;
    ew(rec, pipe, vec![x, out], &p.words(), os.len())
}
