/**
 * Bring your own model, as a running process sees it: the operator's networks registered in the job store
 * (server/store/own-models.ts; added by `lucent models add`, server/own-models/add.ts), refreshed from the store
 * every LUCENT_OWN_MODELS_REFRESH_MS so that an add or remove reaches running gateways and workers within seconds,
 * without a restart. Catalog names always win (an own model never shadows one: `add` refuses such names, and the
 * lookups here ask the catalog first).
 *
 * An own model is a plain super-resolution network at its own scale: its family is itself (no other scales), its
 * limits and price are those of the catalog's models of its price class, and the engine runs it from a local copy
 * of its weights (`network()`: fetched from media storage once per process and host, sha256-checked).
 *
 * Identity and pinning: an entry's `sha256` is its identity (modelIdentity: the file's sha256; an ncnn pair's is the
 * sha256 of '<param sha256>:<bin sha256>'). A submission records the identity it was priced with in the job's
 * params (`own_sha256`, from `ownPin` of the model object the route priced); at run time `network()` refuses a job
 * whose name now stands for another identity (removed and re-added with other weights): 110400005, which fails
 * the job with every coin back (a failure of the service's, not of the input).
 *
 * Local copies are named by identity, so a re-add of other bytes never overwrites a file a job has open. A removed
 * model's weights are released once no entry uses the same file any more and no job can still hold them: every
 * hand-out of the local path stamps the files' mtime, and the copy is deleted only `releaseAfterMs` (the job
 * timeout: a job handed the path has ended by then) after the last hand-out, in this process or another one on
 * the same cache; the engine drops the loaded network (`forget`) first. A re-add meanwhile keeps both; a hand-out
 * that comes while a release is under way waits for it and fetches the file again. At start, local copies of files
 * no entry uses and no job was handed within `releaseAfterMs` (left by an earlier run) are deleted.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { PHOTO_MODELS, VIDEO_MODELS, type CatalogModel, type PhotoModel, type PhotoPriceClass, type VideoModel, type VideoPriceClass, photoModel, videoModel } from '../catalog.js'
import type { OwnModel, OwnModelStore } from '../store/own-models.js'
import type { MediaStorage } from '../storage/types.js'
import type { ErrorCode } from '../errors.js'

/** What the engine is given to run an own model (the addon's NetworkFile). */
export interface NetworkFile { path: string; multiple: number; maxInMp: number; maxOutMp: number }

/** What `lucent enhance --model NAME` runs for an own model: its network files by kind (server/enhance/engine.ts). */
export interface OwnForEnhance { photo?: NetworkFile; video?: { model: VideoModel; network: NetworkFile } }

export class OwnModelError extends Error {
  constructor(readonly errorCode: ErrorCode, message: string) { super(message) }
}

const sha256hex = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex')

/** An entry's identity from its files' sha256 (one file: that hash; ncnn: sha256 of '<param sha256>:<bin sha256>'). */
export function modelIdentity(format: string, fileSha256: readonly string[]): string {
  if (format !== 'ncnn') return fileSha256[0]!
  return sha256hex(`${fileSha256[0]}:${fileSha256[1]}`)
}

/** Identities of the model objects this module hands out (asPhotoModel / asVideoModel), for `ownPin`. */
const identities = new WeakMap<object, string>()

/** What a submission stores in the job's params for the model object it priced: `own_sha256` for an own model. */
export function ownPin(model: PhotoModel | VideoModel): { own_sha256?: string } {
  const sha = identities.get(model)
  return sha ? { own_sha256: sha } : {}
}

/** The identity a stored job was priced with (undefined: a catalog model, or a job submitted before pinning). */
export function pinnedIdentity(params: unknown): string | undefined {
  const v = params && typeof params === 'object' ? (params as { own_sha256?: unknown }).own_sha256 : undefined
  return typeof v === 'string' ? v : undefined
}

/** The limits of the catalog's models of a price class (the first one listed). */
function photoLimits(priceClass: string): PhotoModel['limits'] {
  const m = [...PHOTO_MODELS.values()].find((p) => p.priceClass === priceClass) ?? PHOTO_MODELS.values().next().value!
  return { ...m.limits }
}
function videoLimits(priceClass: string): VideoModel['limits'] {
  const m = [...VIDEO_MODELS.values()].find((v) => v.priceClass === priceClass && !v.interpolation) ?? VIDEO_MODELS.values().next().value!
  return { ...m.limits }
}

