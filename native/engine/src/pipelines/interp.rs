//! Frame interpolation with RIFE v4.6 (`interp/rife-v4.6/flownet`, ncnn; three inputs: `in0` =
//! frame 0, `in1` = frame 1, `in2` = a 1 x H x W plane holding the timestep t; output `out0`).
//!
//! Depends only on lucent_core (Backend / Prepared / Net / Tensor) and the engine's raster types,
//! so any owner of a backend (the Engine, a runtime, a bench) can drive it.
//!
//! Conventions, as rife-ncnn-vulkan's v4 path does them: RGB, v / 255 planar, each side padded
//! with zeros on the right / bottom to a multiple of [`MULTIPLE`] (32: the coarsest of RIFE's four
//! blocks works at 1/32 of the input, an Interp to 1/8 then two stride-2 convolutions, and brings
//! its flow back up by exact factors, so other sides give blobs that do not add up), output
//! `floor(v * 255 + 0.5)` clamped, cropped back; t = 0 and t = 1 return the frames themselves.
//!
//! Memory: one network run on a padded W x H costs about [`BYTES_PER_PIXEL_CPU`] bytes per pixel on
//! the CPU backend plus ~0.15 GB of fixed cost (peak RSS, `interp_eval speed`: 0.53 GB at 1080p,
//! 1.43 GB for a whole 4K frame, 0.63 GB for 4K in the default 6 tiles). Frames whose padded
//! area exceeds [`InterpLimits::max_pixels`] (or, on a GPU, whose side exceeds what the device's
//! largest storage binding allows for this network: `Backend::max_tile`) are cut into a grid of
//! tiles; each tile runs with [`InterpLimits::margin`] pixels of real context on every inner side
//! and only its core is kept. Motion larger than the margin that crosses a tile edge is what tiling
//! costs; the error against a whole-frame run is measured by `examples/interp_eval.rs`.
use crate::raster::{Raster, RasterMut, RasterRef, SamplesMut, SamplesRef};
use lucent_core::ncnn::Net;
use lucent_core::{Backend, Cancel, Code, Error, Prepared, Result, Tensor};
use std::path::Path;
use std::sync::Arc;

/// The model's path below the model directory, without `.param` / `.bin`.
pub const MODEL_STEM: &str = crate::catalog::RIFE;

/// Every side the network sees is a multiple of this.
pub const MULTIPLE: usize = 32;

/// Peak memory of one CPU-backend run, bytes per padded input pixel, on top of a ~0.15 GB fixed
/// cost (measured: 474 MB more than the decoded frames at 1920x1088, 1234 MB at 3840x2176).
pub const BYTES_PER_PIXEL_CPU: usize = 150;

/// Default largest padded area of one network run: a whole 1080p frame (1920 x 1088) and a bit
/// more, about 0.5 GB on the CPU backend; 4K frames run as 6 tiles (1536 x 1344 padded).
pub const DEFAULT_MAX_PIXELS: usize = 2_300_000;

/// Default context kept around each tile's core on its inner sides.
pub const DEFAULT_MARGIN: usize = 128;

/// How big one network run may get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpLimits {
    /// Largest padded area (pixels) of one network run; larger frames are tiled.
    pub max_pixels: usize,
    /// Context (pixels) around a tile's core on sides inside the frame.
    pub margin: usize,
}

impl Default for InterpLimits {
    fn default() -> Self {
        InterpLimits { max_pixels: DEFAULT_MAX_PIXELS, margin: DEFAULT_MARGIN }
    }
}

/// A rectangle of the frame: x, y, width, height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// One network run: `region` of the frames goes in (zero-padded to `padded_w` x `padded_h`),
/// the `core` part of its output is kept. Cores tile the frame exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub core: Rect,
    pub region: Rect,
    pub padded_w: usize,
    pub padded_h: usize,
}

fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

