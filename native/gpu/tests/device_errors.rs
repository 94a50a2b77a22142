//! Device-error handling: refused requests and a destroyed device come back as error codes.
//! (Own test binary = own process: destroying the process-wide device here cannot disturb the
//! other test files.)

mod common;
use common::{backend, NetBuilder, Rng};
use lucent_core::error::Code;
use lucent_core::{Backend, Cancel};
use std::sync::Arc;

#[test]
fn device_errors_become_codes() {
    let Some(be) = backend() else { return };
    println!("adapter: {} ({}), f16 {}, timestamps {}", be.adapter_name(), be.device_type(), be.f16_available(), be.timestamps_available());
    println!("adapters seen: {:?}", lucent_gpu::probe_adapters());

    // A buffer larger than the device allows: a validation error caught by the error scope.
    let e = be.try_alloc(u64::MAX / 4).unwrap_err();
    println!("oversized buffer -> {e}");
    assert_eq!(e.code, Code::Internal);
    // The device is still usable afterwards.
    be.try_alloc(1024).unwrap();

    // A feature map larger than one storage binding: refused before anything is recorded.
    let mut b = NetBuilder::new();
    b.input("in").layer("Interp", &["in"], &["out"], "0=1 1=64.0 2=64.0");
    let net = Arc::new(b.build());
    let p = be.prepare(net.clone()).unwrap();
    let limit = be.limits().max_storage_buffer_binding_size as usize;
    // Element size 2 (f16) is the smallest: this overflows the binding either way.
    let side = ((limit / 2 / 64 / 64) as f64).sqrt() as usize + 8;
    let x = Rng::new(1).tensor(1, side, side);
    let e = match p.run(&[(net.blob("in").unwrap(), &x)], &[net.blob("out").unwrap()], &Cancel::new()) {
        Ok(_) => panic!("a {side}x{side} input upscaled 64x must exceed the binding limit of {limit} bytes"),
        Err(e) => e,
    };
    println!("oversized feature map -> {e}");
    assert_eq!(e.code, Code::ImageTooLarge);

    // Cancellation before the run.
    let small = Rng::new(2).tensor(1, 4, 4);
    let c = Cancel::new();
    c.cancel();
    let e = p.run(&[(net.blob("in").unwrap(), &small)], &[net.blob("out").unwrap()], &c).unwrap_err();
    assert_eq!(e.code, Code::Aborted);

    // An unknown custom layer fails with model_invalid at run time.
    let mut b = NetBuilder::new();
    b.input("in").layer("acme.Unknown", &["in"], &["out"], "");
    let cnet = Arc::new(b.build());
    let cp = be.prepare(cnet.clone()).unwrap();
    let e = cp.run(&[(0, &small)], &[cnet.blob("out").unwrap()], &Cancel::new()).unwrap_err();
    assert_eq!(e.code, Code::ModelInvalid);

    // Works before the loss ...
    let out = p.run(&[(net.blob("in").unwrap(), &small)], &[net.blob("out").unwrap()], &Cancel::new()).unwrap();
    assert_eq!((out[0].h, out[0].w), (256, 256));
    // ... and fails cleanly (no panic, no hang) after it, for runs and for new preparations.
    be.destroy_device();
    let e = p.run(&[(net.blob("in").unwrap(), &small)], &[net.blob("out").unwrap()], &Cancel::new()).unwrap_err();
    println!("run after device loss -> {e}");
    assert_eq!(e.code, Code::DeviceLost);
    let e = be.prepare(net.clone()).err().expect("prepare after loss must fail");
    assert_eq!(e.code, Code::DeviceLost);
    drop(p);
    // A new backend opens a fresh device.
    let be2 = lucent_gpu::GpuBackend::new(lucent_gpu::GpuOptions { allow_cpu_adapter: true, ..Default::default() }).unwrap();
    let p2 = be2.prepare(net.clone()).unwrap();
    let out = p2.run(&[(net.blob("in").unwrap(), &small)], &[net.blob("out").unwrap()], &Cancel::new()).unwrap();
    assert_eq!(out[0].w, 256);
}

#[test]
fn adapter_filter_that_matches_nothing_is_gpu_unavailable() {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        return;
    }
    // The process-wide device is reused only when it fits; a filter for a nonexistent adapter
    // on a fresh device open fails with gpu_unavailable. CPU adapters are refused by default.
    let r = lucent_gpu::GpuBackend::new(lucent_gpu::GpuOptions {
        adapter_name: Some("no-such-adapter-xyz".into()),
        allow_cpu_adapter: false,
        ..Default::default()
    });
    let has_real_gpu = lucent_gpu::probe_adapters().iter().any(|(_, t)| t != "cpu");
    if !has_real_gpu {
        assert_eq!(r.err().expect("no real GPU: must fail").code, Code::GpuUnavailable);
    }
}
