//! The convolution-like kernels with one output per thread and ncnn's weight layout
//! ([out][in/group][kh][kw]): direct convolution (depthwise and other layers the GEMMs do not
//! suit), transposed convolution as a gather, and inner product; all with the convolutions'
//! fused epilogue (`conv.rs`).

use super::conv::{conv_common, ConvCall, ConvParams, ConvW, Epilogue};
use super::{act_code, ew, ew_main, header, params, pipeline, Io, Words};
use crate::rec::Rec;
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::{Conv, Padding};

params! {
    /// Direct convolution and deconvolution.
    pub(crate) struct DirectParams {
        /// In `lead`: the number of outputs. Deconvolution: `pad_top` / `pad_left` are the top and
        /// left cut of the full output, `out_h` / `out_w` the cut output's size.
        pub conv: ConvParams,
        /// Input channels per group.
        pub ipg: u32,
    }
}

params! {
    /// Inner product: the convolutions' epilogue at the same place, their geometry unused.
    pub(crate) struct InnerParams {
        /// Outputs (threads).
        pub n: u32,
        /// Inputs per output.
        pub inputs: u32,
        pub unused2: u32,
        /// Outputs again (where AUX's PReLU slopes would start).
        pub out_c: u32,
        pub unused4: [u32; 11],
        pub epi: Epilogue,
    }
}

/// Direct convolution, one output per thread ([`DirectParams`]).
pub fn conv_direct(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(&conv_common());
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let kw = P[7]; let sh = P[8]; let sw = P[9]; let dh = P[10]; let dw = P[11];
    let pt = i32(P[12]); let pl = i32(P[13]); let padv = pf(14u);
    let mg = P[21]; let ipg = P[22];
    let npix = out_h * out_w;
    let oc = i / npix;
    let p = i - oc * npix;
    let oy = p / out_w;
    let ox = p - oy * out_w;
    let g = oc / mg;
    var s = 0.0;
    for (var ic = 0u; ic < ipg; ic++) {
        let xb = (g * ipg + ic) * in_h * in_w;
        let wb = ((oc * ipg + ic) * kh) * kw;
        for (var ky = 0u; ky < kh; ky++) {
            let iy = i32(oy * sh + ky * dh) - pt;
            for (var kx = 0u; kx < kw; kx++) {
                let ix = i32(ox * sw + kx * dw) - pl;
                var v = padv;
                if (iy >= 0 && iy < i32(in_h) && ix >= 0 && ix < i32(in_w)) {
                    v = f32(X[xb + u32(iy) * in_w + u32(ix)]);
                }
                s = fma(v, f32(W[wb + ky * kw + kx]), s);
            }
        }
    }
    Y[i] = T(epi(s, oc, i));
}
"#,
    );
    s
}

/// Transposed convolution (gather form, [`DirectParams`]).
pub fn deconv(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(&conv_common());
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let kw = P[7]; let sh = P[8]; let sw = P[9]; let dh = P[10]; let dw = P[11];
    let ct = P[12]; let cl = P[13];
    let mg = P[21]; let ipg = P[22];
    let npix = out_h * out_w;
    let oc = i / npix;
    let p = i - oc * npix;
    let fy = i32(p / out_w + ct);
    let fx = i32(p % out_w + cl);
    let g = oc / mg;
    var s = 0.0;
    for (var ky = 0u; ky < kh; ky++) {
        let ty = fy - i32(ky * dh);
        if (ty < 0 || (ty % i32(sh)) != 0) { continue; }
        let iy = u32(ty) / sh;
        if (iy >= in_h) { continue; }
        for (var kx = 0u; kx < kw; kx++) {
            let tx = fx - i32(kx * dw);
            if (tx < 0 || (tx % i32(sw)) != 0) { continue; }
            let ix = u32(tx) / sw;
            if (ix >= in_w) { continue; }
            for (var ic = 0u; ic < ipg; ic++) {
                let xv = f32(X[((g * ipg + ic) * in_h + iy) * in_w + ix]);
                s = fma(xv, f32(W[((oc * ipg + ic) * kh + ky) * kw + kx]), s);
            }
        }
    }
    Y[i] = T(epi(s, oc, i));
}
"#,
    );
    s
}