/// Region along one axis for the core [c0, c0 + cn) of a frame side n: the core plus `margin`
/// on each side, widened to a multiple of 32 where the frame allows, kept inside the frame.
fn region_1d(c0: usize, cn: usize, n: usize, margin: usize) -> (usize, usize) {
    let want = round_up(cn + 2 * margin, MULTIPLE).min(n);
    let start = c0.saturating_sub((want - cn) / 2).min(n - want);
    (start, want)
}

/// Split a w x h frame into tiles whose padded area is at most `max_pixels` and whose padded
/// sides are at most `max_side`.
pub fn plan_tiles(w: usize, h: usize, limits: InterpLimits, max_side: usize) -> Result<Vec<Tile>> {
    if w == 0 || h == 0 {
        return Err(Error::new(Code::InvalidArgument, "empty frame"));
    }
    let max_side = max_side.max(MULTIPLE);
    let fits = |nx: usize, ny: usize| -> bool {
        let (cw, ch) = (w.div_ceil(nx), h.div_ceil(ny));
        let rw = if nx == 1 { w } else { round_up(cw + 2 * limits.margin, MULTIPLE).min(w) };
        let rh = if ny == 1 { h } else { round_up(ch + 2 * limits.margin, MULTIPLE).min(h) };
        let (pw, ph) = (round_up(rw, MULTIPLE), round_up(rh, MULTIPLE));
        pw * ph <= limits.max_pixels && pw <= max_side && ph <= max_side
    };
    let (mut nx, mut ny) = (1usize, 1usize);
    while !fits(nx, ny) {
        // Split the longer core side; give up when cores would get smaller than the margin.
        if w.div_ceil(nx) >= h.div_ceil(ny) {
            nx += 1;
        } else {
            ny += 1;
        }
        if w.div_ceil(nx) < MULTIPLE.max(limits.margin) && h.div_ceil(ny) < MULTIPLE.max(limits.margin) {
            return Err(Error::new(
                Code::ImageTooLarge,
                format!("a {w}x{h} frame cannot be cut into tiles of at most {} pixels with a {} px margin", limits.max_pixels, limits.margin),
            ));
        }
    }
    let (cw, ch) = (w.div_ceil(nx), h.div_ceil(ny));
    let mut tiles = Vec::with_capacity(nx * ny);
    for ty in 0..ny {
        let (cy, chh) = (ty * ch, ch.min(h - (ty * ch).min(h)));
        if chh == 0 {
            continue;
        }
        for tx in 0..nx {
            let (cx, cww) = (tx * cw, cw.min(w - (tx * cw).min(w)));
            if cww == 0 {
                continue;
            }
            let (rx, rw) = if nx == 1 { (0, w) } else { region_1d(cx, cww, w, limits.margin) };
            let (ry, rh) = if ny == 1 { (0, h) } else { region_1d(cy, chh, h, limits.margin) };
            tiles.push(Tile {
                core: Rect { x: cx, y: cy, w: cww, h: chh },
                region: Rect { x: rx, y: ry, w: rw, h: rh },
                padded_w: round_up(rw, MULTIPLE),
                padded_h: round_up(rh, MULTIPLE),
            });
        }
    }
    Ok(tiles)
}

fn rgb8<'a>(r: &RasterRef<'a>, what: &str) -> Result<&'a [u8]> {
    match r.samples {
        SamplesRef::U8(v) if r.channels == 3 => Ok(v),
        _ => Err(Error::new(Code::InvalidArgument, format!("{what}: frame interpolation takes 8-bit RGB frames, got {} channels of {} bits", r.channels, r.bit_depth()))),
    }
}

fn check_t(t: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&t) {
        return Err(Error::new(Code::InvalidArgument, format!("timestep {t} is outside [0, 1]")));
    }
    Ok(())
}

