//! The transformer ops of SwinIR / DAT: per-pixel LayerNorm, reflect padding to a multiple,
//! shifted-window attention and transposed channel attention (GELU is a case of the unary kernel,
//! `eltwise.rs`). Semantics are the reference executor's (`lucent_core::reference::attention`);
//! every kernel computes in f32 whatever the storage precision.
//!
//! - `layer_norm`: one thread per pixel, mean and biased variance over its channels (two passes).
//! - `pad_multiple`: one thread per output element, bottom/right reflection without edge repeat.
//! - `window_attention`: one thread per (head, query pixel) of the padded, shifted frame; the
//!   thread walks the keys of its window once with an online softmax (running max and sum, the
//!   accumulator rescaled when the max grows), so no score row is stored. The kernel is generated
//!   per head width `D` (q and the accumulator live in registers); heads wider than
//!   [`MAX_HEAD`] channels are refused with `model_invalid`. [`head_kernel`] is that kernel's
//!   frame, shared with HAT's overlapping cross-attention (`overlap.rs`).
//! - channel attention, three dispatches over an f32 scratch `G`: `ca_gram` (one workgroup per
//!   q·kᵀ entry of each head and per squared norm of a q or k channel, a tree reduction over the
//!   pixels), `ca_softmax` (one thread per row: normalise by the norms, scale by the head's
//!   temperature, softmax in place), `ca_apply` (one thread per output element: A·v).

use super::{ew, ew_main, header, params, pipeline, Io, Words};
use crate::rec::{fold, Rec};
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::model::WindowAttention;

/// Widest attention head (channels per head) the window kernel keeps in registers.
pub const MAX_HEAD: usize = 64;

/// Threads per workgroup of the channel-attention reductions.
const RED: u32 = 256;

params! {
    /// LayerNorm: `pixels` pixels of `c` channels, `AUX` = weights then biases.
    pub(crate) struct LayerNormParams {
        pub pixels: u32,
        pub c: u32,
        pub eps: f32,
    }
}

params! {
    /// Reflect padding of a (c, h, w) blob to (c, oh, ow); `n` output elements.
    pub(crate) struct PadParams {
        pub n: u32,
        pub h: u32,
        pub w: u32,
        pub oh: u32,
        pub ow: u32,
    }
}

params! {
    /// Window attention over a blob of 3·`c` channels, `h` x `w`, padded to `hp` x `wp`;
    /// `n` = heads·hp·wp threads.
    pub(crate) struct WindowParams {
        pub n: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
        pub hp: u32,
        pub wp: u32,
        pub win_h: u32,
        pub win_w: u32,
        pub shift_y: u32,
        pub shift_x: u32,
        pub scale: f32,
        pub masked: bool,
        pub mask_value: f32,
        /// AUX holds heads x N x N position biases.
        pub has_bias: bool,
    }
}

params! {
    /// Channel attention over 3·`c` channels of `hw` pixels, `heads` heads of `d` channels;
    /// `n`: the dispatch's work items (workgroups of `ca_gram`, rows of `ca_softmax`, output
    /// elements of `ca_apply`).
    pub(crate) struct ChannelParams {
        pub n: u32,
        pub c: u32,
        pub d: u32,
        pub hw: u32,
        pub heads: u32,
    }
}

/// [`LayerNormParams`]: X input, AUX f32 (weights, biases), Y output.
pub fn layer_norm(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> AUX: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let hw = P[0]; let c = P[1]; let eps = pf(2u);
    var mean = 0.0;
    for (var k = 0u; k < c; k++) { mean += f32(X[k * hw + i]); }
    mean = mean / f32(c);
    var vr = 0.0;
    for (var k = 0u; k < c; k++) { let d = f32(X[k * hw + i]) - mean; vr += d * d; }
    let r = inverseSqrt(vr / f32(c) + eps);
    for (var k = 0u; k < c; k++) { Y[k * hw + i] = T((f32(X[k * hw + i]) - mean) * r * AUX[k] + AUX[c + k]); }
}
"#,
    );
    s
}

/// [`PadParams`]: X input, Y output.
pub fn pad_multiple(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(super::X_TO_Y);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let h = P[1]; let w = P[2]; let oh = P[3]; let ow = P[4];
    let ch = i / (oh * ow);
    let r = i - ch * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
    let sy = select(y, 2u * (h - 1u) - y, y >= h);
    let sx = select(x, 2u * (w - 1u) - x, x >= w);
    Y[i] = X[(ch * h + sy) * w + sx];
}
"#,
    );
    s
}

