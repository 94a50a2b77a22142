//! Arithmetic cost of a network for a given input size: shapes are propagated through the graph
//! and every (de)convolution counts 2 FLOP per multiply-accumulate
//! (out_pixels * macs_per_output_pixel; input pixels for deconvolutions, which scatter).
//! Other layers are not counted (they are a rounding error next to the convolutions).

use lucent_core::ncnn::{Net, Op};

/// (c, h, w) per blob; None where unknown.
type Shape = (usize, usize, usize);

/// Total convolution FLOPs of one run of `net` on a (3, h, w) input.
pub fn conv_flops(net: &Net, w: usize, h: usize) -> f64 {
    propagate(net, w, h).1
}

/// Shape (c, h, w) of blob `blob` for a (3, h, w) input, when it can be inferred.
pub fn blob_shape(net: &Net, w: usize, h: usize, blob: usize) -> Option<(usize, usize, usize)> {
    propagate(net, w, h).0.get(blob).copied().flatten()
}

fn propagate(net: &Net, w: usize, h: usize) -> (Vec<Option<Shape>>, f64) {
    let mut shapes: Vec<Option<Shape>> = vec![None; net.blob_names.len()];
    let mut flops = 0f64;
    for layer in &net.layers {
        let ins: Vec<Option<Shape>> = layer.bottoms.iter().map(|&b| shapes[b]).collect();
        let first = ins.first().copied().flatten();
        let out: Option<Shape> = match &layer.op {
            Op::Input { c, .. } => Some(((*c).max(3) as usize, h, w)),
            Op::Conv(cv) => first.map(|(_, ih, iw)| {
                let kw = cv.dilation_w * (cv.kernel_w - 1) + 1;
                let kh = cv.dilation_h * (cv.kernel_h - 1) + 1;
                let (pl, pr, pt, pb) = cv.pad.resolve(iw, ih, kw, kh, cv.stride_w, cv.stride_h);
                let ow = (iw + pl + pr).saturating_sub(kw) / cv.stride_w + 1;
                let oh = (ih + pt + pb).saturating_sub(kh) / cv.stride_h + 1;
                flops += 2.0 * (ow * oh) as f64 * cv.macs_per_output_pixel() as f64;
                (cv.num_output, oh, ow)
            }),
            Op::Deconv(cv) => first.map(|(_, ih, iw)| {
                let kw = cv.dilation_w * (cv.kernel_w - 1) + 1;
                let kh = cv.dilation_h * (cv.kernel_h - 1) + 1;
                flops += 2.0 * (iw * ih) as f64 * cv.macs_per_output_pixel() as f64;
                let (pl, pr, pt, pb) = cv.pad.resolve(iw, ih, kw, kh, 1, 1);
                let ow = if cv.output_w > 0 { cv.output_w } else { ((iw - 1) * cv.stride_w + kw + cv.output_pad_right).saturating_sub(pl + pr) };
                let oh = if cv.output_h > 0 { cv.output_h } else { ((ih - 1) * cv.stride_h + kh + cv.output_pad_bottom).saturating_sub(pt + pb) };
                (cv.num_output, oh, ow)
            }),
            Op::PixelShuffle { factor, .. } => first.map(|(c, ih, iw)| (c / (factor * factor).max(1), ih * factor, iw * factor)),
            Op::Interp(ip) => first.map(|(c, ih, iw)| {
                let ow = if ip.output_w > 0 { ip.output_w } else { (iw as f32 * ip.width_scale) as usize };
                let oh = if ip.output_h > 0 { ip.output_h } else { (ih as f32 * ip.height_scale) as usize };
                (c, oh, ow)
            }),
            Op::Concat { axis } if *axis == 0 => {
                if ins.iter().all(|s| s.is_some()) {
                    let (_, ih, iw) = first.unwrap_or((0, 0, 0));
                    Some((ins.iter().map(|s| s.map(|x| x.0).unwrap_or(0)).sum(), ih, iw))
                } else {
                    None
                }
            }
            _ => first,
        };
        for &t in &layer.tops {
            shapes[t] = out;
        }
    }
    (shapes, flops)
}
