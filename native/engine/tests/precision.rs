//! The CPU precision per network (issue 32, src/precision.rs): the committed table parses and names
//! catalog networks, `auto` picks the narrowest precision whose committed minimum meets its bound
//! (never a row below it, fp32 for a network without rows), the engine applies it per network on the
//! CPU, and one network's bf16 quality is re-measured here on one small crop with the emulated bf16
//! kernel (the same bf16-rounded values as AMX / AVX512-BF16, on any CPU).
//!
//! Wall time: ~1 s in release (the re-measurement: x4v3 on a 48x48 crop, fp32 and emulated bf16);
//! it skips without ../shared/models (or LUCENT_MODEL_DIR) and ../shared/data.

use lucent_core::cpu::{Bf16Kernel, ConvPolicy, CpuBackend, CpuOptions, Precision};
use lucent_core::Backend;
use lucent_engine::photo::image_to_raster;
use lucent_engine::precision::{bound, measure, wider, CpuPrecisions, Row, Table, BF16_MIN_PSNR, COMMITTED_TSV, INT8_MIN_PSNR};
use lucent_engine::{catalog, pipelines, BackendChoice, Cancel, Engine, EngineOptions, Kind, Runtime, Samples};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn row(network: &str, p: Precision, min_psnr: f64) -> Row {
    Row {
        network: network.into(),
        precision: p,
        min_psnr,
        mean_psnr: min_psnr + 2.0,
        max_diff: 5,
        images: 9,
        crop: "96px".into(),
        kernel: "bf16 (amx-bf16) on 34 of 34 convs".into(),
        date: "2026-12-02".into(),
        cpu: "test".into(),
        wider_layers: Vec::new(),
    }
}

#[test]
fn committed_table_parses_and_names_catalog_networks() {
    let t = Table::parse(COMMITTED_TSV).expect("precision.tsv parses");
    assert_eq!(&t, Table::committed());
    for r in &t.rows {
        assert!(catalog::CATALOG.iter().any(|m| m.networks.contains(&r.network.as_str())), "{}: not a catalog network", r.network);
        assert!(r.images > 0 && r.ran_narrow(), "{} {}: a row must come from a run of the narrower path", r.network, r.precision.name());
        // Never silently worse: a row below its bound is never what auto picks.
        if !r.meets_bound() {
            assert_ne!(t.auto(&r.network), r.precision, "{} {} is below its bound", r.network, r.precision.name());
        }
    }
    // The file is what to_tsv writes (the example's --write keeps it that way).
    assert_eq!(Table::parse(&t.to_tsv()).unwrap(), t);
}

#[test]
fn parse_rejects_malformed_tables() {
    let header = "network\tprecision\tmin_psnr_db\tmean_psnr_db\tmax_diff\timages\tcrop\tkernel\tdate\tcpu\twider_layers\n";
    assert!(Table::parse("").is_err(), "no header");
    assert!(Table::parse("network\tprecision\n").is_err(), "wrong header");
    assert_eq!(Table::parse(&format!("# c\n\n{header}")).unwrap().rows.len(), 0);
    let good = row("sr/a", Precision::Bf16, 51.0).to_tsv();
    assert_eq!(Table::parse(&format!("{header}{good}\n")).unwrap().rows, vec![row("sr/a", Precision::Bf16, 51.0)]);
    for bad in [
        good.replace("\tbf16\t", "\tfp32\t"),
        good.replace("\tbf16\t", "\tauto\t"),
        good.replace("51.00", "x"),
        good.replace("51.00", "-1"),
        good.replace("\t9\t", "\tnine\t"),
        good.replacen("\t", " ", 1),
        format!("{good}\t"),
        format!("{good}\n{good}"),
        good.replace("\tbf16\t", "\tint8\t").replace("\t-", "\tconv_a,,conv_b"), // an empty layer name
        good.replace("\t-", ""),                                       // the old ten columns
    ] {
        assert!(Table::parse(&format!("{header}{bad}\n")).is_err(), "accepted {bad:?}");
    }
    // The per-layer rule: the layers round-trip (int8 and bf16 rows), `-` is none.
    let bf16_ruled = Row { wider_layers: vec!["conv_last".into()], ..row("sr/b", Precision::Bf16, 50.2) };
    assert_eq!(Table::parse(&format!("{header}{}\n", bf16_ruled.to_tsv())).unwrap().rows, vec![bf16_ruled]);
    let ruled = Row { wider_layers: vec!["conv_a".into(), "body.3".into()], ..row("sr/a", Precision::Int8, 46.0) };
    assert!(ruled.to_tsv().ends_with("\tconv_a,body.3"), "{}", ruled.to_tsv());
    assert_eq!(Table::parse(&format!("{header}{}\n", ruled.to_tsv())).unwrap().rows, vec![ruled]);
    assert!(good.ends_with("\t-"), "{good}");
    let inf = good.replace("51.00", "inf");
    assert_eq!(Table::parse(&format!("{header}{inf}\n")).unwrap().rows[0].min_psnr, f64::INFINITY);
}

