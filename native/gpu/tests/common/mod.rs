#![allow(dead_code)]
//! Shared test helpers: the lavapipe-capable backend, tiny network builder, random data, error metric.

use lucent_core::ncnn::Net;
use lucent_core::Tensor;
use lucent_gpu::GpuBackend;

pub mod env;

/// The GPU backend (a CPU adapter such as lavapipe is allowed; the other options from the
/// `LUCENT_GPU_*` environment of the test run, [`env`]). Fails loudly when no adapter
/// exists; only LUCENT_SKIP_GPU_TESTS=1 opts out (returns None).
pub fn backend() -> Option<GpuBackend> {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        eprintln!("LUCENT_SKIP_GPU_TESTS=1: skipping GPU test");
        return None;
    }
    match GpuBackend::new(env::gpu_options_from_env(true)) {
        Ok(b) => Some(b),
        Err(e) => panic!(
            "no GPU adapter for the tests ({e}); adapters: {:?}. Install mesa-vulkan-drivers (lavapipe) or set LUCENT_SKIP_GPU_TESTS=1",
            lucent_gpu::probe_adapters()
        ),
    }
}

/// max|a-b| / max(1, max|ref|)
pub fn rel_err(got: &Tensor, want: &Tensor) -> f32 {
    assert_eq!(
        (got.dims, got.c, got.h, got.w),
        (want.dims, want.c, want.h, want.w),
        "shape mismatch: got {} want {}",
        got.shape_string(),
        want.shape_string()
    );
    let mut md = 0.0f32;
    let mut mr = 0.0f32;
    for (a, b) in got.data.iter().zip(&want.data) {
        md = md.max((a - b).abs());
        mr = mr.max(b.abs());
        assert!(a.is_finite() == b.is_finite(), "non-finite mismatch {a} vs {b}");
    }
    md / mr.max(1.0)
}

/// xorshift random numbers, seeded per test.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next_f32() * scale).collect()
    }
    pub fn tensor(&mut self, c: usize, h: usize, w: usize) -> Tensor {
        Tensor::from_vec(c, h, w, self.vec(c * h * w, 1.0))
    }
}

/// Builds `.param` text + `.bin` bytes for a small network.
#[derive(Default)]
pub struct NetBuilder {
    lines: Vec<String>,
    blobs: Vec<String>,
    pub bin: Vec<u8>,
}

