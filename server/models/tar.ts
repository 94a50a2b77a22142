// Minimal streaming reader for gzip-compressed tar archives (what `npm pack` writes).
//
// Handles ustar headers (name + prefix), pax extended headers ('x': path/size) and GNU long names ('L').
// Entry bodies are streamed to a sink chosen per entry, so a large archive never sits in memory.

import fs from 'node:fs'
import zlib from 'node:zlib'

export interface TarHeader {
  name: string
  size: number
  /** '0' file, '5' directory, ... (typeflag; '\0' is read as '0'). */
  type: string
}

export interface TarSink {
  write(chunk: Buffer): void | Promise<void>
  end(): void | Promise<void>
}

const BLOCK = 512

function cstr(buf: Buffer, off: number, len: number): string {
  const s = buf.subarray(off, off + len)
  const z = s.indexOf(0)
  return (z >= 0 ? s.subarray(0, z) : s).toString('utf8')
}

function octal(buf: Buffer, off: number, len: number, what: string): number {
  const field = buf.subarray(off, off + len)
  if (field[0]! & 0x80) {
    // base-256 (GNU) for big sizes
    let v = 0
    for (let i = 1; i < field.length; i++) v = v * 256 + field[i]!
    return v
  }
  const s = cstr(buf, off, len).trim()
  if (s === '') return 0
  if (!/^[0-7]+$/.test(s)) throw new Error(`tar: bad ${what} field ${JSON.stringify(s)}`)
  return parseInt(s, 8)
}

function checksumOk(h: Buffer): boolean {
  const stored = octal(h, 148, 8, 'checksum')
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!
  return sum === stored
}

function parsePax(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  let i = 0
  const b = Buffer.from(text, 'utf8')
  while (i < b.length) {
    const sp = b.indexOf(0x20, i)
    if (sp < 0) break
    const len = parseInt(b.subarray(i, sp).toString('ascii'), 10)
    if (!(len > 0)) break
    const rec = b.subarray(sp + 1, i + len - 1).toString('utf8') // drop trailing \n
    const eq = rec.indexOf('=')
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1)
    i += len
  }
  return out
}

/**
 * Read every entry of a .tgz; `pick(header)` returns a sink for the entries to keep (null to skip).
 * Resolves when the archive end is reached.
 */
export async function readTgz(file: string, pick: (h: TarHeader) => TarSink | null): Promise<void> {
  const input = fs.createReadStream(file).pipe(zlib.createGunzip())
  let pending: Buffer = Buffer.alloc(0)
  // state
  let mode: 'header' | 'body' | 'meta' | 'done' = 'header'
  let remaining = 0 // body bytes left
  let padding = 0 // padding bytes after the body
  let sink = null as TarSink | null
  let meta: Buffer[] = []
  let metaType = ''
  let paxNext: Record<string, string> = {}
  let longName: string | null = null
  let zeroBlocks = 0

  const startEntry = async (h: Buffer) => {
    const type = String.fromCharCode(h[156] || 0x30)
    let size = octal(h, 124, 12, 'size')
    const prefix = cstr(h, 345, 155)
    let name = cstr(h, 0, 100)
    const magic = cstr(h, 257, 6)
    if (magic.startsWith('ustar') && prefix) name = `${prefix}/${name}`
    padding = (BLOCK - (size % BLOCK)) % BLOCK
    if (type === 'x' || type === 'g' || type === 'L') {
      mode = 'meta'
      metaType = type
      meta = []
      remaining = size
      if (size === 0) finishMeta()
      return
    }
    if (longName !== null) name = longName
    if (paxNext.path) name = paxNext.path
    if (paxNext.size) {
      size = Number(paxNext.size)
      padding = (BLOCK - (size % BLOCK)) % BLOCK
    }
    longName = null
    paxNext = {}
    sink = pick({ name, size, type: type === '\0' ? '0' : type })
    remaining = size
    mode = 'body'
    if (remaining === 0) {
      if (sink) await sink.end()
      sink = null
      mode = padding ? 'body' : 'header'
    }
  }

  const finishMeta = () => {
    const text = Buffer.concat(meta).toString('utf8')
    if (metaType === 'x') paxNext = parsePax(text)
    else if (metaType === 'L') longName = text.replace(/\0+$/, '')
    meta = []
  }

  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
      let off = 0
      while (off < pending.length && mode !== 'done') {
        if (mode === 'header') {
          if (pending.length - off < BLOCK) break
          const h = pending.subarray(off, off + BLOCK)
          off += BLOCK
          if (h.every((b) => b === 0)) {
            if (++zeroBlocks >= 2) mode = 'done'
            continue
          }
          zeroBlocks = 0
          if (!checksumOk(h)) throw new Error('tar: header checksum mismatch (corrupt archive)')
          await startEntry(Buffer.from(h))
          continue
        }
        if (remaining > 0) {
          const n = Math.min(remaining, pending.length - off)
          const piece = pending.subarray(off, off + n)
          off += n
          remaining -= n
          if (mode === 'meta') meta.push(Buffer.from(piece))
          else if (sink) await sink.write(Buffer.from(piece))
          if (remaining === 0) {
            if (mode === 'meta') finishMeta()
            else if (sink) {
              await sink.end()
              sink = null
            }
          }
          continue
        }
        // skip padding
        const n = Math.min(padding, pending.length - off)
        off += n
        padding -= n
        if (padding === 0) mode = 'header'
      }
      pending = pending.subarray(off)
      if (mode === 'done') break
    }
  } finally {
    input.destroy()
  }
  // Without the end-of-archive blocks, accept only a clean entry boundary (a lost entry is then simply absent).
  if (mode !== 'done' && !(mode === 'header' && pending.length === 0)) throw new Error('tar: archive truncated')
}
