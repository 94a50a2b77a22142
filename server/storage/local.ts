/** MediaStorage on the local disk: DATA_DIR/objects/<key> + <key>.meta.json; links signed with HMAC-SHA256. */
import crypto from 'node:crypto'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Transform, type Readable } from 'node:stream'
import { validKey, type MediaStorage, type ObjectMeta } from './types.js'
import { BoundedCache } from '../cache.js'

export class TooLargeError extends Error {
  constructor() { super('object too large'); this.name = 'TooLargeError' }
}

/** Copies `src` into `file`, failing with TooLargeError past `maxBytes`; on any failure the partial
 *  file is removed. Returns the byte count. (Shared by the disk and S3 storages.) */
export async function spoolToFile(src: Readable, file: string, maxBytes: number): Promise<number> {
  let size = 0
  const limit = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length
      if (size > maxBytes) cb(new TooLargeError())
      else cb(null, chunk)
    },
  })
  try {
    await pipeline(src, limit, fs.createWriteStream(file))
  } catch (e) {
    await fsp.rm(file, { force: true })
    throw e
  }
  return size
}

/** Reads DATA_DIR/secret, creating it (32 random bytes, mode 0600) on first use. */
export function loadSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, 'secret')
  fs.mkdirSync(dataDir, { recursive: true })
  try {
    const s = fs.readFileSync(file)
    if (s.length >= 32) return s
  } catch { /* create below */ }
  const s = crypto.randomBytes(32)
  try {
    fs.writeFileSync(file, s, { mode: 0o600, flag: 'wx' })
    return s
  } catch {
    return fs.readFileSync(file) // another process created it first
  }
}

export class LocalStorage implements MediaStorage {
  readonly root: string
  private readonly secret: Buffer

  /** `publicUrl`: base of /upload links; `filesUrl` (default publicUrl): base of /files links, possibly another
   *  origin (LUCENT_FILES_BASE_URL) pointing at this same service. */
  constructor(dataDir: string, secret: Buffer, publicUrl: () => string, filesUrl: () => string = publicUrl) {
    this.root = path.join(dataDir, 'objects')
    fs.mkdirSync(this.root, { recursive: true })
    this.secret = secret
    this.publicUrl = publicUrl
    this.filesUrl = filesUrl
  }
  private publicUrl: () => string
  private filesUrl: () => string

  private file(key: string): string {
    if (!validKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return path.join(this.root, key)
  }

  private sign(parts: string[]): string {
    return crypto.createHmac('sha256', this.secret).update(parts.join('\n')).digest('base64url')
  }

  private check(expected: string, sig: string, expires: string): 'ok' | 'expired' | 'bad' {
    const a = Buffer.from(expected)
    const b = Buffer.from(sig)
    if (a.length !== b.length || !crypto.timingSafeEqual(a, b)) return 'bad'
    return Number(expires) * 1000 >= Date.now() ? 'ok' : 'expired'
  }

  async put(key: string, data: Buffer, contentType: string): Promise<ObjectMeta> {
    const f = this.file(key)
    await fsp.mkdir(path.dirname(f), { recursive: true })
    const tmp = `${f}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`
    await fsp.writeFile(tmp, data)
    return this.commit(tmp, f, contentType, data.length)
  }

  private async commit(tmp: string, f: string, contentType: string, size: number): Promise<ObjectMeta> {
    const meta: ObjectMeta = { contentType, size, createdAt: Date.now() }
    await fsp.writeFile(`${f}.meta.json`, JSON.stringify(meta))
    await fsp.rename(tmp, f)
    return meta
  }

  async putStream(key: string, src: Readable, contentType: string, maxBytes: number): Promise<ObjectMeta> {
    const f = this.file(key)
    await fsp.mkdir(path.dirname(f), { recursive: true })
    const tmp = `${f}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`
    const size = await spoolToFile(src, tmp, maxBytes)
    return this.commit(tmp, f, contentType, size)
  }

  private async meta(f: string): Promise<ObjectMeta | null> {
    try {
      return JSON.parse(await fsp.readFile(`${f}.meta.json`, 'utf8')) as ObjectMeta
    } catch {
      return null
    }
  }

  async get(key: string) {
    const f = this.file(key)
    const meta = await this.meta(f)
    if (!meta) return null
    try {
      return { data: await fsp.readFile(f), meta }
    } catch {
      return null
    }
  }

  async stream(key: string) {
    const f = this.file(key)
    const meta = await this.meta(f)
    if (!meta) return null
    try {
      const fh = await fsp.open(f, 'r')
      return { stream: fh.createReadStream() as unknown as Readable, meta }
    } catch {
      return null
    }
  }

  localPath(key: string): string | null {
    return this.file(key)
  }

  async delete(key: string) {
    const f = this.file(key)
    await fsp.rm(f, { force: true })
    await fsp.rm(`${f}.meta.json`, { force: true })
  }

  async sweep(prefix: string, before: number): Promise<number> {
    let n = 0
    const dir = path.join(this.root, prefix)
    let entries: string[]
    try {
      entries = await fsp.readdir(dir, { recursive: true }) as string[]
    } catch {
      return 0
    }
    for (const rel of entries) {
      if (!rel.endsWith('.meta.json') && !rel.endsWith('.tmp')) continue
      const full = path.join(dir, rel)
      const st = await fsp.stat(full).catch(() => null)
      if (!st || st.mtimeMs >= before) continue
      const obj = rel.endsWith('.tmp') ? full : full.slice(0, -'.meta.json'.length)
      await fsp.rm(obj, { force: true })
      await fsp.rm(`${obj}.meta.json`, { force: true })
      n++
    }
    return n
  }

  /** GET signatures are memoised: a polled job's links are the same on every task-status (HMAC is ~10 us). */
  private getSig(key: string, e: string): string {
    const k = `${key}\n${e}`
    let s = this.getSigs.get(k)
    if (s === undefined) this.getSigs.set(k, (s = this.sign(['GET', key, e])))
    return s
  }
  private readonly getSigs = new BoundedCache<string, string>(20_000)

  signedGetUrl(key: string, expiresAt: number): string {
    const e = String(Math.floor(expiresAt / 1000))
    return `${this.filesUrl()}/files/${key}?e=${e}&s=${this.getSig(key, e)}`
  }

  signedPutUrl(key: string, contentType: string, expiresAt: number): string {
    const e = String(Math.floor(expiresAt / 1000))
    return `${this.publicUrl()}/upload/${key}?e=${e}&s=${this.sign(['PUT', key, contentType.toLowerCase(), e])}`
  }

  verifyGet(key: string, expires: string, sig: string) {
    if (!validKey(key) || !/^\d{1,12}$/.test(expires)) return 'bad' as const
    return this.check(this.sign(['GET', key, expires]), sig, expires)
  }

  verifyPut(key: string, contentType: string, expires: string, sig: string) {
    if (!validKey(key) || !/^\d{1,12}$/.test(expires)) return 'bad' as const
    return this.check(this.sign(['PUT', key, contentType.toLowerCase(), expires]), sig, expires)
  }

  /** Links on the files base and, as before it was set, on the public URL. */
  ownKey(url: string): string | 'invalid' | null {
    const prefix = [`${this.filesUrl()}/files/`, `${this.publicUrl()}/files/`].find((p) => url.startsWith(p))
    if (!prefix) return null
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return 'invalid'
    }
    const key = decodeURIComponent(u.pathname.slice(new URL(prefix).pathname.length))
    const r = this.verifyGet(key, u.searchParams.get('e') ?? '', u.searchParams.get('s') ?? '')
    return r === 'ok' ? key : 'invalid'
  }
}