#[test]
fn auto_picks_the_narrowest_precision_meeting_its_bound() {
    assert_eq!((bound(Precision::Bf16), bound(Precision::Int8), bound(Precision::Fp32)), (Some(50.0), Some(45.0), None));
    let t = Table {
        rows: vec![
            row("sr/bf16-ok", Precision::Bf16, BF16_MIN_PSNR),
            row("sr/bf16-low", Precision::Bf16, BF16_MIN_PSNR - 0.01),
            row("sr/both", Precision::Bf16, 55.0),
            row("sr/both", Precision::Int8, INT8_MIN_PSNR + 1.0),
            row("sr/int8-low", Precision::Bf16, 55.0),
            row("sr/int8-low", Precision::Int8, INT8_MIN_PSNR - 0.5),
            row("sr/int8-only-low", Precision::Int8, 44.0),
            Row { images: 0, ..row("sr/no-images", Precision::Bf16, 60.0) },
            Row { kernel: "fp32 (bf16 requested, no bf16 unit: ...)".into(), ..row("sr/fell-back", Precision::Bf16, f64::INFINITY) },
        ],
    };
    assert_eq!(t.auto("sr/bf16-ok"), Precision::Bf16, "at the bound");
    assert_eq!(t.auto("sr/bf16-low"), Precision::Fp32, "below the bound");
    assert_eq!(t.auto("sr/both"), Precision::Int8, "int8 is narrower and meets its bound");
    assert_eq!(t.auto("sr/int8-low"), Precision::Bf16, "int8 below its bound: bf16");
    assert_eq!(t.auto("sr/int8-only-low"), Precision::Fp32);
    // A CPU without an int8 unit: the int8 row cannot run, bf16 is next where its row holds.
    assert_eq!(t.auto_among("sr/both", |p| p != Precision::Int8), Precision::Bf16, "no int8 unit: bf16");
    assert_eq!(t.auto_among("sr/both", |p| p == Precision::Fp32), Precision::Fp32, "no narrow unit at all: fp32");
    assert_eq!(t.auto("sr/no-images"), Precision::Fp32, "a row over no image proves nothing");
    assert_eq!(t.auto("sr/fell-back"), Precision::Fp32, "a row where fp32 ran instead proves nothing");
    for absent in ["sr/unknown", "own/0123/model.onnx", "/abs/path/net", ""] {
        assert_eq!(t.auto(absent), Precision::Fp32, "{absent}: no row");
    }
    // Per network on a runtime: explicit choices win, `Auto` there means the table's.
    let p = CpuPrecisions::with_table(CpuOptions::default(), t).with("sr/bf16-low", Precision::Bf16).with("sr/both", Precision::Auto).with("sr/x", Precision::Fp32);
    assert_eq!(p.resolve("sr/bf16-low"), Precision::Bf16);
    assert_eq!(p.resolve("sr/both"), Precision::Int8);
    assert_eq!(p.resolve("sr/x"), Precision::Fp32);
    assert_eq!(p.resolve("sr/bf16-ok"), Precision::Bf16);
    assert!(p.describe().contains("sr/bf16-ok"), "{}", p.describe());
    assert!(!p.describe().contains("sr/bf16-low"), "{}", p.describe());
    // fp32 networks are prepared on the runtime's own backend, others on one backend per precision.
    let own: Arc<dyn Backend> = Arc::new(CpuBackend::with_options(&CpuOptions { threads: Some(1), ..Default::default() }));
    assert!(Arc::ptr_eq(&p.backend("sr/x", &own), &own));
    let b1 = p.backend("sr/bf16-ok", &own);
    assert!(!Arc::ptr_eq(&b1, &own));
    assert!(Arc::ptr_eq(&b1, &p.backend("sr/bf16-low", &own)), "one backend per precision");
}

