//! Every WGSL source the backend can compile (each storage precision, each FMA tile
//! configuration, the register-blocked kernel over tiles and layer shapes, the cooperative-matrix kernel for 16x16 and 8x8 fragments and each planned
//! subgroup size, its emulation, warp and the element-wise kernels) is parsed and validated by
//! naga with only the capabilities the device would have for it, then translated to SPIR-V
//! (Vulkan: NVIDIA, AMD, lavapipe) and MSL (Apple). No adapter needed.
//!
//! The SPIR-V writer gets the capability list wgpu-hal's Vulkan backend allows for those
//! features, so a shader that needs more than the device grants fails here. When `spirv-val`
//! (Debian package spirv-tools) is on the PATH the SPIR-V is also checked with it for Vulkan 1.1
//! (1.3 for the cooperative-matrix kernels, the lowest version that has them); without it that
//! extra check is reported as skipped. Bookworm's spirv-val (2023.1) predates cooperative
//! matrices; `bash scripts/mesa-coop.sh test` reruns this with trixie's (2025.1), which checks
//! those modules too (`LUCENT_SPIRV_VAL` names the tool).

use lucent_gpu::shader_variants;
use naga::back::{msl, spv};
use naga::valid::{Capabilities, ValidationFlags, Validator};
use std::io::Write;
use std::process::{Command, Stdio};

fn capabilities(f16: bool, coop: bool) -> Capabilities {
    let mut c = Capabilities::empty();
    if f16 {
        c |= Capabilities::SHADER_FLOAT16;
    }
    if coop {
        c |= Capabilities::COOPERATIVE_MATRIX | Capabilities::SUBGROUP | Capabilities::SHADER_FLOAT16;
    }
    c
}

/// What wgpu-hal's Vulkan backend lets naga use for these features (see its naga options).
fn spv_caps(f16: bool, coop: bool) -> naga::FastHashSet<spv::Capability> {
    use spv::Capability as C;
    let mut v = vec![C::Shader, C::Matrix, C::Sampled1D, C::Image1D, C::ImageQuery, C::DerivativeControl, C::StorageImageExtendedFormats];
    if f16 || coop {
        v.push(C::Float16);
    }
    if coop {
        v.extend([
            C::GroupNonUniform,
            C::GroupNonUniformVote,
            C::GroupNonUniformArithmetic,
            C::GroupNonUniformBallot,
            C::GroupNonUniformShuffle,
            C::GroupNonUniformShuffleRelative,
            C::GroupNonUniformQuad,
            C::CooperativeMatrixKHR,
            C::VulkanMemoryModel,
        ]);
    }
    v.into_iter().collect()
}

/// `LUCENT_SPIRV_VAL` (a spirv-val new enough for cooperative matrices: scripts/mesa-coop.sh
/// sets trixie's) or `spirv-val` on the PATH.
fn spirv_val() -> Option<String> {
    let tool = std::env::var("LUCENT_SPIRV_VAL").unwrap_or_else(|_| "spirv-val".into());
    let ok = Command::new(&tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success());
    ok.ok().filter(|&b| b).map(|_| tool)
}

