/**
 * The EXIF orientation (1..8) of a JPEG, read from its APP1 Exif segment's IFD0 (tag 0x0112), without
 * decoding: the gateway needs the upright sides of a photo to size its output (server/jobs/output-size.ts).
 * Undefined for other formats, no EXIF, or anything malformed (never throws).
 */
export function exifOrientation(b: Buffer): number | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined
  let o = 2
  while (o + 4 <= b.length) {
    if (b[o] !== 0xff) return undefined
    const marker = b[o + 1]!
    if (marker === 0xff) { o++; continue } // fill byte
    if (marker === 0xda || marker === 0xd9) return undefined // start of scan / end: no EXIF before the pixels
    const len = b.readUInt16BE(o + 2)
    if (len < 2) return undefined
    const seg = o + 4
    if (marker === 0xe1 && seg + 6 <= b.length && b.toString('latin1', seg, seg + 6) === 'Exif\0\0') {
      return fromTiff(b.subarray(seg + 6, Math.min(b.length, o + 2 + len)))
    }
    o += 2 + len
  }
  return undefined
}

function fromTiff(t: Buffer): number | undefined {
  if (t.length < 8) return undefined
  const le = t.toString('latin1', 0, 2) === 'II'
  if (!le && t.toString('latin1', 0, 2) !== 'MM') return undefined
  const u16 = (p: number) => (le ? t.readUInt16LE(p) : t.readUInt16BE(p))
  const u32 = (p: number) => (le ? t.readUInt32LE(p) : t.readUInt32BE(p))
  if (u16(2) !== 42) return undefined
  const ifd = u32(4)
  if (ifd + 2 > t.length) return undefined
  const n = u16(ifd)
  for (let i = 0; i < n; i++) {
    const e = ifd + 2 + i * 12
    if (e + 12 > t.length) return undefined
    if (u16(e) === 0x0112 && u16(e + 2) === 3) {
      const v = u16(e + 8)
      return v >= 1 && v <= 8 ? v : undefined
    }
  }
  return undefined
}