/// The per-layer rule: an int8 row's `wider_layers` run bf16 wherever that network runs int8
/// (`auto` or an explicit `int8`), a bf16 row's run fp32, on a backend of its own (sharing the
/// pool), which says so.
#[test]
fn int8_rows_set_their_worst_layers_apart() {
    let t = Table {
        rows: vec![
            Row { wider_layers: vec!["body.7".into(), "body.9".into()], ..row("sr/ruled", Precision::Int8, 46.0) },
            row("sr/plain", Precision::Int8, 47.0),
            Row { wider_layers: vec!["head".into()], ..row("sr/bf16", Precision::Bf16, 52.0) },
        ],
    };
    let own: Arc<dyn Backend> = Arc::new(CpuBackend::with_options(&CpuOptions { threads: Some(1), ..Default::default() }));
    let p = CpuPrecisions::with_table(CpuOptions { threads: Some(1), ..Default::default() }, t.clone());
    assert_eq!(wider(Precision::Int8), Precision::Bf16);
    assert_eq!(wider(Precision::Bf16), Precision::Fp32);
    assert_eq!(p.wider_layers("sr/ruled", Precision::Int8), ["body.7".to_string(), "body.9".to_string()]);
    assert_eq!(p.wider_layers("sr/bf16", Precision::Bf16), ["head".to_string()]);
    assert!(p.wider_layers("sr/plain", Precision::Int8).is_empty() && p.wider_layers("sr/ruled", Precision::Bf16).is_empty() && p.wider_layers("sr/none", Precision::Int8).is_empty());
    if p.resolve("sr/ruled") == Precision::Int8 {
        let (ruled, plain) = (p.backend("sr/ruled", &own), p.backend("sr/plain", &own));
        assert!(!Arc::ptr_eq(&ruled, &plain), "the ruled network has a backend of its own");
        let info = ruled.info().cpu_precision.unwrap();
        assert!(info.starts_with("int8") && info.contains("per-layer rule: 2 "), "{info}");
        assert!(!plain.info().cpu_precision.unwrap().contains("per-layer"));
        assert!(p.describe().contains("bf16 on the layers int8 loses most on in 1 of them"), "{}", p.describe());
    }
    if p.resolve("sr/bf16") == Precision::Bf16 {
        let b = p.backend("sr/bf16", &own).info().cpu_precision.unwrap();
        assert!(b.starts_with("bf16") && b.ends_with("per-layer rule: 1 fp32 conv layer(s) set apart"), "{b}");
        assert!(p.describe().contains("fp32 on the layers bf16 loses most on in 1 of them"), "{}", p.describe());
    } else {
        eprintln!("no int8 unit here: the ruled network resolves to {}", p.resolve("sr/ruled").name());
    }
    // An explicit int8 for every network keeps the rule; explicit layers replace it (measurements).
    let all = CpuPrecisions::with_table(CpuOptions { threads: Some(1), ..Default::default() }, t).all(Precision::Int8);
    assert_eq!((all.resolve("sr/bf16"), all.resolve("own/x/model.onnx")), (Precision::Int8, Precision::Int8));
    let b = all.backend("sr/ruled", &own).info().cpu_precision.unwrap();
    assert!(b.contains("per-layer rule: 2 "), "{b}");
    let measured = all.with_layers("sr/x", vec![("conv1".into(), Precision::Int8)]).with("sr/x", Precision::Fp32);
    let one = measured.backend("sr/x", &own);
    assert!(!Arc::ptr_eq(&one, &own), "one layer in int8 on an fp32 network needs a backend of its own");
    assert!(one.info().cpu_precision.unwrap().starts_with("fp32; per-layer rule: 1 "), "{:?}", one.info().cpu_precision);
}

