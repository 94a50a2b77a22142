mod common;
use common::*;
use lucent_codec::*;

fn opts() -> EncodeOptions {
    EncodeOptions::default()
}

fn formats_here() -> Vec<Format> {
    let mut v = vec![Format::Png, Format::Jpeg, Format::Bmp, Format::Tga, Format::Tiff, Format::Webp];
    if heif_ok() {
        v.push(Format::Heif);
    }
    v
}

#[test]
fn extensions_and_mime() {
    for (ext, f) in [
        ("png", Format::Png),
        (".jpg", Format::Jpeg),
        ("JPEG", Format::Jpeg),
        ("jfif", Format::Jpeg),
        ("bmp", Format::Bmp),
        ("tga", Format::Tga),
        ("tif", Format::Tiff),
        (".TIFF", Format::Tiff),
        ("webp", Format::Webp),
        ("heic", Format::Heif),
        ("heif", Format::Heif),
    ] {
        assert_eq!(Format::from_extension(ext), Some(f), "{ext}");
    }
    assert_eq!(Format::from_extension("gif"), None);
    assert_eq!(Format::from_extension(""), None);
    for f in Format::ALL {
        assert_eq!(Format::from_extension(f.extension()), Some(f));
        assert!(f.mime().starts_with("image/"));
    }
    assert_eq!(CodecErrorCode::ImageTooLarge.as_str(), "image_too_large");
    assert_eq!(CodecErrorCode::UnsupportedFormat.as_str(), "unsupported_format");
    assert_eq!(CodecErrorCode::DecodeFailed.as_str(), "decode_failed");
    assert_eq!(CodecErrorCode::EncodeFailed.as_str(), "encode_failed");
}

#[test]
fn lossless_round_trips_8bit_all_layouts() {
    for f in LOSSLESS {
        for ch in 1..=4u8 {
            let img = synth_u8(37, 23, ch);
            let bytes = encode(&img, f, &opts()).unwrap_or_else(|e| panic!("{f:?} ch{ch}: {e}"));
            let back = decode(&bytes, &Limits::default()).unwrap_or_else(|e| panic!("{f:?} ch{ch}: {e}"));
            assert_eq!((back.width, back.height, back.bit_depth), (37, 23, 8), "{f:?} ch{ch}");
            assert_eq!(back.has_alpha(), img.has_alpha(), "{f:?} ch{ch}: alpha presence");
            if matches!(f, Format::Png | Format::Tga) || (f == Format::Tiff && ch != 2) {
                assert_eq!(back.channels, ch, "{f:?} keeps the layout");
            }
            assert_eq!(rgba8(&back), rgba8(&img), "{f:?} ch{ch}: pixels differ");
            // The probe agrees with the decode.
            let p = probe(&bytes).unwrap();
            assert_eq!((p.format, p.width, p.height), (f, 37, 23));
            assert_eq!(p.bit_depth, back.bit_depth, "{f:?} ch{ch}");
            assert_eq!(p.channels, back.channels, "{f:?} ch{ch}: probe channels");
        }
    }
}

#[test]
fn lossy_round_trips() {
    let mut fs = vec![Format::Jpeg];
    if heif_ok() {
        fs.push(Format::Heif);
    }
    for f in fs {
        for ch in 1..=4u8 {
            let img = synth_u8(64, 48, ch);
            let bytes = encode(&img, f, &EncodeOptions { quality: 92, ..opts() }).unwrap_or_else(|e| panic!("{f:?} ch{ch}: {e}"));
            let back = decode(&bytes, &Limits::default()).unwrap();
            assert_eq!((back.width, back.height), (64, 48));
            let psnr = psnr_rgb(&img, &back);
            assert!(psnr > 30.0, "{f:?} ch{ch}: PSNR {psnr:.1} dB");
            let p = probe(&bytes).unwrap();
            assert_eq!((p.format, p.width, p.height, p.channels), (f, 64, 48, back.channels));
            match f {
                Format::Jpeg => {
                    // JPEG has no alpha; gray stays gray.
                    assert_eq!(back.channels, if ch <= 2 { 1 } else { 3 }, "jpeg ch{ch}");
                }
                _ => {
                    assert_eq!(back.has_alpha(), img.has_alpha(), "heif ch{ch}");
                    if img.has_alpha() {
                        let (a, b) = (rgba8(&img), rgba8(&back));
                        let worst = a.iter().zip(&b).map(|(x, y)| (x[3] as i32 - y[3] as i32).abs()).max().unwrap();
                        assert!(worst <= 16, "heif alpha error {worst}");
                    }
                }
            }
        }
    }
    // Quality matters: a lower quality gives a smaller JPEG.
    let img = synth_u8(96, 96, 3);
    let hi = encode(&img, Format::Jpeg, &EncodeOptions { quality: 95, ..opts() }).unwrap();
    let lo = encode(&img, Format::Jpeg, &EncodeOptions { quality: 30, ..opts() }).unwrap();
    assert!(lo.len() < hi.len(), "q30 {} bytes vs q95 {} bytes", lo.len(), hi.len());
}

