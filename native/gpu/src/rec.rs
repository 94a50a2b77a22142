//! One run's recording: feature-map buffers (pooled by size class), the parameter words, the
//! dispatches and copies in order; then one command encoder per run, its submission, the
//! readback and the profile's timestamps. What each dispatch is, the ops decide (`ops/`).

use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Error, Result};
use lucent_core::Tensor;
use std::collections::HashMap;
use std::num::NonZeroU64;

/// Free buffers by size class.
pub(crate) type Pool = HashMap<u64, Vec<wgpu::Buffer>>;

/// GPU time of each run of commands: (step, ms), in order.
pub(crate) type StepTimes = Vec<(usize, f64)>;

fn size_class(b: u64) -> u64 {
    let b = b.max(256);
    let step = (b.next_power_of_two() / 8).max(256);
    b.div_ceil(step) * step
}

/// `groups` workgroups as (x, y) within the device's per-dimension limit.
pub(crate) fn fold(groups: usize, maxdim: u32) -> Result<(u32, u32)> {
    let m = maxdim.max(1) as usize;
    if groups <= m {
        return Ok((groups.max(1) as u32, 1));
    }
    let y = groups.div_ceil(m);
    if y > m {
        bail!(Code::ImageTooLarge, "dispatch of {groups} workgroups exceeds the device limits");
    }
    Ok((groups.div_ceil(y) as u32, y as u32))
}

/// A storage buffer holding `data` (as f16 where `f16`).
pub(crate) fn upload(ctx: &DevCtx, data: &[f32], f16: bool, label: &str) -> Result<wgpu::Buffer> {
    let bytes = to_bytes(data, f16);
    let size = (bytes.len() as u64).max(16).div_ceil(4) * 4;
    let d = ctx.device.clone();
    let b = ctx.scoped(label, || {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })?;
    let mut padded = bytes;
    padded.resize(size as usize, 0);
    ctx.queue.write_buffer(&b, 0, &padded);
    Ok(b)
}

/// `data` as f16 or f32 bytes.
pub(crate) fn to_bytes(data: &[f32], f16: bool) -> Vec<u8> {
    if f16 {
        let mut v = Vec::with_capacity(data.len() * 2);
        for &x in data {
            v.extend_from_slice(&half::f16::from_f32(x).to_le_bytes());
        }
        v
    } else {
        bytemuck::cast_slice(data).to_vec()
    }
}

#[derive(Clone)]
pub(crate) struct BlobVal {
    pub slot: usize,
    pub shape: Shape,
}

pub(crate) struct Slot {
    pub buf: wgpu::Buffer,
    pub refs: usize,
}

/// One recorded command: a dispatch (kernel, its buffers after the params, params slice, workgroups)
/// or a plain buffer-to-buffer copy (src, src offset, dst, dst offset, bytes; a driver memcpy).
pub(crate) enum Work {
    Dispatch { pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, pofs: usize, plen: usize, wg: (u32, u32, u32) },
    Copy { src: wgpu::Buffer, src_ofs: u64, dst: wgpu::Buffer, dst_ofs: u64, bytes: u64 },
}

pub(crate) struct Cmd {
    pub work: Work,
    pub step: usize,
}

/// One run's recording: the parameter words, the commands, the buffers and which blob lives in
/// which. Holds the prepared network's buffer pool for the run.
pub(crate) struct Rec {
    pub params: Vec<u32>,
    pub cmds: Vec<Cmd>,
    pub slots: Vec<Slot>,
    pub blobs: Vec<Option<BlobVal>>,
    align: usize,
    pub uploads: Vec<(wgpu::Buffer, Vec<u8>)>,
    /// Every buffer this run took from the pool or created.
    pub used: Vec<wgpu::Buffer>,
    /// f16 storage (else f32).
    pub f16: bool,
    /// Bytes per element.
    pub es: u64,
    pub maxdim: u32,
    max_binding: u64,
    /// The step being recorded.
    pub step: usize,
    /// Per step: (FLOPs, kernel) of convolutions, for the profile.
    pub conv_notes: HashMap<usize, (f64, &'static str)>,
    /// Free buffers by size class (the prepared network's, lent for the run).
    pub pool: Pool,
}

impl Rec {
    pub fn new(limits: &wgpu::Limits, blobs: usize, f16: bool, pool: Pool) -> Rec {
        Rec {
            params: Vec::new(),
            cmds: Vec::new(),
            slots: Vec::new(),
            blobs: vec![None; blobs],
            align: (limits.min_storage_buffer_offset_alignment as usize / 4).max(1),
            uploads: Vec::new(),
            used: Vec::new(),
            f16,
            es: if f16 { 2 } else { 4 },
            maxdim: limits.max_compute_workgroups_per_dimension,
            max_binding: limits.max_storage_buffer_binding_size,
            step: 0,
            conv_notes: HashMap::new(),
            pool,
        }
    }

    pub fn buf_of(&self, blob: usize) -> wgpu::Buffer {
        self.slots[self.blobs[blob].as_ref().expect("blob computed").slot].buf.clone()
    }

