/** Loads a user-supplied input URL: the service's own links are read from storage, anything else via safeFetch.
 *  Sizes are checked while streaming, before anything is buffered: a stored object's size before its first byte is
 *  read, a fetched body as it arrives (server/fetch: Content-Length, then a byte count). */
import fsp from 'node:fs/promises'
import path from 'node:path'
import crypto from 'node:crypto'
import type { Readable } from 'node:stream'
import { safeFetch, safeFetchToFile, FetchError, type FetchPolicy } from './fetch/index.js'
import { ApiError, fetchErrorCode } from './errors.js'
import type { Config } from './config.js'
import type { MediaStorage } from './storage/types.js'
import { TooLargeError, spoolToFile } from './storage/local.js'

export function fetchPolicy(cfg: Config, maxBytes: number): FetchPolicy {
  return {
    ...cfg.outbound,
    allow: cfg.fetchAllow,
    maxBytes,
    connectTimeoutMs: 10_000,
    headersTimeoutMs: 15_000,
    bodyTimeoutMs: 15_000,
    maxRedirects: 5,
    totalTimeoutMs: cfg.fetchTimeoutMs,
  }
}

function checkUrl(url: string, kind: 'photo' | 'video'): void {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
}

/** Whole input in memory (photos). */
export async function loadBytes(url: string, kind: 'photo' | 'video', cfg: Config, storage: MediaStorage, maxBytes: number): Promise<Buffer> {
  checkUrl(url, kind)
  const own = storage.ownKey(url)
  if (own === 'invalid') throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
  if (own) {
    // the stored size first (local: its meta; S3: the GET's Content-Length, before any body byte is read): an
    // oversize upload is refused without reading it, and the read stops at maxBytes whatever the size said
    const obj = await storage.stream(own)
    if (!obj) throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
    if (obj.meta.size > maxBytes) {
      obj.stream.destroy()
      throw new ApiError(fetchErrorCode('too_large', kind))
    }
    return readAtMost(obj.stream, maxBytes, kind)
  }
  try {
    return (await safeFetch(url, fetchPolicy(cfg, maxBytes))).body
  } catch (e) {
    if (e instanceof FetchError) throw new ApiError(fetchErrorCode(e.reason, kind), { detail: e.message })
    throw e
  }
}

/** The stream's bytes, refused (the stream destroyed) as soon as they pass maxBytes. */
async function readAtMost(src: Readable, maxBytes: number, kind: 'photo' | 'video'): Promise<Buffer> {
  const parts: Buffer[] = []
  let n = 0
  try {
    for await (const c of src) {
      const b = c as Buffer
      n += b.length
      if (n > maxBytes) throw new ApiError(fetchErrorCode('too_large', kind))
      parts.push(b)
    }
  } finally {
    src.destroy()
  }
  return Buffer.concat(parts, n)
}

/** Input into a temporary file (videos, transfers). The caller removes it. */
export async function loadToFile(url: string, kind: 'photo' | 'video', cfg: Config, storage: MediaStorage, maxBytes: number): Promise<{ file: string; size: number; contentType: string | null }> {
  checkUrl(url, kind)
  const dir = path.join(cfg.dataDir, 'tmp')
  await fsp.mkdir(dir, { recursive: true })
  const file = path.join(dir, `in-${crypto.randomBytes(12).toString('hex')}`)
  const own = storage.ownKey(url)
  if (own === 'invalid') throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
  if (own) {
    const obj = await storage.stream(own)
    if (!obj) throw new ApiError(kind === 'photo' ? 100400001 : 110400008)
    if (obj.meta.size > maxBytes) {
      obj.stream.destroy()
      throw new ApiError(fetchErrorCode('too_large', kind))
    }
    let size: number
    try {
      size = await spoolToFile(obj.stream, file, maxBytes) // capped too, whatever the stored size said
    } catch (e) {
      if (e instanceof TooLargeError) throw new ApiError(fetchErrorCode('too_large', kind))
      throw e
    }
    return { file, size, contentType: obj.meta.contentType }
  }
  try {
    const r = await safeFetchToFile(url, file, fetchPolicy(cfg, maxBytes))
    return { file, size: r.bytes, contentType: r.contentType }
  } catch (e) {
    await fsp.rm(file, { force: true })
    if (e instanceof FetchError) throw new ApiError(fetchErrorCode(e.reason, kind), { detail: e.message })
    throw e
  }
}

export async function readHead(file: string, n = 256 * 1024): Promise<Buffer> {
  const fh = await fsp.open(file, 'r')
  try {
    const buf = Buffer.alloc(n)
    const { bytesRead } = await fh.read(buf, 0, n, 0)
    return buf.subarray(0, bytesRead)
  } finally {
    await fh.close()
  }
}