export const isPhoto = (m: OwnModel) => m.kind === 'photo' || m.kind === 'both'
export const isVideo = (m: OwnModel) => m.kind === 'video' || m.kind === 'both'

/** The gateway's view of an own model (family = itself). */
export function asPhotoModel(m: OwnModel): PhotoModel {
  const priceClass = (m.photoPriceClass ?? 'enhance') as PhotoPriceClass
  const p: PhotoModel = { name: m.name, family: m.name, scale: m.scale, category: 'enhance', priceClass, limits: photoLimits(priceClass) }
  identities.set(p, m.sha256)
  return p
}
export function asVideoModel(m: OwnModel): VideoModel {
  const priceClass = (m.videoPriceClass ?? 'standard') as VideoPriceClass
  const v: VideoModel = { name: m.name, family: m.name, scale: m.scale, interpolation: false, priceClass, limits: videoLimits(priceClass) }
  identities.set(v, m.sha256)
  return v
}

/** An own model as catalog entries (GET /api/models): one per kind it serves. */
export function asCatalogModels(m: OwnModel): CatalogModel[] {
  const common = {
    name: m.name, family: m.name, aliases: [], scale: m.scale, category: 'enhance' as const, description: m.description,
    networks: [], pipeline: 'own', interpolation: false, available: true, reason: null,
  }
  const out: CatalogModel[] = []
  if (isPhoto(m)) {
    const p = asPhotoModel(m)
    out.push({ ...common, kind: 'photo', price_class: p.priceClass, limits: { max_in_mp: p.limits.maxInMP, max_out_mp: p.limits.maxOutMP } })
  }
  if (isVideo(m)) {
    const v = asVideoModel(m)
    out.push({ ...common, kind: 'video', price_class: v.priceClass, limits: { max_out_mp: v.limits.maxOutMP, min_seconds: v.limits.minSeconds, max_seconds: v.limits.maxSeconds } })
  }
  return out
}

/**
 * Where an own model's weights lie in media storage: named by identity and by the add (`addId`), so no two entries
 * share an object and a remove racing an add never deletes the other's weights. Without `addId`: the name rows
 * from before used (content-addressed, possibly shared).
 */
export function storageKey(sha256: string, format: string, addId?: string): string {
  return `m/own/${sha256}${addId ? `.${addId}` : ''}.${format === 'ncnn' ? 'param' : format === 'safetensors' || format === 'onnx' ? format : 'pth'}`
}
/** The .bin beside an ncnn model's .param. */
export const ncnnBinKey = (paramKey: string) => paramKey.replace(/\.param$/, '.bin')

export interface OwnModelsOptions {
  /** Local directory for the weights the engine reads (DATA_DIR/own-models). */
  cacheDir: string
  /** How often the store is asked whether the registry changed (ms); 0: only on `refresh()`. */
  refreshMs: number
  /** How long after a removal the weights stay loaded and on disk (ms; default 0). */
  releaseAfterMs?: number
  /** Drops a loaded network from this process's engine (a job-running process); true when it was loaded. */
  forget?: (enginePath: string) => Promise<boolean>
  /** The clock (ms) of hand-outs and releases (tests); default Date.now. */
  now?: () => number
}

/** A removed model's weights, released (`OwnModels.onRelease`). */
export interface Release { name: string; sha256: string; files: string[]; forgotten: boolean }

export class OwnModels {
  private models = new Map<string, OwnModel>()
  private version = ''
  private timer: NodeJS.Timeout | null = null
  private local = new Map<string, Promise<string>>()
  private listeners: Array<() => void> = []
  private releaseListeners: Array<(r: Release) => void> = []
  /** Release timers by sha256. */
  private pending = new Map<string, NodeJS.Timeout>()
  /** Releases under way (engine forget + file deletion) by sha256: a hand-out of the same file waits for it. */
  private releasing = new Map<string, Promise<void>>()
  /** Hand-outs under way (a job being given the local path) by sha256. */
  private handing = new Map<string, number>()
  private readonly now: () => number
  private swept = false
  private stopped = false
  /** Bumped on every change seen (GET /api/models rebuilds its answer on it). */
  generation = 0
  private photoMap: { generation: number; map: ReadonlyMap<string, PhotoModel> } | null = null

