//! Real-ESRGAN Compact (SRVGGNetCompact): conv + PReLU, `num_conv` times conv + PReLU, a conv to
//! `out·scale²` channels, pixel shuffle, plus the nearest-upscaled input.

use super::Graph;
use crate::detect::{get, Compact};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net};
use lucent_core::{bail, Code, Result};

pub fn build(p: &Compact, sd: &StateDict) -> Result<Net> {
    if p.in_nc != p.out_nc {
        bail!(Code::ModelInvalid, "Compact with {} input and {} output channels cannot add its input back", p.in_nc, p.out_nc);
    }
    let (mut g, x) = Graph::new();
    let mut y = x;
    for i in 0..=p.num_conv {
        y = g.conv(sd, &format!("body.{}", 2 * i), y, Activation::None)?;
        let slope = get(sd, &format!("body.{}.weight", 2 * i + 1))?.data.clone();
        y = g.prelu(&format!("body.{}", 2 * i + 1), slope, y);
    }
    y = g.conv(sd, &format!("body.{}", 2 * p.num_conv + 2), y, Activation::None)?;
    let out = if p.scale > 1 {
        let up = g.pixel_shuffle("upsampler", y, p.scale);
        let base = g.nearest("base", x, p.scale);
        g.sum("add_base", up, 1.0, base, 1.0)
    } else {
        g.sum("add_base", y, 1.0, x, 1.0)
    };
    Ok(g.finish(out))
}
