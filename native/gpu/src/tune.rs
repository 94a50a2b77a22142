//! Measured kernel choice: at prepare time, every GEMM tile that fits the device, in its plain
//! and pipelined form, is timed on each distinct convolution shape of the network, and the
//! layers of that shape run the fastest. Tile and form choices that were made from analysis
//! alone (which tile suits which GPU, whether double buffering pays) are thereby made from
//! measurement on the operator's own GPU.
//!
//! A candidate runs as a one-convolution probe network (the layer's own weights, a random input
//! of `side` x `side` pixels, smaller for layers so wide that one probe would exceed
//! [`PROBE_FLOP`]: such layers run at low resolution in real networks): one warm-up run
//! (pipeline compilation), then [`ROUNDS`] rounds that alternate the candidates; a candidate's
//! time is its fastest GPU time (timestamp queries), so tuning needs TIMESTAMP_QUERY and is
//! skipped without it. A candidate that fails (compilation, validation) is left out, and so is
//! one whose warm-up output disagrees with the default's beyond [`AGREE`] (a fast but wrong
//! kernel is never chosen); where none has a valid time, the default choice stays. The static
//! default comes first, so it wins exact ties.
//!
//! Results are cached per adapter (name, backend, driver version), shape and settings: in the
//! device context, so later prepares in the process measure nothing, and in a file
//! ([`Tune::cache`], a line per measurement), so later processes do not either (a CLI run, a
//! restarted server). A file line whose candidates are not today's (another build's tile lists)
//! is measured again.
//!
//! Enabled by `Settings::tune` (`LUCENT_GPU_TUNE`, on by default for GPUs; see lib.rs, which
//! calls [`choose`] before building a prepared network). The candidates and the default are
//! `choice.rs`'s; a probe is a prepared network (`prep.rs`) with the candidate forced.

use crate::choice::{candidates, Gemm};
use crate::prep::Prep;
use crate::{DevCtx, Settings};
use lucent_core::error::Result;
use lucent_core::ncnn::{Conv, Layer, Net, Op};
use lucent_core::{Cancel, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Timed rounds per candidate (after one warm-up run).
pub const ROUNDS: usize = 3;

/// The probe's side in pixels when `LUCENT_GPU_TUNE` gives none: 65536 output pixels, enough
/// workgroups for every tile to fill a large GPU.
pub const DEFAULT_SIDE: u32 = 256;

/// The most work (multiply-adds x 2) one probe run does: realesr-general-x4v3's 64->64 3x3
/// layer at 256 x 256. Wider layers get a smaller probe (at least 16 x 16).
pub const PROBE_FLOP: f64 = 4.9e9;

/// How to tune.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tune {
    /// The probe's side in pixels (before the [`PROBE_FLOP`] cap).
    pub side: u32,
    /// The file that keeps measurements across processes (None: this process only).
    pub cache: Option<PathBuf>,
}

/// What the tuner measured for one convolution shape of a network.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// "cin->cout KHxKW sSH,SW dDH,DW gG".
    pub shape: String,
    /// The layers with this shape, in order.
    pub layers: Vec<String>,
    /// Every candidate (kernel and tile, e.g. "fma 64x128x16/8+pipelined") with its fastest GPU
    /// time in ms; infinite where it failed.
    pub candidates: Vec<(String, f64)>,
    /// The candidate these layers run (the fastest); empty where no candidate had a valid time
    /// and the default choice stays.
    pub chosen: String,
    /// From a cache (this device's, or the file's): measured earlier with these settings.
    pub cached: bool,
}

/// A cached measurement.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    candidates: Vec<(String, f64)>,
    chosen: Option<Gemm>,
}

fn shape(c: &Conv) -> String {
    format!(
        "{}->{} {}x{} s{},{} d{},{} g{}",
        c.num_input, c.num_output, c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.group
    )
}

/// The probe's side for `c`: `side`, less where one run would exceed [`PROBE_FLOP`].
fn probe_side(c: &Conv, side: u32) -> usize {
    let per_px = 2.0 * (c.num_output * c.in_per_group() * c.kernel_h * c.kernel_w) as f64;
    let cap = (PROBE_FLOP / per_px).sqrt().floor().max(16.0) as usize;
    (side.max(1) as usize).min(cap)
}