  constructor(private readonly store: OwnModelStore, private readonly storage: MediaStorage, private readonly o: OwnModelsOptions) {
    this.now = o.now ?? Date.now
  }

  /** First load, then the refresh timer (unref'd). A failing refresh keeps the last list. */
  async start(): Promise<void> {
    await this.refresh()
    if (this.o.refreshMs > 0 && !this.timer) {
      this.timer = setInterval(() => { this.refresh().catch(() => {}) }, this.o.refreshMs)
      this.timer.unref()
    }
  }

  stop(): void {
    this.stopped = true
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    for (const t of this.pending.values()) clearTimeout(t)
    this.pending.clear()
  }

  /** Re-reads the registry when the store says it changed. */
  async refresh(): Promise<void> {
    const v = await this.store.version()
    if (v === this.version) return
    const list = await this.store.list()
    const before = this.models
    this.models = new Map(list.map((m) => [m.name, m]))
    this.version = v
    this.generation++
    const inUse = new Set(list.map((m) => m.sha256))
    for (const m of before.values()) if (!inUse.has(m.sha256)) this.release(m)
    if (!this.swept) {
      this.swept = true
      sweepOrphans(this.o.cacheDir, inUse, this.now() - (this.o.releaseAfterMs ?? 0))
    }
    for (const f of this.listeners) f()
  }

  onChange(f: () => void): void {
    this.listeners.push(f)
  }

  /** Called after a removed model's weights were released (the worker logs it). */
  onRelease(f: (r: Release) => void): void {
    this.releaseListeners.push(f)
  }

  /** After the grace period: unless the file is in use again, the engine forgets it and the local copy goes. */
  private release(m: OwnModel, delayMs = this.o.releaseAfterMs ?? 0): void {
    if (this.pending.has(m.sha256) || this.stopped) return
    const timer = setTimeout(() => {
      this.pending.delete(m.sha256)
      this.releaseIfIdle(m)
    }, delayMs)
    timer.unref()
    this.pending.set(m.sha256, timer)
  }

  /**
   * Releases `m`'s local copy unless an entry uses its file again, or a job was handed it less than releaseAfterMs
   * ago (the files' mtime, stamped at each hand-out: then it waits until that has passed).
   */
  private releaseIfIdle(m: OwnModel): void {
    if (this.releasing.has(m.sha256)) return
    const { files, enginePath } = localFiles(m, this.o.cacheDir)
    // null: an entry uses the file again (nothing to release); else the ms to wait (0: release now)
    const busyFor = (): number | null => {
      if (this.list().some((x) => x.sha256 === m.sha256)) return null
      if (this.handing.get(m.sha256)) return Math.max(1, this.o.releaseAfterMs ?? 0)
      return Math.max(0, lastHandOut(files) + (this.o.releaseAfterMs ?? 0) - this.now())
    }
    const wait = busyFor()
    if (wait === null) return
    if (wait > 0) return this.release(m, wait)
    const fetching = this.local.get(m.sha256)
    this.local.delete(m.sha256)
    const done = (async () => {
      await fetching?.catch(() => {})
      const forgotten = this.o.forget ? await this.o.forget(enginePath).catch(() => false) : false
      // decided again right before the deletion (nothing awaited in between): a hand-out since keeps the copy
      const again = busyFor()
      if (again !== 0) {
        if (again !== null) setImmediate(() => this.release(m, again))
        return
      }
      for (const f of files) fs.rmSync(f, { force: true })
      for (const l of this.releaseListeners) l({ name: m.name, sha256: m.sha256, files, forgotten })
    })().finally(() => this.releasing.delete(m.sha256))
    this.releasing.set(m.sha256, done)
  }

  list(): OwnModel[] {
    return [...this.models.values()]
  }

  get(name: string): OwnModel | undefined {
    return this.models.get(name)
  }

  /** A photo model by name: the catalog's first, then the operator's. */
  photo(name: string): PhotoModel | undefined {
    const c = photoModel(name)
    if (c) return c
    const m = this.models.get(name)
    return m && isPhoto(m) ? asPhotoModel(m) : undefined
  }

