/** Loads a user-supplied input URL: the service's own links are read from storage, anything else via safeFetchToFile.
 *  Sizes are checked while streaming, before anything is buffered: a stored object's size before its first byte is
 *  read, a fetched body as it arrives (server/fetch: Content-Length, then a byte count).
 *  Inputs are spooled to temporary files; the photo route reads one whole into memory only for its header facts
 *  (photoFacts: sniff + upright sides, which may need the file's end: TIFF IFD0, PNG/WebP EXIF chunks, TGA footer,
 *  HEIF meta after mdat), within a per-process budget of input bytes held in memory (LUCENT_INPUT_MEMORY_BYTES):
 *  a submission waits up to INPUT_MEMORY_WAIT_MS for room, then 503 + Retry-After (100500007), nothing debited. */
import fsp from 'node:fs/promises'
import path from 'node:path'
import crypto from 'node:crypto'
import { safeFetchToFile, FetchError, type FetchPolicy } from './fetch/index.js'
import { ApiError, QUEUE_FULL_CODE, fetchErrorCode } from './errors.js'
import { sniff, type Sniffed } from './media/sniff.js'
import { uprightSize } from './media/orientation.js'
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

/** Input into a temporary file (photos, videos, transfers). The caller removes it. */
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

/** How long a photo submission waits for room in the input memory budget before its 503. */
export const INPUT_MEMORY_WAIT_MS = 5000

/** Bytes of inputs held in memory at once in this process, FIFO: a taker waits until its bytes fit (an input larger
 *  than the whole budget: until nothing else is held, so memory stays under max(budget, one input)). */
export class MemoryBudget {
  private held = 0
  private readonly waiting: Array<{ n: number; grant: (release: () => void) => void }> = []
  constructor(readonly max: number) {}

  get inUse(): number { return this.held }

  /** A release function once `n` bytes are granted; null when they were not within `waitMs`. */
  take(n: number, waitMs: number): Promise<(() => void) | null> {
    return new Promise((resolve) => {
      const w = { n, grant: (r: () => void) => { clearTimeout(timer); resolve(r) } }
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(w)
        if (i < 0) return
        this.waiting.splice(i, 1)
        resolve(null)
        this.pump() // a large taker leaving the head may let smaller ones in
      }, waitMs)
      this.waiting.push(w)
      this.pump()
    })
  }

  private fits(n: number): boolean { return this.held === 0 || this.held + n <= this.max }

  private pump(): void {
    while (this.waiting.length && this.fits(this.waiting[0]!.n)) {
      const w = this.waiting.shift()!
      this.held += w.n
      let done = false
      w.grant(() => {
        if (done) return
        done = true
        this.held -= w.n
        this.pump()
      })
    }
  }
}

const budgets = new WeakMap<Config, MemoryBudget>()

/** The budget of this process (one per loaded configuration: a test's apps each have their own). */
export function inputBudget(cfg: Config): MemoryBudget {
  let b = budgets.get(cfg)
  if (!b) budgets.set(cfg, (b = new MemoryBudget(cfg.inputMemoryBytes)))
  return b
}

/** A photo's header facts from its spooled file: the sniffed format and sides, and its upright sides (orientation.ts),
 *  read whole within the input memory budget (released before this returns: nothing of it is kept). */
export async function photoFacts(file: string, size: number, cfg: Config): Promise<{ sn: Sniffed | null; upright: { width: number; height: number } | null }> {
  const release = await inputBudget(cfg).take(size, INPUT_MEMORY_WAIT_MS)
  if (!release) {
    const why = `the gateway holds its budget of input bytes (LUCENT_INPUT_MEMORY_BYTES=${cfg.inputMemoryBytes}): retry shortly`
    throw new ApiError(QUEUE_FULL_CODE, { status: 503, detail: why, headers: { 'retry-after': '5' } })
  }
  try {
    const bytes = await fsp.readFile(file)
    const sn = sniff(bytes)
    if (!sn || sn.kind !== 'image' || !sn.width || !sn.height) return { sn, upright: null }
    return { sn, upright: uprightSize(bytes, { format: sn.format, width: sn.width, height: sn.height }) }
  } finally {
    release()
  }
}

/** A photo input spooled to a temporary file (capped at LUCENT_FETCH_MAX_BYTES while streaming) for `fn`, removed
 *  after it: the photo route holds no input in memory but within photoFacts. */
export async function withPhotoInput<T>(url: string, cfg: Config, storage: MediaStorage, fn: (input: { file: string; size: number }) => Promise<T>): Promise<T> {
  const input = await loadToFile(url, 'photo', cfg, storage, cfg.fetchMaxBytes)
  try {
    return await fn(input)
  } finally {
    await fsp.rm(input.file, { force: true })
  }
}
