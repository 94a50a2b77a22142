//! HEIF/HEIC through libheif's C API (bound by hand; tested against libheif 1.15).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use crate::{CodecError, Format, Image, Limits, Metadata, Pixels, Probe};

#[repr(C)]
struct HeifError {
    code: c_int,
    subcode: c_int,
    message: *const c_char,
}

#[repr(C)]
struct HeifWriter {
    writer_api_version: c_int,
    write: unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut c_void) -> HeifError,
}

#[allow(non_camel_case_types)]
type heif_item_id = u32;

const COMPRESSION_HEVC: c_int = 1;
const HEIF_PRESET: &str = "ultrafast";
const COLORSPACE_RGB: c_int = 1;
const CHROMA_RGB: c_int = 10;
const CHROMA_RGBA: c_int = 11;
const CHROMA_RRGGBB_LE: c_int = 14;
const CHROMA_RRGGBBAA_LE: c_int = 15;
const CHANNEL_INTERLEAVED: c_int = 10;
const PROFILE_PROF: u32 = u32::from_be_bytes(*b"prof");
const PROFILE_RICC: u32 = u32::from_be_bytes(*b"rICC");

extern "C" {
    fn heif_context_alloc() -> *mut c_void;
    fn heif_context_free(ctx: *mut c_void);
    fn heif_context_read_from_memory_without_copy(ctx: *mut c_void, mem: *const c_void, size: usize, opts: *const c_void) -> HeifError;
    fn heif_context_get_primary_image_handle(ctx: *mut c_void, out: *mut *mut c_void) -> HeifError;
    fn heif_context_set_maximum_image_size_limit(ctx: *mut c_void, maximum_width: c_int);
    fn heif_image_handle_release(h: *const c_void);
    fn heif_image_handle_get_width(h: *const c_void) -> c_int;
    fn heif_image_handle_get_height(h: *const c_void) -> c_int;
    fn heif_image_handle_has_alpha_channel(h: *const c_void) -> c_int;
    fn heif_image_handle_get_luma_bits_per_pixel(h: *const c_void) -> c_int;
    fn heif_image_handle_get_number_of_metadata_blocks(h: *const c_void, filter: *const c_char) -> c_int;
    fn heif_image_handle_get_list_of_metadata_block_IDs(h: *const c_void, filter: *const c_char, ids: *mut heif_item_id, count: c_int) -> c_int;
    fn heif_image_handle_get_metadata_size(h: *const c_void, id: heif_item_id) -> usize;
    fn heif_image_handle_get_metadata(h: *const c_void, id: heif_item_id, out: *mut c_void) -> HeifError;
    fn heif_image_handle_get_color_profile_type(h: *const c_void) -> u32;
    fn heif_image_handle_get_raw_color_profile_size(h: *const c_void) -> usize;
    fn heif_image_handle_get_raw_color_profile(h: *const c_void, out: *mut c_void) -> HeifError;
    fn heif_decode_image(h: *const c_void, out: *mut *mut c_void, colorspace: c_int, chroma: c_int, opts: *const c_void) -> HeifError;
    fn heif_image_get_plane_readonly(img: *const c_void, channel: c_int, stride: *mut c_int) -> *const u8;
    fn heif_image_get_plane(img: *mut c_void, channel: c_int, stride: *mut c_int) -> *mut u8;
    fn heif_image_release(img: *const c_void);
    fn heif_image_create(w: c_int, h: c_int, colorspace: c_int, chroma: c_int, out: *mut *mut c_void) -> HeifError;
    fn heif_image_add_plane(img: *mut c_void, channel: c_int, w: c_int, h: c_int, bit_depth: c_int) -> HeifError;
    fn heif_image_set_raw_color_profile(img: *mut c_void, fourcc: *const c_char, data: *const c_void, size: usize) -> HeifError;
    fn heif_have_encoder_for_format(format: c_int) -> c_int;
    fn heif_have_decoder_for_format(format: c_int) -> c_int;
    fn heif_context_get_encoder_for_format(ctx: *mut c_void, format: c_int, out: *mut *mut c_void) -> HeifError;
    fn heif_encoder_release(enc: *mut c_void);
    fn heif_encoder_set_parameter_string(enc: *mut c_void, name: *const c_char, value: *const c_char) -> HeifError;
    fn heif_encoder_set_lossy_quality(enc: *mut c_void, q: c_int) -> HeifError;
    fn heif_context_encode_image(ctx: *mut c_void, img: *const c_void, enc: *mut c_void, opts: *const c_void, out: *mut *mut c_void) -> HeifError;
    fn heif_context_add_exif_metadata(ctx: *mut c_void, h: *const c_void, data: *const c_void, size: c_int) -> HeifError;
    fn heif_context_write(ctx: *mut c_void, writer: *mut HeifWriter, userdata: *mut c_void) -> HeifError;
}