/// `region` of an interleaved RGB8 frame of width `fw` as planar v / 255, zero-padded to pw x ph.
fn region_tensor(px: &[u8], fw: usize, region: Rect, pw: usize, ph: usize) -> Tensor {
    let plane = pw * ph;
    let mut t = Tensor::zeros(3, ph, pw);
    for y in 0..region.h {
        let row = &px[((region.y + y) * fw + region.x) * 3..][..region.w * 3];
        for (x, p) in row.chunks_exact(3).enumerate() {
            for (c, &v) in p.iter().enumerate() {
                t.data[c * plane + y * pw + x] = v as f32 * (1.0 / 255.0);
            }
        }
    }
    t
}

/// RIFE v4.6 prepared on one backend.
pub struct Rife {
    prep: Arc<dyn Prepared>,
    blobs: [usize; 4],
    limits: InterpLimits,
    max_side: usize,
}

impl Rife {
    /// Load `<model_dir>/interp/rife-v4.6/flownet.{param,bin}` and prepare it on `backend`.
    pub fn load(backend: &dyn Backend, model_dir: &Path) -> Result<Rife> {
        let net = Net::load_stem(&model_dir.join(MODEL_STEM))?;
        Rife::new(backend, Arc::new(net))
    }

    /// Prepare an already loaded RIFE v4 network (`in0`, `in1`, `in2` -> `out0`).
    pub fn new(backend: &dyn Backend, net: Arc<Net>) -> Result<Rife> {
        let prep = backend.prepare(net.clone())?;
        Rife::with_prepared(backend, &net, prep)
    }

    /// A RIFE v4 network already prepared on `backend` (e.g. the runtime's cached copy,
    /// `Runtime::network(MODEL_STEM)`): no second preparation.
    pub fn with_prepared(backend: &dyn Backend, net: &Net, prep: Arc<dyn Prepared>) -> Result<Rife> {
        let blob = |n: &str| net.blob(n).ok_or_else(|| Error::new(Code::ModelInvalid, format!("RIFE network has no blob '{n}'")));
        let blobs = [blob("in0")?, blob("in1")?, blob("in2")?, blob("out0")?];
        // A GPU's largest storage binding bounds the side; the CPU backend's max_tile is a
        // super-resolution heuristic and does not apply here (RIFE needs whole-frame context).
        let max_side = if backend.info().kind == "gpu" { backend.max_tile(net) } else { usize::MAX };
        Ok(Rife { prep, blobs, limits: InterpLimits::default(), max_side })
    }