/// A one-thread-per-(head, query pixel) attention kernel for heads of `d` channels: X input (q, k,
/// v), AUX f32 (position biases, or a dummy), Y output. `setup` defines `c`, `hw`, `hd`, `o` (the
/// query pixel), `scale`, `nk` (keys per query) and returns for threads with no query; `key`
/// defines, for key `j`, `inside` (the key is a pixel of the blob, else k = v = 0), `ko` (its
/// offset when inside) and `add` (position bias and mask). The rest is shared: q into registers,
/// one pass over the keys with an online softmax, the output. Window attention and HAT's
/// overlapping cross-attention (`overlap.rs`) are the two users.
pub(super) fn head_kernel(f16: bool, d: usize, functions: &str, setup: &str, key: &str) -> String {
    let mut s = header(f16);
    s.push_str(&format!("const D: u32 = {d}u;\n"));
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> AUX: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(functions);
    s.push_str(&ew_main());
    s.push_str(setup);
    s.push_str(
        r#"
    let qb = hd * D * hw;
    let kb = (c + hd * D) * hw;
    let vb = (2u * c + hd * D) * hw;
    var q: array<f32, D>;
    var acc: array<f32, D>;
    for (var e = 0u; e < D; e++) { q[e] = f32(X[qb + e * hw + o]) * scale; }
    var m = -3.0e38;
    var l = 0.0;
    for (var j = 0u; j < nk; j++) {
"#,
    );
    s.push_str(key);
    s.push_str(
        r#"
        var sc = 0.0;
        if (inside) {
            for (var e = 0u; e < D; e++) { sc += q[e] * f32(X[kb + e * hw + ko]); }
        }
        sc += add;
        let mn = max(m, sc);
        let corr = exp(m - mn);
        let pj = exp(sc - mn);
        l = l * corr + pj;
        if (inside) {
            for (var e = 0u; e < D; e++) { acc[e] = acc[e] * corr + pj * f32(X[vb + e * hw + ko]); }
        } else {
            for (var e = 0u; e < D; e++) { acc[e] = acc[e] * corr; }
        }
        m = mn;
    }
    let inv = 1.0 / l;
    for (var e = 0u; e < D; e++) { Y[qb + e * hw + o] = T(acc[e] * inv); }
}
"#,
    );
    s
}

/// [`WindowParams`] for heads of `d` channels (see [`head_kernel`]).
pub fn window_attention(f16: bool, d: usize) -> String {
    let region = r#"
// Swin's mask region along an axis of n: the last of the slices [0, n-win), [n-win, n-shift),
// [n-shift, n) holding i; with no shift the last slice is the whole axis.
fn region(i: u32, n: u32, win: u32, shift: u32) -> u32 {
    if (shift == 0u) { return 2u; }
    let a = n - min(win, n);
    let b = n - min(shift, n);
    var l = 0u;
    if (i >= a && i < b) { l = 1u; }
    if (i >= b) { l = 2u; }
    return l;
}
"#;
    let setup = r#"
    let c = P[1]; let h = P[2]; let w = P[3]; let hp = P[4]; let wp = P[5];
    let wh = P[6]; let ww = P[7]; let shy = P[8]; let shx = P[9];
    let scale = pf(10u); let masked = P[11] != 0u; let maskv = pf(12u); let biased = P[13] != 0u;
    let frame = hp * wp;
    let hd = i / frame;
    let r = i - hd * frame;
    let sy = r / wp;
    let sx = r - sy * wp;
    let py = (sy + shy) % hp;
    let px = (sx + shx) % wp;
    if (py >= h || px >= w) { return; }
    let hw = h * w;
    let o = py * w + px;
    let wy0 = sy / wh * wh;
    let wx0 = sx / ww * ww;
    let nk = wh * ww;
    let ti = (sy - wy0) * ww + (sx - wx0);
    let li = region(sy, hp, wh, shy) * 3u + region(sx, wp, ww, shx);
"#;
    let key = r#"
        let jy = j / ww;
        let ky = wy0 + jy;
        let kx = wx0 + (j - jy * ww);
        let qy = (ky + shy) % hp;
        let qx = (kx + shx) % wp;
        let inside = qy < h && qx < w;
        let ko = qy * w + qx;
        var add = 0.0;
        if (biased) { add += AUX[(hd * nk + ti) * nk + j]; }
        if (masked && region(ky, hp, wh, shy) * 3u + region(kx, wp, ww, shx) != li) { add += maskv; }
"#;
    head_kernel(f16, d, region, setup, key)
}