fn check(e: HeifError, what: &str, mk: fn(String) -> CodecError) -> Result<(), CodecError> {
    if e.code == 0 {
        return Ok(());
    }
    let msg = if e.message.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(e.message) }.to_string_lossy().into_owned()
    };
    Err(mk(format!("{what}: {msg} (libheif error {}.{})", e.code, e.subcode)))
}

fn dec_err(m: String) -> CodecError {
    CodecError::decode(m)
}
fn enc_err(m: String) -> CodecError {
    CodecError::encode(m)
}

struct Ctx(*mut c_void);
impl Drop for Ctx {
    fn drop(&mut self) {
        unsafe { heif_context_free(self.0) }
    }
}
struct Handle(*mut c_void);
impl Drop for Handle {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { heif_image_handle_release(self.0) }
        }
    }
}
struct Img(*mut c_void);
impl Drop for Img {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { heif_image_release(self.0) }
        }
    }
}
struct Enc(*mut c_void);
impl Drop for Enc {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { heif_encoder_release(self.0) }
        }
    }
}

pub(crate) fn can_decode() -> bool {
    unsafe { heif_have_decoder_for_format(COMPRESSION_HEVC) != 0 }
}

pub(crate) fn can_encode() -> bool {
    unsafe { heif_have_encoder_for_format(COMPRESSION_HEVC) != 0 }
}

/// Parses the container (no pixel decoding) and returns the primary image handle. The context
/// borrows `bytes`, which must outlive it.
fn open(bytes: &[u8], max_side: Option<u64>) -> Result<(Ctx, Handle), CodecError> {
    let ctx = unsafe { heif_context_alloc() };
    if ctx.is_null() {
        return Err(CodecError::decode("libheif: cannot allocate context"));
    }
    let ctx = Ctx(ctx);
    if let Some(m) = max_side {
        unsafe { heif_context_set_maximum_image_size_limit(ctx.0, m.clamp(1, i32::MAX as u64) as c_int) };
    }
    check(
        unsafe { heif_context_read_from_memory_without_copy(ctx.0, bytes.as_ptr() as *const c_void, bytes.len(), ptr::null()) },
        "HEIF parse",
        dec_err,
    )?;
    let mut h = ptr::null_mut();
    check(unsafe { heif_context_get_primary_image_handle(ctx.0, &mut h) }, "HEIF primary image", dec_err)?;
    if h.is_null() {
        return Err(CodecError::decode("HEIF without primary image"));
    }
    Ok((ctx, Handle(h)))
}

fn handle_probe(h: &Handle) -> Probe {
    let (w, hh, alpha, bits) = unsafe {
        (
            heif_image_handle_get_width(h.0),
            heif_image_handle_get_height(h.0),
            heif_image_handle_has_alpha_channel(h.0) != 0,
            heif_image_handle_get_luma_bits_per_pixel(h.0),
        )
    };
    Probe {
        format: Format::Heif,
        width: w.max(0) as u32,
        height: hh.max(0) as u32,
        channels: if alpha { 4 } else { 3 },
        bit_depth: if bits > 8 { 16 } else { 8 },
    }
}

pub(crate) fn probe(bytes: &[u8]) -> Result<Probe, CodecError> {
    let (_ctx, h) = open(bytes, None)?;
    Ok(handle_probe(&h))
}

