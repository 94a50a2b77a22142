//! The CPU backend's arithmetic per network (issue 32): `auto` resolved from committed measurements.
//!
//! [`Table`] is `precision.tsv` next to this file: per catalog network and narrower precision, the
//! lowest PSNR against fp32 (8-bit output) over the shared photos, measured by
//! `examples/precision_eval.rs` with the narrower arithmetic on every conv where it applies (the worst
//! case: at run time the calibration may keep some convs fp32). [`Table::auto`] picks the narrowest
//! precision whose committed minimum meets its bound ([`bound`]: bf16 >= 50 dB, int8 >= 45 dB), else
//! fp32; a network without a row (an operator's own model, an ONNX file) runs fp32. A row measured
//! where the narrower path did not run (its `kernel` column says fp32) never counts.
//!
//! The per-layer rule: a row may name conv layers that run one step wider ([`wider`]: bf16 under
//! int8, fp32 under bf16) in `wider_layers`: the example measures each layer's loss alone at the
//! narrower precision and sets apart the worst ones, fewest first, until the whole network meets the
//! bound; the row's PSNR is measured with those layers wider. Wherever that precision runs for the
//! network (`auto`, or an explicit `int8` / `bf16`), they do.
//!
//! [`CpuPrecisions`] applies that per network on a CPU runtime (`Runtime::with_cpu_precisions`):
//! one CPU backend per precision in use (and per network with layers set apart), created on first
//! need with the runtime's CPU options, all on one worker pool.

use lucent_core::cpu::{CpuBackend, CpuOptions, Precision};
use lucent_core::{Backend, Code, Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Lowest PSNR (dB, against fp32 on the 8-bit output, minimum over the measured images) at which
/// `auto` runs a network in bf16.
pub const BF16_MIN_PSNR: f64 = 50.0;
/// The same for int8.
pub const INT8_MIN_PSNR: f64 = 45.0;

/// The quality bound of a narrower precision (None for fp32 and auto).
pub fn bound(p: Precision) -> Option<f64> {
    match p {
        Precision::Bf16 => Some(BF16_MIN_PSNR),
        Precision::Int8 => Some(INT8_MIN_PSNR),
        Precision::Fp32 | Precision::Auto => None,
    }
}

/// The precision a layer set apart by the per-layer rule runs at under `p` (one step wider).
pub fn wider(p: Precision) -> Precision {
    match p {
        Precision::Int8 => Precision::Bf16,
        _ => Precision::Fp32,
    }
}

/// The committed measurements (`examples/precision_eval.rs --write` rewrites them).
pub const COMMITTED_TSV: &str = include_str!("precision.tsv");

/// The columns of the table, in order.
pub const COLUMNS: [&str; 11] = ["network", "precision", "min_psnr_db", "mean_psnr_db", "max_diff", "images", "crop", "kernel", "date", "cpu", "wider_layers"];

/// One measured (network, precision).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Network stem as the catalog names it (`sr/realesr-general-x4v3`).
    pub network: String,
    pub precision: Precision,
    /// Lowest PSNR (dB) over the images against the fp32 output, both rounded to 8 bit (`inf`: identical).
    pub min_psnr: f64,
    pub mean_psnr: f64,
    /// Largest difference of one 8-bit sample (levels).
    pub max_diff: u32,
    pub images: usize,
    /// The crop side (input px) or the input's description.
    pub crop: String,
    /// What ran (the CPU backend's precision line, e.g. `bf16 (amx-bf16)`).
    pub kernel: String,
    /// UTC date of the measurement (YYYY-MM-DD).
    pub date: String,
    /// The CPU (`model name` of /proc/cpuinfo).
    pub cpu: String,
    /// The conv layers (by name) that run one step wider ([`wider`]), the per-layer rule (`-` in
    /// the file when none).
    pub wider_layers: Vec<String>,
}

impl Row {
    /// Whether the narrower precision really ran for this row (not an fp32 fallback).
    pub fn ran_narrow(&self) -> bool {
        !self.kernel.trim_start().starts_with("fp32")
    }

