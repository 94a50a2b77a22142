/**
 * The orientation the engine gives a photo before any network runs, read from the file's header without
 * decoding, for every photo format the engine turns: the gateway prices and sizes a photo by its upright sides
 * (server/pricing.ts, server/jobs/output-size.ts) and `lucent enhance --scale` sizes upright too
 * (server/enhance/engine.ts).
 *
 * What the engine does (native/codec/src/meta.rs, exif.rs, heif.rs; native/engine/src/photo.rs applies it):
 * - JPEG: the first APP1 `Exif\0\0` segment's IFD0 Orientation (0x0112);
 * - PNG: the `eXIf` chunk(s), wherever they sit (the first one giving an orientation);
 * - WebP: the RIFF `EXIF` chunk(s) (with or without an `Exif\0\0` prefix), VP8X or not;
 * - TIFF: IFD0's Orientation tag (classic TIFF; BigTIFF gets none);
 * - TGA: an EXIF block in the TGA 2.0 developer area (tag 0x4578, the engine's own); the origin bits of the
 *   header only flip the picture (the decoder applies them), they never swap its sides;
 * - HEIF/HEIC: libheif applies the primary item's `irot` / `imir` while decoding (its sides are then the
 *   upright ones), and the EXIF Orientation is ignored, as every HEIF reader does (HEIF files from phones carry
 *   both `irot` and the camera's EXIF orientation: applying both would turn the picture twice);
 * - BMP: none.
 * The TIFF structure is read with the engine's rules (exif.rs): the first IFD0 entry of that tag with a known
 * type and its value inside the block decides, BYTE/SHORT/LONG accepted, 1..8 or nothing. Never throws.
 *
 * Why not a library: exifr (the well-kept one) reads EXIF from JPEG/TIFF/HEIC/PNG but not WebP or TGA, and for
 * HEIF it reports the EXIF tag, which the engine ignores, not `irot`; the engine's rules (which segment or
 * chunk counts, which entry types) are mirrored exactly here, in one place.
 */

/** Largest EXIF block the engine reads (meta.rs MAX_META). */
const MAX_META = 16 << 20

/** Orientation 1..8 from a TIFF structure (an EXIF block), with the prefixes the engine strips (exif.rs
 *  tiff_start: `Exif\0\0`, or HEIF's 4-byte offset). */
export function tiffOrientation(blob: Buffer): number | undefined {
  if (blob.length > MAX_META) return undefined
  const t = tiffStart(blob)
  return t ? ifd0Orientation(t) : undefined
}

const tiffHeader = (b: Buffer) => b.length >= 8 && (b.toString('latin1', 0, 4) === 'II*\0' || b.toString('latin1', 0, 4) === 'MM\0*')
const isExifPrefix = (b: Buffer) => b.length >= 6 && b.toString('latin1', 0, 6) === 'Exif\0\0'

function tiffStart(b: Buffer): Buffer | undefined {
  if (tiffHeader(b)) return b
  if (isExifPrefix(b)) return tiffStart(b.subarray(6))
  if (b.length >= 4) {
    const off = b.readUInt32BE(0)
    if (4 + off <= b.length) {
      const rest = b.subarray(4 + off)
      if (tiffHeader(rest)) return rest
      if (isExifPrefix(rest) && tiffHeader(rest.subarray(6))) return rest.subarray(6)
    }
  }
  return undefined
}

/** exif.rs type_size */
const TYPE_SIZE: Record<number, number> = { 1: 1, 2: 1, 6: 1, 7: 1, 3: 2, 8: 2, 4: 4, 9: 4, 11: 4, 13: 4, 5: 8, 10: 8, 12: 8 }