/// `ca_gram` ([`ChannelParams`], `n` workgroups): X input, G f32 scratch: G[r·d + j] = q_r·k_j
/// for the heads·d rows r, then the 2·c squared norms of the q and k channels.
pub fn ca_gram(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> G: array<f32>;
var<workgroup> red: array<f32, REDu>;

@compute @workgroup_size(REDu)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= P[0]) { return; }
    let c = P[1]; let d = P[2]; let hw = P[3];
    let pairs = P[4] * d * d;
    var a = g - pairs;
    var b = a;
    if (g < pairs) {
        let hd = g / (d * d);
        let ij = g - hd * d * d;
        let i = ij / d;
        a = hd * d + i;
        b = c + hd * d + (ij - i * d);
    }
    var sum = 0.0;
    for (var p = li; p < hw; p += REDu) { sum += f32(X[a * hw + p]) * f32(X[b * hw + p]); }
    red[li] = sum;
    workgroupBarrier();
    for (var st = REDu / 2u; st > 0u; st = st / 2u) {
        if (li < st) { red[li] += red[li + st]; }
        workgroupBarrier();
    }
    if (li == 0u) { G[g] = red[0]; }
}
"#,
    );
    s.replace("RED", &RED.to_string())
}

/// `ca_softmax` ([`ChannelParams`], one thread per row): G f32 scratch (in place), AUX f32
/// temperatures.
pub fn ca_softmax(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> AUX: array<f32>;
@group(0) @binding(2) var<storage, read_write> G: array<f32>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let c = P[1]; let d = P[2];
    let hd = i / d;
    let norms = P[4] * d * d;
    let qn = max(sqrt(G[norms + i]), 1e-12);
    let t = AUX[hd];
    let row = i * d;
    var m = -3.0e38;
    for (var j = 0u; j < d; j++) {
        let kn = max(sqrt(G[norms + c + hd * d + j]), 1e-12);
        let a = G[row + j] / (qn * kn) * t;
        G[row + j] = a;
        m = max(m, a);
    }
    var sum = 0.0;
    for (var j = 0u; j < d; j++) { let e = exp(G[row + j] - m); G[row + j] = e; sum += e; }
    for (var j = 0u; j < d; j++) { G[row + j] = G[row + j] / sum; }
}
"#,
    );
    s
}

/// `ca_apply` ([`ChannelParams`], one thread per output element): X input (its v channels),
/// G f32 (the attention rows), Y output.
pub fn ca_apply(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> G: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let c = P[1]; let d = P[2]; let hw = P[3];
    let ch = i / hw;
    let p = i - ch * hw;
    let hd = ch / d;
    let row = ch * d;
    let vb = (2u * c + hd * d) * hw + p;
    var acc = 0.0;
    for (var j = 0u; j < d; j++) { acc += G[row + j] * f32(X[vb + j * hw]); }
    Y[i] = T(acc);
}
"#,
    );
    s
}

/// [`head_kernel`] keeps a head's q and accumulator in registers: at most [`MAX_HEAD`] channels.
pub(super) fn check_head(io: &Io, d: usize) -> Result<()> {
    if d > MAX_HEAD {
        bail!(Code::ModelInvalid, "layer {}: attention heads of {d} channels (the GPU kernel takes up to {MAX_HEAD})", io.name);
    }
    Ok(())
}

pub(super) fn need_3d(io: &Io, what: &str) -> Result<Shape> {
    let s = io.ins[0];
    if s.dims != 3 || s.h == 0 || s.w == 0 {
        bail!(Code::InvalidArgument, "layer {}: {what} needs a non-empty 3-D blob", io.name);
    }
    Ok(s)
}

/// Record a LayerNorm layer; `aux` holds its weights then its biases.
pub(crate) fn record_layer_norm(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, channels: usize, eps: f32, aux: wgpu::Buffer) -> Result<()> {
    let s = need_3d(io, "LayerNorm")?;
    if s.c != channels {
        bail!(Code::InvalidArgument, "layer {}: LayerNorm of {channels} channels applied to {} channels", io.name, s.c);
    }
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], s)?;
    let p = LayerNormParams { pixels: s.plane() as u32, c: s.c as u32, eps };
    let pipe = pipeline(ctx, rec, "layer_norm", layer_norm)?;
    ew(rec, pipe, vec![x, aux, out], &p.words(), s.plane())
}

/// The output shape of PadToMultiple on `s` (checked as the reference does).
pub(crate) fn pad_shape(s: Shape, m: usize, lname: &str) -> Result<Shape> {
    if m == 0 {
        bail!(Code::ModelInvalid, "layer {lname}: PadToMultiple by 0");
    }
    let (oh, ow) = (s.h.div_ceil(m) * m, s.w.div_ceil(m) * m);
    if oh - s.h >= s.h || ow - s.w >= s.w {
        bail!(Code::InvalidArgument, "layer {lname}: reflect padding of {}x{} to a multiple of {m} is as large as the side it mirrors", s.h, s.w);
    }
    Ok(Shape::d3(s.c, oh, ow))
}