    fn get_buf(&mut self, ctx: &DevCtx, s: Shape) -> Result<usize> {
        let bytes = s.len() as u64 * self.es;
        if bytes > self.max_binding {
            bail!(
                Code::ImageTooLarge,
                "a {}x{}x{} feature map ({} MiB) exceeds the device's largest storage binding ({} MiB): use smaller tiles",
                s.c,
                s.h,
                s.w,
                bytes >> 20,
                self.max_binding >> 20
            );
        }
        let size = size_class(bytes);
        let buf = match self.pool.get_mut(&size).and_then(|v| v.pop()) {
            Some(b) => b,
            None => {
                let d = ctx.device.clone();
                ctx.scoped("allocating a feature map", || {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("blob"),
                        size,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })?
            }
        };
        self.used.push(buf.clone());
        self.slots.push(Slot { buf, refs: 1 });
        Ok(self.slots.len() - 1)
    }

    /// The output buffer of `blob`, with shape `s`.
    pub fn alloc_blob(&mut self, ctx: &DevCtx, blob: usize, s: Shape) -> Result<wgpu::Buffer> {
        let slot = self.get_buf(ctx, s)?;
        self.blobs[blob] = Some(BlobVal { slot, shape: s });
        Ok(self.slots[slot].buf.clone())
    }

    /// A scratch buffer that lives to the end of the run.
    pub fn alloc_temp(&mut self, ctx: &DevCtx, s: Shape) -> Result<wgpu::Buffer> {
        let slot = self.get_buf(ctx, s)?;
        Ok(self.slots[slot].buf.clone())
    }

    /// `top` is `bottom` with shape `s` (same buffer).
    pub fn alias(&mut self, top: usize, bottom: usize, s: Shape) {
        let slot = self.blobs[bottom].as_ref().unwrap().slot;
        self.slots[slot].refs += 1;
        self.blobs[top] = Some(BlobVal { slot, shape: s });
    }

    pub fn release_blob(&mut self, blob: usize) {
        let Some(b) = self.blobs[blob].take() else { return };
        let slot = &mut self.slots[b.slot];
        slot.refs -= 1;
        if slot.refs == 0 {
            // Later dispatches in the same encoder may reuse it: wgpu orders them with barriers.
            self.pool.entry(slot.buf.size()).or_default().push(slot.buf.clone());
        }
    }

    /// A dispatch of `pipe` with its parameter words `p` and buffers (bindings 1..) on `wg` workgroups.
    pub fn cmd(&mut self, pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, p: &[u32], wg: (u32, u32, u32)) {
        let pofs = self.params.len().div_ceil(self.align) * self.align;
        self.params.resize(pofs, 0);
        self.params.extend_from_slice(p);
        self.cmds.push(Cmd { work: Work::Dispatch { pipe, bufs, pofs, plen: p.len(), wg }, step: self.step });
    }

    /// A buffer-to-buffer copy; offsets and size must be multiples of 4 bytes (wgpu's copy alignment).
    pub fn copy(&mut self, src: wgpu::Buffer, src_ofs: u64, dst: wgpu::Buffer, dst_ofs: u64, bytes: u64) {
        debug_assert!(src_ofs.is_multiple_of(4) && dst_ofs.is_multiple_of(4) && bytes.is_multiple_of(4));
        self.cmds.push(Cmd { work: Work::Copy { src, src_ofs, dst, dst_ofs, bytes }, step: self.step });
    }

