//! Winograd or im2col for each 3x3 conv layer, chosen by measured cost on this machine.
//!
//! At prepare time every distinct (in channels, out channels) shape of a network's Winograd-capable
//! convs is timed both ways on a synthetic 64x64 input in the backend's own pool (one warm-up each,
//! then three alternating runs, the fastest of each kept); Winograd is used where it was not slower,
//! except on maps too narrow to fill its GEMM's tile vectors ([`winograd::fills`]: im2col there).
//! The answers are cached for the life of the process, keyed by shape, ISA level and thread count, so
//! a network is calibrated once per process (and shapes shared between networks once in all): on 2
//! Zen 3 cores 0.13 s (quiet) to 0.7 s (load average 11) for RealESRGAN_x4plus (6 shapes), 0.05-0.15 s
//! for realesr-general-x4v3 (2 shapes). [`log`] lists what was measured (`cpu_bench` prints it).
//!
//! And across processes, in a file (a line per shape), so a CLI run or a restarted server does not
//! measure again: the backend option [`super::CpuOptions::calibration_cache`] (the server's
//! `LUCENT_CPU_CALIBRATION_CACHE`; empty = no file; the first backend of the process sets it), else
//! `$XDG_CACHE_HOME/lucent/cpu-calibration.tsv` or `$HOME/.cache/lucent/cpu-calibration.tsv`. A line
//! is keyed by the CPU model (/proc/cpuinfo), the ISA level, the thread count, the shape, and this
//! build's kernels (crate version and a hash of the kernel sources, build.rs): another machine,
//! another ISA cap or `LUCENT_WORKERS` split, or changed kernels measure again. A file
//! that cannot be read or written costs a measurement, nothing else.
//!
//! [`ConvPolicy`] (option [`super::CpuOptions::policy`], the server's `LUCENT_CPU_WINOGRAD`: `0`
//! im2col, `1` Winograd wherever it applies without measuring; `CpuBackend::with_policy` sets it
//! per backend).
//!
//! bf16 ([`super::Precision::Bf16`] with a bf16 kernel): each distinct (in, out, kernel size) shape
//! that [`bf16::applies`] to is also timed in bf16 against the layer's fp32 choice, the same way
//! (same input, alternating, fastest of three), and bf16 is used only where it was faster
//! ([`log_narrow`]; cached in memory and in the same file, keyed by the kernel and the fp32
//! algorithm too). On the 2-core AMX Xeon: 64x64 channels 0.43 ms bf16 against 1.1-1.6 ms Winograd;
//! with the AVX512-BF16 kernel there 7.45 ms against 1.30 ms, so that kernel stays unused there.
//!
//! int8 ([`super::Precision::Int8`] with an int8 kernel): the same, int8 against the fp32 choice
//! ([`log_narrow`]; file lines keyed by the int8 kernel).

use super::bf16::{self, Bf16Kernel};
use super::int8::{self, Int8Kernel};
use super::conv::{conv_forward, ConvAlgo};
use super::isa::Isa;
use super::options::{CacheFile, ConvPolicy};
use super::{winograd, Val};
use crate::ncnn::model::{Activation, Conv, Padding};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Side of the synthetic input the two algorithms are timed on.
pub const CALIBRATION_PX: usize = 64;

/// One measured conv shape.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub ic: usize,
    pub oc: usize,
    pub isa: Isa,
    pub threads: usize,
    pub winograd_ms: f64,
    pub im2col_ms: f64,
    /// Wall time the measurement took (both algorithms, warm-ups, packing).
    pub cost_ms: f64,
    /// Read from the file cache (measured by an earlier process; `cost_ms` is that measurement's).
    pub cached: bool,
}

impl Measured {
    pub fn winograd(&self) -> bool {
        self.winograd_ms <= self.im2col_ms
    }
}

type Key = (usize, usize, Isa, usize);

fn cache() -> &'static Mutex<HashMap<Key, Measured>> {
    static C: OnceLock<Mutex<HashMap<Key, Measured>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Everything measured so far in this process.
pub fn log() -> Vec<Measured> {
    let mut v: Vec<Measured> = cache().lock().map(|m| m.values().copied().collect()).unwrap_or_default();
    v.sort_by_key(|m| (m.ic, m.oc, m.isa, m.threads));
    v
}

