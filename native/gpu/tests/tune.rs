//! The measured kernel choice (src/tune.rs) on lavapipe: every candidate GEMM tile and form is
//! timed per convolution shape, the fastest is chosen and run, the result stays exact (f32:
//! max|gpu - ref| / max(1, max|ref|) <= 1e-4 for the FMA GEMM, 2e-3 for the MMA kernels, whose
//! operands are f16), and a second prepare is answered from the cache.
//! Which candidate wins on lavapipe says nothing about GPUs; these tests check the mechanism.
//! The real cooperative-matrix form is `real_coop_tuned` in tests/mma.rs.

mod common;
use common::{backend, check_tuned, rel_err, tuning_handle, tuning_net, Rng};
use lucent_core::{reference, Cancel, Prepared};
use std::sync::Arc;

#[test]
fn tuned_fma_gemm() {
    let Some(be) = backend() else { return };
    check_tuned(&be, None, false, 41, "fma", 1e-4);
    check_tuned(&be, None, true, 46, "fma", 2e-3);
}

#[test]
fn tuned_emulated_mma() {
    let Some(be) = backend() else { return };
    let plan = be.emulated_mma(16, 32, true, None);
    check_tuned(&be, Some(plan), false, 42, "mma-emulated", 2e-3);
}

/// Without tuning (CPU adapters' default unless LUCENT_GPU_TUNE asks) nothing is measured.
#[test]
fn untuned_handle_reports_nothing() {
    let Some(be) = backend() else { return };
    if be.device_type() == "cpu" && std::env::var_os("LUCENT_GPU_TUNE").is_none() {
        assert_eq!(be.settings().tune, None, "CPU adapters do not tune by default");
    }
    let h = be.with_settings(|s| {
        s.rb = None;
        s.tune = None;
    });
    let mut r = Rng::new(43);
    let p = h.prepare_gpu(std::sync::Arc::new(tuning_net(&mut r))).unwrap();
    assert!(p.tuning().unwrap().is_empty());
}

/// The file cache: a prepare writes a line per shape measured (its choice and every time); a
/// later process (here: a probe side not yet measured in this one) takes a line's choice, even
/// one a measurement would not make, without measuring; bad lines are skipped and lines whose
/// candidates are not today's are measured again.
#[test]
fn tuning_file_cache() {
    let Some(be) = backend() else { return };
    let dir = std::env::temp_dir().join(format!("lucent-tune-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let handle = |side: u32, file: &str| tuning_handle(&be, None, false, side, Some(dir.join(file)));
    let mut r = Rng::new(45);
    let net = Arc::new(tuning_net(&mut r));
    let x = r.tensor(19, 9, 7);
    let (i, o) = (net.input_blobs()[0], *net.output_blobs().last().unwrap());
    let want = reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap();

    // 1. Measured and written (the folder is created).
    let first = handle(20, "sub/a.tsv").prepare_gpu(net.clone()).unwrap().tuning().unwrap();
    assert!(first.iter().all(|t| !t.cached));
    let text = std::fs::read_to_string(dir.join("sub/a.tsv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (t, l) in first.iter().zip(&lines) {
        let f: Vec<&str> = l.split('\t').collect();
        assert!(f[0].contains(be.adapter_name().split(" (").next().unwrap()) && f[0].contains(&t.shape) && f[0].ends_with("side 20"), "{l}");
        assert_eq!(f[1], t.chosen);
        assert_eq!(f[2].split(';').count(), t.candidates.len());
    }

    // 2. Another side: its lines, choosing each shape's slowest candidate, are taken as they are.
    let slowest = |t: &lucent_gpu::Tuning| t.candidates.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0.clone();
    let mut edited: String = first
        .iter()
        .zip(&lines)
        .map(|(t, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("{}\t{}\t{}\n", f[0].replace("side 20", "side 24"), slowest(t), f[2])
        })
        .collect();
    edited.push_str("not a cache line\n");
    std::fs::write(dir.join("b.tsv"), &edited).unwrap();
    let p = handle(24, "b.tsv").prepare_gpu(net.clone()).unwrap();
    let second = p.tuning().unwrap();
    assert!(second.iter().all(|t| t.cached), "{second:?}");
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(b.chosen, slowest(a));
        assert_eq!(b.candidates, a.candidates);
    }
    let forms: Vec<String> = [0, 1, 1, 2].iter().map(|&k| if second[k].chosen.ends_with("+pipelined") { "fma+pipelined".into() } else { "fma".to_string() }).collect();
    assert_eq!(p.conv_kernels().unwrap(), forms);
    let got = p.run(&[(i, &x)], &[o], &Cancel::new()).unwrap();
    assert!(rel_err(&got[0], &want[0]) <= 1e-4);

    // 3. A line whose candidates are not today's (the first shape's) is measured again and
    // rewritten; the other lines stay and are used.
    let stale = edited.replace("side 24", "side 28").replacen("fma 64x128x16/8=", "fma 8x8x8/4=", 1);
    std::fs::write(dir.join("c.tsv"), &stale).unwrap();
    let third = handle(28, "c.tsv").prepare_gpu(net).unwrap().tuning().unwrap();
    let cached: Vec<bool> = third.iter().map(|t| t.cached).collect();
    assert_eq!(cached, vec![false, true, true], "{third:?}");
    let text = std::fs::read_to_string(dir.join("c.tsv")).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("8x8x8") && !text.contains("not a cache line"));
    let _ = std::fs::remove_dir_all(&dir);
}
