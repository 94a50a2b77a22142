//! A convolution step: its weights uploaded in the layout of the kernel `choice.rs` picks, and
//! its recording: the output (or a scratch buffer when a residual cannot be fused), the fused
//! epilogue (activation, PReLU, residual), then the dispatch by the kernel's op
//! (`conv_gemm.rs`, `mma.rs`, `rb.rs`, `direct.rs`).

use crate::ops::conv::{conv_shape, ConvCall, ConvParams, ConvW, Epilogue, EPI_PRELU, EPI_PRELU_PER_CHANNEL, EPI_RESIDUAL};
use crate::ops::rb::{self, RbCfg};
use crate::ops::{act_code, conv_gemm, direct, eltwise, mma, Io};
use crate::choice::{conv_choice, ConvChoice, Gemm};
use crate::rec::{upload, Rec};
use crate::shape::broadcast;
use crate::{DevCtx, Settings};
use lucent_core::error::Result;
use lucent_core::ncnn::{Activation, Conv};

/// How a convolution runs, with the layout its weights were uploaded in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ConvKernel {
    /// Implicit GEMM (FMA or MMA); weights [group][kpad][mpad], zero padded.
    Gemm { gemm: Gemm, mpad: usize, kpad: usize },
    /// Register-blocked direct kernel (CPU adapters); weights in `rb::pack_weights` rows of `row`.
    Rb { cfg: RbCfg, row: usize },
    /// One output per thread (depthwise-like, deconvolution, inner product); ncnn's layout.
    Direct,
}

impl ConvKernel {
    /// "coop", "mma-emulated", "fma", "rb", "direct"; "+pipelined" appended to a GEMM in that form.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ConvKernel::Gemm { gemm, .. } => gemm.name(),
            ConvKernel::Rb { .. } => "rb",
            ConvKernel::Direct => "direct",
        }
    }
}

/// A residual add fused into a convolution: y = conv * c_conv + blob * c_res.
pub(crate) struct Res {
    pub blob: usize,
    pub c_conv: f32,
    pub c_res: f32,
}

/// A prepared convolution: its weights, kernel and fused residual.
pub(crate) struct ConvStep {
    pub cw: ConvW,
    pub kernel: ConvKernel,
    pub res: Option<Res>,
}

/// Upload a convolution's (or, with `deconv`, deconvolution's) weights in the layout of its
/// kernel: `tuned` (the tuner's pick for this layer), else the default choice for these
/// settings.
pub(crate) fn upload_weights(
    ctx: &DevCtx,
    c: &Conv,
    settings: &Settings,
    deconv: bool,
    prelu: Option<&[f32]>,
    act: Activation,
    tuned: Option<Gemm>,
) -> Result<(ConvW, ConvKernel)> {
    let mut aux = c.bias.clone().unwrap_or_else(|| vec![0.0; c.num_output]);
    if let Some(s) = prelu {
        aux.extend_from_slice(s);
    }
    let aux = upload(ctx, &aux, false, "aux")?;
    let prelu = prelu.map(|s| s.len());
    let (w, kernel) = match conv_choice(&ctx.limits, c, settings, deconv, tuned) {
        ConvChoice::Rb(cfg) => {
            let w = rb::pack_weights(&c.weight, c.group, c.out_per_group(), c.in_per_group(), c.kernel_h, c.kernel_w, cfg, settings.f16);
            let w = upload(ctx, &w, settings.f16, "conv weights")?;
            (w, ConvKernel::Rb { cfg, row: cfg.row(c.kernel_w as u32, settings.f16) as usize })
        }
        ConvChoice::Gemm(gemm) => {
            let (bm, bk) = gemm.bm_bk();
            let (w, mpad, kpad) = conv_gemm::pack_weights(c, bm, bk);
            (upload(ctx, &w, settings.f16, "conv weights")?, ConvKernel::Gemm { gemm, mpad, kpad })
        }
        ConvChoice::Direct => (upload(ctx, &c.weight, settings.f16, "conv weights")?, ConvKernel::Direct),
    };
    Ok((ConvW { w, aux, act, prelu }, kernel))
}