#[test]
fn engine_applies_auto_on_the_cpu_only() {
    let dir = std::env::temp_dir().join(format!("lucent-precision-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = |precision| {
        let cpu = CpuOptions { threads: Some(1), precision, ..Default::default() };
        Engine::new(EngineOptions { model_dir: dir.clone(), backend: Some(BackendChoice::Cpu), cpu, ..Default::default() }).unwrap()
    };
    // The default (auto): per network from the committed table; an own model runs fp32.
    assert_eq!(CpuOptions::default().precision, Precision::Auto);
    let e = engine(Precision::Auto);
    assert!(e.info().cpu_precision.as_deref().is_some_and(|s| s.starts_with("auto")), "{:?}", e.info().cpu_precision);
    let rt = e.runtime();
    for m in catalog::CATALOG {
        for n in m.networks {
            assert_eq!(rt.cpu_precision_of(n), Some(Table::committed().auto(n)), "{n}");
        }
    }
    assert_eq!(rt.cpu_precision_of("own/abc/model.pth"), Some(Precision::Fp32));
    // An explicit fp32: every network on the one backend, no per-network choice; bf16 and int8
    // every network at that precision, with the table's per-layer rule where it has one.
    assert_eq!(engine(Precision::Fp32).runtime().cpu_precision_of(catalog::GENERAL_X4V3), None);
    for p in [Precision::Bf16, Precision::Int8] {
        let e = engine(p);
        assert_eq!(e.runtime().cpu_precision_of(catalog::GENERAL_X4V3), Some(p));
        assert_eq!(e.runtime().cpu_precision_of("own/abc/model.pth"), Some(p));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// x4v3 (general_4x, the default photo model) on one 48x48 crop: emulated bf16 on every conv
/// against fp32, at least the bf16 bound. Measured 2026-12-02: 55.1 dB (max 3 levels) on
/// 0030.jpg; over the nine shared photos at 96 px see precision.tsv.
#[test]
fn x4v3_bf16_on_one_crop_meets_the_bound() {
    let models = std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"));
    let photo = root().join("../shared/data/photos/0030.jpg");
    if !models.join("sr/realesr-general-x4v3.param").exists() || !photo.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI: {} or {} missing", models.display(), photo.display());
        eprintln!("skipping: no x4v3 in {} or no ../shared/data", models.display());
        return;
    }
    let t0 = std::time::Instant::now();
    let img = image_to_raster(lucent_codec::decode(&std::fs::read(&photo).unwrap(), &Default::default()).unwrap()).unwrap().0;
    let src = measure::rgb8_crop(&img, 48).unwrap();
    let base = CpuOptions { threads: Some(2), ..Default::default() };
    let fp32: Arc<dyn Backend> = Arc::new(CpuBackend::with_options(&CpuOptions { precision: Precision::Fp32, ..base.clone() }));
    let pinned = CpuOptions { policy: ConvPolicy::Winograd, bf16_kernel: Some(Bf16Kernel::Emulated), ..base };
    let pipeline = pipelines::for_model(catalog::lookup(Kind::Photo, "general_4x").unwrap()).unwrap();
    let out = |rt: &Runtime| match pipeline.run(rt, src.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap().samples {
        Samples::U8(v) => v,
        Samples::U16(_) => panic!("8-bit in, 8-bit out"),
    };
    let reference = out(&Runtime::new(fp32.clone(), &models, None).unwrap());
    let per_net = CpuPrecisions::with_table(pinned, Table::default()).with(catalog::GENERAL_X4V3, Precision::Bf16);
    let rt = Runtime::new(fp32, &models, None).unwrap().with_cpu_precisions(per_net);
    let (db, max) = measure::compare_u8(&reference, &out(&rt));
    eprintln!("x4v3 bf16 (emulated) vs fp32 on a 48x48 crop: {db:.2} dB, max {max} levels, {:.1} s", t0.elapsed().as_secs_f64());
    assert!(db.is_finite(), "bf16 ran nowhere: the output equals fp32's");
    assert!(db >= BF16_MIN_PSNR, "{db:.2} dB < {BF16_MIN_PSNR} dB");
}
