//! The plain CPU reference's resampling and layout ops (part of [`super`], the ground truth): Interp,
//! Concat, Crop, Pooling, Permute, Reshape, Flatten, Softmax. Same conventions as the parent module.

use super::*;

/// Interp output size: fixed output size when given, else int(size * scale).
pub fn interp_out_size(p: &Interp, w: usize, h: usize) -> (usize, usize) {
    if p.output_w > 0 && p.output_h > 0 {
        (p.output_w, p.output_h)
    } else {
        ((w as f32 * p.width_scale) as usize, (h as f32 * p.height_scale) as usize)
    }
}

/// Source coordinates along one axis for linear/cubic interpolation: (floor index, fraction).
pub(crate) fn interp_src(dst: usize, in_len: usize, out_len: usize, align_corner: bool) -> (isize, f32) {
    let f = if align_corner {
        let scale = if out_len > 1 { (in_len as f64 - 1.0) / (out_len as f64 - 1.0) } else { 0.0 };
        (dst as f64 * scale) as f32
    } else {
        let scale = in_len as f64 / out_len as f64;
        ((dst as f64 + 0.5) * scale - 0.5) as f32
    };
    let i = f.floor();
    (i as isize, f - i)
}

/// Keys cubic weights with A = -0.75 for taps at offsets -1, 0, 1, 2 from the floor index.
pub fn cubic_weights(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let x0 = t + 1.0;
    let x1 = t;
    let x2 = 1.0 - t;
    let w0 = ((A * x0 - 5.0 * A) * x0 + 8.0 * A) * x0 - 4.0 * A;
    let w1 = ((A + 2.0) * x1 - (A + 3.0)) * x1 * x1 + 1.0;
    let w2 = ((A + 2.0) * x2 - (A + 3.0)) * x2 * x2 + 1.0;
    [w0, w1, w2, 1.0 - w0 - w1 - w2]
}

/// Interp on a 3-D blob. Nearest: src = min(floor(dst * (1/scale)), size-1), where 1/scale is
/// in/out when a fixed output size is given. Bilinear / bicubic: half-pixel centres
/// ((dst + 0.5) * in/out - 0.5) or, with align_corner, dst * (in-1)/(out-1); taps outside the
/// input are clamped to the edge (what ncnn's coefficient shuffling amounts to).
pub fn interp(p: &Interp, x: &Tensor) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 {
        bail!(Code::InvalidArgument, "Interp supports 3-D blobs, got {}", x.shape_string());
    }
    let (ow, oh) = interp_out_size(p, x.w, x.h);
    if ow == 0 || oh == 0 || x.w == 0 || x.h == 0 {
        bail!(Code::InvalidArgument, "Interp to an empty {ow}x{oh} output");
    }
    let mut out = Tensor::zeros(x.c, oh, ow);
    let clampi = |i: isize, n: usize| i.clamp(0, n as isize - 1) as usize;
    match p.resize_type {
        1 => {
            let hs = if p.output_h > 0 && p.output_w > 0 { x.h as f32 / p.output_h as f32 } else { 1.0 / p.height_scale };
            let ws = if p.output_h > 0 && p.output_w > 0 { x.w as f32 / p.output_w as f32 } else { 1.0 / p.width_scale };
            for c in 0..x.c {
                for y in 0..oh {
                    let sy = ((y as f32 * hs) as usize).min(x.h - 1);
                    for xx in 0..ow {
                        let sx = ((xx as f32 * ws) as usize).min(x.w - 1);
                        out.data[(c * oh + y) * ow + xx] = x.at(c, sy, sx);
                    }
                }
            }
        }
        2 => {
            for c in 0..x.c {
                for y in 0..oh {
                    let (sy, fy) = interp_src(y, x.h, oh, p.align_corner);
                    for xx in 0..ow {
                        let (sx, fx) = interp_src(xx, x.w, ow, p.align_corner);
                        let v = |yy: isize, xi: isize| x.at(c, clampi(yy, x.h), clampi(xi, x.w));
                        let top = v(sy, sx) * (1.0 - fx) + v(sy, sx + 1) * fx;
                        let bot = v(sy + 1, sx) * (1.0 - fx) + v(sy + 1, sx + 1) * fx;
                        out.data[(c * oh + y) * ow + xx] = top * (1.0 - fy) + bot * fy;
                    }
                }
            }
        }
        3 => {
            for c in 0..x.c {
                for y in 0..oh {
                    let (sy, fy) = interp_src(y, x.h, oh, p.align_corner);
                    let wy = cubic_weights(fy);
                    for xx in 0..ow {
                        let (sx, fx) = interp_src(xx, x.w, ow, p.align_corner);
                        let wx = cubic_weights(fx);
                        let mut s = 0.0;
                        for (j, wyj) in wy.iter().enumerate() {
                            let yy = clampi(sy - 1 + j as isize, x.h);
                            let mut row = 0.0;
                            for (i, wxi) in wx.iter().enumerate() {
                                row += x.at(c, yy, clampi(sx - 1 + i as isize, x.w)) * wxi;
                            }
                            s += row * wyj;
                        }
                        out.data[(c * oh + y) * ow + xx] = s;
                    }
                }
            }
        }
        t => bail!(Code::ModelInvalid, "Interp resize type {t} is not supported"),
    }
    Ok(out)
}

