//! Face path tests on the real networks (shared/models) and the real face images
//! (shared/data/faces), CPU backend. Inputs are kept small: the GAN face network costs ~33 GFLOP per
//! input kilopixel.

use lucent_codec::{EncodeOptions, Format};
use lucent_core::cpu::CpuBackend;
use lucent_engine::face::blend::{face_region, FaceMask};
use lucent_engine::face::image::Rgb;
use lucent_engine::face::{detect_faces, FaceBox, FacePipeline, FacePrior, FaceTracker};
use lucent_engine::photo::{image_to_raster, raster_to_image};
use lucent_engine::{catalog, Cancel, EnhanceOptions, Engine, Enhancer, Frames, FramesOutput, Kind, Pipeline, Raster, Result, Samples, VideoState};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"))
}

fn faces_dir() -> PathBuf {
    root().join("../shared/data/faces")
}

fn have_data() -> bool {
    let ok = model_dir().join("face/retinaface-slim.param").exists() && faces_dir().is_dir();
    if !ok {
        eprintln!("skipping: ../shared/models or ../shared/data/faces is absent");
    }
    ok
}

macro_rules! need_data {
    () => {
        if !have_data() {
            return;
        }
    };
}

fn engine() -> Engine {
    Engine::with_backend(Arc::new(CpuBackend::new(None)), &model_dir(), None).expect("engine")
}

fn load(rel: &str) -> Raster {
    let p = faces_dir().join(rel);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    image_to_raster(lucent_codec::decode(&bytes, &Default::default()).expect("decode")).unwrap().0
}

fn crop(r: &Raster, x0: usize, y0: usize, w: usize, h: usize) -> Raster {
    let c = r.channels;
    let row = |y: usize| ((y0 + y) * r.width + x0) * c..((y0 + y) * r.width + x0 + w) * c;
    match &r.samples {
        Samples::U8(v) => Raster::from_u8(w, h, c, (0..h).flat_map(|y| v[row(y)].to_vec()).collect()).unwrap(),
        Samples::U16(v) => Raster::from_u16(w, h, c, (0..h).flat_map(|y| v[row(y)].to_vec()).collect()).unwrap(),
    }
}

/// `r` resampled to w x h as 8-bit RGB.
fn resized(r: &Raster, w: usize, h: usize) -> Raster {
    let img = Rgb::from_raster(r.as_ref()).resize(w, h);
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                v.push((img.get(c, x, y).clamp(0.0, 1.0) * 255.0 + 0.5) as u8);
            }
        }
    }
    Raster::from_u8(w, h, 3, v).unwrap()
}

fn encode(r: &Raster, f: Format) -> Vec<u8> {
    lucent_codec::encode(&raster_to_image(r.clone(), Default::default()), f, &EncodeOptions::default()).unwrap()
}

fn expected_counts() -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/face_counts.toml")).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').expect("name = count");
            (k.trim().trim_matches('"').to_string(), v.trim().parse().expect("count"))
        })
        .collect()
}

fn luma(r: &Raster, x: usize, y: usize) -> f32 {
    255.0 * (0.299 * r.get(x, y, 0) + 0.587 * r.get(x, y, 1) + 0.114 * r.get(x, y, 2))
}

#[test]
fn detector_finds_every_face_in_the_whole_pictures() {
    need_data!();
    let e = engine();
    let expected = expected_counts();
    assert_eq!(expected.len(), 4);
    for (name, n) in expected {
        let img = load(&format!("whole/{name}"));
        let faces = detect_faces(e.runtime(), img.as_ref(), &Cancel::new()).unwrap();
        let desc: Vec<String> = faces
            .iter()
            .map(|f| format!("({:.0},{:.0} {:.0}x{:.0} s={:.3})", f.x0, f.y0, f.width(), f.height(), f.score))
            .collect();
        println!("{name} {}x{}: {} faces {}", img.width, img.height, faces.len(), desc.join(" "));
        assert_eq!(faces.len(), n, "{name}: {desc:?}");
        for f in &faces {
            assert!(f.score > lucent_engine::face::detect::FACE_SCORE_MIN && f.width() >= 8.0 && f.height() >= 8.0, "{name}: {f:?}");
            // Landmarks (eyes, nose, mouth) lie inside the box.
            for [x, y] in f.landmarks {
                assert!(x >= f.x0 - 1.0 && x <= f.x1 + 1.0 && y >= f.y0 - 1.0 && y <= f.y1 + 1.0, "{name}: {f:?}");
            }
        }
    }
}