function ifd0Orientation(t: Buffer): number | undefined {
  const le = t[0] === 0x49
  const u16 = (p: number) => (le ? t.readUInt16LE(p) : t.readUInt16BE(p))
  const u32 = (p: number) => (le ? t.readUInt32LE(p) : t.readUInt32BE(p))
  const ifd = u32(4)
  if (ifd < 8 || ifd + 2 > t.length) return undefined
  const n = u16(ifd)
  if (n > 1000 || ifd + 2 + n * 12 > t.length) return undefined
  for (let i = 0; i < n; i++) {
    const e = ifd + 2 + i * 12
    const [tag, type, count] = [u16(e), u16(e + 2), u32(e + 4)]
    const ts = TYPE_SIZE[type]
    if (ts === undefined) continue
    const size = ts * count
    let at = e + 8
    if (size > 4) {
      at = u32(e + 8)
      if (at + size > t.length) continue // the engine drops an entry pointing outside the block
    }
    if (tag !== 0x0112) continue
    if (count === 0) return undefined
    const v = type === 1 || type === 7 ? t[at]! : type === 3 ? u16(at) : type === 4 || type === 13 ? u32(at) : 0
    return v >= 1 && v <= 8 ? v : undefined
  }
  return undefined
}

/** The EXIF orientation (1..8) of a JPEG: the first APP1 Exif segment, as the engine reads it. Undefined for
 *  other formats, no EXIF, or anything malformed. */
export function exifOrientation(b: Buffer): number | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined
  let p = 2
  while (p + 4 <= b.length) {
    if (b[p] !== 0xff) return undefined
    const mk = b[p + 1]!
    if (mk === 0xff) { p++; continue } // fill byte
    if (mk === 0xd8 || (mk >= 0xd0 && mk <= 0xd7) || mk === 0x01) { p += 2; continue }
    if (mk === 0xda || mk === 0xd9) return undefined // start of scan / end: no EXIF before the pixels
    const len = b.readUInt16BE(p + 2)
    if (len < 2 || p + 2 + len > b.length) return undefined
    const seg = b.subarray(p + 4, p + 2 + len)
    if (mk === 0xe1 && seg.length > 6 && isExifPrefix(seg)) return tiffOrientation(seg.subarray(6)) // the first one only
    p += 2 + len
  }
  return undefined
}

function pngOrientation(b: Buffer): number | undefined {
  let p = 8
  while (p + 12 <= b.length) {
    const len = b.readUInt32BE(p)
    const end = p + 12 + len
    if (end > b.length) return undefined
    if (b.toString('latin1', p + 4, p + 8) === 'eXIf') {
      const o = tiffOrientation(b.subarray(p + 8, p + 8 + len))
      if (o !== undefined) return o
    }
    p = end
  }
  return undefined
}

function webpOrientation(b: Buffer): number | undefined {
  let p = 12
  while (p + 8 <= b.length) {
    const len = b.readUInt32LE(p + 4)
    const end = p + 8 + len
    if (end > b.length) return undefined
    if (b.toString('latin1', p, p + 4) === 'EXIF') {
      const o = tiffOrientation(b.subarray(p + 8, end))
      if (o !== undefined) return o
    }
    p = end + (len & 1)
  }
  return undefined
}

const TGA_SIGNATURE = 'TRUEVISION-XFILE.\0'
const TGA_EXIF_TAG = 0x4578

function tgaOrientation(b: Buffer): number | undefined {
  if (b.length < 18 + 26 || b.toString('latin1', b.length - 18) !== TGA_SIGNATURE) return undefined
  const f = b.length - 26
  const dir = b.readUInt32LE(f + 4)
  if (dir === 0 || dir + 2 > f) return undefined
  const n = b.readUInt16LE(dir)
  for (let i = 0; i < n; i++) {
    const p = dir + 2 + i * 10
    if (p + 10 > f) break
    if (b.readUInt16LE(p) !== TGA_EXIF_TAG) continue
    const off = b.readUInt32LE(p + 2)
    const end = off + b.readUInt32LE(p + 6)
    if (end <= f) {
      const o = tiffOrientation(b.subarray(off, end))
      if (o !== undefined) return o
    }
  }
  return undefined
}

/**
 * The EXIF orientation (1..8) the engine applies to the decoded pixels of a photo of `format` (sniff.ts's
 * names or the addon's probe() extensions: jpeg/jpg, png, webp, tiff/tif, tga, heic/heif, bmp); undefined:
 * none. HEIF: none (libheif turns it while decoding; see heifTurns).
 */