/// Concat along an ncnn axis (negative counts from the end). All other axes must match.
pub fn concat(axis: i32, xs: &[&Tensor]) -> Result<Tensor> {
    if xs.is_empty() {
        bail!(Code::ModelInvalid, "Concat without inputs");
    }
    let dims = xs[0].dims as usize;
    let ax = resolve_axis(axis, dims)?;
    let s0 = shape_of(xs[0]);
    let mut total = 0;
    for x in xs {
        check_tensor(x)?;
        let s = shape_of(x);
        if s.len() != dims || (0..dims).any(|i| i != ax && s[i] != s0[i]) {
            bail!(Code::InvalidArgument, "Concat inputs {} and {} do not fit on axis {axis}", xs[0].shape_string(), x.shape_string());
        }
        total += s[ax];
    }
    let mut shape = s0.clone();
    shape[ax] = total;
    let (outer, _, inner) = split_at_axis(&shape, ax);
    let mut data = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for x in xs {
            let n = shape_of(x)[ax] * inner;
            data.extend_from_slice(&x.data[o * n..(o + 1) * n]);
        }
    }
    tensor_of_shape(&shape, data)
}

fn crop_region(x: &Tensor, off: [usize; 3], size: [usize; 3]) -> Result<Tensor> {
    // off/size in (c, h, w) order; for lower-rank blobs the unused leading entries are 0 / 1.
    let [c0, h0, w0] = off;
    let [cn, hn, wn] = size;
    if cn == 0 || hn == 0 || wn == 0 || c0 + cn > x.c || h0 + hn > x.h || w0 + wn > x.w {
        bail!(Code::InvalidArgument, "Crop region {:?}+{:?} does not fit {}", off, size, x.shape_string());
    }
    let mut data = Vec::with_capacity(cn * hn * wn);
    for c in c0..c0 + cn {
        for y in h0..h0 + hn {
            let base = (c * x.h + y) * x.w;
            data.extend_from_slice(&x.data[base + w0..base + w0 + wn]);
        }
    }
    Ok(Tensor { dims: x.dims, c: cn, h: hn, w: wn, data })
}