fn read_meta(h: &Handle) -> Metadata {
    let mut m = Metadata::default();
    unsafe {
        let filter = c"Exif".as_ptr();
        let n = heif_image_handle_get_number_of_metadata_blocks(h.0, filter);
        if n > 0 {
            let mut ids = vec![0 as heif_item_id; n.min(64) as usize];
            let got = heif_image_handle_get_list_of_metadata_block_IDs(h.0, filter, ids.as_mut_ptr(), ids.len() as c_int);
            if got > 0 {
                let size = heif_image_handle_get_metadata_size(h.0, ids[0]);
                if size > 0 && size <= 16 << 20 {
                    let mut buf = vec![0u8; size];
                    if heif_image_handle_get_metadata(h.0, ids[0], buf.as_mut_ptr() as *mut c_void).code == 0 {
                        if let Some(x) = crate::exif::Exif::parse(&buf) {
                            m.dpi = x.dpi();
                            // No orientation from the EXIF: libheif applies the item's irot/imir while
                            // decoding (the handle's sides are already the turned ones), and HEIF readers
                            // ignore the EXIF tag; phones write both, so applying it too would turn the
                            // picture twice (server/media/orientation.ts mirrors this).
                            m.exif = crate::exif::tiff_start(&buf).map(|s| s.to_vec());
                        }
                    }
                }
            }
        }
        let pt = heif_image_handle_get_color_profile_type(h.0);
        if pt == PROFILE_PROF || pt == PROFILE_RICC {
            let size = heif_image_handle_get_raw_color_profile_size(h.0);
            if size > 0 && size <= 16 << 20 {
                let mut buf = vec![0u8; size];
                if heif_image_handle_get_raw_color_profile(h.0, buf.as_mut_ptr() as *mut c_void).code == 0 {
                    m.icc = Some(buf);
                }
            }
        }
    }
    m
}

pub(crate) fn decode(bytes: &[u8], limits: &Limits) -> Result<Image, CodecError> {
    if !can_decode() {
        return Err(CodecError::unsupported("this libheif has no HEVC decoder"));
    }
    let (_ctx, h) = open(bytes, Some(limits.max_pixels))?;
    let p = handle_probe(&h);
    crate::check_limits(&p, limits)?;
    if p.width == 0 || p.height == 0 {
        return Err(CodecError::decode("HEIF image has zero size"));
    }
    let alpha = p.channels == 4;
    let hi = p.bit_depth == 16;
    let chroma = match (alpha, hi) {
        (false, false) => CHROMA_RGB,
        (true, false) => CHROMA_RGBA,
        (false, true) => CHROMA_RRGGBB_LE,
        (true, true) => CHROMA_RRGGBBAA_LE,
    };
    let mut img = ptr::null_mut();
    check(unsafe { heif_decode_image(h.0, &mut img, COLORSPACE_RGB, chroma, ptr::null()) }, "HEIF decode", dec_err)?;
    let img = Img(img);
    let mut stride: c_int = 0;
    let plane = unsafe { heif_image_get_plane_readonly(img.0, CHANNEL_INTERLEAVED, &mut stride) };
    if plane.is_null() || stride <= 0 {
        return Err(CodecError::decode("HEIF decode produced no interleaved plane"));
    }
    let (w, hgt, ch) = (p.width as usize, p.height as usize, p.channels as usize);
    let stride = stride as usize;
    let row_samples = w * ch;
    let pixels = if hi {
        let bits = unsafe { heif_image_handle_get_luma_bits_per_pixel(h.0) }.clamp(9, 16) as u32;
        let max_in = (1u32 << bits) - 1;
        let mut out = Vec::with_capacity(row_samples * hgt);
        for y in 0..hgt {
            let row = unsafe { std::slice::from_raw_parts(plane.add(y * stride), row_samples * 2) };
            for s in row.chunks_exact(2) {
                let v = (u16::from_le_bytes([s[0], s[1]]) as u32).min(max_in);
                out.push(((v * 65535 + max_in / 2) / max_in) as u16);
            }
        }
        Pixels::U16(out)
    } else {
        let mut out = Vec::with_capacity(row_samples * hgt);
        for y in 0..hgt {
            let row = unsafe { std::slice::from_raw_parts(plane.add(y * stride), row_samples) };
            out.extend_from_slice(row);
        }
        Pixels::U8(out)
    };
    Ok(Image { width: p.width, height: p.height, channels: p.channels, bit_depth: p.bit_depth, data: pixels, meta: read_meta(&h) })
}

unsafe extern "C" fn write_cb(_ctx: *mut c_void, data: *const c_void, size: usize, user: *mut c_void) -> HeifError {
    let out = &mut *(user as *mut Vec<u8>);
    out.extend_from_slice(std::slice::from_raw_parts(data as *const u8, size));
    HeifError { code: 0, subcode: 0, message: c"ok".as_ptr() }
}