#[test]
fn sixteen_bit_png_and_tiff_exact() {
    for f in [Format::Png, Format::Tiff] {
        for ch in 1..=4u8 {
            let img = synth_u16(29, 17, ch);
            let bytes = encode(&img, f, &opts()).unwrap();
            let back = decode(&bytes, &Limits::default()).unwrap();
            assert_eq!(back.bit_depth, 16, "{f:?} ch{ch}");
            let p = probe(&bytes).unwrap();
            assert_eq!((p.bit_depth, p.channels), (16, back.channels));
            if f == Format::Tiff && ch == 2 {
                // Gray+alpha TIFF is written as RGBA (the `image` crate cannot read GrayA TIFF).
                assert_eq!(back.channels, 4);
                let Pixels::U16(b) = &back.data else { panic!() };
                let Pixels::U16(a) = &img.data else { panic!() };
                for (pa, pb) in a.chunks(2).zip(b.chunks(4)) {
                    assert_eq!([pa[0], pa[0], pa[0], pa[1]], pb);
                }
                continue;
            }
            assert_eq!(back.channels, ch, "{f:?} ch{ch}");
            assert_eq!(back.data, img.data, "{f:?} ch{ch}: 16-bit samples changed");
        }
    }
}

#[test]
fn sixteen_bit_reduced_to_8_elsewhere() {
    for f in formats_here() {
        if f.supports_16bit() {
            continue;
        }
        let img = synth_u16(20, 10, 3);
        let bytes = encode(&img, f, &opts()).unwrap();
        let back = decode(&bytes, &Limits::default()).unwrap();
        assert_eq!(back.bit_depth, 8, "{f:?}");
        let psnr = psnr_rgb(&img, &back);
        let min = if matches!(f, Format::Jpeg | Format::Heif) { 28.0 } else { 99.0 };
        assert!(psnr >= min, "{f:?}: PSNR {psnr:.1}");
    }
}

#[test]
fn dpi_written_and_read_back_every_format() {
    for f in formats_here() {
        for dpi in [72.0, 96.0, 300.0, 1200.0] {
            let img = synth_u8(16, 16, 3);
            let bytes = encode(&img, f, &EncodeOptions { dpi: Some(dpi), ..opts() }).unwrap();
            let back = decode(&bytes, &Limits::default()).unwrap();
            assert_eq!(back.meta.dpi, Some((dpi, dpi)), "{f:?} at {dpi} dpi");
        }
        // No DPI given and none in the input: none written.
        let bytes = encode(&synth_u8(8, 8, 3), f, &opts()).unwrap();
        assert_eq!(decode(&bytes, &Limits::default()).unwrap().meta.dpi, None, "{f:?} without DPI");
    }
}

#[test]
fn fractional_dpi_exact_where_stored_as_rational() {
    let mut fs = vec![Format::Tiff, Format::Webp, Format::Tga];
    if heif_ok() {
        fs.push(Format::Heif);
    }
    for f in fs {
        let bytes = encode(&synth_u8(8, 8, 3), f, &EncodeOptions { dpi: Some(150.5), ..opts() }).unwrap();
        assert_eq!(decode(&bytes, &Limits::default()).unwrap().meta.dpi, Some((150.5, 150.5)), "{f:?}");
    }
}

#[test]
fn dpi_is_kept_from_input_when_not_given() {
    for src in formats_here() {
        for dst in formats_here() {
            let bytes = encode(&synth_u8(12, 12, 3), src, &EncodeOptions { dpi: Some(240.0), ..opts() }).unwrap();
            let img = decode(&bytes, &Limits::default()).unwrap();
            let out = encode(&img, dst, &opts()).unwrap();
            let back = decode(&out, &Limits::default()).unwrap();
            assert_eq!(back.meta.dpi, Some((240.0, 240.0)), "{src:?} -> {dst:?}");
            // An explicit DPI overrides the input's.
            let out = encode(&img, dst, &EncodeOptions { dpi: Some(600.0), ..opts() }).unwrap();
            assert_eq!(decode(&out, &Limits::default()).unwrap().meta.dpi, Some((600.0, 600.0)), "{src:?} -> {dst:?}");
        }
    }
}