/// Crop: numpy-style starts/ends/axes (negative values count from the end; an end of 0 or -233
/// means "to the end", as in ncnn), else fixed offsets + sizes (-233 = remaining, and
/// woffset2/hoffset2/coffset2 trim the far side), or, with a second input, the reference blob's
/// size at the fixed offsets.
pub fn crop(p: &Crop, x: &Tensor, reference: Option<&Tensor>) -> Result<Tensor> {
    check_tensor(x)?;
    let dims = x.dims as usize;
    let (w, h, c) = (x.w as i64, x.h as i64, x.c as i64);
    // (offset, size) per (c, h, w)
    let mut r = [(0i64, c), (0i64, h), (0i64, w)];
    if let Some(rf) = reference {
        r[2] = (p.woffset as i64, rf.w as i64);
        if dims >= 2 {
            r[1] = (p.hoffset as i64, rf.h as i64);
        }
        if dims == 3 {
            r[0] = (p.coffset as i64, if rf.dims == 3 { rf.c as i64 } else { c });
        }
    } else if !p.starts.is_empty() && !p.ends.is_empty() {
        let n = if p.axes.is_empty() { dims } else { p.axes.len() };
        if p.starts.len() < n || p.ends.len() < n {
            bail!(Code::ModelInvalid, "Crop has fewer starts/ends than axes");
        }
        for i in 0..n {
            let axis = if p.axes.is_empty() { i } else { resolve_axis(p.axes[i], dims)? };
            // map the ncnn axis of a `dims`-D blob onto the (c, h, w) slots
            let slot = axis + (3 - dims);
            let len = [c, h, w][slot];
            let mut start = p.starts[i] as i64;
            let mut end = p.ends[i] as i64;
            if start == -233 {
                start = 0;
            }
            if end == -233 {
                end = len;
            }
            let off = if start >= 0 { start } else { len + start };
            let size = len.min(if end > 0 { end } else { len + end }) - off;
            r[slot] = (off, size);
        }
    } else {
        if p.hoffset == -233 || p.coffset == -233 {
            bail!(Code::ModelInvalid, "Crop with axis-shifted offsets (-233) is not supported");
        }
        let side = |off: i32, off2: i32, out: i32, len: i64| -> (i64, i64) {
            let mut size = len - off as i64 - off2 as i64;
            if out != -233 {
                size = size.min(out as i64);
            }
            (off as i64, size)
        };
        r[2] = side(p.woffset, p.woffset2, p.outw, w);
        if dims >= 2 {
            r[1] = side(p.hoffset, p.hoffset2, p.outh, h);
        }
        if dims == 3 {
            r[0] = side(p.coffset, p.coffset2, p.outc, c);
        }
    }
    for &(o, s) in &r {
        if o < 0 || s <= 0 {
            bail!(Code::InvalidArgument, "Crop of {} resolves to an empty or negative region", x.shape_string());
        }
    }
    crop_region(x, [r[0].0 as usize, r[1].0 as usize, r[2].0 as usize], [r[0].1 as usize, r[1].1 as usize, r[2].1 as usize])
}