impl NetBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a layer; `params` is ncnn's "k=v" list.
    pub fn layer(&mut self, kind: &str, bottoms: &[&str], tops: &[&str], params: &str) -> &mut Self {
        for t in tops {
            self.blobs.push(t.to_string());
        }
        let name = format!("l{}", self.lines.len());
        self.lines.push(format!("{kind} {name} {} {} {} {} {params}", bottoms.len(), tops.len(), bottoms.join(" "), tops.join(" ")));
        self
    }
    pub fn input(&mut self, name: &str) -> &mut Self {
        self.layer("Input", &[], &[name], "")
    }
    /// Weights with the f32 tag.
    pub fn tagged(&mut self, w: &[f32]) -> &mut Self {
        self.bin.extend_from_slice(&0u32.to_le_bytes());
        self.raw(w)
    }
    pub fn raw(&mut self, w: &[f32]) -> &mut Self {
        for v in w {
            self.bin.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
    pub fn build(&self) -> Net {
        let text = format!("7767517\n{} {}\n{}\n", self.lines.len(), self.blobs.len(), self.lines.join("\n"));
        Net::from_parts(&text, &self.bin).unwrap_or_else(|e| panic!("bad test net: {e}\n{text}"))
    }
}

/// Input -> one convolution layer (`kind`: Convolution / ConvolutionDepthWise) with ncnn params
/// `extra` and random weights (and bias when `bias`).
#[allow(clippy::too_many_arguments)] // one conv layer's whole description
pub fn conv_net(r: &mut Rng, kind: &str, cin: usize, cout: usize, kw: usize, kh: usize, group: usize, extra: &str, bias: bool) -> Net {
    let mut b = NetBuilder::new();
    b.input("in");
    let wn = cout * (cin / group) * kw * kh;
    let g = if group > 1 { format!(" 7={group}") } else { String::new() };
    b.layer(kind, &["in"], &["out"], &format!("0={cout} 1={kw} 11={kh} 5={} 6={wn}{g} {extra}", bias as i32));
    let scale = 1.0 / ((cin / group * kw * kh) as f32).sqrt();
    let w = r.vec(wn, scale);
    b.tagged(&w);
    if bias {
        let bv = r.vec(cout, 0.5);
        b.raw(&bv);
    }
    b.build()
}

/// in -> Split -> 3x3 conv 24->24 -> PReLU (`slopes` 1 or 24) -> residual add with the input:
/// `Eltwise` sum with coefficients (0.2, 1.0), or `BinaryOp` add with the input first. The
/// convolution kernels fuse all of it.
pub fn prelu_residual_net(r: &mut Rng, slopes: usize, elt: &str) -> Net {
    let mut b = NetBuilder::new();
    b.input("in");
    b.layer("Split", &["in"], &["a", "b"], "");
    b.layer("Convolution", &["a"], &["c"], "0=24 1=3 4=1 5=1 6=5184");
    let w = r.vec(24 * 24 * 9, 0.07);
    let bias = r.vec(24, 0.2);
    b.tagged(&w).raw(&bias);
    b.layer("PReLU", &["c"], &["p"], &format!("0={slopes}"));
    let s = r.vec(slopes, 0.3);
    b.raw(&s);
    if elt == "Eltwise" {
        b.layer("Eltwise", &["p", "b"], &["out"], "0=1 -23301=2,0.2,1.0");
    } else {
        b.layer("BinaryOp", &["b", "p"], &["out"], "0=0");
    }
    b.build()
}

/// The convolution geometry and epilogue cases every GEMM-like kernel is checked on: 5x3 kernel
/// with stride 2, dilation 2, asymmetric pads and pad value 0.25, clip; SAME_UPPER stride 2, relu;
/// 4 groups, mish; hardswish with odd channel counts and an odd width (f16 pairs that start at
/// odd elements). (name, network, input).
pub fn conv_geometry_cases(r: &mut Rng) -> Vec<(&'static str, Net, Tensor)> {
    let mut v = Vec::new();
    let net = conv_net(r, "Convolution", 6, 20, 5, 3, 1, "2=2 3=2 4=1 15=3 14=2 16=0 18=0.25 9=3 -23310=2,-0.5,0.7", true);
    v.push(("conv5x3 s2 d2 pads clip", net, r.tensor(6, 21, 19)));
    let net = conv_net(r, "Convolution", 8, 16, 3, 3, 1, "3=2 4=-233 9=1", true);
    v.push(("conv3x3 s2 same_upper relu", net, r.tensor(8, 14, 15)));
    let net = conv_net(r, "ConvolutionDepthWise", 16, 32, 3, 3, 4, "4=1 9=5", true);
    v.push(("conv grouped g4 16->32 mish", net, r.tensor(16, 10, 12)));
    let net = conv_net(r, "Convolution", 5, 33, 3, 3, 1, "4=1 9=6 -23310=2,0.2,0.5", true);
    v.push(("conv3x3 5->33 hardswish", net, r.tensor(5, 13, 37)));
    v
}

/// The convolution shapes of [`tuning_net`] with how many layers have each.
pub const TUNING_SHAPES: [(&str, usize); 3] = [("19->40 3x3 s1,1 d1,1 g1", 1), ("40->40 3x3 s1,1 d1,1 g1", 2), ("40->8 1x1 s1,1 d1,1 g1", 1)];

/// A handle that tunes: f16 storage or f32, no register-blocked kernel, the MMA plan `mma` (None:
/// the FMA GEMM), probes of `side` pixels, the file cache `cache`.
pub fn tuning_handle(be: &GpuBackend, mma: Option<lucent_gpu::MmaPlan>, f16: bool, side: u32, cache: Option<std::path::PathBuf>) -> GpuBackend {
    be.with_settings(|s| {
        s.f16 = f16;
        s.rb = None;
        s.mma = mma;
        s.tune = Some(lucent_gpu::tune::Tune { side, cache });
    })
}

/// Prepare [`tuning_net`] on a [`tuning_handle`] (16-pixel probes, no file) and check the tuner's
/// report and its effect: one entry per shape of [`TUNING_SHAPES`], every candidate a `kind`
/// kernel timed on the device (finite, > 0: none failed or disagreed with the default's output,
/// f16 rounding included), plain and pipelined forms among them, the fastest
/// chosen and run by every layer of that shape; the output against `lucent_core::reference`
/// within `bound`; a second prepare answered from the cache with the same choices.
pub fn check_tuned(be: &GpuBackend, mma: Option<lucent_gpu::MmaPlan>, f16: bool, seed: u64, kind: &str, bound: f32) {
    use lucent_core::ncnn::Op;
    let h = tuning_handle(be, mma, f16, 16, None);
    if f16 && !h.settings().f16 {
        eprintln!("adapter {} has no SHADER_F16: f16 tuning not tested here", be.adapter_name());
        return;
    }
    let name = &format!("{kind} {}", if f16 { "f16" } else { "f32" });
    let mut r = Rng::new(seed);
    let x = r.tensor(19, 13, 11);
    let net = std::sync::Arc::new(tuning_net(&mut r));
    let (i, o) = (net.input_blobs()[0], *net.output_blobs().last().unwrap());
    let want = lucent_core::reference::run_net(&net, &[(i, x.clone())], &[o]).unwrap();
    let p = h.prepare_gpu(net.clone()).unwrap_or_else(|e| panic!("{name}: prepare: {e}"));
    let report = p.tuning().unwrap();
    for t in &report {
        println!("{name}: {} {:?}: {:?} -> {}", t.shape, t.layers, t.candidates, t.chosen);
    }
    let got: Vec<(&str, usize)> = report.iter().map(|t| (t.shape.as_str(), t.layers.len())).collect();
    assert_eq!(got, TUNING_SHAPES, "{name}: shapes tuned");
    for t in &report {
        assert!(!t.cached, "{name}: {} measured in a fresh process", t.shape);
        assert!(t.candidates.len() >= 2, "{name}: {} has {} candidates", t.shape, t.candidates.len());
        assert!(t.candidates.iter().all(|(l, ms)| l.starts_with(&format!("{kind} ")) && ms.is_finite() && *ms > 0.0), "{name}: {:?}", t.candidates);
        assert!(t.candidates.iter().any(|(l, _)| l.ends_with("+pipelined")) && t.candidates.iter().any(|(l, _)| !l.ends_with("+pipelined")));
        let fastest = t.candidates.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert_eq!(t.chosen, fastest.0, "{name}: {} chose {} over the fastest {fastest:?}", t.shape, t.chosen);
    }
    // Each convolution runs its shape's choice (the form is what conv_kernels reports).
    let forms: Vec<String> = net
        .layers
        .iter()
        .filter(|l| matches!(l.op, Op::Conv(_)))
        .map(|l| {
            let t = report.iter().find(|t| t.layers.contains(&l.name)).unwrap_or_else(|| panic!("{name}: layer {} not tuned", l.name));
            format!("{kind}{}", if t.chosen.ends_with("+pipelined") { "+pipelined" } else { "" })
        })
        .collect();
    assert_eq!(p.conv_kernels().unwrap(), forms, "{name}: kernels run");
    let out = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &lucent_core::Cancel::new()).unwrap();
    let e = rel_err(&out[0], &want[0]);
    println!("{name}: tuned network vs reference: rel err {e:.2e} (bound {bound:.0e})");
    assert!(e <= bound, "{name}: rel err {e:.3e} > {bound:.0e}");
    let again = h.prepare_gpu(net).unwrap().tuning().unwrap();
    assert!(again.iter().all(|t| t.cached), "{name}: second prepare measured again");
    let chosen = |r: &[lucent_gpu::Tuning]| r.iter().map(|t| t.chosen.clone()).collect::<Vec<_>>();
    assert_eq!(chosen(&again), chosen(&report), "{name}: cached choices");
}

/// in -> 3x3 conv 19->40 (ReLU) -> two 3x3 convs 40->40 (one shape) -> 1x1 conv 40->8: three
/// convolution shapes, wide and narrow tiles.
pub fn tuning_net(r: &mut Rng) -> Net {
    let mut b = NetBuilder::new();
    b.input("in");
    let mut conv = |b: &mut NetBuilder, from: &str, to: &str, cin: usize, cout: usize, k: usize, extra: &str| {
        let wn = cout * cin * k * k;
        b.layer("Convolution", &[from], &[to], &format!("0={cout} 1={k} 4={} 5=1 6={wn} {extra}", k / 2));
        let w = r.vec(wn, 1.0 / ((cin * k * k) as f32).sqrt());
        let bias = r.vec(cout, 0.2);
        b.tagged(&w).raw(&bias);
    };
    conv(&mut b, "in", "a", 19, 40, 3, "9=1");
    conv(&mut b, "a", "b", 40, 40, 3, "");
    conv(&mut b, "b", "c", 40, 40, 3, "");
    conv(&mut b, "c", "out", 40, 8, 1, "");
    b.build()
}