/// The algorithm for `c` (called inside the backend's pool, so the timing sees its threads). With a
/// bf16 kernel, bf16 where it applies and was measured faster than the fp32 choice; with a pinned
/// `policy` (not `Measure`) or the emulated kernel, bf16 wherever it applies, unmeasured.
pub fn choose(c: &Conv, isa: Isa, policy: ConvPolicy, bf16k: Option<Bf16Kernel>, int8k: Option<Int8Kernel>) -> ConvAlgo {
    // The fp32 choice first (without packing: only the chosen algorithm packs its weights).
    let wino = winograd::applies(c)
        && match policy {
            ConvPolicy::Im2col => false,
            ConvPolicy::Winograd => true,
            ConvPolicy::Measure => measure(c.num_input, c.num_output, isa).winograd(),
        };
    if let Some(k) = bf16k.filter(|_| bf16::applies(c)) {
        let pinned = policy != ConvPolicy::Measure || k == Bf16Kernel::Emulated;
        if pinned || measure_narrow(c.num_input, c.num_output, c.kernel_h, c.kernel_w, isa, "bf16", k.name(), wino, |c| ConvAlgo::Bf16(bf16::pack(c, k))).faster() {
            return ConvAlgo::Bf16(bf16::pack(c, k));
        }
    }
    if let Some(k) = int8k.filter(|_| int8::applies(c)) {
        let pinned = policy != ConvPolicy::Measure || k == Int8Kernel::Emulated;
        if pinned || measure_narrow(c.num_input, c.num_output, c.kernel_h, c.kernel_w, isa, "int8", k.name(), wino, |c| ConvAlgo::Int8(int8::pack(c, k))).faster() {
            return ConvAlgo::Int8(int8::pack(c, k));
        }
    }
    if wino {
        let p = winograd::pack(c, isa);
        // Pinned: Winograd on every map; measured: im2col where the map is too narrow (winograd::fills).
        ConvAlgo::Winograd(if policy == ConvPolicy::Winograd { p.pinned() } else { p })
    } else {
        ConvAlgo::Im2col
    }
}

/// A synthetic `kh x kw` conv (pad to keep the size, leaky ReLU) and a 64x64 input for timing.
fn synthetic(ic: usize, oc: usize, kh: usize, kw: usize) -> (Conv, Val) {
    let mut seed = 0x9e3779b97f4a7c15u64 ^ (ic * 1000 + oc) as u64;
    let mut rnd = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let c = Conv {
        num_output: oc,
        num_input: ic,
        group: 1,
        kernel_w: kw,
        kernel_h: kh,
        dilation_w: 1,
        dilation_h: 1,
        stride_w: 1,
        stride_h: 1,
        pad: Padding::Explicit { left: kw / 2, right: (kw - 1) / 2, top: kh / 2, bottom: (kh - 1) / 2 },
        pad_value: 0.0,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight: (0..oc * ic * kh * kw).map(|_| rnd() * 0.1).collect(),
        bias: Some((0..oc).map(|_| rnd()).collect()),
        activation: Activation::LeakyRelu(0.2),
    };
    let n = CALIBRATION_PX;
    let x = Val::T(Arc::new(Tensor::from_vec(ic, n, n, (0..ic * n * n).map(|_| rnd() + 0.5).collect())));
    (c, x)
}

/// The fastest of three runs (after a warm-up) of each algorithm, alternating.
fn time_algos(c: &Conv, x: &Val, isa: Isa, algos: &[ConvAlgo]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; algos.len()];
    for round in 0..4 {
        for (i, a) in algos.iter().enumerate() {
            let t = Instant::now();
            let out = conv_forward(c, a, isa, x, None, &[], &[]);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            debug_assert!(out.is_ok());
            if round > 0 {
                best[i] = best[i].min(ms);
            }
        }
    }
    best
}

/// One measured narrow-vs-fp32 conv shape (bf16 or int8 against the layer's fp32 choice).
#[derive(Clone, Copy, Debug)]
pub struct MeasuredNarrow {
    pub ic: usize,
    pub oc: usize,
    pub kh: usize,
    pub kw: usize,
    /// `bf16` or `int8`.
    pub precision: &'static str,
    /// The kernel's name ([`Bf16Kernel::name`], [`Int8Kernel::name`]).
    pub kernel: &'static str,
    pub threads: usize,
    pub narrow_ms: f64,
    /// The fp32 algorithm this layer would run otherwise (Winograd or im2col, as chosen).
    pub fp32_ms: f64,
    pub cost_ms: f64,
    pub cached: bool,
}

impl MeasuredNarrow {
    /// Whether the narrow precision was faster (and so runs).
    pub fn faster(&self) -> bool {
        self.narrow_ms < self.fp32_ms
    }
}