/// Pooling (max / average; global -> 1-D blob of channel values; adaptive -> out_w x out_h bins).
pub fn pooling(p: &Pooling, x: &Tensor) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 || x.w == 0 || x.h == 0 {
        bail!(Code::InvalidArgument, "Pooling needs a 3-D blob, got {}", x.shape_string());
    }
    let (c, h, w) = (x.c, x.h, x.w);
    if p.global {
        let mut out = Vec::with_capacity(c);
        for ch in 0..c {
            let s = x.channel(ch);
            out.push(match p.kind {
                PoolKind::Max => s.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                PoolKind::Avg => s.iter().sum::<f32>() / s.len() as f32,
            });
        }
        return Ok(Tensor::vector(out));
    }
    if p.adaptive {
        let (ow, oh) = (if p.out_w == 0 { w } else { p.out_w }, if p.out_h == 0 { h } else { p.out_h });
        let mut out = Tensor::zeros(c, oh, ow);
        for ch in 0..c {
            for oy in 0..oh {
                let (y0, y1) = (oy * h / oh, ((oy + 1) * h).div_ceil(oh));
                for ox in 0..ow {
                    let (x0, x1) = (ox * w / ow, ((ox + 1) * w).div_ceil(ow));
                    let mut m = f32::NEG_INFINITY;
                    let mut s = 0.0;
                    for yy in y0..y1 {
                        for xx in x0..x1 {
                            let v = x.at(ch, yy, xx);
                            m = m.max(v);
                            s += v;
                        }
                    }
                    out.data[(ch * oh + oy) * ow + ox] = match p.kind {
                        PoolKind::Max => m,
                        PoolKind::Avg => s / ((y1 - y0) * (x1 - x0)) as f32,
                    };
                }
            }
        }
        return Ok(out);
    }
    if p.kernel_w == 0 || p.kernel_h == 0 || p.stride_w == 0 || p.stride_h == 0 {
        bail!(Code::ModelInvalid, "Pooling with zero kernel or stride");
    }
    // Bordered input extents: (top, bottom, left, right) pads.
    let (kw, kh, sw, sh) = (p.kernel_w, p.kernel_h, p.stride_w, p.stride_h);
    let (pt, pb, pl, pr) = match p.pad_mode {
        0 => {
            let tail = |n: usize, a: usize, b: usize, k: usize, s: usize| -> Result<usize> {
                if n + a + b < k {
                    bail!(Code::InvalidArgument, "Pooling input smaller than its kernel");
                }
                let t = (n + a + b - k) % s;
                Ok(if t != 0 { s - t } else { 0 })
            };
            let ht = tail(h, p.pad_top, p.pad_bottom, kh, sh)?;
            let wt = tail(w, p.pad_left, p.pad_right, kw, sw)?;
            (p.pad_top, p.pad_bottom + ht, p.pad_left, p.pad_right + wt)
        }
        1 => (p.pad_top, p.pad_bottom, p.pad_left, p.pad_right),
        2 | 3 => {
            let wpad = (kw + (w - 1) / sw * sw).saturating_sub(w);
            let hpad = (kh + (h - 1) / sh * sh).saturating_sub(h);
            if p.pad_mode == 2 {
                (hpad / 2, hpad - hpad / 2, wpad / 2, wpad - wpad / 2)
            } else {
                (hpad - hpad / 2, hpad / 2, wpad - wpad / 2, wpad / 2)
            }
        }
        m => bail!(Code::ModelInvalid, "Pooling pad mode {m} is not supported"),
    };
    let (bh, bw) = (h + pt + pb, w + pl + pr);
    if bh < kh || bw < kw {
        bail!(Code::InvalidArgument, "Pooling input {w}x{h} smaller than the {kw}x{kh} kernel");
    }
    let (oh, ow) = ((bh - kh) / sh + 1, (bw - kw) / sw + 1);
    // In ncnn the "exclude pad" count uses the layer's pad parameters (plus the full-mode tail),
    // measured on the bordered input.
    let (tail_h, tail_w) = if p.pad_mode == 0 { (pb - p.pad_bottom, pr - p.pad_right) } else { (0, 0) };
    let mut out = Tensor::zeros(c, oh, ow);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut m = f32::NEG_INFINITY;
                let mut sum = 0.0f32;
                let mut area = 0usize;
                for ky in 0..kh {
                    let by = oy * sh + ky;
                    for kx in 0..kw {
                        let bx = ox * sw + kx;
                        let inside = by >= pt && by < pt + h && bx >= pl && bx < pl + w;
                        let v = if inside { x.at(ch, by - pt, bx - pl) } else if p.kind == PoolKind::Max { f32::MIN } else { 0.0 };
                        m = m.max(v);
                        let counted = by >= p.pad_top
                            && by + p.pad_bottom + tail_h < bh
                            && bx >= p.pad_left
                            && bx + p.pad_right + tail_w < bw;
                        if p.count_include_pad || counted {
                            sum += v;
                            area += 1;
                        }
                    }
                }
                out.data[(ch * oh + oy) * ow + ox] = match p.kind {
                    PoolKind::Max => m,
                    PoolKind::Avg if p.count_include_pad => sum / (kw * kh) as f32,
                    PoolKind::Avg => if area > 0 { sum / area as f32 } else { 0.0 },
                };
            }
        }
    }
    Ok(out)
}