/// Record convolution `c` (FMA GEMM tiles accumulate in f16 with `f16_math`).
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, c: &Conv, step: &ConvStep, f16_math: bool) -> Result<()> {
    let (ins, lname) = (io.ins, io.name);
    let ConvStep { cw, kernel, res } = step;
    let (os, pads) = conv_shape(c, ins[0], lname)?;
    let x = rec.buf_of(io.bottoms[0]);
    let mut fuse_res = None;
    if let Some(r) = res {
        if ins[1] == os {
            fuse_res = Some((rec.buf_of(r.blob), r.c_conv, r.c_res));
        }
    }
    let out = if res.is_some() && fuse_res.is_none() { rec.alloc_temp(ctx, os)? } else { rec.alloc_blob(ctx, io.tops[0], os)? };
    let (act, act_a, act_b) = act_code(cw.act);
    let mut flags = 0u32;
    if let Some(n) = cw.prelu {
        flags |= EPI_PRELU;
        if n > 1 {
            flags |= EPI_PRELU_PER_CHANNEL;
        }
    }
    let (rbuf, c_conv, c_res) = match &fuse_res {
        Some((b, ca, cb)) => {
            flags |= EPI_RESIDUAL;
            (b.clone(), *ca, *cb)
        }
        None => (x.clone(), 1.0, 0.0),
    };
    let ipg = c.in_per_group();
    let params = ConvParams {
        lead: ipg as u32,
        in_h: ins[0].h as u32,
        in_w: ins[0].w as u32,
        out_c: c.num_output as u32,
        out_h: os.h as u32,
        out_w: os.w as u32,
        kh: c.kernel_h as u32,
        kw: c.kernel_w as u32,
        sh: c.stride_h as u32,
        sw: c.stride_w as u32,
        dh: c.dilation_h as u32,
        dw: c.dilation_w as u32,
        pad_top: pads.2 as u32,
        pad_left: pads.0 as u32,
        pad_value: c.pad_value,
        epi: Epilogue { act, act_a, act_b, flags, c_conv, c_res },
        mg: c.out_per_group() as u32,
    };
    let bufs = vec![x, cw.w.clone(), cw.aux.clone(), rbuf, out.clone()];
    let conv_flop = 2.0 * (os.c * os.h * os.w) as f64 * (ipg * c.kernel_h * c.kernel_w) as f64;
    rec.conv_notes.insert(rec.step, (conv_flop, kernel.name()));
    let call = ConvCall { c, params, input: ins[0], output: os, bufs, lname };
    match *kernel {
        ConvKernel::Gemm { gemm: Gemm::Fma(cfg), mpad, kpad } => conv_gemm::record(ctx, rec, call, cfg, f16_math, mpad, kpad)?,
        ConvKernel::Gemm { gemm: Gemm::Mma(cfg, mode), mpad, kpad } => mma::record(ctx, rec, call, cfg, mode, mpad, kpad)?,
        ConvKernel::Rb { cfg, row } => rb::record(ctx, rec, call, cfg, row)?,
        ConvKernel::Direct => direct::record_conv(ctx, rec, call)?,
    }
    if let (Some(r), None) = (res, &fuse_res) {
        // Shapes differ: fall back to a broadcasting binary op.
        let (o2, sa, sb) = broadcast(os, ins[1], lname)?;
        let dst = rec.alloc_blob(ctx, io.tops[0], o2)?;
        let rb = rec.buf_of(r.blob);
        eltwise::record_binary(ctx, rec, [out, rb, dst], eltwise::BinaryParams::new(o2, sa, sb, 0, r.c_conv, r.c_res, None))?;
    }
    Ok(())
}