    /// Whether this row lets `auto` use its precision: it ran narrow, over at least one image, and
    /// its minimum meets the precision's bound.
    pub fn meets_bound(&self) -> bool {
        bound(self.precision).is_some_and(|b| self.min_psnr >= b) && self.images > 0 && self.ran_narrow()
    }

    /// The row as a TSV line (no newline).
    pub fn to_tsv(&self) -> String {
        // Rounded down to 0.01 dB: a committed minimum never overstates the measured one.
        let db = |v: f64| if v.is_finite() { format!("{:.2}", (v * 100.0 + 1e-6).floor() / 100.0) } else { "inf".into() };
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        [
            clean(&self.network),
            self.precision.name().into(),
            db(self.min_psnr),
            db(self.mean_psnr),
            self.max_diff.to_string(),
            self.images.to_string(),
            clean(&self.crop),
            clean(&self.kernel),
            clean(&self.date),
            clean(&self.cpu),
            if self.wider_layers.is_empty() { "-".into() } else { clean(&self.wider_layers.join(",")) },
        ]
        .join("\t")
    }
}

/// The parsed table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub rows: Vec<Row>,
}

fn bad(line: usize, why: String) -> Error {
    Error::new(Code::InvalidArgument, format!("precision table line {line}: {why}"))
}

impl Table {
    /// Parse the TSV: `#` comment lines and blank lines skipped, then a header line naming
    /// [`COLUMNS`] in order, then one row per line.
    pub fn parse(text: &str) -> Result<Table> {
        let mut rows = Vec::new();
        let mut header = false;
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split('\t').map(str::trim).collect();
            if !header {
                if f != COLUMNS {
                    return Err(bad(n, format!("header {f:?}, expected {COLUMNS:?}")));
                }
                header = true;
                continue;
            }
            if f.len() != COLUMNS.len() {
                return Err(bad(n, format!("{} columns, expected {}", f.len(), COLUMNS.len())));
            }
            let precision = match Precision::parse(f[1]) {
                Some(p @ (Precision::Bf16 | Precision::Int8)) => p,
                _ => return Err(bad(n, format!("precision '{}': expected bf16 or int8", f[1]))),
            };
            let db = |s: &str, what: &str| -> Result<f64> {
                let v = if s == "inf" { f64::INFINITY } else { s.parse::<f64>().map_err(|_| bad(n, format!("{what} '{s}' is not a number")))? };
                if v.is_nan() || v < 0.0 {
                    return Err(bad(n, format!("{what} '{s}' out of range")));
                }
                Ok(v)
            };
            let int = |s: &str, what: &str| s.parse::<u64>().map_err(|_| bad(n, format!("{what} '{s}' is not a count")));
            if f[0].is_empty() {
                return Err(bad(n, "empty network".into()));
            }
            let row = Row {
                network: f[0].to_string(),
                precision,
                min_psnr: db(f[2], "min_psnr_db")?,
                mean_psnr: db(f[3], "mean_psnr_db")?,
                max_diff: int(f[4], "max_diff")?.min(u32::MAX as u64) as u32,
                images: int(f[5], "images")? as usize,
                crop: f[6].to_string(),
                kernel: f[7].to_string(),
                date: f[8].to_string(),
                cpu: f[9].to_string(),
                wider_layers: if f[10] == "-" { Vec::new() } else { f[10].split(',').map(|l| l.trim().to_string()).collect() },
            };
            if row.wider_layers.iter().any(String::is_empty) {
                return Err(bad(n, "empty layer name in wider_layers".into()));
            }
            if rows.iter().any(|r: &Row| r.network == row.network && r.precision == row.precision) {
                return Err(bad(n, format!("second row for {} {}", row.network, precision.name())));
            }
            rows.push(row);
        }
        if !header {
            return Err(bad(0, "no header line".into()));
        }
        Ok(Table { rows })
    }

    /// The committed table; an unreadable one (a test checks it is not) counts as empty: fp32 everywhere.
    pub fn committed() -> &'static Table {
        static T: OnceLock<Table> = OnceLock::new();
        T.get_or_init(|| {
            Table::parse(COMMITTED_TSV).unwrap_or_else(|e| {
                eprintln!("{e}: auto runs every network in fp32");
                Table::default()
            })
        })
    }

    pub fn row(&self, network: &str, p: Precision) -> Option<&Row> {
        self.rows.iter().find(|r| r.network == network && r.precision == p)
    }

    /// `auto` for `network`: int8 if its row meets the int8 bound, else bf16 if its row meets the
    /// bf16 bound, else fp32 (also for a network without rows).
    pub fn auto(&self, network: &str) -> Precision {
        self.auto_among(network, |_| true)
    }

    /// [`Self::auto`] among the precisions `runs` accepts (those this CPU has a unit for): a network
    /// whose int8 row holds but whose CPU has no int8 unit falls back to bf16 where that row holds.
    pub fn auto_among(&self, network: &str, runs: impl Fn(Precision) -> bool) -> Precision {
        [Precision::Int8, Precision::Bf16]
            .into_iter()
            .find(|&p| runs(p) && self.row(network, p).is_some_and(Row::meets_bound))
            .unwrap_or(Precision::Fp32)
    }

    /// The table as TSV (header comment, header line, rows sorted by network then precision).
    pub fn to_tsv(&self) -> String {
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by(|a, b| a.network.cmp(&b.network).then(a.precision.name().cmp(b.precision.name())));
        let mut s = String::from(
            "# CPU precision vs fp32 per catalog network (issue 32): written by\n\
             # `cargo run --release -p lucent-engine --example precision_eval -- --write`; read by precision.rs (auto).\n\
             # PSNR (dB) and max_diff (levels) on the 8-bit output against fp32, narrower arithmetic on every conv where it applies;\n\
             # wider_layers (the per-layer rule) run one step wider: bf16 in an int8 row, fp32 in a bf16 row; the PSNR measured so.\n",
        );
        s.push_str(&COLUMNS.join("\t"));
        s.push('\n');
        for r in rows {
            s.push_str(&r.to_tsv());
            s.push('\n');
        }
        s
    }

    /// Replace (or add) the rows for `(network, precision)` of `new`.
    pub fn merge(&mut self, new: Vec<Row>) {
        for r in new {
            self.rows.retain(|o| !(o.network == r.network && o.precision == r.precision));
            self.rows.push(r);
        }
    }
}

