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
 * A removed model's weights are released once no entry uses the same file any more: after `releaseAfterMs` (the
 * job timeout: every job that was handed the local path has ended by then) the engine drops the loaded network
 * (`forget`) and the local copy is deleted; a re-add meanwhile keeps both. At start, local copies of files no
 * entry uses (left by an earlier run) are deleted.
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
  return { name: m.name, family: m.name, scale: m.scale, category: 'enhance', priceClass, limits: photoLimits(priceClass) }
}
export function asVideoModel(m: OwnModel): VideoModel {
  const priceClass = (m.videoPriceClass ?? 'standard') as VideoPriceClass
  return { name: m.name, family: m.name, scale: m.scale, interpolation: false, priceClass, limits: videoLimits(priceClass) }
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

/** Where an own model's weights lie in media storage (content-addressed: a re-add of the same file reuses them). */
export function storageKey(sha256: string, format: string): string {
  return `m/own/${sha256}.${format === 'ncnn' ? 'param' : format === 'safetensors' ? 'safetensors' : 'pth'}`
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
  private swept = false
  /** Bumped on every change seen (GET /api/models rebuilds its answer on it). */
  generation = 0
  private photoMap: { generation: number; map: ReadonlyMap<string, PhotoModel> } | null = null

  constructor(private readonly store: OwnModelStore, private readonly storage: MediaStorage, private readonly o: OwnModelsOptions) {}

  /** First load, then the refresh timer (unref'd). A failing refresh keeps the last list. */
  async start(): Promise<void> {
    await this.refresh()
    if (this.o.refreshMs > 0 && !this.timer) {
      this.timer = setInterval(() => { this.refresh().catch(() => {}) }, this.o.refreshMs)
      this.timer.unref()
    }
  }

  stop(): void {
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
      sweepOrphans(this.o.cacheDir, inUse)
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
  private release(m: OwnModel): void {
    if (this.pending.has(m.sha256)) return
    const timer = setTimeout(() => {
      this.pending.delete(m.sha256)
      if (this.list().some((x) => x.sha256 === m.sha256)) return
      const fetching = this.local.get(m.sha256)
      this.local.delete(m.sha256)
      const { files, enginePath } = localFiles(m, this.o.cacheDir)
      void (async () => {
        await fetching?.catch(() => {})
        const forgotten = this.o.forget ? await this.o.forget(enginePath).catch(() => false) : false
        for (const f of files) fs.rmSync(f, { force: true })
        for (const l of this.releaseListeners) l({ name: m.name, sha256: m.sha256, files, forgotten })
      })()
    }, this.o.releaseAfterMs ?? 0)
    timer.unref()
    this.pending.set(m.sha256, timer)
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
   * media storage into the local cache once (sha256-checked); a model removed meanwhile answers 110400005.
   */
  async network(name: string, kind: 'photo' | 'video'): Promise<NetworkFile | null> {
    if (kind === 'photo' ? photoModel(name) : videoModel(name)) return null
    let m = this.models.get(name)
    if (!m) {
      await this.refresh().catch(() => {})
      m = this.models.get(name)
    }
    if (!m || !(kind === 'photo' ? isPhoto(m) : isVideo(m))) throw new OwnModelError(110400005, `model ${name} is not registered (removed?)`)
    const file = await this.localCopy(m)
    const lim = kind === 'photo' ? asPhotoModel(m).limits : { maxInMP: 70, maxOutMP: asVideoModel(m).limits.maxOutMP }
    return { path: file, multiple: m.multiple, maxInMp: Math.floor(lim.maxInMP), maxOutMp: Math.floor(lim.maxOutMP) }
  }

  /** The local path the engine reads (ncnn: the stem, without extension). */
  private localCopy(m: OwnModel): Promise<string> {
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
  d: { ownModels?: Pick<OwnModels, 'network'> }, run: { job: { model: string }; fail(code: ErrorCode, message: string): Promise<boolean> },
  kind: 'photo' | 'video',
): Promise<{ network: NetworkFile | null } | null> {
  try {
    return { network: await d.ownModels?.network(run.job.model, kind) ?? null }
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

/** Deletes local copies (sha256-named files) whose file no registered model uses: left by a run before a removal. */
function sweepOrphans(dir: string, inUse: Set<string>): void {
  let names: string[]
  try {
    names = fs.readdirSync(dir)
  } catch {
    return
  }
  for (const n of names) {
    const sha = /^([0-9a-f]{64})\.(pth|safetensors|param|bin)$/.exec(n)?.[1]
    if (sha && !inUse.has(sha)) fs.rmSync(path.join(dir, n), { force: true })
  }
}

/** Copies an own model's weights from storage into `dir` (atomically, sha256-checked); returns the engine's path. */
async function fetchLocal(storage: MediaStorage, m: OwnModel, dir: string): Promise<string> {
  fs.mkdirSync(dir, { recursive: true })
  const { keys, files, enginePath } = localFiles(m, dir)
  const have = files.every((f) => fs.existsSync(f))
  const hash = crypto.createHash('sha256')
  const datas: Buffer[] = []
  if (have) {
    for (const f of files) hash.update(fs.readFileSync(f))
  } else {
    for (const k of keys) {
      const o = await storage.get(k)
      if (!o) throw new OwnModelError(110400005, `the weights of ${m.name} are missing from media storage (${k})`)
      datas.push(o.data)
      hash.update(o.data)
    }
  }
  if (hash.digest('hex') !== m.sha256) {
    for (const f of files) fs.rmSync(f, { force: true })
    throw new OwnModelError(110400005, `the weights of ${m.name} do not match their sha256`)
  }
  if (!have) {
    datas.forEach((d, i) => {
      const tmp = `${files[i]}.${process.pid}.${crypto.randomUUID()}.tmp`
      fs.writeFileSync(tmp, d)
      fs.renameSync(tmp, files[i]!)
    })
  }
  return enginePath
}