  video(name: string): VideoModel | undefined {
    const c = videoModel(name)
    if (c) return c
    const m = this.models.get(name)
    return m && isVideo(m) ? asVideoModel(m) : undefined
  }

  /** The catalog's photo models and the operator's (the family lookups of the output-size extension and prices). */
  photoModels(): ReadonlyMap<string, PhotoModel> {
    // built once per registry change (the photo route asks twice per submission)
    if (this.photoMap?.generation !== this.generation) {
      const own = this.list().filter((m) => isPhoto(m) && !PHOTO_MODELS.has(m.name))
      const map = own.length ? new Map([...PHOTO_MODELS, ...own.map((m) => [m.name, asPhotoModel(m)] as const)]) : PHOTO_MODELS
      this.photoMap = { generation: this.generation, map }
    }
    return this.photoMap.map
  }

  /** Every catalog entry the API lists after the catalog's own. */
  catalogEntries(): CatalogModel[] {
    return this.list().flatMap(asCatalogModels)
  }

  /**
   * What the engine runs for own model `name` of `kind`, or null for a catalog model. The weights are copied from
   * media storage into the local cache once (sha256-checked, file by file); a model removed meanwhile answers
   * 110400005, and so does one whose entry has another identity than `pin` (the identity the job was priced with:
   * removed and re-added with other weights).
   */
  async network(name: string, kind: 'photo' | 'video', pin?: string): Promise<NetworkFile | null> {
    if (kind === 'photo' ? photoModel(name) : videoModel(name)) return null
    let m = this.models.get(name)
    if (!m || (pin !== undefined && m.sha256 !== pin)) {
      // this process may not have seen the latest add or remove yet
      await this.refresh().catch(() => {})
      m = this.models.get(name)
    }
    if (!m || !(kind === 'photo' ? isPhoto(m) : isVideo(m))) throw new OwnModelError(110400005, `model ${name} is not registered (removed?)`)
    if (pin !== undefined && m.sha256 !== pin) {
      throw new OwnModelError(110400005, `model ${name} was replaced after this job was priced (weights ${pin.slice(0, 12)} then, ${m.sha256.slice(0, 12)} now)`)
    }
    let file: string
    try {
      file = await this.handOut(m)
    } catch (e) {
      // the weights gone from storage: a stale entry (removed, maybe re-added under new keys): once more from the store
      if (!(e instanceof OwnModelError)) throw e
      await this.refresh().catch(() => {})
      const again = this.models.get(name)
      if (!again || again.fileKey === m.fileKey || again.sha256 !== m.sha256) throw e
      m = again
      file = await this.handOut(m)
    }
    const lim = kind === 'photo' ? asPhotoModel(m).limits : { maxInMP: 70, maxOutMP: asVideoModel(m).limits.maxOutMP }
    return { path: file, multiple: m.multiple, maxInMp: Math.floor(lim.maxInMP), maxOutMp: Math.floor(lim.maxOutMP) }
  }

  /** The local copy for a job: fetched if needed, its files' mtime stamped now (see the header). */
  private async handOut(m: OwnModel): Promise<string> {
    const sha = m.sha256
    this.handing.set(sha, (this.handing.get(sha) ?? 0) + 1)
    try {
      for (let tries = 0; ; tries++) {
        const file = await this.localCopy(m)
        const t = this.now() / 1000
        try {
          for (const f of localFiles(m, this.o.cacheDir).files) fs.utimesSync(f, t, t)
          return file
        } catch (e) {
          // deleted under us (another process's release of a copy it thought idle): fetch it again
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || tries > 0) throw e
          this.local.delete(sha)
        }
      }
    } finally {
      const n = (this.handing.get(sha) ?? 1) - 1
      if (n > 0) this.handing.set(sha, n)
      else this.handing.delete(sha)
    }
  }

  /** The local path the engine reads (ncnn: the stem, without extension); after a release under way of the same file. */
  private async localCopy(m: OwnModel): Promise<string> {
    for (let r = this.releasing.get(m.sha256); r; r = this.releasing.get(m.sha256)) await r
    let p = this.local.get(m.sha256)
    if (!p) {
      p = fetchLocal(this.storage, m, this.o.cacheDir)
      this.local.set(m.sha256, p)
      p.catch(() => this.local.delete(m.sha256))
    }
    return p
  }
}