/// The cache key: the adapter, the shape, padding and everything in the settings that changes
/// the kernels.
fn key(ctx: &DevCtx, c: &Conv, settings: &Settings, side: usize) -> String {
    format!(
        "{} | {} pad {:?} f16 {} f16_math {} mma {:?} side {side}",
        ctx.adapter_id,
        shape(c),
        c.pad,
        settings.f16,
        settings.f16_math,
        settings.mma.map(|p| (p.frag, p.mode))
    )
}

/// Choose a GEMM for every convolution of `net` that has candidates: (layer index -> kernel,
/// the report per shape).
pub(crate) fn choose(ctx: &mut DevCtx, net: &Net, settings: &Settings, tune: &Tune) -> Result<(HashMap<usize, Gemm>, Vec<Tuning>)> {
    let mut choices = HashMap::new();
    let mut report: Vec<Tuning> = Vec::new();
    if !ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
        return Ok((choices, report));
    }
    let mut file: Option<HashMap<String, Line>> = None;
    let mut measured: Vec<String> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, l) in net.layers.iter().enumerate() {
        let Op::Conv(c) = &l.op else { continue };
        let cands = candidates(&ctx.limits, c, settings);
        if cands.len() < 2 {
            continue;
        }
        let side = probe_side(c, tune.side);
        let k = key(ctx, c, settings, side);
        if let Some(&r) = seen.get(&k) {
            report[r].layers.push(l.name.clone());
        } else {
            let mut cached = ctx.tuned.contains_key(&k);
            if !cached {
                if let Some(path) = &tune.cache {
                    let lines = file.get_or_insert_with(|| read_file(path));
                    if let Some(e) = lines.get(&k).and_then(|line| line.entry(&cands)) {
                        ctx.tuned.insert(k.clone(), e);
                        cached = true;
                    }
                }
            }
            if !cached {
                let e = measure(ctx, c, settings, side, &cands)?;
                ctx.tuned.insert(k.clone(), e);
                measured.push(k.clone());
            }
            let e = &ctx.tuned[&k];
            seen.insert(k.clone(), report.len());
            report.push(Tuning {
                shape: shape(c),
                layers: vec![l.name.clone()],
                candidates: e.candidates.clone(),
                chosen: e.chosen.map(|g| g.label()).unwrap_or_default(),
                cached,
            });
        }
        if let Some(g) = ctx.tuned[&k].chosen {
            choices.insert(i, g);
        }
    }
    if let (Some(path), false) = (&tune.cache, measured.is_empty()) {
        // A cache that cannot be written costs a measurement next time, nothing else.
        let new: Vec<(&str, &Entry)> = measured.iter().map(|k| (k.as_str(), &ctx.tuned[k])).collect();
        let _ = write_lines(path, &new);
    }
    Ok((choices, report))
}

/// Input -> `c` (its weights, bias and activation), blobs "in" and "out".
fn probe_net(c: &Conv) -> Net {
    let layers = vec![
        Layer { name: "in".into(), kind: "Input".into(), op: Op::Input { w: 0, h: 0, c: 0 }, bottoms: vec![], tops: vec![0] },
        Layer { name: "conv".into(), kind: "Convolution".into(), op: Op::Conv(c.clone()), bottoms: vec![0], tops: vec![1] },
    ];
    Net::from_layers(layers, vec!["in".into(), "out".into()])
}

/// A failed candidate: a lost device ends the tuning (and the prepare); any other error is
/// cleared and the candidate left out.
fn recover(ctx: &DevCtx) -> Result<()> {
    if ctx.lost.load(Ordering::SeqCst) {
        return Err(ctx.lost_error());
    }
    let _ = ctx.check();
    Ok(())
}