/// A backend of [`CpuPrecisions`]: its precision and, where layers are set apart, the network.
type BackendKey = (Precision, Option<String>);

/// Per-network precision on a CPU runtime: each network's precision from an explicit choice
/// ([`Self::with`]) or else the table's [`Table::auto`]; one CPU backend per precision in use.
pub struct CpuPrecisions {
    base: CpuOptions,
    table: Table,
    chosen: HashMap<String, Precision>,
    /// The precision of every network not in `chosen` (`Auto`: the table's).
    all: Precision,
    /// Per-layer precisions given for a network ([`Self::with_layers`]), over the table's rule.
    layers: HashMap<String, Vec<(String, Precision)>>,
    /// By precision, and with layers set apart by network too (None: the plain one).
    backends: Mutex<HashMap<BackendKey, Arc<dyn Backend>>>,
    /// The first narrow backend: the others share its worker pool.
    pool: OnceLock<Arc<CpuBackend>>,
}

impl CpuPrecisions {
    /// `auto` from the committed table, backends built from `base` (its precision field is replaced).
    pub fn auto(base: CpuOptions) -> CpuPrecisions {
        Self::with_table(base, Table::committed().clone())
    }

    /// `auto` from `table`.
    pub fn with_table(base: CpuOptions, table: Table) -> CpuPrecisions {
        CpuPrecisions { base, table, chosen: HashMap::new(), all: Precision::Auto, layers: HashMap::new(), backends: Mutex::new(HashMap::new()), pool: OnceLock::new() }
    }

