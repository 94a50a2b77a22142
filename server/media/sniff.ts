// Media type detection from content (magic numbers and headers), never from a file name.
//
// sniff() looks at a prefix of the file (a few KiB are enough for everything except HEIF files whose `meta`
// box sits after a large `mdat`, and TIFF files whose IFD0 sits at the end). It never throws: truncated or
// garbage input gives null, or a result without dimensions when the type is certain but the header is cut.

export type MediaKind = 'image' | 'video'
export interface Sniffed {
  kind: MediaKind
  format: string
  width?: number
  height?: number
}

/** Canonical image formats sniff() can return. */
export type ImageFormat = 'png' | 'jpeg' | 'gif' | 'webp' | 'bmp' | 'tiff' | 'heic' | 'heif' | 'avif' | 'tga'
/** Canonical video container formats sniff() can return. */
export type VideoFormat =
  | 'mp4' | 'mov' | 'm4v' | '3gp' | '3g2' | 'f4v' | 'mkv' | 'webm' | 'avi' | 'flv' | 'mpeg' | 'm2v' | 'mpegts'
  | 'm2ts' | 'asf' | 'ogg' | 'rm' | 'mxf' | 'nut' | 'dv' | 'ser' | 'mlv'

// ---------------------------------------------------------------------------------------------------------
// Byte helpers: every read is bounds-checked and returns undefined (or -1) past the end.

const u8 = (b: Buffer, o: number): number => (o >= 0 && o < b.length ? b[o]! : -1)
const u16be = (b: Buffer, o: number): number => (o >= 0 && o + 2 <= b.length ? b.readUInt16BE(o) : -1)
const u16le = (b: Buffer, o: number): number => (o >= 0 && o + 2 <= b.length ? b.readUInt16LE(o) : -1)
const u24le = (b: Buffer, o: number): number => (o >= 0 && o + 3 <= b.length ? b.readUIntLE(o, 3) : -1)
const u32be = (b: Buffer, o: number): number => (o >= 0 && o + 4 <= b.length ? b.readUInt32BE(o) : -1)
const u32le = (b: Buffer, o: number): number => (o >= 0 && o + 4 <= b.length ? b.readUInt32LE(o) : -1)
const i32le = (b: Buffer, o: number): number | undefined => (o >= 0 && o + 4 <= b.length ? b.readInt32LE(o) : undefined)
const ascii = (b: Buffer, o: number, n: number): string => (o >= 0 && o + n <= b.length ? b.toString('latin1', o, o + n) : '')

function startsWith(b: Buffer, sig: readonly number[], at = 0): boolean {
  if (b.length < at + sig.length) return false
  for (let i = 0; i < sig.length; i++) if (b[at + i] !== sig[i]) return false
  return true
}

function dims(kind: MediaKind, format: string, w: number | undefined, h: number | undefined): Sniffed {
  const r: Sniffed = { kind, format }
  if (w !== undefined && h !== undefined && w > 0 && h > 0 && Number.isFinite(w) && Number.isFinite(h)) {
    r.width = w
    r.height = h
  }
  return r
}

const image = (format: ImageFormat, w?: number, h?: number): Sniffed => dims('image', format, w, h)
const video = (format: VideoFormat): Sniffed => ({ kind: 'video', format })

// ---------------------------------------------------------------------------------------------------------
// Images