fn run_spirv_val(tool: &str, words: &[u32], env: &str) -> Result<(), String> {
    let mut child = Command::new(tool)
        .args(["--target-env", env, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    child.stdin.take().unwrap().write_all(&bytes).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// The simdgroup matrix sizes an MSL text declares ("8x8", "16x16", ...).
fn simdgroup_sizes(msl: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for part in msl.split("simdgroup_").skip(1) {
        let t: String = part.chars().skip_while(|c| c.is_ascii_alphabetic()).take_while(|c| c.is_ascii_digit() || *c == 'x').collect();
        if t.contains('x') && !t.starts_with('x') && !v.contains(&t) {
            v.push(t);
        }
    }
    v
}

#[test]
fn every_shader_variant_validates_and_translates_to_spirv_and_msl() {
    let variants = shader_variants();
    let val = spirv_val();
    if val.is_none() {
        eprintln!("spirv-val not found (apt-get install spirv-tools): SPIR-V binaries checked by naga only");
    }
    let mut failures = Vec::new();
    let (mut n_coop, mut n_emu, mut n_fma, mut n_rb, mut n_not_metal, mut n_val, mut n_val_old) = (0, 0, 0, 0, 0, 0, 0);
    for (name, src, f16, coop) in &variants {
        n_coop += name.contains(":coop-") as usize;
        n_emu += name.contains(":emu-") as usize;
        n_fma += name.starts_with("conv_gemm") as usize;
        n_rb += name.starts_with("conv_rb") as usize;
        let module = match naga::front::wgsl::parse_str(src) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: parse: {}", e.emit_to_string(src)));
                continue;
            }
        };
        let info = match Validator::new(ValidationFlags::all(), capabilities(*f16, *coop)).validate(&module) {
            Ok(i) => i,
            Err(e) => {
                failures.push(format!("{name}: validate: {}", e.emit_to_string(src)));
                continue;
            }
        };
        // A kernel must not validate with fewer capabilities than it is declared to need
        // (otherwise the runtime selection would be wrong about what the device must have).
        if *coop && Validator::new(ValidationFlags::all(), capabilities(true, false)).validate(&module).is_ok() {
            failures.push(format!("{name}: validates without cooperative matrices, but is declared to need them"));
        }
        if *f16 && !*coop && Validator::new(ValidationFlags::all(), Capabilities::empty()).validate(&module).is_ok() {
            failures.push(format!("{name}: validates without f16, but is declared to need it"));
        }
        let lang = if *coop { (1, 3) } else { (1, 0) };
        let opts = spv::Options { lang_version: lang, capabilities: Some(spv_caps(*f16, *coop)), ..Default::default() };
        let pipe = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
        match spv::write_vec(&module, &info, &opts, Some(&pipe)) {
            Ok(words) => {
                if let Some(tool) = &val {
                    let env = if *coop { "vulkan1.3" } else { "vulkan1.1" };
                    match run_spirv_val(tool, &words, env) {
                        Ok(()) => n_val += 1,
                        // Debian bookworm's spirv-tools (2023.1) predates CooperativeMatrixKHR
                        // (capability 6022): naga's own checks above still hold for those.
                        Err(e) if *coop && e.contains("Invalid capability operand: 6022") => n_val_old += 1,
                        Err(e) => failures.push(format!("{name}: spirv-val ({env}): {e}")),
                    }
                }
            }
            Err(e) => failures.push(format!("{name}: SPIR-V: {e}")),
        }
        let mopts = msl::Options { lang_version: (2, 4), fake_missing_bindings: true, ..Default::default() };
        let mpipe = msl::PipelineOptions { entry_point: Some((naga::ShaderStage::Compute, "main".into())), ..Default::default() };
        match msl::write_string(&module, &info, &mopts, &mpipe) {
            Ok((text, _)) => {
                // Metal has 8x8 simdgroup matrices only; naga writes any size it is given, so
                // the size is checked here. 16x16 kernels never run on Metal (the adapter lists
                // 8x8 only, see mma::pick_frag): their MSL must show the size Metal lacks.
                let sizes = simdgroup_sizes(&text);
                if name.contains(":coop-") && name.contains(":frag16:") {
                    n_not_metal += 1;
                    if !sizes.iter().any(|s| s == "16x16") {
                        failures.push(format!("{name}: expected 16x16 simdgroup types in its MSL, found {sizes:?}"));
                    }
                } else if let Some(bad) = sizes.iter().find(|s| *s != "8x8") {
                    failures.push(format!("{name}: MSL uses simdgroup_*{bad}, which Metal lacks"));
                } else if name.contains(":coop-") && sizes.is_empty() {
                    failures.push(format!("{name}: no simdgroup matrices in its MSL"));
                }
            }
            Err(e) => failures.push(format!("{name}: MSL: {e}")),
        }
    }
    println!(
        "{} shader variants: {n_fma} FMA conv, {n_rb} register-blocked conv, {n_coop} cooperative-matrix ({n_not_metal} 16x16 ones not for Metal), {n_emu} emulated MMA",
        variants.len()
    );
    if val.is_some() {
        println!("spirv-val accepted {n_val}; {n_val_old} cooperative-matrix modules not checked by it (its version predates the capability)");
    }
    // A validator named on purpose must know cooperative matrices (scripts/mesa-coop.sh's does).
    if std::env::var_os("LUCENT_SPIRV_VAL").is_some() {
        assert!(val.is_some(), "LUCENT_SPIRV_VAL is set but does not run");
        assert_eq!(n_val_old, 0, "LUCENT_SPIRV_VAL's spirv-val does not know cooperative matrices");
    }
    assert!(n_coop >= 8 && n_emu >= 8 && n_fma >= 8 && n_rb >= 8, "variant list shrank: {n_fma} {n_rb} {n_coop} {n_emu}");
    assert!(variants.iter().any(|v| v.0.contains(":coop-") && v.0.contains(":frag16:")));
    assert!(variants.iter().any(|v| v.0.contains(":coop-") && v.0.contains(":frag8:")));
    assert!(failures.is_empty(), "{} of {} variants failed:\n{}", failures.len(), variants.len(), failures.join("\n"));
}

#[test]
fn a_broken_shader_fails_here() {
    // The check must be able to fail: a coop kernel that multiplies an A by an A.
    let (name, src, ..) = shader_variants().into_iter().find(|v| v.0.contains(":coop-")).unwrap();
    let bad = src.replacen("coopMultiplyAdd(a0, b0,", "coopMultiplyAdd(a0, a0,", 1);
    assert_ne!(bad, src, "{name}: pattern not found");
    let m = naga::front::wgsl::parse_str(&bad).expect("still parses");
    assert!(Validator::new(ValidationFlags::all(), capabilities(true, true)).validate(&m).is_err(), "A x A validated");
}

#[test]
fn cooperative_matrix_selection_and_tile_plans() {
    use lucent_gpu::ops::mma::{default_cfg, pick_frag, MmaMode};
    use wgpu::{CooperativeMatrixProperties as Prop, CooperativeScalarType as S};
    let p = |n: u32, ab: S, cr: S| Prop { m_size: n, n_size: n, k_size: n, ab_type: ab, cr_type: cr, saturating_accumulation: false };
    // NVIDIA / AMD list 16x16x16 f16 -> f32 (among others): 16.
    assert_eq!(pick_frag(&[p(16, S::F16, S::F16), p(16, S::F16, S::F32)]), Some(16));
    // Metal lists 8x8: 8.
    assert_eq!(pick_frag(&[p(8, S::F32, S::F32), p(8, S::F16, S::F32)]), Some(8));
    // No f16 x f16 -> f32 shape we use: none (the FMA kernel runs).
    assert_eq!(pick_frag(&[p(16, S::F16, S::F16), p(8, S::F32, S::F32)]), None);
    assert_eq!(pick_frag(&[]), None);
    let coop = MmaMode::Coop { sg_max: 32 };
    // 48 KiB of workgroup memory (NVIDIA): the widest tile; WebGPU's default 16 KiB: a smaller one.
    let big = wgpu::Limits { max_compute_workgroup_storage_size: 49152, ..wgpu::Limits::default() };
    let c = default_cfg(&big, 16, false, coop, false).unwrap();
    assert_eq!((c.bm, c.bn, c.bk, c.pipelined), (64, 64, 32, false));
    assert!(c.shared_bytes(true) > 16384);
    let small = default_cfg(&wgpu::Limits::default(), 16, false, coop, false).unwrap();
    assert!(small.shared_bytes(true) <= 16384 && small.bm < 64, "{small:?}");
    // Pipelined: the same widest tile still fits NVIDIA's 48 KiB with its two stages (41 KiB);
    // lavapipe's 32 KiB takes the next one.
    let p = default_cfg(&big, 16, false, coop, true).unwrap();
    assert_eq!((p.bm, p.bn, p.bk, p.pipelined), (64, 64, 32, true));
    assert!(p.shared_bytes(true) > c.shared_bytes(true) && p.shared_bytes(true) <= 49152);
    let mid = wgpu::Limits { max_compute_workgroup_storage_size: 32768, ..wgpu::Limits::default() };
    let p = default_cfg(&mid, 16, false, coop, true).unwrap();
    assert!(p.pipelined && p.bm < 64 && p.shared_bytes(true) <= 32768, "{p:?}");
    // Warp tiles per subgroup: 4 warp tiles, 128 invocations: 1 each with 32-wide subgroups,
    // 2 each with 64-wide ones (AMD wave64).
    assert_eq!((c.warp_tiles(), c.per_subgroup(32), c.per_subgroup(64)), (4, 1, 2));
}

#[test]
#[ignore = "prints one kernel: [LUCENT_DUMP_KERNEL=name-part] cargo test --release -p lucent-gpu --test shaders -- --ignored --nocapture"]
fn dump_kernel() {
    let part = std::env::var("LUCENT_DUMP_KERNEL").unwrap_or_else(|_| ":coop-sg32:frag16:64x64x32:w2x2:wg128".into());
    let v = shader_variants().into_iter().find(|v| v.0.contains(&part)).unwrap_or_else(|| panic!("no variant named like {part}"));
    println!("// {}\n{}", v.0, v.1);
}