#[test]
fn exif_kept_with_new_dimensions_or_stripped() {
    let exif_formats: Vec<Format> = formats_here().into_iter().filter(|f| *f != Format::Bmp).collect();
    for f in exif_formats {
        let mut img = synth_u8(40, 30, 3);
        img.meta.exif = Some(test_exif(6));
        img.meta.orientation = Some(6);
        let bytes = encode(&img, f, &EncodeOptions { keep_exif: true, ..opts() }).unwrap();
        assert!(contains(&bytes, b"TestCam"), "{f:?}: Make tag lost");
        let back = decode(&bytes, &Limits::default()).unwrap();
        let exif = back.meta.exif.as_deref().unwrap_or_else(|| panic!("{f:?}: EXIF missing"));
        let info = read_exif(exif).unwrap();
        assert_eq!(info.orientation, Some(6), "{f:?}");
        assert_eq!(info.pixel_dimensions, Some((40, 30)), "{f:?}: PixelX/YDimension not updated");
        assert!(contains(exif, b"2024:01:02 03:04:05"), "{f:?}: DateTimeOriginal lost");
        // HEIF: the EXIF tag is kept but not applied (libheif applies irot/imir; HEIF readers ignore the tag).
        assert_eq!(back.meta.orientation, if f == Format::Heif { None } else { Some(6) }, "{f:?}");
        // The EXIF resolution (72) was the input's DPI source only through EXIF here.
        assert_eq!(back.meta.dpi, Some((72.0, 72.0)), "{f:?}");

        // Explicit DPI also rewrites the EXIF resolution.
        let bytes = encode(&img, f, &EncodeOptions { keep_exif: true, dpi: Some(300.0), ..opts() }).unwrap();
        let back = decode(&bytes, &Limits::default()).unwrap();
        assert_eq!(back.meta.dpi, Some((300.0, 300.0)), "{f:?}");
        assert_eq!(read_exif(back.meta.exif.as_deref().unwrap()).unwrap().dpi, Some((300.0, 300.0)), "{f:?}");

        // Stripped.
        img.meta.dpi = None;
        let bytes = encode(&img, f, &EncodeOptions { keep_exif: false, ..opts() }).unwrap();
        assert!(!contains(&bytes, b"TestCam"), "{f:?}: EXIF not stripped");
        let back = decode(&bytes, &Limits::default()).unwrap();
        assert_eq!(back.meta.exif, None, "{f:?}");
        assert_eq!(back.meta.orientation, None, "{f:?}");
    }
}

#[test]
fn exif_round_trips_through_decode_and_resize_like_use() {
    // decode -> "process" to a new size -> encode keeps EXIF with the new size (JPEG in and out).
    let mut img = synth_u8(20, 20, 3);
    img.meta.exif = Some(test_exif(3));
    let first = encode(&img, Format::Jpeg, &EncodeOptions { keep_exif: true, ..opts() }).unwrap();
    let dec = decode(&first, &Limits::default()).unwrap();
    assert_eq!(dec.meta.orientation, Some(3));
    let (rgb, _) = to_planar_rgb(&dec);
    // Nearest-neighbour x2 upscale of the planes.
    let (w, h) = (20usize, 20usize);
    let mut up = vec![0f32; 3 * 4 * w * h];
    for c in 0..3 {
        for y in 0..2 * h {
            for x in 0..2 * w {
                up[c * 4 * w * h + y * 2 * w + x] = rgb[c * w * h + (y / 2) * w + x / 2];
            }
        }
    }
    let big = from_planar_rgb(40, 40, &up, None, 8, false, dec.meta.clone());
    let out = encode(&big, Format::Png, &EncodeOptions { keep_exif: true, ..opts() }).unwrap();
    let back = decode(&out, &Limits::default()).unwrap();
    let info = read_exif(back.meta.exif.as_deref().unwrap()).unwrap();
    assert_eq!(info.pixel_dimensions, Some((40, 40)));
    assert_eq!(info.orientation, Some(3));
}