/// Record a PadToMultiple layer (an alias of its input when nothing is padded).
pub(crate) fn record_pad(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, m: usize) -> Result<()> {
    let s = need_3d(io, "PadToMultiple")?;
    let o = pad_shape(s, m, io.name)?;
    if o == s {
        rec.alias(io.tops[0], io.bottoms[0], s);
        return Ok(());
    }
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], o)?;
    let p = PadParams { n: o.len() as u32, h: s.h as u32, w: s.w as u32, oh: o.h as u32, ow: o.w as u32 };
    let pipe = pipeline(ctx, rec, "pad_multiple", pad_multiple)?;
    ew(rec, pipe, vec![x, out], &p.words(), o.len())
}

/// Record a WindowAttention layer; `aux`: its position biases (or the dummy buffer).
pub(crate) fn record_window(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, wa: &WindowAttention, aux: wgpu::Buffer) -> Result<()> {
    let s = need_3d(io, "WindowAttention")?;
    let (wh, ww, heads) = (wa.win_h, wa.win_w, wa.heads);
    if heads == 0 || wh == 0 || ww == 0 || wa.pad_multiple == 0 || !s.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "layer {}: WindowAttention: {heads} heads, window {wh}x{ww} do not fit {} channels", io.name, s.c);
    }
    let n = wh * ww;
    if !wa.bias.is_empty() && wa.bias.len() != heads * n * n {
        bail!(Code::ModelInvalid, "layer {}: WindowAttention: bias of {} values for {heads} heads of {n} tokens", io.name, wa.bias.len());
    }
    let c = s.c / 3;
    let d = c / heads;
    check_head(io, d)?;
    let m = wa.pad_multiple;
    let (hp, wp) = (s.h.div_ceil(m) * m, s.w.div_ceil(m) * m);
    if !hp.is_multiple_of(wh) || !wp.is_multiple_of(ww) || wa.shift_y >= hp || wa.shift_x >= wp {
        bail!(Code::ModelInvalid, "layer {}: WindowAttention: window {wh}x{ww}, shift {},{} do not tile {hp}x{wp}", io.name, wa.shift_y, wa.shift_x);
    }
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], Shape::d3(c, s.h, s.w))?;
    let threads = heads * hp * wp;
    let p = WindowParams {
        n: threads as u32,
        c: c as u32,
        h: s.h as u32,
        w: s.w as u32,
        hp: hp as u32,
        wp: wp as u32,
        win_h: wh as u32,
        win_w: ww as u32,
        shift_y: wa.shift_y as u32,
        shift_x: wa.shift_x as u32,
        scale: wa.scale,
        masked: wa.masked,
        mask_value: wa.mask_value,
        has_bias: !wa.bias.is_empty(),
    };
    let pipe = pipeline(ctx, rec, &format!("window_attention{d}"), |f16| window_attention(f16, d))?;
    ew(rec, pipe, vec![x, aux, out], &p.words(), threads)
}

/// Record a ChannelAttention layer; `temps`: its per-head temperatures (f32).
pub(crate) fn record_channel(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, heads: usize, n_temps: usize, temps: wgpu::Buffer) -> Result<()> {
    let s = need_3d(io, "ChannelAttention")?;
    if heads == 0 || n_temps != heads || !s.c.is_multiple_of(3 * heads) {
        bail!(Code::ModelInvalid, "layer {}: ChannelAttention: {heads} heads ({n_temps} temperatures) do not fit {} channels", io.name, s.c);
    }
    let c = s.c / 3;
    let d = c / heads;
    let hw = s.plane();
    let (pairs, rows) = (heads * d * d, heads * d);
    let groups = pairs + 2 * c;
    // f32 scratch of `groups` values, whatever the storage precision.
    let g = rec.alloc_temp(ctx, Shape::d3(1, 1, groups * 4 / rec.es as usize))?;
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], Shape::d3(c, s.h, s.w))?;
    let p = |n: usize| ChannelParams { n: n as u32, c: c as u32, d: d as u32, hw: hw as u32, heads: heads as u32 };
    let gram = pipeline(ctx, rec, "ca_gram", ca_gram)?;
    let wg = fold(groups, rec.maxdim)?;
    rec.cmd(gram, vec![x.clone(), g.clone()], &p(groups).words(), (wg.0, wg.1, 1));
    let soft = pipeline(ctx, rec, "ca_softmax", ca_softmax)?;
    ew(rec, soft, vec![temps, g.clone()], &p(rows).words(), rows)?;
    let apply = pipeline(ctx, rec, "ca_apply", ca_apply)?;
    ew(rec, apply, vec![x, g, out], &p(c * hw).words(), c * hw)
}
