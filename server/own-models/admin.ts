/**
 * `lucent models add | remove` and the own-model part of `lucent models list` (bring your own model): the operator's
 * side of server/own-models/registry.ts. `add` reads the file (PyTorch `.pth` / `.pt` / `.ckpt`, `.safetensors`, or
 * an ncnn `.param` with its `.bin` beside it), says what it is (the addon's inspectModel: nothing in the file runs),
 * runs a small smoke inference on the engine (a 32x32 picture through the network: the scale it gives must be the
 * one detected), then stores the weights in media storage (`m/own/<identity>.<add id>.<ext>`: objects of this entry's
 * own) and the entry in the job store, so every gateway and worker of a deployment sees it within
 * LUCENT_OWN_MODELS_REFRESH_MS. Each file is hashed on its own; the entry's identity (`sha256`, registry.ts
 * modelIdentity) is made of those hashes. Nothing is stored when any step fails. `remove` deletes the entry and, in
 * the same transaction, learns whether another entry names the same objects (rows from before per-add keys could
 * share them); the weights go unless they are shared. An add never writes an object another entry names, so an add
 * racing a remove cannot lose the other's weights.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { photoModel, videoModel, PhotoPriceClass, VideoPriceClass } from '../catalog.js'
import type { Config } from '../config.js'
import type { Store } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import type { OwnModel, OwnModelKind } from '../store/own-models.js'
import { inspectModelFile, readModelFile, InspectError } from '../models/inspect.js'
import type { Addon } from '../engine/addon.js'
import { modelIdentity, ncnnBinKey, storageKey } from './registry.js'

/** A refusal of `add` / `remove`, with the message the operator sees (exit status 1; 2 for bad usage). */
export class AdminError extends Error {
  constructor(message: string, readonly exitCode: 1 | 2 = 1) { super(message) }
}

export interface AddOptions {
  name?: string
  kind?: string
  /** One class, or photo and video classes separated by a comma (`generative,premium`). */
  priceClass?: string
  description?: string
}

/** Names as the API takes them: letters, digits, `_ . -`, at most 64, starting with a letter or digit. */
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/** The default name of a model file: its base name, made API-safe. */
export function nameFromFile(file: string): string {
  const base = path.basename(file).replace(/\.(pth|pt|ckpt|safetensors|onnx|param|bin)$/i, '')
  return base.replace(/[^A-Za-z0-9_.-]+/g, '_').replace(/^[^A-Za-z0-9]+/, '').slice(0, 64) || 'model'
}

const PHOTO_CLASSES = PhotoPriceClass.enum as readonly string[]
const VIDEO_CLASSES = (VideoPriceClass.enum as readonly string[]).filter((c) => c !== 'interp')

/** The price classes for `kind` from `--price-class` (default enhance / standard). */
export function priceClasses(kind: OwnModelKind, given?: string): { photo: string | null; video: string | null } {
  let photo = kind === 'video' ? null : 'enhance'
  let video = kind === 'photo' ? null : 'standard'
  for (const c of (given ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (PHOTO_CLASSES.includes(c) && kind !== 'video') photo = c
    else if (VIDEO_CLASSES.includes(c) && kind !== 'photo') video = c
    else {
      const known = [...(kind !== 'video' ? PHOTO_CLASSES : []), ...(kind !== 'photo' ? VIDEO_CLASSES : [])]
      throw new AdminError(`price class '${c}' is not one for a ${kind} model: ${known.join(', ')}`, 2)
    }
  }
  return { photo, video }
}

/** A 32 x 32 24-bit BMP (a smooth gradient with some texture): the smoke test's input. */
export function smokePicture(side = 32): Buffer {
  const row = Math.ceil((side * 3) / 4) * 4
  const size = 54 + row * side
  const b = Buffer.alloc(size)
  b.write('BM', 0, 'latin1')
  b.writeUInt32LE(size, 2)
  b.writeUInt32LE(54, 10)
  b.writeUInt32LE(40, 14)
  b.writeInt32LE(side, 18)
  b.writeInt32LE(side, 22)
  b.writeUInt16LE(1, 26)
  b.writeUInt16LE(24, 28)
  b.writeUInt32LE(row * side, 34)
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const o = 54 + y * row + x * 3
      b[o] = (x * 8) & 255
      b[o + 1] = (y * 8) & 255
      b[o + 2] = ((x ^ y) * 16) & 255
    }
  }
  return b
}