#[test]
fn detector_finds_one_big_face_in_each_aligned_crop() {
    need_data!();
    let e = engine();
    let mut names: Vec<_> = std::fs::read_dir(faces_dir().join("cropped")).unwrap().map(|d| d.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names.len(), 12);
    let mut min_cover = f32::MAX;
    for n in names {
        let n = n.to_string_lossy().to_string();
        let img = load(&format!("cropped/{n}"));
        let faces = detect_faces(e.runtime(), img.as_ref(), &Cancel::new()).unwrap();
        assert_eq!(faces.len(), 1, "{n}: {faces:?}");
        let f = &faces[0];
        let (w, h) = (img.width as f32, img.height as f32);
        // The box covers most of the picture's width and height and sits in its middle.
        let cover = (f.width() / w).min(f.height() / h);
        min_cover = min_cover.min(cover);
        println!("{n}: box {:.0},{:.0} {:.0}x{:.0} score {:.3} cover {:.2}", f.x0, f.y0, f.width(), f.height(), f.score, cover);
        assert!(cover >= 0.5, "{n}: {f:?}");
        assert!((f.cx() / w - 0.5).abs() < 0.15 && (f.cy() / h - 0.5).abs() < 0.2, "{n}: {f:?}");
    }
    println!("smallest box side / picture side over the 12 crops: {min_cover:.2}");
}