/// (ic, oc, kh, kw, ISA, kernel name, threads, fp32 choice is Winograd): kernel names are distinct
/// across bf16 and int8.
type KeyNarrow = (usize, usize, usize, usize, Isa, &'static str, usize, bool);

fn cache_narrow() -> &'static Mutex<HashMap<KeyNarrow, MeasuredNarrow>> {
    static C: OnceLock<Mutex<HashMap<KeyNarrow, MeasuredNarrow>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Every bf16- and int8-vs-fp32 measurement so far in this process.
pub fn log_narrow() -> Vec<MeasuredNarrow> {
    let mut v: Vec<MeasuredNarrow> = cache_narrow().lock().map(|m| m.values().copied().collect()).unwrap_or_default();
    v.sort_by_key(|m| (m.ic, m.oc, m.kh, m.kw, m.kernel, m.threads));
    v
}

/// Time (or recall) the narrow algorithm `pack` makes (kernel `kernel` of `precision`) against the
/// layer's fp32 choice (`wino`: Winograd, else im2col) for a shape; cached like [`measure`] (in
/// memory and in the file, keyed by the kernel too).
#[allow(clippy::too_many_arguments)]
fn measure_narrow(ic: usize, oc: usize, kh: usize, kw: usize, isa: Isa, precision: &'static str, kernel: &'static str, wino: bool, pack: impl FnOnce(&Conv) -> ConvAlgo) -> MeasuredNarrow {
    let threads = rayon::current_num_threads();
    let key = (ic, oc, kh, kw, isa, kernel, threads, wino);
    if let Some(m) = cache_narrow().lock().ok().and_then(|m| m.get(&key).copied()) {
        return m;
    }
    let fkey = format!("{}|{kernel}|{kh}x{kw}|{}", file_key(ic, oc, isa, threads), if wino { "winograd" } else { "im2col" });
    let file = cache_file();
    let parsed = file.and_then(|f| file_lines(f).get(&fkey).cloned()).and_then(|l| {
        let v: Vec<f64> = l.split('\t').filter_map(|x| x.parse().ok()).filter(|n: &f64| n.is_finite() && *n >= 0.0).collect();
        (v.len() == 3).then(|| MeasuredNarrow { ic, oc, kh, kw, precision, kernel, threads, narrow_ms: v[0], fp32_ms: v[1], cost_ms: v[2], cached: true })
    });
    let m = parsed.unwrap_or_else(|| {
        let t0 = Instant::now();
        let (c, x) = synthetic(ic, oc, kh, kw);
        let f = if wino { ConvAlgo::Winograd(winograd::pack(&c, isa)) } else { ConvAlgo::Im2col };
        let best = time_algos(&c, &x, isa, &[pack(&c), f]);
        let m = MeasuredNarrow { ic, oc, kh, kw, precision, kernel, threads, narrow_ms: best[0], fp32_ms: best[1], cost_ms: t0.elapsed().as_secs_f64() * 1e3, cached: false };
        if let Some(f) = file {
            let _ = write_line(f, &fkey, &format!("{}\t{}\t{}", m.narrow_ms, m.fp32_ms, m.cost_ms));
        }
        m
    });
    if let Ok(mut cache) = cache_narrow().lock() {
        cache.insert(key, m);
    }
    m
}

/// Time (or recall) the shape; the lock is not held while timing, so two threads may measure the
/// same shape at once (the later answer wins; both are valid).
pub fn measure(ic: usize, oc: usize, isa: Isa) -> Measured {
    let threads = rayon::current_num_threads();
    let key = (ic, oc, isa, threads);
    if let Some(m) = cache().lock().ok().and_then(|m| m.get(&key).copied()) {
        return m;
    }
    let file = cache_file();
    if let Some(m) = file.and_then(|f| file_lines(f).get(&file_key(ic, oc, isa, threads)).and_then(|l| parse_value(l, ic, oc, isa, threads))) {
        if let Ok(mut cache) = cache().lock() {
            cache.insert(key, m);
        }
        return m;
    }
    let t0 = Instant::now();
    let (c, x) = synthetic(ic, oc, 3, 3);
    let best = time_algos(&c, &x, isa, &[ConvAlgo::Winograd(winograd::pack(&c, isa)), ConvAlgo::Im2col]);
    let m = Measured { ic, oc, isa, threads, winograd_ms: best[0], im2col_ms: best[1], cost_ms: t0.elapsed().as_secs_f64() * 1e3, cached: false };
    if let Ok(mut cache) = cache().lock() {
        cache.insert(key, m);
    }
    if let Some(f) = file {
        // A cache that cannot be written costs a measurement next time, nothing else.
        let _ = write_line(f, &file_key(ic, oc, isa, threads), &format!("{}\t{}\t{}", m.winograd_ms, m.im2col_ms, m.cost_ms));
    }
    m
}

// ------------------------------------------------------------------ the file cache

static CACHE_FILE: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Sets the process's cache file (see the module doc) from a backend's options; the first call
/// (or the first measurement, which takes the default) wins.
pub fn set_cache_file(f: &CacheFile) {
    let _ = CACHE_FILE.get_or_init(|| f.resolve("cpu-calibration.tsv"));
}

/// The cache file (see the module doc), or None.
fn cache_file() -> Option<&'static Path> {
    CACHE_FILE.get_or_init(|| CacheFile::Default.resolve("cpu-calibration.tsv")).as_deref()
}