function sniffPng(b: Buffer): Sniffed | null {
  if (!startsWith(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return null
  if (ascii(b, 12, 4) !== 'IHDR') return image('png')
  const w = u32be(b, 16)
  const h = u32be(b, 20)
  return w < 0 || h < 0 ? image('png') : image('png', w, h)
}

function sniffJpeg(b: Buffer): Sniffed | null {
  if (!startsWith(b, [0xff, 0xd8, 0xff])) return null
  let o = 2
  while (o + 1 < b.length) {
    if (b[o] !== 0xff) {
      // Not at a marker: tolerate garbage by scanning forward to the next 0xFF.
      o++
      continue
    }
    let m = b[o + 1]!
    // Fill bytes: any number of 0xFF before the marker code.
    while (m === 0xff && o + 2 < b.length) {
      o++
      m = b[o + 1]!
    }
    if (m === 0xff) break
    o += 2
    if (m === 0x00 || m === 0x01 || (m >= 0xd0 && m <= 0xd8)) continue // stuffed zero, TEM, RSTn, SOI: no length
    if (m === 0xd9 || m === 0xda) break // EOI, or SOS before any SOF: no frame header to read
    const len = u16be(b, o)
    if (len < 2) break
    // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC)
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
      const h = u16be(b, o + 3)
      const w = u16be(b, o + 5)
      if (h < 0 || w < 0) break
      return image('jpeg', w, h) // h = 0 (DNL-defined height) gives no dimensions
    }
    o += len
  }
  return image('jpeg')
}

function sniffGif(b: Buffer): Sniffed | null {
  const sig = ascii(b, 0, 6)
  if (sig !== 'GIF87a' && sig !== 'GIF89a') return null
  const w = u16le(b, 6)
  const h = u16le(b, 8)
  return w < 0 || h < 0 ? image('gif') : image('gif', w, h)
}

const BMP_DIB_SIZES = new Set([12, 16, 40, 52, 56, 64, 108, 124])

function sniffBmp(b: Buffer): Sniffed | null {
  if (b.length < 18 || b[0] !== 0x42 || b[1] !== 0x4d) return null
  const dib = u32le(b, 14)
  if (!BMP_DIB_SIZES.has(dib)) return null
  const pixOff = u32le(b, 10)
  if (pixOff < 14 + dib) return null
  if (dib === 12) {
    const w = u16le(b, 18)
    const h = u16le(b, 20)
    return w < 0 || h < 0 ? image('bmp') : image('bmp', w, h)
  }
  const w = i32le(b, 18)
  const h = i32le(b, 22)
  if (w === undefined || h === undefined) return image('bmp')
  if (w <= 0) return null
  return image('bmp', w, Math.abs(h)) // negative height: rows stored top-down
}

function sniffRiff(b: Buffer): Sniffed | null {
  if (ascii(b, 0, 4) !== 'RIFF') return null
  const form = ascii(b, 8, 4)
  if (form === 'AVI ' || form === 'AVIX') return video('avi')
  if (form !== 'WEBP') return null
  const chunk = ascii(b, 12, 4)
  if (chunk === 'VP8 ') {
    // frame tag (3 bytes) then start code 9D 01 2A, then 14-bit width and height (upper 2 bits: scale)
    if (!startsWith(b, [0x9d, 0x01, 0x2a], 23)) return image('webp')
    const w = u16le(b, 26)
    const h = u16le(b, 28)
    return w < 0 || h < 0 ? image('webp') : image('webp', w & 0x3fff, h & 0x3fff)
  }
  if (chunk === 'VP8L') {
    if (u8(b, 20) !== 0x2f) return image('webp')
    const bits = u32le(b, 21)
    if (bits < 0) return image('webp')
    return image('webp', (bits & 0x3fff) + 1, ((bits >>> 14) & 0x3fff) + 1)
  }
  if (chunk === 'VP8X') {
    const w = u24le(b, 24)
    const h = u24le(b, 27)
    return w < 0 || h < 0 ? image('webp') : image('webp', w + 1, h + 1)
  }
  return image('webp')
}

function sniffTiff(b: Buffer): Sniffed | null {
  let le: boolean
  if (startsWith(b, [0x49, 0x49])) le = true
  else if (startsWith(b, [0x4d, 0x4d])) le = false
  else return null
  const r16 = (o: number) => (le ? u16le(b, o) : u16be(b, o))
  const r32 = (o: number) => (le ? u32le(b, o) : u32be(b, o))
  const magic = r16(2)
  if (magic !== 42 && magic !== 43) return null
  let w: number | undefined
  let h: number | undefined
  if (magic === 42) {
    const ifd = r32(4)
    if (ifd < 8) return ifd < 0 ? null : image('tiff')
    const n = r16(ifd)
    if (n <= 0) return image('tiff')
    for (let i = 0; i < n; i++) {
      const e = ifd + 2 + i * 12
      const tag = r16(e)
      if (tag < 0) break
      if (tag !== 256 && tag !== 257) continue
      const type = r16(e + 2)
      const v = type === 3 ? r16(e + 8) : type === 4 ? r32(e + 8) : -1
      if (v < 0) continue
      if (tag === 256) w = v
      else h = v
    }
  } else {
    // BigTIFF: offset size 8 at byte 4, 64-bit IFD offset at 8, entries of 20 bytes with 8-byte counts
    if (r16(4) !== 8) return null
    const hi = r32(le ? 12 : 8)
    const lo = r32(le ? 8 : 12)
    if (hi !== 0 || lo < 16) return image('tiff')
    const ifd = lo
    const nlo = r32(le ? ifd : ifd + 4)
    if (nlo <= 0) return image('tiff')
    for (let i = 0; i < nlo && i < 4096; i++) {
      const e = ifd + 8 + i * 20
      const tag = r16(e)
      if (tag < 0) break
      if (tag !== 256 && tag !== 257) continue
      const type = r16(e + 2)
      const v = type === 3 ? r16(e + 12) : type === 4 ? r32(e + 12) : type === 16 ? r32(le ? e + 12 : e + 16) : -1
      if (v < 0) continue
      if (tag === 256) w = v
      else h = v
    }
  }
  return image('tiff', w, h)
}

// ---------------------------------------------------------------------------------------------------------
// ISO base media (MP4 / MOV / 3GP / HEIF / AVIF)

interface Box {
  type: string
  start: number // offset of the box header
  body: number // offset of the payload
  end: number // offset after the box (clamped to the buffer)
  complete: boolean // the whole box is inside the buffer
}

/** Iterates boxes in [from, to). Stops at the first malformed box. */
function* boxes(b: Buffer, from: number, to: number): Generator<Box> {
  let o = from
  while (o + 8 <= to) {
    let size = u32be(b, o)
    const type = ascii(b, o + 4, 4)
    let body = o + 8
    if (size === 1) {
      const hi = u32be(b, o + 8)
      const lo = u32be(b, o + 12)
      if (hi < 0 || lo < 0) return
      size = hi * 2 ** 32 + lo
      body = o + 16
    } else if (size === 0) {
      size = to - o
    }
    if (size < body - o) return
    const end = o + size
    yield { type, start: o, body, end: Math.min(end, to), complete: end <= to }
    if (end > to) return
    o = end
  }
}

const HEIF_HEIC_BRANDS = new Set(['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'hevm', 'hevs'])
const HEIF_AVIF_BRANDS = new Set(['avif', 'avis'])
const HEIF_GENERIC_BRANDS = new Set(['mif1', 'msf1', 'mif2', 'miaf'])

function brandToVideo(brand: string): VideoFormat | null {
  if (brand === 'qt  ') return 'mov'
  if (brand.startsWith('3gp') || brand.startsWith('3ge') || brand.startsWith('3gg') || brand.startsWith('3gs')) return '3gp'
  if (brand.startsWith('3g2')) return '3g2'
  if (brand === 'M4V ' || brand === 'M4VH' || brand === 'M4VP') return 'm4v'
  if (brand === 'F4V ' || brand === 'F4P ') return 'f4v'
  if (
    brand === 'isom' || /^iso[2-9a-c]$/.test(brand) || brand === 'mp41' || brand === 'mp42' || brand === 'avc1' ||
    brand === 'dash' || brand === 'mmp4' || brand === 'MSNV' || brand === 'NDAS' || brand === 'NDSC' ||
    brand === 'NDSH' || brand === 'NDSM' || brand === 'NDSP' || brand === 'NDSS' || brand === 'NDXC' ||
    brand === 'NDXH' || brand === 'NDXM' || brand === 'NDXP' || brand === 'NDXS' || brand === 'mp71' ||
    brand === 'cmfc' || brand === 'XAVC' || brand === 'av01'
  )
    return 'mp4'
  return null
}

/** Dimensions of the primary item from meta/iprp (ispe), else the largest ispe. */
function heifDims(b: Buffer, meta: Box): { w?: number; h?: number } {
  let primary = -1
  const props: Array<{ w: number; h: number } | null> = [] // 1-based property index -> ispe or null
  const assoc = new Map<number, number[]>()
  const inner = meta.body + 4 // FullBox: version + flags
  for (const box of boxes(b, inner, meta.end)) {
    if (box.type === 'pitm') {
      const v = u8(b, box.body)
      primary = v === 0 ? u16be(b, box.body + 4) : u32be(b, box.body + 4)
    } else if (box.type === 'iprp') {
      for (const p of boxes(b, box.body, box.end)) {
        if (p.type === 'ipco') {
          for (const prop of boxes(b, p.body, p.end)) {
            if (prop.type === 'ispe') {
              const w = u32be(b, prop.body + 4)
              const h = u32be(b, prop.body + 8)
              props.push(w > 0 && h > 0 ? { w, h } : null)
            } else props.push(null)
          }
        } else if (p.type === 'ipma') {
          const version = u8(b, p.body)
          const flags = u8(b, p.body + 3) // low byte of the 24-bit flags
          if (version < 0 || flags < 0) continue
          let o = p.body + 4
          const count = u32be(b, o)
          o += 4
          for (let i = 0; i < count && o < p.end; i++) {
            const item = version < 1 ? u16be(b, o) : u32be(b, o)
            o += version < 1 ? 2 : 4
            const n = u8(b, o)
            o += 1
            if (item < 0 || n < 0) break
            const list: number[] = []
            for (let k = 0; k < n; k++) {
              const idx = flags & 1 ? u16be(b, o) & 0x7fff : u8(b, o) & 0x7f
              o += flags & 1 ? 2 : 1
              if (idx > 0) list.push(idx)
            }
            assoc.set(item, list)
          }
        }
      }
    }
  }
  if (primary >= 0) {
    for (const idx of assoc.get(primary) ?? []) {
      const p = props[idx - 1]
      if (p) return { w: p.w, h: p.h }
    }
  }
  let best: { w: number; h: number } | null = null
  for (const p of props) if (p && (!best || p.w * p.h > best.w * best.h)) best = p
  return best ? { w: best.w, h: best.h } : {}
}

function sniffIsoBmff(b: Buffer): Sniffed | null {
  const first = ascii(b, 4, 4)
  if (first === 'ftyp') {
    const size = u32be(b, 0)
    const major = ascii(b, 8, 4)
    if (major === '') return null
    const ftypComplete = size >= 16 && size <= b.length
    const brands = [major]
    const end = Math.min(size >= 16 ? size : 16, b.length)
    for (let o = 16; o + 4 <= end; o += 4) brands.push(ascii(b, o, 4))
    const has = (set: Set<string>) => brands.some((x) => set.has(x))
    // Image formats: judged by the major brand first, then by the compatible brands.
    let imageFormat: ImageFormat | null = null
    if (HEIF_AVIF_BRANDS.has(major)) imageFormat = 'avif'
    else if (HEIF_HEIC_BRANDS.has(major)) imageFormat = 'heic'
    else if (HEIF_GENERIC_BRANDS.has(major)) {
      if (!ftypComplete) return null // the compatible brands decide between heic, avif and plain heif
      imageFormat = has(HEIF_AVIF_BRANDS) ? 'avif' : has(HEIF_HEIC_BRANDS) ? 'heic' : 'heif'
    }
    if (imageFormat) {
      for (const box of boxes(b, 0, b.length)) {
        if (box.type === 'meta') {
          if (!box.complete) break // a cut meta box could point at the wrong item's size
          const d = heifDims(b, box)
          return image(imageFormat, d.w, d.h)
        }
      }
      return image(imageFormat)
    }
    const fromMajor = brandToVideo(major)
    if (fromMajor) return video(fromMajor)
    if (major === 'M4A ' || major === 'M4B ' || major === 'M4P ' || major === 'crx ') return null // audio, raw photos
    if (!ftypComplete) return null
    for (const br of brands.slice(1)) {
      const v = brandToVideo(br)
      if (v) return video(v)
    }
    return null
  }
  // Old QuickTime files without ftyp start directly with one of these atoms.
  if ((first === 'moov' || first === 'mdat' || first === 'wide' || first === 'pnot') && u32be(b, 0) >= 8) {
    return video('mov')
  }
  return null
}

// ---------------------------------------------------------------------------------------------------------
// Other video containers

/** EBML variable-length integer at o: [value, length] or null. */
function vint(b: Buffer, o: number, keepMarker: boolean): [number, number] | null {
  const first = u8(b, o)
  if (first <= 0) return null
  let len = 1
  while (len <= 8 && !(first & (0x80 >> (len - 1)))) len++
  if (len > 8 || o + len > b.length) return null
  let v = keepMarker ? first : first & (0xff >> len)
  for (let i = 1; i < len; i++) v = v * 256 + b[o + i]!
  return [v, len]
}

function sniffEbml(b: Buffer): Sniffed | null {
  if (!startsWith(b, [0x1a, 0x45, 0xdf, 0xa3])) return null
  const sz = vint(b, 4, false)
  if (!sz) return null // header cut: webm or matroska cannot be told yet
  let o = 4 + sz[1]
  const end = Math.min(b.length, o + sz[0])
  while (o < end) {
    const id = vint(b, o, true)
    if (!id) break
    const len = vint(b, o + id[1], false)
    if (!len) break
    const body = o + id[1] + len[1]
    if (id[0] === 0x4282) {
      const doc = b.toString('latin1', body, Math.min(body + len[0], b.length)).replace(/\0+$/, '')
      if (doc === 'webm') return video('webm')
      if (doc === 'matroska') return video('mkv')
      return null
    }
    o = body + len[0]
  }
  if (4 + sz[1] + sz[0] > b.length) return null // header cut before the DocType
  return video('mkv') // DocType absent: the default is "matroska"
}

function sniffMpegTs(b: Buffer): Sniffed | null {
  // Require the sync byte at every packet start present in the prefix, and at least 3 packets.
  const check = (offset: number, stride: number): boolean => {
    let n = 0
    for (let o = offset; o < b.length && n < 64; o += stride, n++) if (b[o] !== 0x47) return false
    return n >= 3 && offset + (n - 1) * stride < b.length
  }
  if (check(0, 188)) return video('mpegts')
  if (check(4, 192)) return video('m2ts')
  return null
}

const ASF_GUID = [0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11, 0xa6, 0xd9, 0x00, 0xaa, 0x00, 0x62, 0xce, 0x6c]
const MXF_KEY = [0x06, 0x0e, 0x2b, 0x34, 0x02, 0x05, 0x01, 0x01, 0x0d, 0x01, 0x02, 0x01, 0x01]

function sniffVideoMagic(b: Buffer): Sniffed | null {
  if (ascii(b, 0, 3) === 'FLV' && u8(b, 3) === 1) return video('flv')
  if (startsWith(b, [0x00, 0x00, 0x01, 0xba])) return video('mpeg')
  if (startsWith(b, [0x00, 0x00, 0x01, 0xb3])) return video('m2v')
  if (startsWith(b, ASF_GUID)) return video('asf')
  if (ascii(b, 0, 4) === 'OggS' && u8(b, 4) === 0) return video('ogg')
  if (ascii(b, 0, 4) === '.RMF') return video('rm')
  if (startsWith(b, MXF_KEY)) return video('mxf')
  if (ascii(b, 0, 25) === 'nut/multimedia container\0') return video('nut')
  if (ascii(b, 0, 14) === 'LUCAM-RECORDER') return video('ser')
  if (ascii(b, 0, 4) === 'MLVI') return video('mlv')
  // DV DIF: header section of the first DIF block: 1F 07 00 followed by 3F (525/60) or BF (625/50)
  if (startsWith(b, [0x1f, 0x07, 0x00]) && (u8(b, 3) & 0x7f) === 0x3f) return video('dv')
  return null
}

// ---------------------------------------------------------------------------------------------------------
// TGA: no magic number, so a strict plausibility check of the 18-byte header, tried last.

function sniffTga(b: Buffer): Sniffed | null {
  if (b.length < 18) return null
  const idLen = b[0]!
  const cmapType = b[1]!
  const imgType = b[2]!
  const cmapFirst = u16le(b, 3)
  const cmapLen = u16le(b, 5)
  const cmapBits = b[7]!
  const w = u16le(b, 12)
  const h = u16le(b, 14)
  const bpp = b[16]!
  const desc = b[17]!
  if (cmapType > 1) return null
  if (![1, 2, 3, 9, 10, 11].includes(imgType)) return null
  if (w === 0 || h === 0) return null
  if (desc & 0xc0) return null // interleaving bits: unused by every real writer
  const alphaBits = desc & 0x0f
  const colorMapped = imgType === 1 || imgType === 9
  if (colorMapped) {
    if (cmapType !== 1 || cmapLen === 0 || ![15, 16, 24, 32].includes(cmapBits) || ![8, 16].includes(bpp)) return null
    if (cmapFirst > cmapLen) return null
  } else {
    if (cmapType === 0 && (cmapFirst !== 0 || cmapLen !== 0 || (cmapBits !== 0 && ![15, 16, 24, 32].includes(cmapBits)))) return null
    if (cmapType === 1 && (cmapLen === 0 || ![15, 16, 24, 32].includes(cmapBits))) return null
    const trueColor = imgType === 2 || imgType === 10
    if (trueColor && ![15, 16, 24, 32].includes(bpp)) return null
    if (!trueColor && ![8, 16].includes(bpp)) return null
  }
  if (alphaBits > 8 || (bpp === 24 && alphaBits !== 0) || (bpp === 32 && alphaBits !== 0 && alphaBits !== 8)) return null
  // The TGA 2.0 footer (TRUEVISION-XFILE) is optional and sits at the end of the file, outside a prefix.
  return image('tga', w, h)
}

// ---------------------------------------------------------------------------------------------------------

/**
 * Same as sniff() but lets an internal error escape instead of answering null. For tests, which use it to show
 * that truncated or garbage input is handled by the parsers themselves and not by sniff()'s safety net.
 */
export function sniffOrThrow(b: Buffer): Sniffed | null {
  if (b.length < 2) return null
  return (
    sniffPng(b) ??
    sniffJpeg(b) ??
    sniffGif(b) ??
    sniffRiff(b) ??
    sniffBmp(b) ??
    sniffTiff(b) ??
    sniffIsoBmff(b) ??
    sniffEbml(b) ??
    sniffVideoMagic(b) ??
    sniffMpegTs(b) ??
    sniffTga(b)
  )
}

/** Detects an image or video container from its leading bytes (a prefix is enough). Never throws. */
export function sniff(bytes: Buffer): Sniffed | null {
  try {
    if (!bytes) return null
    return sniffOrThrow(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes as Uint8Array))
  } catch {
    return null
  }
}
