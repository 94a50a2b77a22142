//! ESRGAN / RRDBNet (old-style keys; new-style files are renamed by
//! [`crate::detect::esrgan_old_keys`]): first conv, `nb` RRDBs of three 5-conv dense blocks
//! (leaky ReLU 0.2, `x + 0.2·block(x)`), trunk conv plus the long skip, `upsamples` stages of
//! nearest x2 + conv + leaky ReLU, an HR conv with leaky ReLU and the last conv. ESRGAN+ adds a
//! 1x1 conv from the block input to the second conv's output and the second conv's output to
//! the fourth's. The pixel-unshuffle variants take the input through a pixel-unshuffle first.

use super::{Graph, B};
use crate::detect::{esrgan_old_keys, Esrgan};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, Net};
use lucent_core::Result;

const LRELU: Activation = Activation::LeakyRelu(0.2);

fn dense_block(g: &mut Graph, sd: &StateDict, key: &str, x: B, plus: bool) -> Result<B> {
    let mut feats = vec![x];
    let mut x2 = None;
    for c in 1..=5 {
        let input = if feats.len() == 1 { x } else { g.concat(&format!("{key}.cat{c}"), &feats) };
        let act = if c == 5 { Activation::None } else { LRELU };
        let mut y = g.conv(sd, &format!("{key}.conv{c}.0"), input, act)?;
        if plus && c == 2 {
            let skip = g.conv(sd, &format!("{key}.conv1x1"), x, Activation::None)?;
            y = g.sum(&format!("{key}.plus2"), y, 1.0, skip, 1.0);
            x2 = Some(y);
        }
        if plus && c == 4 {
            y = g.sum(&format!("{key}.plus4"), y, 1.0, x2.expect("conv2 ran"), 1.0);
        }
        if c == 5 {
            return Ok(g.sum(&format!("{key}.res"), y, 0.2, x, 1.0));
        }
        feats.push(y);
    }
    unreachable!()
}

pub fn build(p: &Esrgan, sd0: &StateDict) -> Result<Net> {
    let sd = esrgan_old_keys(sd0);
    let (mut g, mut x) = Graph::new();
    if let Some(r) = p.shuffle {
        x = g.pixel_unshuffle(x, p.in_nc / (r * r), r);
    }
    let fea = g.conv(&sd, "model.0", x, Activation::None)?;
    let mut t = fea;
    for i in 0..p.nb {
        let block_in = t;
        let mut cur = t;
        for r in 1..=3 {
            cur = dense_block(&mut g, &sd, &format!("model.1.sub.{i}.RDB{r}"), cur, p.plus)?;
        }
        t = g.sum(&format!("model.1.sub.{i}.res"), cur, 0.2, block_in, 1.0);
    }
    let trunk = g.conv(&sd, &format!("model.1.sub.{}", p.nb), t, Activation::None)?;
    let mut y = g.sum("model.1.shortcut", trunk, 1.0, fea, 1.0);
    for k in 1..=p.upsamples {
        y = g.nearest(&format!("model.{}.up", 3 * k), y, 2);
        y = g.conv(&sd, &format!("model.{}", 3 * k), y, LRELU)?;
    }
    let n = 3 * p.upsamples;
    y = g.conv(&sd, &format!("model.{}", n + 2), y, LRELU)?;
    let out = g.conv(&sd, &format!("model.{}", n + 4), y, Activation::None)?;
    Ok(g.finish(out))
}