/// Seam check on a real face: face_2x's output O against its base B (= general_2x on the same
/// input, the same network at the same scale). Per pixel, the luma gradient of an image I is
/// g_I(p) = max(|I(p+x) - I(p)|, |I(p+y) - I(p)|) (0..255), and the face path's change is
/// D = O - B (luma). Over the union mask M (max of the faces' masks) the feather ring is
/// R = {0 < M < 1} and the face core is F = {M = 1}. No seam means:
///   max_R g_O <= max_F g_O   and   max_R g_D <= max_F g_D
/// (nothing changes across the mask border faster than it changes inside the face). The same
/// measure on a hard-edged blend (the face pasted where M >= 0.5) must be worse, which shows the
/// measure sees seams.
#[test]
fn face_blend_has_no_seam() {
    need_data!();
    let e = engine();
    // One face of 01.jpg with its context, at 0.6x (face ~27 px: keeps the GAN pass short).
    let src = resized(&crop(&load("whole/01.jpg"), 0, 20, 110, 110), 66, 66);
    let m = catalog::lookup(Kind::Photo, "face_2x").unwrap();
    let out = e.run_pipeline(m, src.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
    let base = e.run_pipeline(catalog::lookup(Kind::Photo, "general_2x").unwrap(), src.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
    let faces = detect_faces(e.runtime(), src.as_ref(), &Cancel::new()).unwrap();
    assert!(!faces.is_empty(), "the test crop must hold a face");
    let (w, h) = (out.width, out.height);
    let masks: Vec<FaceMask> = faces.iter().map(|f| FaceMask::new(f, 2.0)).collect();
    let mask = |x: usize, y: usize| masks.iter().map(|k| k.at(x, y)).fold(0f32, f32::max);
    let d = |x: usize, y: usize| luma(&out, x, y) - luma(&base, x, y);
    // Hard blend: recover the face network's pixels where M >= 0.5 (O = B + M (F - B)).
    let hard = |x: usize, y: usize| {
        let k = mask(x, y);
        if k >= 0.5 { d(x, y) / k } else { 0.0 }
    };
    let grad = |f: &dyn Fn(usize, usize) -> f32, x: usize, y: usize| (f(x + 1, y) - f(x, y)).abs().max((f(x, y + 1) - f(x, y)).abs());
    let (mut ring_o, mut core_o, mut ring_d, mut core_d, mut ring_h) = (0f32, 0f32, 0f32, 0f32, 0f32);
    let (mut n_ring, mut n_core) = (0, 0);
    let lo = |x: usize, y: usize| luma(&out, x, y);
    for y in 0..h - 1 {
        for x in 0..w - 1 {
            let k = mask(x, y);
            let go = grad(&lo, x, y);
            let gd = grad(&d, x, y);
            if k >= 1.0 {
                core_o = core_o.max(go);
                core_d = core_d.max(gd);
                n_core += 1;
            } else if k > 0.0 {
                ring_o = ring_o.max(go);
                ring_d = ring_d.max(gd);
                ring_h = ring_h.max(grad(&hard, x, y));
                n_ring += 1;
            }
        }
    }
    println!(
        "faces {} | ring {n_ring} px, core {n_core} px | output gradient: ring max {ring_o:.1}, core max {core_o:.1} | change D: ring max {ring_d:.1}, core max {core_d:.1}, hard-edge ring max {ring_h:.1}",
        faces.len()
    );
    assert!(n_ring > 100 && n_core > 100);
    assert!(ring_o <= core_o, "output gradient on the mask border {ring_o} > inside the face {core_o}");
    assert!(ring_d <= core_d, "change gradient on the mask border {ring_d} > inside the face {core_d}");
    assert!(ring_h > ring_d, "a hard edge ({ring_h}) must measure worse than the feathered blend ({ring_d})");
    // Outside every mask the output is the base, bit for bit.
    for y in 0..h {
        for x in 0..w {
            if mask(x, y) == 0.0 {
                for c in 0..3 {
                    assert_eq!(out.get(x, y, c), base.get(x, y, c), "({x},{y})");
                }
            }
        }
    }
}

fn opts(model: &str, format: &str) -> EnhanceOptions {
    EnhanceOptions { model: model.into(), format: format.into(), ..Default::default() }
}

/// Every photo face/portrait name: output exactly input x scale, png and jpg out, alpha kept, DPI
/// rules by category. One model per style runs on a picture with a face (the face path runs), the
/// others on a faceless patch (the GAN costs ~33 GFLOP per input kilopixel on this CPU).
#[test]
fn face_models_output_sizes_formats_and_alpha() {
    need_data!();
    let e = engine();
    let pic = load("whole/01.jpg");
    // 01.jpg's left face downscaled to ~12 px in a 26 x 26 picture, still found by the detector.
    let face = resized(&crop(&pic, 0, 20, 110, 110), 26, 26);
    assert_eq!(detect_faces(e.runtime(), face.as_ref(), &Cancel::new()).unwrap().len(), 1);
    // A faceless patch (background wall, top left corner).
    let plain = crop(&pic, 0, 0, 16, 12);
    assert_eq!(detect_faces(e.runtime(), plain.as_ref(), &Cancel::new()).unwrap().len(), 0);
    // The face picture with a varying alpha plane (RGBA PNG).
    let Samples::U8(rgb) = &face.samples else { panic!() };
    let mut rgba = Vec::new();
    for (i, p) in rgb.chunks(3).enumerate() {
        rgba.extend_from_slice(p);
        rgba.push((40 + (i % 26) * 8) as u8);
    }
    let rgba = Raster::from_u8(26, 26, 4, rgba).unwrap();
    let inputs = [
        (encode(&rgba, Format::Png), 26usize),
        (encode(&face, Format::Jpeg), 26),
        (encode(&plain, Format::Png), 16),
        (encode(&plain, Format::Jpeg), 16),
    ];
    // (model, input index, output format)
    let runs = [
        ("face_2x", 0, "png"),
        ("face_v2_4x", 1, "png"),
        ("generative_portrait_1x", 1, "jpg"),
        ("face_4x", 2, "jpg"),
        ("face_v2_2x", 3, "png"),
        ("generative_portrait_2x", 3, "jpg"),
        ("generative_portrait_4x", 2, "png"),
    ];
    let names: Vec<_> = catalog::CATALOG.iter().filter(|m| m.kind == Kind::Photo && matches!(m.pipeline, Pipeline::Face(_))).map(|m| m.name).collect();
    let mut covered: Vec<_> = runs.iter().map(|r| r.0).collect();
    covered.sort();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, covered, "face_2x/4x, face_v2_2x/4x, generative_portrait_1x/2x/4x");
    for (name, k, fmt) in runs {
        let m = catalog::lookup(Kind::Photo, name).unwrap();
        let (bytes, side) = &inputs[k];
        let o = EnhanceOptions { dpi: Some(300.0), ..opts(name, fmt) };
        let out = e.enhance(bytes, &o, &Cancel::new(), &|_| {}).unwrap();
        let want = (*side * m.scale) as u32;
        let h = if *side == 16 { 12 * m.scale as u32 } else { want };
        assert_eq!((out.width, out.height), (want, h), "{name}");
        assert_eq!(out.format, fmt);
        let dec = lucent_codec::decode(&out.data, &Default::default()).unwrap();
        assert_eq!((dec.width, dec.height), (out.width, out.height), "{name}");
        // DPI: honoured by the enhance category, ignored by the generative one.
        let dpi = dec.meta.dpi.map(|d| d.0.round());
        if m.category == lucent_engine::Category::Generative {
            assert_ne!(dpi, Some(300.0), "{name}");
        } else {
            assert_eq!(dpi, Some(300.0), "{name}");
        }
        if k == 0 {
            // Alpha input to png output keeps the alpha plane: exactly the base pipeline's.
            let o = image_to_raster(dec).unwrap().0;
            assert_eq!(o.channels, 4, "{name}");
            let g = e.run_pipeline(catalog::lookup(Kind::Photo, "general_2x").unwrap(), rgba.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
            for y in 0..o.height {
                for x in 0..o.width {
                    assert_eq!(o.get(x, y, 3), g.get(x, y, 3), "{name} alpha at ({x},{y})");
                }
            }
        }
        println!("{name}: {}x{} {fmt} ok ({:.0} ms)", out.width, out.height, out.ms);
    }
}

/// A prior plugged into the hook replaces the face network on every face crop.
#[test]
fn face_prior_hook_is_used() {
    need_data!();
    struct Flat;
    impl FacePrior for Flat {
        fn name(&self) -> &str {
            "flat-test-prior"
        }
        fn size(&self) -> usize {
            32
        }
        fn restore(&self, face: &Rgb, lm: &[[f32; 2]; 5], _c: &Cancel) -> Result<Rgb> {
            assert_eq!((face.w, face.h), (32, 32));
            assert!(lm.iter().all(|&[x, y]| (0.0..32.0).contains(&x) && (0.0..32.0).contains(&y)), "{lm:?}");
            let mut o = Rgb::new(32, 32);
            o.data.iter_mut().enumerate().for_each(|(i, v)| *v = if i < 1024 { 1.0 } else { 0.0 });
            Ok(o)
        }
    }
    let e = engine();
    let src = resized(&crop(&load("whole/01.jpg"), 0, 20, 110, 110), 26, 26);
    let faces = detect_faces(e.runtime(), src.as_ref(), &Cancel::new()).unwrap();
    assert_eq!(faces.len(), 1);
    let m = catalog::lookup(Kind::Photo, "face_2x").unwrap();
    let out = FacePipeline::for_model(m).unwrap().with_prior(&Flat).run(e.runtime(), src.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
    let (cx, cy) = ((faces[0].cx() * 2.0) as usize, (faces[0].cy() * 2.0) as usize);
    assert_eq!([out.get(cx, cy, 0), out.get(cx, cy, 1), out.get(cx, cy, 2)], [1.0, 0.0, 0.0], "pure red from the prior");
}

#[test]
fn face_styles_match_the_catalog() {
    let face_models: Vec<_> = catalog::CATALOG.iter().filter(|m| matches!(m.pipeline, Pipeline::Face(_))).map(|m| (m.kind, m.name)).collect();
    let photo = ["face_2x", "face_4x", "face_v2_2x", "face_v2_4x", "generative_portrait_1x", "generative_portrait_2x", "generative_portrait_4x"];
    let video = ["face_soft_2x", "portrait_restore_1x", "portrait_restore_2x"];
    let want: Vec<_> = photo.iter().map(|n| (Kind::Photo, *n)).chain(video.iter().map(|n| (Kind::Video, *n))).collect();
    assert_eq!(face_models, want, "the face / portrait names run the face pipeline, the others do not");
    for m in catalog::CATALOG {
        if let Pipeline::Face(st) = m.pipeline {
            assert_eq!(m.networks, &[st.base, st.face_net, "face/retinaface-slim"], "{}", m.name);
            assert_eq!(m.tile_margin, st.base_margin, "{}", m.name);
            assert!(model_dir().join(format!("{}.param", st.face_net)).exists() || !have_data());
        }
    }
    // The whole mask stays inside the crop the face network ran on.
    let f = FaceBox { x0: 10.0, y0: 10.0, x1: 30.0, y1: 34.0, score: 1.0, landmarks: [[0.0; 2]; 5] };
    assert!(face_region(&f, 100, 100).is_some());
}

/// Issue 14: the face path of a video model must stay affordable next to its base network. Per
/// input pixel, each video face model's face network costs at most 2.5x its base network (x4plus,
/// the face network before, costs ~30x animevideov3 x2; a 640x480 frame's faces cover ~40 % of it).
#[test]
fn video_face_networks_cost_little_more_than_the_base() {
    need_data!();
    let e = engine();
    let per_px = |stem: &str| {
        let l = e.runtime().network(stem).unwrap();
        lucent_engine::flops::conv_flops(&l.net, 64, 64) / (64.0 * 64.0)
    };
    let mut n = 0;
    for m in catalog::CATALOG.iter().filter(|m| m.kind == Kind::Video) {
        let Pipeline::Face(st) = m.pipeline else { continue };
        let (base, face) = (per_px(st.base), per_px(st.face_net));
        println!("{}: base {} {:.2} MFLOP/px, face {} {:.2} MFLOP/px", m.name, st.base, base / 1e6, st.face_net, face / 1e6);
        assert!(face <= 2.5 * base, "{}: face network {face} FLOP/px vs base {base}", m.name);
        n += 1;
    }
    assert_eq!(n, 3);
    assert!(per_px("sr/realesrgan-x4plus") > 2.5 * per_px("sr/realesr-animevideov3-x2"), "the bound does tell x4plus apart");
}

/// Jittered per-frame detections of a real face: the tracker's boxes move less frame to frame than
/// the raw detections.
#[test]
fn tracker_smooths_jittered_detections() {
    need_data!();
    let e = engine();
    let img = load("whole/01.jpg");
    // 12 frames: a 200x150 window over the picture shifted by a pseudo-random jitter of up to
    // +-3 px (camera shake); boxes mapped back to picture coordinates, so the truth is static.
    let mut seed = 12345u32;
    let mut rnd = || {
        seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
        ((seed >> 16) % 7) as usize
    };
    let mut raw: Vec<Vec<FaceBox>> = Vec::new();
    let mut smooth: Vec<Vec<FaceBox>> = Vec::new();
    let mut t = FaceTracker::new();
    for _ in 0..12 {
        let (dx, dy) = (20 + rnd(), 15 + rnd());
        let f = crop(&img, dx, dy, 200, 150);
        let dets = detect_faces(e.runtime(), f.as_ref(), &Cancel::new()).unwrap();
        // The tracker works in frame coordinates; convert both to picture coordinates.
        let shift = |b: &FaceBox| FaceBox { x0: b.x0 + dx as f32, x1: b.x1 + dx as f32, y0: b.y0 + dy as f32, y1: b.y1 + dy as f32, ..*b };
        // Feed the tracker detections in picture coordinates (a static scene with jittery boxes).
        let pic: Vec<FaceBox> = dets.iter().map(shift).collect();
        let tr = t.update(248, 189, &pic);
        raw.push(pic);
        smooth.push(tr.iter().map(|x| x.face).collect());
    }
    // Frame-to-frame motion of each face: match by nearest centre.
    let motion = |seq: &Vec<Vec<FaceBox>>| {
        let mut sum = 0f32;
        let mut n = 0;
        for w in seq.windows(2) {
            for a in &w[1] {
                if let Some(b) = w[0].iter().min_by(|p, q| {
                    let d = |z: &FaceBox| (z.cx() - a.cx()).hypot(z.cy() - a.cy());
                    d(p).total_cmp(&d(q))
                }) {
                    sum += (a.cx() - b.cx()).abs() + (a.cy() - b.cy()).abs() + (a.width() - b.width()).abs() + (a.height() - b.height()).abs();
                    n += 1;
                }
            }
        }
        sum / n.max(1) as f32
    };
    let (mr, ms) = (motion(&raw), motion(&smooth));
    println!("mean frame-to-frame box change (px, |dcx|+|dcy|+|dw|+|dh|): raw {mr:.2}, smoothed {ms:.2}");
    assert!(raw.iter().all(|r| r.len() >= 3), "most faces of the shaken picture are found");
    assert!(mr > 0.5, "the detections do jitter");
    assert!(ms < 0.6 * mr, "smoothing must remove most of the jitter: raw {mr}, smoothed {ms}");
}

/// Video face models: output size, carry-over of the tracker between batches.
#[test]
fn video_face_models_enhance_frames() {
    need_data!();
    let e = engine();
    let frame = resized(&crop(&load("whole/01.jpg"), 0, 20, 110, 110), 26, 26);
    let Samples::U8(f) = &frame.samples else { panic!() };
    let frames: Vec<u8> = f.iter().chain(f.iter()).copied().collect();
    for (name, s, n) in [("face_soft_2x", 2, 2), ("portrait_restore_1x", 1, 1), ("portrait_restore_2x", 2, 2)] {
        let FramesOutput { rgb24: out, width: w, height: h } =
            e.enhance_frames(Frames::new(&frames[..n * 26 * 26 * 3], 26, 26, n), name, None, &Cancel::new()).unwrap();
        assert_eq!((w, h, out.len()), (26 * s, 26 * s, n * 26 * s * 26 * s * 3), "{name}");
        if n == 2 {
            // Two identical frames of a face seen from the first frame on: identical outputs.
            assert_eq!(out[..out.len() / 2], out[out.len() / 2..], "{name}");
        }
    }
    // The tracker state survives a round trip between batches and changes the second batch only
    // through the carried tracks.
    let mut t = VideoState::new();
    let a = e.enhance_frames(Frames::new(f, 26, 26, 1), "face_soft_2x", Some(&mut t), &Cancel::new()).unwrap().rgb24;
    assert_eq!(t.faces().map(FaceTracker::frames), Some(1));
    let mut t2 = VideoState::from_bytes(&t.to_bytes());
    let b = e.enhance_frames(Frames::new(f, 26, 26, 1), "face_soft_2x", Some(&mut t2), &Cancel::new()).unwrap().rgb24;
    assert_eq!(t2.faces().map(FaceTracker::frames), Some(2));
    assert_eq!(a, b, "a static face keeps its full-weight restoration across batches");
    // Without a face the base pipeline is all there is: compare with general_restore_2x.
    let blank = vec![128u8; 26 * 26 * 3];
    let x = e.enhance_frames(Frames::new(&blank, 26, 26, 1), "face_soft_2x", None, &Cancel::new()).unwrap().rgb24;
    let y = e.enhance_frames(Frames::new(&blank, 26, 26, 1), "general_restore_2x", None, &Cancel::new()).unwrap().rgb24;
    assert_eq!(x, y);
}