/// Permute: 2-D order 0 (keep) / 1 (transpose); 3-D order types 0..5 give the output (w, h, c)
/// axes as input axes: 0 (w,h,c) 1 (h,w,c) 2 (w,c,h) 3 (c,w,h) 4 (h,c,w) 5 (c,h,w).
pub fn permute(x: &Tensor, order_type: i32) -> Result<Tensor> {
    check_tensor(x)?;
    match (x.dims, order_type) {
        (1, _) | (_, 0) => Ok(x.clone()),
        (2, 1) => {
            let mut data = Vec::with_capacity(x.len());
            for i in 0..x.w {
                for j in 0..x.h {
                    data.push(x.data[j * x.w + i]);
                }
            }
            Ok(Tensor::matrix(x.w, x.h, data))
        }
        (3, 1..=5) => {
            // input axis index per output axis: 0 = w, 1 = h, 2 = c
            let order: [usize; 3] = match order_type {
                1 => [1, 0, 2],
                2 => [0, 2, 1],
                3 => [2, 0, 1],
                4 => [1, 2, 0],
                _ => [2, 1, 0],
            };
            let in_ext = [x.w, x.h, x.c];
            let (ow, oh, oc) = (in_ext[order[0]], in_ext[order[1]], in_ext[order[2]]);
            let mut out = Tensor::zeros(oc, oh, ow);
            for q in 0..oc {
                for i in 0..oh {
                    for j in 0..ow {
                        let mut src = [0usize; 3];
                        src[order[0]] = j;
                        src[order[1]] = i;
                        src[order[2]] = q;
                        out.data[(q * oh + i) * ow + j] = x.at(src[2], src[1], src[0]);
                    }
                }
            }
            Ok(out)
        }
        _ => bail!(Code::ModelInvalid, "Permute order type {order_type} is not supported for {}", x.shape_string()),
    }
}

/// Reshape with ncnn semantics: -233 = axis absent (sets the rank), 0 = keep the input's size on
/// that axis, -1 = infer from the total.
pub fn reshape(x: &Tensor, w: i32, h: i32, c: i32) -> Result<Tensor> {
    check_tensor(x)?;
    let total = x.len() as i64;
    let rank = if c != -233 { 3 } else if h != -233 { 2 } else { 1 };
    let keep = |v: i32, from: usize| -> i64 { if v == 0 { from as i64 } else { v as i64 } };
    let mut dims: Vec<i64> = match rank {
        1 => vec![keep(w, x.w)],
        2 => vec![keep(h, x.h), keep(w, x.w)],
        _ => vec![keep(c, x.c), keep(h, x.h), keep(w, x.w)],
    };
    let unknown: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == -1).collect();
    if unknown.len() > 1 || dims.iter().any(|&d| d < -1 || d == 0) {
        bail!(Code::InvalidArgument, "Reshape to {w},{h},{c} is ambiguous or invalid");
    }
    if let Some(&u) = unknown.first() {
        let known: i64 = dims.iter().filter(|&&d| d != -1).product();
        if known == 0 || total % known != 0 {
            bail!(Code::InvalidArgument, "Reshape of {} values to {w},{h},{c}", total);
        }
        dims[u] = total / known;
    }
    if dims.iter().product::<i64>() != total {
        bail!(Code::InvalidArgument, "Reshape of {} ({} values) to {:?}", x.shape_string(), total, dims);
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    tensor_of_shape(&shape, x.data.clone())
}

pub fn flatten(x: &Tensor) -> Tensor {
    Tensor::vector(x.data.clone())
}

/// Softmax along an ncnn axis.
pub fn softmax(x: &Tensor, axis: i32) -> Result<Tensor> {
    check_tensor(x)?;
    let shape = shape_of(x);
    let ax = resolve_axis(axis, shape.len())?;
    let (outer, n, inner) = split_at_axis(&shape, ax);
    let mut out = x.clone();
    for o in 0..outer {
        for i in 0..inner {
            let idx = |k: usize| (o * n + k) * inner + i;
            let m = (0..n).map(|k| x.data[idx(k)]).fold(f32::NEG_INFINITY, f32::max);
            let mut s = 0.0;
            for k in 0..n {
                let e = (x.data[idx(k)] - m).exp();
                out.data[idx(k)] = e;
                s += e;
            }
            for k in 0..n {
                out.data[idx(k)] /= s;
            }
        }
    }
    Ok(out)
}