/// Encodes 8-bit RGB (3 channels) or RGBA (4 channels) interleaved samples as HEIC.
pub(crate) fn encode(w: u32, h: u32, channels: u8, rgb: &[u8], quality: u8, exif: Option<&[u8]>, icc: Option<&[u8]>) -> Result<Vec<u8>, CodecError> {
    if !can_encode() {
        return Err(CodecError::unsupported("this libheif has no HEVC (x265) encoder"));
    }
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(CodecError::encode("image too large for HEIF"));
    }
    let ctx = unsafe { heif_context_alloc() };
    if ctx.is_null() {
        return Err(CodecError::encode("libheif: cannot allocate context"));
    }
    let ctx = Ctx(ctx);
    let mut enc = ptr::null_mut();
    let r = unsafe { heif_context_get_encoder_for_format(ctx.0, COMPRESSION_HEVC, &mut enc) };
    if r.code != 0 || enc.is_null() {
        return Err(CodecError::unsupported("libheif has no usable HEVC encoder"));
    }
    let enc = Enc(enc);
    check(unsafe { heif_encoder_set_lossy_quality(enc.0, quality.clamp(1, 100) as c_int) }, "HEIF quality", enc_err)?;
    // x265's default preset in libheif ("slow") takes ~5 s per megapixel on two cores; "ultrafast" is
    // about 5x quicker; on a 1024x768 test image PSNR was 51.5 vs 52.0 dB for "veryfast". The codec option
    // `heif_preset` (the server's LUCENT_HEIF_PRESET; crate::configure) overrides it.
    let preset = crate::heif_preset().filter(|p| p.bytes().all(|c| c.is_ascii_lowercase())).unwrap_or_else(|| HEIF_PRESET.to_string());
    let preset = std::ffi::CString::new(preset).unwrap_or_else(|_| c"fast".to_owned());
    // A preset the plugin does not know is not fatal: the encoder keeps its default.
    let _ = unsafe { heif_encoder_set_parameter_string(enc.0, c"preset".as_ptr(), preset.as_ptr()) };
    let chroma = if channels == 4 { CHROMA_RGBA } else { CHROMA_RGB };
    let mut img = ptr::null_mut();
    check(unsafe { heif_image_create(w as c_int, h as c_int, COLORSPACE_RGB, chroma, &mut img) }, "HEIF image", enc_err)?;
    let img = Img(img);
    check(unsafe { heif_image_add_plane(img.0, CHANNEL_INTERLEAVED, w as c_int, h as c_int, 8) }, "HEIF plane", enc_err)?;
    let mut stride: c_int = 0;
    let plane = unsafe { heif_image_get_plane(img.0, CHANNEL_INTERLEAVED, &mut stride) };
    if plane.is_null() || stride <= 0 {
        return Err(CodecError::encode("HEIF plane allocation failed"));
    }
    let row = w as usize * channels as usize;
    for y in 0..h as usize {
        unsafe { ptr::copy_nonoverlapping(rgb.as_ptr().add(y * row), plane.add(y * stride as usize), row) };
    }
    if let Some(icc) = icc {
        check(
            unsafe { heif_image_set_raw_color_profile(img.0, c"prof".as_ptr(), icc.as_ptr() as *const c_void, icc.len()) },
            "HEIF ICC",
            enc_err,
        )?;
    }
    let mut handle = ptr::null_mut();
    check(unsafe { heif_context_encode_image(ctx.0, img.0, enc.0, ptr::null(), &mut handle) }, "HEIF encode", enc_err)?;
    let handle = Handle(handle);
    if let Some(x) = exif {
        check(
            unsafe { heif_context_add_exif_metadata(ctx.0, handle.0, x.as_ptr() as *const c_void, x.len() as c_int) },
            "HEIF EXIF",
            enc_err,
        )?;
    }
    let mut out: Vec<u8> = Vec::new();
    let mut writer = HeifWriter { writer_api_version: 1, write: write_cb };
    check(unsafe { heif_context_write(ctx.0, &mut writer, &mut out as *mut Vec<u8> as *mut c_void) }, "HEIF write", enc_err)?;
    Ok(out)
}