/**
 * For a job runner (server/jobs/photo.ts, video.ts): the network file of the job's own model (null: a catalog
 * model); an own model gone meanwhile fails the run with the registry's code, and this answers null.
 */
export async function ownNetwork(
  d: { ownModels?: Pick<OwnModels, 'network'> },
  run: { job: { model: string; params?: unknown }; fail(code: ErrorCode, message: string): Promise<boolean> },
  kind: 'photo' | 'video',
): Promise<{ network: NetworkFile | null } | null> {
  try {
    const pin = pinnedIdentity(run.job.params)
    return { network: await d.ownModels?.network(run.job.model, kind, pin) ?? null }
  } catch (e) {
    if (!(e instanceof OwnModelError)) throw e
    await run.fail(e.errorCode, e.message)
    return null
  }
}

/** The local copy of an own model's weights in `dir` (named by sha256; ncnn: .param and .bin) and the path the engine is given. */
function localFiles(m: OwnModel, dir: string): { keys: string[]; files: string[]; enginePath: string } {
  const ncnn = m.format === 'ncnn'
  const keys = ncnn ? [m.fileKey, ncnnBinKey(m.fileKey)] : [m.fileKey]
  const files = keys.map((k) => path.join(dir, `${m.sha256}${path.extname(k)}`))
  return { keys, files, enginePath: ncnn ? files[0]!.replace(/\.param$/, '') : files[0]! }
}

/** The latest hand-out of a local copy (its files' newest mtime, ms); 0 when none is there. */
function lastHandOut(files: string[]): number {
  let t = 0
  for (const f of files) {
    try {
      t = Math.max(t, fs.statSync(f).mtimeMs)
    } catch {}
  }
  return t
}

/** Deletes local copies (sha256-named files) whose file no registered model uses and no job was handed after `idleBefore`. */
function sweepOrphans(dir: string, inUse: Set<string>, idleBefore: number): void {
  let names: string[]
  try {
    names = fs.readdirSync(dir)
  } catch {
    return
  }
  for (const n of names) {
    const sha = /^([0-9a-f]{64})\.(pth|safetensors|onnx|param|bin)$/.exec(n)?.[1]
    if (sha && !inUse.has(sha) && lastHandOut([path.join(dir, n)]) <= idleBefore) fs.rmSync(path.join(dir, n), { force: true })
  }
}

/**
 * Whether `datas` (the files in `fileKey` order) are `m`'s weights: each file against its own sha256 and the pair
 * against the identity; an ncnn row older than per-file hashes: the concatenation against its sha256.
 */
function matches(m: OwnModel, datas: Buffer[]): boolean {
  if (!m.fileSha256) {
    const h = crypto.createHash('sha256')
    for (const d of datas) h.update(d)
    return h.digest('hex') === m.sha256
  }
  return datas.length === m.fileSha256.length && datas.every((d, i) => sha256hex(d) === m.fileSha256![i]) &&
    modelIdentity(m.format, m.fileSha256) === m.sha256
}

/**
 * Copies an own model's weights from storage into `dir` (atomically, sha256-checked file by file; a local copy that
 * does not match is replaced from storage); returns the engine's path.
 */
async function fetchLocal(storage: MediaStorage, m: OwnModel, dir: string): Promise<string> {
  fs.mkdirSync(dir, { recursive: true })
  const { keys, files, enginePath } = localFiles(m, dir)
  if (files.every((f) => fs.existsSync(f)) && matches(m, files.map((f) => fs.readFileSync(f)))) return enginePath
  const datas: Buffer[] = []
  for (const k of keys) {
    const o = await storage.get(k)
    if (!o) throw new OwnModelError(110400005, `the weights of ${m.name} are missing from media storage (${k})`)
    datas.push(o.data)
  }
  if (!matches(m, datas)) throw new OwnModelError(110400005, `the weights of ${m.name} do not match their sha256`)
  datas.forEach((d, i) => {
    const tmp = `${files[i]}.${process.pid}.${crypto.randomUUID()}.tmp`
    fs.writeFileSync(tmp, d)
    fs.renameSync(tmp, files[i]!)
  })
  return enginePath
}
