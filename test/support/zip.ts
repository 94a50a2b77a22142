/** Zip archives made in tests (model-file suites): torch.save's stored entries, or a wheel's deflated ones. */
import zlib from 'node:zlib'

/** A zip of `entries` (local headers, central directory, end record); `deflate`: method 8, else stored (0). */
export function zipOf(entries: [string, Buffer][], o: { deflate?: boolean } = {}): Buffer {
  const method = o.deflate ? 8 : 0
  const local: Buffer[] = []
  const central: Buffer[] = []
  let off = 0
  for (const [name, data] of entries) {
    const n = Buffer.from(name)
    const body = o.deflate ? zlib.deflateRawSync(data) : data
    const crc = zlib.crc32(data) >>> 0
    const h = Buffer.alloc(30)
    h.writeUInt32LE(0x04034b50, 0)
    h.writeUInt16LE(20, 4)
    h.writeUInt16LE(method, 8)
    h.writeUInt32LE(crc, 14)
    h.writeUInt32LE(body.length, 18)
    h.writeUInt32LE(data.length, 22)
    h.writeUInt16LE(n.length, 26)
    local.push(h, n, body)
    const c = Buffer.alloc(46)
    c.writeUInt32LE(0x02014b50, 0)
    c.writeUInt16LE(20, 4)
    c.writeUInt16LE(20, 6)
    c.writeUInt16LE(method, 10)
    c.writeUInt32LE(crc, 16)
    c.writeUInt32LE(body.length, 20)
    c.writeUInt32LE(data.length, 24)
    c.writeUInt16LE(n.length, 28)
    c.writeUInt32LE(off, 42)
    central.push(c, n)
    off += 30 + n.length + body.length
  }
  const cd = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(cd.length, 12)
  end.writeUInt32LE(off, 16)
  return Buffer.concat([...local, cd, end])
}

/** A zip of stored (uncompressed) entries, as torch.save writes them. */
export const zipStored = (entries: [string, Buffer][]): Buffer => zipOf(entries)