#[test]
fn icc_profile_preserved() {
    let icc: Vec<u8> = (0..600u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut fs = vec![Format::Png, Format::Jpeg, Format::Tiff, Format::Webp];
    if heif_ok() {
        fs.push(Format::Heif);
    }
    for f in fs {
        let mut img = synth_u8(10, 10, 3);
        img.meta.icc = Some(icc.clone());
        let bytes = encode(&img, f, &opts()).unwrap();
        let back = decode(&bytes, &Limits::default()).unwrap();
        assert_eq!(back.meta.icc.as_deref(), Some(&icc[..]), "{f:?}");
    }
}

#[test]
fn probe_matches_decode_on_real_images() {
    let files = real_files();
    for (path, bytes) in &files {
        let p = probe(bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let img = decode(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!((p.width, p.height), (img.width, img.height), "{}", path.display());
        assert_eq!(p.bit_depth, img.bit_depth, "{}", path.display());
        let ext = path.extension().unwrap().to_str().unwrap();
        assert_eq!(Some(p.format), Format::from_extension(ext), "{}", path.display());
        let name = path.file_name().unwrap().to_str().unwrap();
        if name.contains("16bit") {
            assert_eq!(img.bit_depth, 16, "{name}");
        }
        if name.contains("alpha") {
            assert!(img.has_alpha(), "{name}");
        }
        if name.contains("gray") {
            assert!(img.channels <= 2, "{name}: {} channels", img.channels);
        }
    }
    eprintln!("probed and decoded {} real images", files.len());
}

#[test]
fn real_images_reencode_in_every_format() {
    let files = real_files();
    let Some((_, bytes)) = files.iter().find(|(p, _)| p.to_string_lossy().contains("tree_alpha_16bit")) else {
        return;
    };
    let img = decode(bytes, &Limits::default()).unwrap();
    for f in formats_here() {
        let out = encode(&img, f, &EncodeOptions { dpi: Some(144.0), ..opts() }).unwrap();
        let back = decode(&out, &Limits::default()).unwrap();
        assert_eq!((back.width, back.height), (img.width, img.height), "{f:?}");
        assert_eq!(back.meta.dpi, Some((144.0, 144.0)), "{f:?}");
        let want_depth = if f.supports_16bit() { 16 } else { 8 };
        assert_eq!(back.bit_depth, want_depth, "{f:?}");
        if f != Format::Jpeg {
            assert!(back.has_alpha(), "{f:?} lost alpha");
        }
    }
}

#[test]
fn planar_round_trip_8_and_16_bit() {
    for ch in 1..=4u8 {
        let img = synth_u8(13, 7, ch);
        let (rgb, alpha) = to_planar_rgb(&img);
        assert_eq!(rgb.len(), 3 * 13 * 7);
        assert_eq!(alpha.is_some(), img.has_alpha());
        assert!(rgb.iter().all(|v| (0.0..=1.0).contains(v)));
        let back = from_planar_rgb(13, 7, &rgb, alpha.as_deref(), 8, ch <= 2, Metadata::default());
        assert_eq!(back.channels, ch);
        assert_eq!(back.data, img.data, "8-bit ch{ch}");

        let img = synth_u16(13, 7, ch);
        let (rgb, alpha) = to_planar_rgb(&img);
        let back = from_planar_rgb(13, 7, &rgb, alpha.as_deref(), 16, ch <= 2, Metadata::default());
        assert_eq!(back.bit_depth, 16);
        assert_eq!(back.data, img.data, "16-bit ch{ch}");
    }
    // Gray expands to three equal planes.
    let g = synth_u8(5, 5, 1);
    let (rgb, _) = to_planar_rgb(&g);
    assert_eq!(&rgb[0..25], &rgb[25..50]);
    assert_eq!(&rgb[0..25], &rgb[50..75]);
    // Planar layout: R plane first.
    let img = Image::from_u8(2, 1, 3, vec![255, 0, 0, 0, 0, 255]);
    let (rgb, _) = to_planar_rgb(&img);
    assert_eq!(rgb, vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
}

#[test]
fn planar_clamps_and_rounds() {
    let rgb = [-0.5f32, 0.5, 2.0, f32::NAN, 0.5 / 255.0 + 1e-4, 0.5 / 255.0 - 1e-4];
    // 2x1 image: planes R=[-0.5,0.5] G=[2.0,NaN] B=[~0.5/255 above, below]
    let img = from_planar_rgb(2, 1, &rgb, Some(&[1.5, -1.0]), 8, false, Metadata::default());
    assert_eq!(img.data, Pixels::U8(vec![0, 255, 1, 255, 128, 0, 0, 0]));
    let img16 = from_planar_rgb(1, 1, &[0.5, 1.0, 0.0], None, 16, false, Metadata::default());
    assert_eq!(img16.data, Pixels::U16(vec![32768, 65535, 0]));
}