/// Inner product ([`InnerParams`]), one output per thread.
pub fn inner(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(&conv_common());
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let n = P[1];
    var s = 0.0;
    for (var k = 0u; k < n; k++) {
        s = fma(f32(X[k]), f32(W[i * n + k]), s);
    }
    Y[i] = T(epi(s, i, i));
}
"#,
    );
    s
}

/// Output shape of a deconvolution and the (top, left) cut applied to the full output.
pub(crate) fn deconv_shape(c: &Conv, s: Shape) -> (Shape, usize, usize) {
    let kew = c.dilation_w * (c.kernel_w - 1) + 1;
    let keh = c.dilation_h * (c.kernel_h - 1) + 1;
    let fw = (s.w - 1) * c.stride_w + kew + c.output_pad_right;
    let fh = (s.h - 1) * c.stride_h + keh + c.output_pad_bottom;
    match c.pad {
        Padding::Explicit { left, right, top, bottom } if left + right + top + bottom > 0 => {
            (Shape::d3(c.num_output, fh.saturating_sub(top + bottom), fw.saturating_sub(left + right)), top, left)
        }
        Padding::SameUpper | Padding::SameLower if c.output_w > 0 && c.output_h > 0 => {
            let wc = fw.saturating_sub(c.output_w);
            let hc = fh.saturating_sub(c.output_h);
            let (t, l) = if c.pad == Padding::SameUpper { (hc / 2, wc / 2) } else { (hc - hc / 2, wc - wc / 2) };
            (Shape::d3(c.num_output, fh - hc, fw - wc), t, l)
        }
        _ => (Shape::d3(c.num_output, fh, fw), 0, 0),
    }
}

/// Record `call` on the direct kernel.
pub(crate) fn record_conv(ctx: &mut DevCtx, rec: &mut Rec, call: ConvCall) -> Result<()> {
    let n = call.output.len();
    let p = DirectParams { conv: ConvParams { lead: n as u32, ..call.params }, ipg: call.c.in_per_group() as u32 };
    let pipe = pipeline(ctx, rec, "conv_direct", conv_direct)?;
    ew(rec, pipe, call.bufs, &p.words(), n)
}

/// Record a deconvolution step.
pub(crate) fn record_deconv(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, c: &Conv, cw: &ConvW) -> Result<()> {
    let (os, cut_t, cut_l) = deconv_shape(c, io.ins[0]);
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let (act, act_a, act_b) = act_code(cw.act);
    let p = DirectParams {
        conv: ConvParams {
            lead: os.len() as u32,
            in_h: io.ins[0].h as u32,
            in_w: io.ins[0].w as u32,
            out_c: c.num_output as u32,
            out_h: os.h as u32,
            out_w: os.w as u32,
            kh: c.kernel_h as u32,
            kw: c.kernel_w as u32,
            sh: c.stride_h as u32,
            sw: c.stride_w as u32,
            dh: c.dilation_h as u32,
            dw: c.dilation_w as u32,
            pad_top: cut_t as u32,
            pad_left: cut_l as u32,
            pad_value: 0.0,
            epi: Epilogue { act, act_a, act_b, ..Default::default() },
            mg: c.out_per_group() as u32,
        },
        ipg: c.in_per_group() as u32,
    };
    let pipe = pipeline(ctx, rec, "deconv", deconv)?;
    ew(rec, pipe, vec![x.clone(), cw.w.clone(), cw.aux.clone(), x, out], &p.words(), os.len())
}

/// Record an inner product of `num_input` inputs to `num_output` outputs.
pub(crate) fn record_inner(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, (num_output, num_input): (usize, usize), cw: &ConvW) -> Result<()> {
    if io.ins[0].len() != num_input {
        bail!(Code::ModelInvalid, "layer {}: inner product wants {num_input} inputs, got {}", io.name, io.ins[0].len());
    }
    let os = Shape { dims: 1, c: 1, h: 1, w: num_output };
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], os)?;
    let (act, act_a, act_b) = act_code(cw.act);
    let p = InnerParams {
        n: num_output as u32,
        inputs: num_input as u32,
        out_c: num_output as u32,
        epi: Epilogue { act, act_a, act_b, ..Default::default() },
        ..Default::default()
    };
    let pipe = pipeline(ctx, rec, "inner", inner)?;
    ew(rec, pipe, vec![x.clone(), cw.w.clone(), cw.aux.clone(), x, out], &p.words(), os.len())
}