    pub fn with_limits(mut self, limits: InterpLimits) -> Rife {
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> InterpLimits {
        self.limits
    }

    /// The network runs a w x h frame takes.
    pub fn plan(&self, w: usize, h: usize) -> Result<Vec<Tile>> {
        plan_tiles(w, h, self.limits, self.max_side)
    }

    /// The frame at time `t` (0 = `f0`, 1 = `f1`) between two RGB8 frames of one size, written
    /// into `dst` (RGB8, same size). `progress(done, total)` after each tile.
    pub fn interpolate_into(
        &self,
        f0: RasterRef<'_>,
        f1: RasterRef<'_>,
        t: f32,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let (a, b) = (rgb8(&f0, "frame 0")?, rgb8(&f1, "frame 1")?);
        let (w, h) = (f0.width, f0.height);
        if (f1.width, f1.height) != (w, h) {
            return Err(Error::new(Code::InvalidArgument, format!("frames differ in size: {w}x{h} and {}x{}", f1.width, f1.height)));
        }
        check_t(t)?;
        let out = match &mut dst.samples {
            SamplesMut::U8(v) if dst.channels == 3 && dst.width == w && dst.height == h => v,
            _ => return Err(Error::new(Code::InvalidArgument, format!("destination must be 8-bit RGB {w}x{h}"))),
        };
        if t == 0.0 || t == 1.0 {
            out.copy_from_slice(if t == 0.0 { a } else { b });
            progress(1, 1);
            return Ok(());
        }
        let tiles = self.plan(w, h)?;
        for (i, tile) in tiles.iter().enumerate() {
            cancel.check()?;
            self.run_tile(a, b, w, t, tile, out, cancel)?;
            progress(i + 1, tiles.len());
        }
        Ok(())
    }

    /// [`Rife::interpolate_into`] into a new raster.
    pub fn interpolate(&self, f0: RasterRef<'_>, f1: RasterRef<'_>, t: f32, cancel: &Cancel) -> Result<Raster> {
        let mut dst = Raster::new(f0.width, f0.height, 3, 8)?;
        self.interpolate_into(f0, f1, t, &mut dst.as_mut(), cancel, &mut |_, _| {})?;
        Ok(dst)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_tile(&self, a: &[u8], b: &[u8], w: usize, t: f32, tile: &Tile, out: &mut [u8], cancel: &Cancel) -> Result<()> {
        let (pw, ph, r, c) = (tile.padded_w, tile.padded_h, tile.region, tile.core);
        let x0 = region_tensor(a, w, r, pw, ph);
        let x1 = region_tensor(b, w, r, pw, ph);
        let ts = Tensor::from_vec(1, ph, pw, vec![t; pw * ph]);
        let [i0, i1, i2, o] = self.blobs;
        let y = self.prep.run(&[(i0, &x0), (i1, &x1), (i2, &ts)], &[o], cancel)?.pop();
        let y = y.ok_or_else(|| Error::new(Code::Internal, "RIFE returned no output"))?;
        if y.c != 3 || y.h != ph || y.w != pw {
            return Err(Error::new(Code::ModelInvalid, format!("RIFE output {} for a {pw}x{ph} input", y.shape_string())));
        }
        let plane = pw * ph;
        let (ox, oy) = (c.x - r.x, c.y - r.y);
        for yy in 0..c.h {
            let drow = &mut out[((c.y + yy) * w + c.x) * 3..][..c.w * 3];
            let srow = (oy + yy) * pw + ox;
            for (x, px) in drow.chunks_exact_mut(3).enumerate() {
                for (ch, v) in px.iter_mut().enumerate() {
                    *v = to_u8(y.data[ch * plane + srow + x]);
                }
            }
        }
        Ok(())
    }
}

/// Any raster (gray or colour, alpha or not, 8 or 16 bit) as the 8-bit RGB the pipeline takes:
/// gray replicated, alpha dropped, 16-bit rounded to 8.
pub fn to_rgb8(r: RasterRef<'_>) -> Result<Raster> {
    let mut v = Vec::new();
    v.try_reserve_exact(r.width * r.height * 3).map_err(|_| Error::new(Code::ImageTooLarge, "cannot allocate the RGB frame"))?;
    for y in 0..r.height {
        for x in 0..r.width {
            v.extend(r.rgb(x, y).iter().map(|&c| to_u8(c)));
        }
    }
    Raster::from_u8(r.width, r.height, 3, v)
}

/// `floor(v * 255 + 0.5)` clamped to 0..255 (NaN gives 0), as rife-ncnn-vulkan's postprocess.
#[inline]
fn to_u8(v: f32) -> u8 {
    (v * 255.0 + 0.5).clamp(0.0, 255.0) as u8
}

/// The plain frame blend `(1 - t) f0 + t f1`, rounded: the baseline interpolation is measured
/// against. Same checks as [`Rife::interpolate_into`].
pub fn blend(f0: RasterRef<'_>, f1: RasterRef<'_>, t: f32, dst: &mut RasterMut<'_>) -> Result<()> {
    let (a, b) = (rgb8(&f0, "frame 0")?, rgb8(&f1, "frame 1")?);
    check_t(t)?;
    if (f1.width, f1.height) != (f0.width, f0.height) {
        return Err(Error::new(Code::InvalidArgument, "frames differ in size"));
    }
    match &mut dst.samples {
        SamplesMut::U8(v) if dst.channels == 3 && v.len() == a.len() => {
            for ((o, &x), &y) in v.iter_mut().zip(a).zip(b) {
                *o = to_u8(((1.0 - t) * x as f32 + t * y as f32) / 255.0);
            }
            Ok(())
        }
        _ => Err(Error::new(Code::InvalidArgument, "destination must be 8-bit RGB of the frames' size")),
    }
}