    /// Upload the parameters and inputs, encode the recorded commands into one command buffer,
    /// submit it, wait and read `outputs` back. With `profile` (and TIMESTAMP_QUERY), also the
    /// GPU time of each run of commands.
    pub fn submit(&mut self, ctx: &mut DevCtx, outputs: &[usize], profile: bool) -> Result<(Vec<Tensor>, Option<StepTimes>)> {
        let rec = self;
        let dev = ctx.device.clone();
        let es = rec.es;
        // Parameter buffer.
        let pbytes: Vec<u8> = bytemuck::cast_slice(&rec.params).to_vec();
        let psize = (pbytes.len() as u64).max(256);
        let pbuf = ctx.scoped("params", || {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params"),
                size: psize,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        if !pbytes.is_empty() {
            ctx.queue.write_buffer(&pbuf, 0, &pbytes);
        }
        for (buf, bytes) in rec.uploads.drain(..) {
            ctx.queue.write_buffer(&buf, 0, &bytes);
        }
        // Output staging.
        let mut out_ofs = Vec::new();
        let mut total = 0u64;
        for &o in outputs {
            let b = rec.blobs[o].as_ref().ok_or_else(|| Error::new(Code::Internal, format!("output blob {o} was not computed")))?;
            let bytes = (b.shape.len() as u64 * es).div_ceil(4) * 4;
            out_ofs.push((total, bytes));
            total += bytes.div_ceil(256) * 256;
        }
        let profile = profile && ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY);
        // One timestamp pair per run of dispatches or of copies within a step.
        let mut runs: Vec<(usize, bool)> = rec.cmds.iter().map(|c| (c.step, matches!(c.work, Work::Copy { .. }))).collect();
        runs.dedup();
        let step_ids: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let nq = (step_ids.len() * 2) as u32;
        let profile = profile && nq > 0 && nq <= 4096;
        let prof_bytes = if profile { nq as u64 * 8 } else { 0 };
        let staging_size = (total + prof_bytes).max(256);
        let staging = ctx.scoped("staging", || {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging"),
                size: staging_size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        let cmds = std::mem::take(&mut rec.cmds);
        let groups = ctx.scoped("bind groups", || {
            cmds.iter()
                .map(|c| {
                    let Work::Dispatch { pipe, bufs, pofs, plen, .. } = &c.work else { return None };
                    let layout = pipe.get_bind_group_layout(0);
                    let mut entries = vec![wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &pbuf,
                            offset: *pofs as u64 * 4,
                            size: NonZeroU64::new((*plen).max(1) as u64 * 4),
                        }),
                    }];
                    for (i, b) in bufs.iter().enumerate() {
                        entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() });
                    }
                    Some(dev.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &layout, entries: &entries }))
                })
                .collect::<Vec<_>>()
        })?;
        let qs = if profile {
            Some(dev.create_query_set(&wgpu::QuerySetDescriptor { label: Some("profile"), ty: wgpu::QueryType::Timestamp, count: nq }))
        } else {
            None
        };
        let resolve = if profile {
            Some(dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("resolve"),
                size: prof_bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }))
        } else {
            None
        };
        let cb = ctx.scoped("encoding", || {
            let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("run") });
            // Consecutive dispatches share a compute pass; a copy ends it. Profiling: one pass per
            // step, timestamps at its start and end (a step of copies gets an empty pass before
            // and after them, so its time still lands between its two timestamps).
            let mut i = 0;
            let mut qi = 0u32;
            while i < cmds.len() {
                let s = cmds[i].step;
                let stamp = |begin: bool, end: bool| {
                    qs.as_ref().map(|qs| wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: begin.then_some(qi),
                        end_of_pass_write_index: end.then_some(qi + 1),
                    })
                };
                if let Work::Copy { .. } = cmds[i].work {
                    if qs.is_some() {
                        drop(enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(true, false) }));
                    }
                    while let Some(Cmd { work: Work::Copy { src, src_ofs, dst, dst_ofs, bytes }, step }) = cmds.get(i) {
                        if qs.is_some() && *step != s {
                            break;
                        }
                        enc.copy_buffer_to_buffer(src, *src_ofs, dst, *dst_ofs, *bytes);
                        i += 1;
                    }
                    if qs.is_some() {
                        drop(enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(false, true) }));
                    }
                } else {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(true, true) });
                    while let Some(Cmd { work: Work::Dispatch { pipe, wg, .. }, step }) = cmds.get(i) {
                        if qs.is_some() && *step != s {
                            break;
                        }
                        pass.set_pipeline(pipe);
                        pass.set_bind_group(0, groups[i].as_ref(), &[]);
                        pass.dispatch_workgroups(wg.0, wg.1, wg.2);
                        i += 1;
                    }
                }
                if qs.is_some() {
                    qi += 2;
                }
            }
            if let Some(qs) = &qs {
                enc.resolve_query_set(qs, 0..nq, resolve.as_ref().unwrap(), 0);
                enc.copy_buffer_to_buffer(resolve.as_ref().unwrap(), 0, &staging, total, prof_bytes);
            }
            for (&o, &(ofs, bytes)) in outputs.iter().zip(&out_ofs) {
                let b = rec.blobs[o].as_ref().unwrap();
                enc.copy_buffer_to_buffer(&rec.slots[b.slot].buf, 0, &staging, ofs, bytes);
            }
            enc.finish()
        })?;
        let idx = ctx.queue.submit([cb]);
        ctx.wait(idx)?;
        let (mtx, mrx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = mtx.send(r);
        });
        let idx = ctx.queue.submit([]);
        ctx.wait(idx)?;
        match mrx.try_recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!(Code::Internal, "reading results back failed: {e}"),
            Err(_) => {
                ctx.check()?;
                bail!(Code::Internal, "reading results back did not complete")
            }
        }
        let view = staging.slice(..).get_mapped_range().map_err(|e| Error::new(Code::Internal, format!("map: {e}")))?;
        let mut out = Vec::new();
        for (&o, &(ofs, _)) in outputs.iter().zip(&out_ofs) {
            let b = rec.blobs[o].as_ref().unwrap();
            let n = b.shape.len();
            let raw = &view[ofs as usize..ofs as usize + n * es as usize];
            let data: Vec<f32> = if es == 2 {
                raw.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
            } else {
                raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
            };
            let s = b.shape;
            out.push(Tensor { dims: s.dims, c: s.c, h: s.h, w: s.w, data });
        }
        let times = if profile {
            let period = ctx.queue.get_timestamp_period() as f64;
            let raw = &view[total as usize..(total + prof_bytes) as usize];
            let ts: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            Some(step_ids.iter().enumerate().map(|(k, &s)| (s, ts[2 * k + 1].wrapping_sub(ts[2 * k]) as f64 * period / 1e6)).collect())
        } else {
            None
        };
        drop(view);
        staging.unmap();
        Ok((out, times))
    }
}