fn measure(ctx: &mut DevCtx, c: &Conv, settings: &Settings, side: usize, cands: &[Gemm]) -> Result<Entry> {
    let net = Arc::new(probe_net(c));
    let mut s = settings.clone();
    s.tune = None;
    s.profile = true;
    // xorshift: a fixed, well-spread input in [-1, 1).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let data = (0..c.num_input * side * side)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let input = [(0usize, Tensor::from_vec(c.num_input, side, side, data))];
    let mut preps = Vec::with_capacity(cands.len());
    for g in cands {
        let choice = HashMap::from([(1usize, *g)]);
        match Prep::build(ctx, net.clone(), s.clone(), &choice) {
            Ok(mut p) => {
                p.quiet = true;
                preps.push(Some(p));
            }
            Err(_) => {
                recover(ctx)?;
                preps.push(None);
            }
        }
    }
    let mut best = vec![f64::INFINITY; cands.len()];
    let cancel = Cancel::new();
    // The warm-up round's first output (the default's, unless it failed): every other
    // candidate must agree with it, so a kernel that is fast but wrong is never chosen.
    let mut first: Option<(usize, Tensor)> = None;
    for round in 0..=ROUNDS {
        for (k, slot) in preps.iter_mut().enumerate() {
            let Some(p) = slot else { continue };
            match p.run(ctx, &input, &[1], &cancel) {
                Ok(mut out) if round == 0 => match &first {
                    None => first = out.pop().map(|t| (k, t)),
                    Some((j, want)) if !agrees(&out[0], want) => {
                        eprintln!(
                            "[lucent-gpu] tuning {}: {} disagrees with {} (max difference {:.3e} relative); left out",
                            shape(c),
                            cands[k].label(),
                            cands[*j].label(),
                            rel_diff(&out[0], want)
                        );
                        *slot = None;
                    }
                    Some(_) => {}
                },
                Ok(_) => {
                    let t = p.last_profile.iter().find(|t| !t.kernel.is_empty()).map(|t| t.ms).unwrap_or(f64::NAN);
                    if t.is_finite() && t > 0.0 {
                        best[k] = best[k].min(t);
                    }
                }
                Err(_) => {
                    recover(ctx)?;
                    *slot = None;
                    best[k] = f64::INFINITY;
                }
            }
        }
    }
    Ok(Entry {
        candidates: cands.iter().zip(&best).map(|(g, &t)| (g.label(), t)).collect(),
        chosen: fastest(&best).map(|k| cands[k]),
    })
}

/// The index of the fastest valid time: a candidate without one in any round (failed,
/// disagreed, or timestamps that read 0) is never chosen; the first of equal times wins (the
/// default comes first).
fn fastest(best: &[f64]) -> Option<usize> {
    let mut chosen: Option<usize> = None;
    for (k, &t) in best.iter().enumerate() {
        if t.is_finite() && t > 0.0 && chosen.is_none_or(|b| t < best[b]) {
            chosen = Some(k);
        }
    }
    chosen
}

/// Two candidates' outputs differ by at most [`AGREE`] relative to max(1, max|want|).
pub const AGREE: f32 = 1e-2;

/// max|got - want| / max(1, max|want|) (infinite for other shapes or non-finite values).
fn rel_diff(got: &Tensor, want: &Tensor) -> f32 {
    if (got.c, got.h, got.w) != (want.c, want.h, want.w) || got.data.len() != want.data.len() {
        return f32::INFINITY;
    }
    let (mut d, mut m) = (0.0f32, 0.0f32);
    for (a, b) in got.data.iter().zip(&want.data) {
        if !a.is_finite() || !b.is_finite() {
            return f32::INFINITY;
        }
        d = d.max((a - b).abs());
        m = m.max(b.abs());
    }
    d / m.max(1.0)
}

/// Whether `got` agrees with `want` (tiles change only the summation order and, with f16
/// storage, the last bit of a rounding: far below [`AGREE`]; an indexing error is not).
fn agrees(got: &Tensor, want: &Tensor) -> bool {
    rel_diff(got, want) <= AGREE
}

/// The report on stderr (with `LUCENT_GPU_PROFILE=1`).
pub(crate) fn print(report: &[Tuning]) {
    for t in report {
        let cands: Vec<String> = t.candidates.iter().map(|(l, ms)| format!("{l} {ms:.4} ms")).collect();
        eprintln!(
            "[lucent-gpu] tuned {} ({} layers{}): {} -> {}",
            t.shape,
            t.layers.len(),
            if t.cached { ", cached" } else { "" },
            cands.join(", "),
            if t.chosen.is_empty() { "default (no valid time)" } else { &t.chosen }
        );
    }
}