/// The file's lines (key -> value), read once per process and file.
fn file_lines(path: &Path) -> HashMap<String, String> {
    static READ: OnceLock<Mutex<HashMap<PathBuf, HashMap<String, String>>>> = OnceLock::new();
    let mut all = match READ.get_or_init(Default::default).lock() {
        Ok(g) => g,
        Err(_) => return read_file(path),
    };
    all.entry(path.to_path_buf()).or_insert_with(|| read_file(path)).clone()
}

/// The CPU's model name (Linux: /proc/cpuinfo), tabs and newlines replaced; else the architecture.
pub fn cpu_model() -> &'static str {
    static M: OnceLock<String> = OnceLock::new();
    M.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("CPU part"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| std::env::consts::ARCH.to_string())
            .replace(['\t', '\n', '|'], " ")
    })
}

/// A shape's key in the file: format, this build's kernels, the CPU, ISA, threads, shape.
fn file_key(ic: usize, oc: usize, isa: Isa, threads: usize) -> String {
    format!("1|{}-{}|{}|{}|{threads}|{ic}x{oc}", env!("CARGO_PKG_VERSION"), env!("LUCENT_CPU_KERNELS"), cpu_model(), isa.name())
}

/// "winograd_ms TAB im2col_ms TAB cost_ms" -> a cached measurement.
fn parse_value(v: &str, ic: usize, oc: usize, isa: Isa, threads: usize) -> Option<Measured> {
    let mut f = v.split('\t').map(|x| x.parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0));
    let (winograd_ms, im2col_ms, cost_ms) = (f.next()??, f.next()??, f.next()??);
    Some(Measured { ic, oc, isa, threads, winograd_ms, im2col_ms, cost_ms, cached: true })
}

/// The file's lines by key (empty when missing or unreadable; bad lines skipped).
fn read_file(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter_map(|l| l.split_once('\t')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
        .unwrap_or_default()
}

/// Replace or add one line (written to a temporary file, then renamed over the cache, so a reader
/// never sees half a file; concurrent writers may drop each other's new lines: measured again).
fn write_line(path: &Path, key: &str, value: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: String = old.lines().filter(|l| l.split_once('\t').is_some_and(|(k, _)| k != key)).flat_map(|l| [l, "\n"]).collect();
    out.push_str(&format!("{key}\t{value}\n"));
    let tmp = path.with_extension(format!("tmp{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], ""));
    std::fs::write(&tmp, out)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_cache_lines_round_trip_and_replace() {
        let dir = std::env::temp_dir().join(format!("lucent-cal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("cpu-calibration.tsv");
        assert!(read_file(&path).is_empty(), "a missing file is an empty cache");
        let m = Measured { ic: 64, oc: 64, isa: Isa::Scalar, threads: 2, winograd_ms: 1.5, im2col_ms: 2.25, cost_ms: 30.0, cached: false };
        let k = file_key(64, 64, Isa::Scalar, 2);
        assert!(k.contains(cpu_model()) && k.ends_with("|scalar|2|64x64"), "{k}");
        let v = |m: &Measured| format!("{}\t{}\t{}", m.winograd_ms, m.im2col_ms, m.cost_ms);
        write_line(&path, &k, &v(&m)).unwrap();
        write_line(&path, "other", &v(&Measured { winograd_ms: 9.0, ..m })).unwrap();
        write_line(&path, &k, &v(&Measured { winograd_ms: 3.0, ..m })).unwrap();
        let lines = read_file(&path);
        assert_eq!(lines.len(), 2);
        let back = parse_value(&lines[&k], 64, 64, Isa::Scalar, 2).unwrap();
        assert!(back.cached && back.winograd_ms == 3.0 && back.im2col_ms == 2.25 && back.cost_ms == 30.0 && !back.winograd());
        assert!(parse_value("1\tx\t2", 1, 1, Isa::Scalar, 1).is_none());
        assert!(parse_value("1\t2", 1, 1, Isa::Scalar, 1).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