    /// Every network at `p` (an operator's explicit `int8`: the table's per-layer rule still
    /// applies to the networks it has measured), except those given by [`Self::with`].
    pub fn all(mut self, p: Precision) -> CpuPrecisions {
        self.all = p;
        self
    }

    /// Run `network` at `p` whatever the table says (measurements; `Auto` here means the table's).
    pub fn with(mut self, network: &str, p: Precision) -> CpuPrecisions {
        self.chosen.insert(network.to_string(), p);
        self
    }

    /// Per-layer precisions for `network`'s conv layers, by name, instead of the table's rule
    /// (measurements: one layer in int8, the rest fp32; a candidate set of layers in bf16).
    pub fn with_layers(mut self, network: &str, layers: Vec<(String, Precision)>) -> CpuPrecisions {
        self.layers.insert(network.to_string(), layers);
        self
    }

    /// The precision `network` runs at (never `Auto`).
    pub fn resolve(&self, network: &str) -> Precision {
        match self.chosen.get(network).copied().unwrap_or(self.all) {
            Precision::Auto => self.table.auto_among(network, |p| self.cpu_runs(p)),
            p => p,
        }
    }

    /// Whether this CPU has a unit for `p` under the base options (else that precision would run fp32).
    fn cpu_runs(&self, p: Precision) -> bool {
        let o = CpuOptions { precision: p, ..self.base.clone() };
        match p {
            Precision::Int8 => o.effective_int8().is_some(),
            Precision::Bf16 => o.effective_bf16().0.is_some(),
            Precision::Fp32 | Precision::Auto => true,
        }
    }

    /// The conv layers of `network` that run one step wider when it runs at `p` (the table's
    /// per-layer rule).
    pub fn wider_layers(&self, network: &str, p: Precision) -> &[String] {
        self.table.row(network, p).map_or(&[], |r| &r.wider_layers)
    }

    /// The backend `network` is prepared on: `fp32` on `fp32_backend` (the runtime's own), another
    /// precision on a CPU backend with the base options at that precision (built once; with the
    /// network's layers set apart, one backend per such network), all on one worker pool.
    pub fn backend(&self, network: &str, fp32_backend: &Arc<dyn Backend>) -> Arc<dyn Backend> {
        let p = self.resolve(network);
        let layers: Vec<(String, Precision)> = match self.layers.get(network) {
            Some(l) => l.clone(),
            None => self.wider_layers(network, p).iter().map(|l| (l.clone(), wider(p))).collect(),
        };
        if p == Precision::Fp32 && layers.is_empty() {
            return fp32_backend.clone();
        }
        let key = (p, (!layers.is_empty()).then(|| network.to_string()));
        // A poisoned map (a panic while building one) is still a valid map.
        self.backends
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert_with(|| -> Arc<dyn Backend> {
                let opts = CpuOptions { precision: p, layer_precision: layers, ..self.base.clone() };
                match self.pool.get() {
                    Some(first) => Arc::new(first.sharing_pool(&opts)),
                    None => self.pool.get_or_init(|| Arc::new(CpuBackend::with_options(&opts))).clone(),
                }
            })
            .clone()
    }

