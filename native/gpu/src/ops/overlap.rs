//! HAT's overlapping cross-attention (`Op::OverlapAttention`): queries from non-overlapping
//! `window` squares, keys and values from the `overlap` square centred on each (zero outside the
//! blob), per head `softmax(q·kᵀ·scale + bias)·v`. Semantics are the reference executor's
//! (`lucent_core::reference::overlap_attention`).
//!
//! One thread per (head, pixel): the thread walks the keys of its window's overlap square once with
//! an online softmax (running max and sum, the accumulator rescaled when the max grows), in f32
//! whatever the storage precision; q and the accumulator live in registers, so the kernel is
//! generated per head width `D` (up to `super::attention::MAX_HEAD` channels).

use super::attention::{check_head, head_kernel, need_3d};
use super::{ew, params, pipeline, Io, Words};
use crate::rec::Rec;
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::model::OverlapAttention;

params! {
    /// Overlapping cross-attention over a blob of 3·`c` channels, `h` x `w`; `n` = heads·h·w
    /// threads.
    pub(crate) struct OverlapParams {
        pub n: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
        pub window: u32,
        pub overlap: u32,
        pub scale: f32,
        /// AUX holds heads x Nq x Nk position biases.
        pub has_bias: bool,
    }
}

/// [`OverlapParams`] for heads of `d` channels (the frame: [`super::attention::head_kernel`]).
pub fn overlap_attention(f16: bool, d: usize) -> String {
    let setup = r#"
    let c = P[1]; let h = P[2]; let w = P[3]; let ws = P[4]; let ows = P[5];
    let scale = pf(6u); let biased = P[7] != 0u;
    let hw = h * w;
    let hd = i / hw;
    let o = i - hd * hw;
    let y = o / w;
    let x = o - y * w;
    let wy = y / ws;
    let wx = x / ws;
    let ti = (y - wy * ws) * ws + (x - wx * ws);
    let nq = ws * ws;
    let nk = ows * ows;
    let pad = i32((ows - ws) / 2u);
    let y0 = i32(wy * ws) - pad;
    let x0 = i32(wx * ws) - pad;
"#;
    let key = r#"
        let jy = j / ows;
        let ky = y0 + i32(jy);
        let kx = x0 + i32(j - jy * ows);
        let inside = ky >= 0 && kx >= 0 && ky < i32(h) && kx < i32(w);
        let ko = u32(max(ky, 0)) * w + u32(max(kx, 0));
        var add = 0.0;
        if (biased) { add = AUX[(hd * nq + ti) * nk + j]; }
"#;
    head_kernel(f16, d, "", setup, key)
}

/// Record an OverlapAttention layer; `aux`: its position biases (or the dummy buffer).
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, p: &OverlapAttention, aux: wgpu::Buffer) -> Result<()> {
    let s = need_3d(io, "OverlapAttention")?;
    let (ws, ows, heads) = (p.window, p.overlap, p.heads);
    if heads == 0 || ws == 0 || ows < ws || !(ows - ws).is_multiple_of(2) || !s.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "layer {}: OverlapAttention: {heads} heads, window {ws}, overlap window {ows} do not fit {} channels", io.name, s.c);
    }
    if !p.bias.is_empty() && p.bias.len() != heads * ws * ws * ows * ows {
        bail!(Code::ModelInvalid, "layer {}: OverlapAttention: bias of {} values for {heads} heads of {} x {} tokens", io.name, p.bias.len(), ws * ws, ows * ows);
    }
    let c = s.c / 3;
    let d = c / heads;
    check_head(io, d)?;
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], Shape::d3(c, s.h, s.w))?;
    let threads = heads * s.h * s.w;
    let prm = OverlapParams {
        n: threads as u32,
        c: c as u32,
        h: s.h as u32,
        w: s.w as u32,
        window: ws as u32,
        overlap: ows as u32,
        scale: p.scale,
        has_bias: !p.bias.is_empty(),
    };
    let pipe = pipeline(ctx, rec, &format!("overlap_attention{d}"), |f16| overlap_attention(f16, d))?;
    ew(rec, pipe, vec![x, aux, out], &prm.words(), threads)
}