/// A line of the cache file: "key TAB chosen TAB label=ms;label=ms;...".
struct Line {
    chosen: String,
    candidates: Vec<(String, f64)>,
}

impl Line {
    /// The cached entry, where its candidates are today's and its choice one of them.
    fn entry(&self, cands: &[Gemm]) -> Option<Entry> {
        let labels: Vec<String> = cands.iter().map(|g| g.label()).collect();
        let same = self.candidates.len() == labels.len() && self.candidates.iter().zip(&labels).all(|(a, b)| a.0 == *b);
        if !same {
            return None;
        }
        let chosen = if self.chosen.is_empty() { None } else { Some(*cands.iter().find(|g| g.label() == self.chosen)?) };
        Some(Entry { candidates: self.candidates.clone(), chosen })
    }
}

fn parse_line(line: &str) -> Option<(String, Line)> {
    let mut f = line.split('\t');
    let (key, chosen, cands) = (f.next()?, f.next()?, f.next()?);
    let candidates = cands
        .split(';')
        .map(|c| {
            let (l, ms) = c.rsplit_once('=')?;
            Some((l.to_string(), ms.parse::<f64>().ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((key.to_string(), Line { chosen: chosen.to_string(), candidates }))
}

/// The cache file's lines by key (empty when it is missing or unreadable; bad lines are skipped).
fn read_file(path: &Path) -> HashMap<String, Line> {
    std::fs::read_to_string(path).map(|t| t.lines().filter_map(parse_line).collect()).unwrap_or_default()
}

/// Replace or add the lines of `new` (written to a temporary file, then renamed over the cache,
/// so a reader never sees half a file; concurrent writers may drop each other's new lines).
fn write_lines(path: &Path, new: &[(&str, &Entry)]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: String = old
        .lines()
        .filter(|l| parse_line(l).is_some_and(|(k, _)| new.iter().all(|(key, _)| k != *key)))
        .flat_map(|l| [l, "\n"])
        .collect();
    for (key, e) in new {
        let cands: Vec<String> = e.candidates.iter().map(|(l, ms)| format!("{l}={ms}")).collect();
        let chosen = e.chosen.map(|g| g.label()).unwrap_or_default();
        out.push_str(&format!("{key}\t{chosen}\t{}\n", cands.join(";")));
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, out)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastest_valid_time_wins_and_ties_keep_the_first() {
        assert_eq!(fastest(&[2.0, 1.0, 3.0]), Some(1));
        assert_eq!(fastest(&[1.0, 1.0]), Some(0));
        assert_eq!(fastest(&[f64::INFINITY, 0.0, 2.0, f64::NAN]), Some(2));
        assert_eq!(fastest(&[f64::INFINITY, 0.0]), None);
        assert_eq!(fastest(&[]), None);
    }

    #[test]
    fn agreement_tolerates_rounding_not_wrong_values() {
        let want = Tensor::from_vec(2, 2, 2, vec![0.5, -3.0, 2.0, 1.0, 0.0, 0.25, -0.75, 4.0]);
        // f16 storage: each value off by one f16 ulp at most (2^-11 relative).
        let mut rounded = want.clone();
        for v in rounded.data.iter_mut() {
            *v *= 1.0 + 1.0 / 2048.0;
        }
        assert!(agrees(&rounded, &want), "{}", rel_diff(&rounded, &want));
        // An indexing error: two values swapped.
        let mut swapped = want.clone();
        swapped.data.swap(1, 2);
        assert!(!agrees(&swapped, &want));
        let mut nan = want.clone();
        nan.data[3] = f32::NAN;
        assert!(!agrees(&nan, &want));
        assert!(!agrees(&Tensor::from_vec(1, 2, 4, want.data.clone()), &want));
        // Relative to max(1, max|want|): small outputs are compared absolutely.
        let tiny = Tensor::from_vec(1, 1, 2, vec![1e-3, 0.0]);
        assert!(agrees(&Tensor::from_vec(1, 1, 2, vec![2e-3, 5e-3]), &tiny));
        assert!(!agrees(&Tensor::from_vec(1, 1, 2, vec![2e-3, 2e-2]), &tiny));
    }
}