    /// What `info()` says: the networks the table runs narrower (and what runs there), fp32 otherwise.
    pub fn describe(&self) -> String {
        if self.all != Precision::Auto {
            let runs = CpuOptions { precision: self.all, ..self.base.clone() }.effective_bf16().1;
            let ruled: Vec<&str> = self.table.rows.iter().filter(|r| r.precision == self.all && !r.wider_layers.is_empty()).map(|r| r.network.as_str()).collect();
            return if ruled.is_empty() {
                runs
            } else {
                format!("{runs}; {} on the layers {} loses most on, per committed measurements, in {}", wider(self.all).name(), self.all.name(), ruled.join(", "))
            };
        }
        let mut narrow: Vec<String> = Vec::new();
        for p in [Precision::Int8, Precision::Bf16] {
            let nets: Vec<&str> = self.table.rows.iter().filter(|r| r.precision == p && self.table.auto(&r.network) == p).map(|r| r.network.as_str()).collect();
            if !nets.is_empty() {
                let runs = CpuOptions { precision: p, ..self.base.clone() }.effective_bf16().1;
                let ruled = nets.iter().filter(|n| !self.wider_layers(n, p).is_empty()).count();
                let rule = if ruled > 0 { format!("; {} on the layers {} loses most on in {ruled} of them", wider(p).name(), p.name()) } else { String::new() };
                narrow.push(format!("{}: {} ({runs}{rule})", p.name(), nets.join(", ")));
            }
        }
        if narrow.is_empty() {
            "auto: fp32 (no network meets a narrower precision's bound in the committed table)".into()
        } else {
            format!("auto per network from committed measurements: {}; fp32 otherwise", narrow.join("; "))
        }
    }
}

/// Measurement helpers shared by `examples/precision_eval.rs` and the tests.
pub mod measure {
    use crate::raster::{Raster, Samples};
    use lucent_core::Result;

    /// (PSNR in dB, largest sample difference in levels) of two 8-bit buffers; `inf` when identical.
    pub fn compare_u8(a: &[u8], b: &[u8]) -> (f64, u32) {
        assert_eq!(a.len(), b.len(), "outputs of different sizes");
        let (mut se, mut max) = (0f64, 0u32);
        for (&x, &y) in a.iter().zip(b) {
            let d = (x as i32 - y as i32).unsigned_abs();
            se += (d * d) as f64;
            max = max.max(d);
        }
        let mse = se / a.len().max(1) as f64;
        let db = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
        (db, max)
    }

    /// The centre `side` x `side` crop (the whole image where it is smaller) as 8-bit RGB: grey
    /// expanded, alpha dropped, 16 bit rounded to 8 (what the networks see, without the alpha path).
    pub fn rgb8_crop(r: &Raster, side: usize) -> Result<Raster> {
        let (w, h) = (side.min(r.width), side.min(r.height));
        let (x0, y0) = ((r.width - w) / 2, (r.height - h) / 2);
        let c = r.channels;
        let at = |i: usize| -> u8 {
            match &r.samples {
                Samples::U8(v) => v[i],
                Samples::U16(v) => ((v[i] as u32 * 255 + 32767) / 65535) as u8,
            }
        };
        let mut out = Vec::with_capacity(w * h * 3);
        for y in y0..y0 + h {
            for x in x0..x0 + w {
                let p = (y * r.width + x) * c;
                for k in 0..3 {
                    out.push(at(p + if c >= 3 { k } else { 0 }));
                }
            }
        }
        Raster::from_u8(w, h, 3, out)
    }

    /// Box-filter an 8-bit RGB raster down by an integer `factor` (face crops for the detector job).
    pub fn shrink(r: &Raster, factor: usize) -> Result<Raster> {
        let Samples::U8(v) = &r.samples else { return Raster::from_u8(0, 0, 3, vec![]) };
        let (w, h, c) = (r.width / factor, r.height / factor, r.channels);
        let mut out = Vec::with_capacity(w * h * c);
        for y in 0..h {
            for x in 0..w {
                for k in 0..c {
                    let mut s = 0u32;
                    for dy in 0..factor {
                        for dx in 0..factor {
                            s += v[((y * factor + dy) * r.width + x * factor + dx) * c + k] as u32;
                        }
                    }
                    let n = (factor * factor) as u32;
                    out.push(((s + n / 2) / n) as u8);
                }
            }
        }
        Raster::from_u8(w, h, c, out)
    }

    /// The UTC date (YYYY-MM-DD) of now.
    pub fn utc_date() -> String {
        let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 86_400).unwrap_or(0) as i64;
        // Days since 1970-01-01 to a civil date (proleptic Gregorian).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// This machine's CPU (`model name` of /proc/cpuinfo), or "unknown CPU".
    pub fn cpu_model() -> String {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| "unknown CPU".into())
    }
}