/** Reads the model's files: the weights, or an ncnn .param and its .bin. */
function readFiles(file: string): { format: 'ncnn' | null; parts: Buffer[]; names: string[] } {
  const wrap = (f: string) => {
    try {
      return readModelFile(f)
    } catch (e) {
      if (e instanceof InspectError) throw new AdminError(`${f}: ${e.message}`)
      throw e
    }
  }
  const lower = file.toLowerCase()
  if (lower.endsWith('.param') || lower.endsWith('.bin')) {
    const stem = file.slice(0, -path.extname(file).length)
    return { format: 'ncnn', parts: [wrap(`${stem}.param`), wrap(`${stem}.bin`)], names: [`${stem}.param`, `${stem}.bin`] }
  }
  return { format: null, parts: [wrap(file)], names: [file] }
}

export interface AddDeps {
  config: Config
  store: Store
  storage: MediaStorage
  /** The engine for the smoke run (server/enhance/engine.ts openEngine). */
  engine: () => Addon
  log?: (s: string) => void
}

/** Adds `file` as an own model; returns the stored entry. Throws AdminError (nothing stored) on any refusal. */
export async function addModel(d: AddDeps, file: string, o: AddOptions): Promise<OwnModel> {
  const log = d.log ?? (() => {})
  const name = o.name ?? nameFromFile(file)
  if (!NAME_RE.test(name)) throw new AdminError(`name '${name}': letters, digits, _ . - only, at most 64, starting with a letter or digit`, 2)
  if (photoModel(name) || videoModel(name)) throw new AdminError(`name '${name}' is a catalog model's: pick another (--name)`)
  const kind = (o.kind ?? 'both') as OwnModelKind
  if (!['photo', 'video', 'both'].includes(kind)) throw new AdminError(`--kind ${o.kind}: photo, video or both`, 2)
  const classes = priceClasses(kind, o.priceClass)
  if ((await d.store.ownModels.list()).some((m) => m.name === name)) throw new AdminError(`an own model named '${name}' exists: remove it first, or pick another name`)

  const { format: ncnn, parts, names } = readFiles(file)
  let architecture = 'ncnn'
  let format = 'ncnn'
  let scale = 0
  let multiple = 1
  let info: OwnModel['info'] = { params: {}, tags: [], warnings: [] }
  if (!ncnn) {
    let r
    // inspectModelFile gives what `lucent models inspect` prints, which leaves out the addon's sizeMultiple: keep it
    // from the addon's own answer on the way
    const engine = d.engine()
    const withMultiple: Addon = {
      ...engine,
      inspectModel: (bytes, fileName) => {
        const m = engine.inspectModel(bytes, fileName)
        multiple = Math.max(1, m.sizeMultiple ?? 1)
        return m
      },
    }
    try {
      r = inspectModelFile(file, withMultiple)
    } catch (e) {
      if (e instanceof InspectError) throw new AdminError(`${file}: ${e.message}`)
      throw e
    }
    architecture = r.architecture
    format = r.format
    scale = r.scale
    if (r.inChannels !== 3 || r.outChannels !== 3) throw new AdminError(`${file}: ${r.architecture} with ${r.inChannels} input and ${r.outChannels} output channels: only RGB models (3 in, 3 out) can be served`)
    info = { params: r.params, tags: r.tags, warnings: r.warnings }
    log(`found: ${r.architecture}, ${r.scale}x, ${r.format}${r.warnings.length ? ` (${r.warnings.join('; ')})` : ''}`)
  }

  // each file hashed on its own (ncnn: bytes moved across the .param/.bin boundary make another identity)
  const fileSha256 = parts.map((p) => crypto.createHash('sha256').update(p).digest('hex'))
  const sha = modelIdentity(format, fileSha256)
  const size = parts.reduce((n, p) => n + p.length, 0)

  // smoke run: the network on a 32x32 picture, from a private copy of the file (what the workers will read)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-add-'))
  try {
    const ext = ncnn ? '' : path.extname(storageKey(sha, format))
    const local = path.join(tmp, `${sha}${ext}`)
    if (ncnn) {
      fs.writeFileSync(`${local}.param`, parts[0]!)
      fs.writeFileSync(`${local}.bin`, parts[1]!)
    } else fs.writeFileSync(local, parts[0]!)
    const side = 32
    const t0 = performance.now()
    let out
    try {
      out = await d.engine().enhance(smokePicture(side), { model: name, format: 'png', network: { path: local, multiple } })
    } catch (e) {
      throw new AdminError(`${file}: the smoke run failed: ${(e as Error).message}`)
    }
    const ms = performance.now() - t0
    if (out.width !== out.height || out.width % side !== 0) throw new AdminError(`${file}: the smoke run gave ${out.width}x${out.height} for ${side}x${side}: not a whole scale`)
    const got = out.width / side
    if (scale && got !== scale) throw new AdminError(`${file}: detected ${scale}x, but the network made ${got}x`)
    scale = got
    log(`smoke run: ${side}x${side} -> ${out.width}x${out.height} in ${ms.toFixed(0)} ms`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  if (scale < 1 || scale > 16) throw new AdminError(`${file}: scale ${scale}x is outside 1..16`)

  // the weights into media storage under keys of this add's own, then the entry (a failed insert takes them back)
  const key = storageKey(sha, format, crypto.randomBytes(6).toString('hex'))
  const keys = ncnn ? [key, ncnnBinKey(key)] : [key]
  const fresh: string[] = []
  const entry: OwnModel = {
    name, kind, photoPriceClass: classes.photo, videoPriceClass: classes.video,
    description: o.description ?? `${architecture} ${scale}x (${path.basename(names[0]!)})`,
    architecture, format, scale, multiple, sha256: sha, fileSha256, size, fileKey: key, info, createdAt: Date.now(),
  }
  let added = false
  try {
    for (let i = 0; i < keys.length; i++) {
      fresh.push(keys[i]!)
      await d.storage.put(keys[i]!, parts[i]!, 'application/octet-stream')
    }
    added = await d.store.ownModels.add(entry)
  } finally {
    if (!added) for (const k of fresh) await d.storage.delete(k).catch(() => {})
  }
  if (!added) throw new AdminError(`an own model named '${name}' exists: remove it first, or pick another name`)
  return entry
}

/**
 * Removes own model `name` (and its weights unless another entry names the same objects); the removed entry. Jobs
 * priced with it fail at their run with every coin back (registry.ts: the entry or its identity is gone); running
 * processes drop their local copy once no job can hold it (registry.ts release).
 */
export async function removeModel(d: Pick<AddDeps, 'store' | 'storage'>, name: string): Promise<OwnModel> {
  if (photoModel(name) || videoModel(name)) throw new AdminError(`'${name}' is a catalog model: only own models can be removed`)
  const removed = await d.store.ownModels.remove(name)
  if (!removed) throw new AdminError(`no own model named '${name}' (lucent models list)`)
  const { fileKeyShared, ...m } = removed
  if (!fileKeyShared) {
    for (const k of m.format === 'ncnn' ? [m.fileKey, ncnnBinKey(m.fileKey)] : [m.fileKey]) await d.storage.delete(k).catch(() => {})
  }
  return m
}

/** One line per own model (the `list` table). */
export function ownModelLine(m: OwnModel): string {
  const price = [m.photoPriceClass && `photo:${m.photoPriceClass}`, m.videoPriceClass && `video:${m.videoPriceClass}`].filter(Boolean).join(' ')
  return `${m.name.padEnd(24)} ${m.kind.padEnd(5)} ${`${m.scale}x`.padStart(3)}  ${m.architecture.padEnd(8)} ${m.format.padEnd(14)} ${price}  ${m.sha256.slice(0, 12)}  ${m.description}`
}