export function engineOrientation(b: Buffer, format: string): number | undefined {
  try {
    switch (format) {
      case 'jpeg': case 'jpg': return exifOrientation(b)
      case 'png': return pngOrientation(b)
      case 'webp': return webpOrientation(b)
      case 'tiff': case 'tif': return tiffHeader(b) ? ifd0Orientation(b) : undefined
      case 'tga': return tgaOrientation(b)
      default: return undefined
    }
  } catch {
    return undefined
  }
}

// --- HEIF: the primary item's irot ----------------------------------------------------------------------------

interface Box { type: string; body: number; end: number }

function* boxes(b: Buffer, from: number, to: number): Generator<Box> {
  let o = from
  while (o + 8 <= to) {
    let size = b.readUInt32BE(o)
    let body = o + 8
    if (size === 1) {
      if (o + 16 > to) return
      size = b.readUInt32BE(o + 8) * 2 ** 32 + b.readUInt32BE(o + 12)
      body = o + 16
    } else if (size === 0) size = to - o
    if (size < body - o || o + size > to) return
    yield { type: b.toString('latin1', o + 4, o + 8), body, end: o + size }
    o += size
  }
}

/**
 * Whether libheif turns a HEIF's primary image a quarter turn (`irot` angle 90 or 270 degrees) while decoding,
 * i.e. whether its upright sides are those of its `ispe` (what sniff() reports) swapped. Undefined: not a
 * readable HEIF.
 */
export function heifTurns(b: Buffer): boolean | undefined {
  try {
    if (b.length < 12 || b.toString('latin1', 4, 8) !== 'ftyp') return undefined
    const meta = [...boxes(b, 0, b.length)].find((x) => x.type === 'meta')
    if (!meta) return undefined
    let primary = -1
    const props: string[] = [] // 1-based property index -> type ('irot:<angle>' for irot)
    const assoc = new Map<number, number[]>()
    for (const box of boxes(b, meta.body + 4, meta.end)) {
      if (box.type === 'pitm') primary = b[box.body] === 0 ? b.readUInt16BE(box.body + 4) : b.readUInt32BE(box.body + 4)
      if (box.type !== 'iprp') continue
      for (const p of boxes(b, box.body, box.end)) {
        if (p.type === 'ipco') {
          for (const prop of boxes(b, p.body, p.end)) props.push(prop.type === 'irot' && prop.body < prop.end ? `irot:${b[prop.body]! & 3}` : prop.type)
        } else if (p.type === 'ipma') {
          const version = b[p.body]!
          const large = (b[p.body + 3]! & 1) === 1
          let o = p.body + 4
          const count = b.readUInt32BE(o)
          o += 4
          for (let i = 0; i < count && o < p.end; i++) {
            const item = version < 1 ? b.readUInt16BE(o) : b.readUInt32BE(o)
            o += version < 1 ? 2 : 4
            const n = b[o]!
            o += 1
            const list: number[] = []
            for (let k = 0; k < n; k++) {
              list.push(large ? b.readUInt16BE(o) & 0x7fff : b[o]! & 0x7f)
              o += large ? 2 : 1
            }
            assoc.set(item, list)
          }
        }
      }
    }
    if (primary < 0) return undefined
    for (const idx of assoc.get(primary) ?? []) {
      const p = props[idx - 1]
      if (p?.startsWith('irot:')) return p === 'irot:1' || p === 'irot:3'
    }
    return false
  } catch {
    return undefined
  }
}

/** EXIF orientations that swap width and height. */
export const swapsSides = (orientation: number | undefined): boolean => orientation !== undefined && orientation >= 5 && orientation <= 8

/**
 * The upright sides of a photo as the networks see it, from its sniffed (stored) sides: swapped when the engine
 * turns it a quarter turn (an EXIF orientation 5..8, or a HEIF's irot of 90 / 270 degrees).
 */
export function uprightSize(b: Buffer, sn: { format: string; width: number; height: number }): { width: number; height: number } {
  const turned = sn.format === 'heic' || sn.format === 'heif' ? heifTurns(b) === true : swapsSides(engineOrientation(b, sn.format))
  return turned ? { width: sn.height, height: sn.width } : { width: sn.width, height: sn.height }
}
