/**
 * `lucent enhance` on the engine, in this process: the addon `@lucent/native` (server/engine/addon.ts loads it,
 * as the server's engine threads do) for photos, and the server's video job (server/video/job.ts: input checks,
 * interpolation, transcode) fed by the addon's enhanceFrames / interpolateFrames for videos. Limits are the
 * catalog's (the engine checks a photo's own; a video's are checked here as POST /api/video-enhancer checks
 * them), and every failure carries the API's error_code (server/errors.ts), the one mapping of engine codes.
 */
import path from 'node:path'
import fsp from 'node:fs/promises'
import { ERRORS, engineErrorCode, isEngineErrorCode, type ErrorCode } from '../errors.js'
import { loadAddon, type Addon } from '../engine/addon.js'
import { engineSettings } from '../engine/options.js'
import { photoFormat, videoOutputExtensions, normExt } from '../media/formats.js'
import { engineOrientation, exifOrientation, swapsSides } from '../media/orientation.js'
import { videoModel, type VideoModel } from '../catalog.js'
import type { OwnForEnhance } from '../own-models/registry.js'
import type { VideoSettings } from '../config.js'
import { probeVideo, ProbeError } from '../video/probe.js'
import { encodedSize, TranscodeError } from '../video/transcode.js'
import { missingVideoTools } from '../video/tools.js'
import { decideInterp } from '../video/interp.js'
import { runVideoJob, displaySize, videoInputError } from '../video/job.js'
import { partPath, writeAtomic, type InputFile } from './files.js'

/** A failure of one file: the API's error_code and message, and what went wrong in words. */
export class ItemError extends Error {
  readonly errorCode: ErrorCode
  /** The engine's code when the engine failed (e.g. 'decode_failed'). */
  readonly engineCode?: string
  constructor(errorCode: ErrorCode, detail: string, engineCode?: string) {
    super(detail)
    this.errorCode = errorCode
    this.engineCode = engineCode
  }
  get apiMessage(): string {
    return ERRORS[this.errorCode].message
  }
}

/** An addon rejection -> ItemError through server/errors.ts. */
export function fromEngine(e: unknown): ItemError {
  if (e instanceof ItemError) return e
  const code = (e as { code?: unknown })?.code
  const msg = String((e as Error)?.message ?? e)
  return new ItemError(engineErrorCode(isEngineErrorCode(code) ? code : 'internal'), msg, isEngineErrorCode(code) ? code : undefined)
}

/** Output size request: at most one of the three. */
export interface SizeRequest { scale?: number; width?: number; height?: number }

export interface EnhanceSettings {
  model: string
  /** Video model (default: `model` when it names one). */
  videoModel?: string
  /** 'keep' or a photo extension. */
  format: string
  /** 'keep' or a video output container. */
  videoFormat: string
  quality?: number
  keepMeta: boolean
  dpi?: number
  size: SizeRequest
  /** Video target WxH (default: the input's size times the model's scale, or `size`). */
  resolution?: [number, number]
  video: VideoSettings
  /** Video frame interpolation (server/video/interp.ts rules: fps above the source's, slowmo 2/4/8). */
  fps?: number
  slowmo?: number
  /** The operator's own model named by `model` / `videoModel` (bring your own model, server/own-models/cli.ts). */
  own?: OwnForEnhance
}

export interface Planned extends InputFile {
  /** Absolute output path. */
  output: string
}

/** Photo output extension of an input (`keep`: the input's own when it is a writable photo format). */
function photoOutExt(rel: string, format: string): string | ItemError {
  const own = normExt(path.extname(rel)) ?? ''
  if (format !== 'keep') return format
  const f = photoFormat(own === 'tif' ? 'tiff' : own)
  if (f) return path.extname(rel).slice(1) // as spelled: a.JPG stays a.JPG
  if (own === 'heic') return 'heif'
  return new ItemError(110400007, `cannot keep the format of ${rel}: choose one with --format`)
}

/** Video output container of an input (`keep`: the input's own when the output list has it, else mp4). */
function videoOutExt(rel: string, format: string): string {
  if (format !== 'keep') return format
  const own = normExt(path.extname(rel)) ?? ''
  return videoOutputExtensions.includes(own) ? own : 'mp4'
}

/** The output path of an input under `outDir`: same relative path, the output format's extension. */
export function outputFor(item: InputFile, outDir: string, s: EnhanceSettings): string | ItemError {
  const ext = item.kind === 'photo' ? photoOutExt(item.rel, s.format) : videoOutExt(item.rel, s.videoFormat)
  if (ext instanceof ItemError) return ext
  const rel = item.rel.slice(0, item.rel.length - path.extname(item.rel).length)
  return path.resolve(outDir, `${rel}.${ext}`)
}

export interface ItemResult { width: number; height: number; ms: number }

/** The addon, initialised once for the process (backend from --backend, else LUCENT_BACKEND, else auto; the other
 *  engine settings of the environment as addon options, server/engine/options.ts). */
export function openEngine(modelDir: string, backend: 'auto' | 'cpu' | 'gpu', threads?: number): { addon: Addon; info: ReturnType<Addon['init']> } {
  let addon: Addon
  try {
    addon = loadAddon()
  } catch (e) {
    throw new ItemError(100500005, `the native addon is not built (npm run build:native): ${(e as Error).message}`)
  }
  try {
    return { addon, info: addon.init({ ...engineSettings(), modelDir, backend, threads }) }
  } catch (e) {
    throw fromEngine(e)
  }
}

/**
 * The engine's output size (EnhanceOptions targetWidth / targetHeight) for a photo of w x h: --scale sets both,
 * --width or --height one side (the engine keeps the aspect ratio); undefined: the model's own scale.
 */
export function targetSize(w: number, h: number, size: SizeRequest): { targetWidth?: number; targetHeight?: number } | undefined {
  if (size.scale !== undefined) return { targetWidth: Math.max(1, Math.round(w * size.scale)), targetHeight: Math.max(1, Math.round(h * size.scale)) }
  if (size.width !== undefined) return { targetWidth: size.width }
  if (size.height !== undefined) return { targetHeight: size.height }
  return undefined
}

/** Both sides of a target (a video needs both): the missing one keeps the aspect ratio. */
function bothSides(w: number, h: number, t: { targetWidth?: number; targetHeight?: number }): [number, number] {
  if (t.targetWidth !== undefined && t.targetHeight !== undefined) return [t.targetWidth, t.targetHeight]
  if (t.targetWidth !== undefined) return [t.targetWidth, Math.max(1, Math.round((h * t.targetWidth) / w))]
  return [Math.max(1, Math.round((w * t.targetHeight!) / h)), t.targetHeight!]
}

/**
 * EXIF orientation of a JPEG (1..8; 1 when absent or another format), as the engine reads it
 * (server/media/orientation.ts, which reads every format's).
 */
export function jpegOrientation(b: Buffer): number {
  return exifOrientation(b) ?? 1
}

/** One photo: read, enhance on the engine, write atomically. */
export async function enhancePhoto(addon: Addon, item: Planned, s: EnhanceSettings, signal: AbortSignal, parts: Set<string>,
  onProgress: (pct: number) => void): Promise<ItemResult> {
  const bytes = await fsp.readFile(item.file)
  const ext = normExt(path.extname(item.output))!
  const format = photoFormat(ext === 'tif' ? 'tiff' : ext)!
  let target: ReturnType<typeof targetSize>
  try {
    // The engine turns photos upright and takes target sizes upright: --scale needs the upright sides. probe()
    // gives the stored ones (a HEIF's with its irot applied by libheif), turned here by the orientation the engine
    // applies to the decoded pixels, for every format (PNG eXIf, WebP EXIF, TIFF, TGA, JPEG).
    const p = addon.probe(bytes)
    const turned = swapsSides(engineOrientation(bytes, p.format)) // 5..8: a quarter turn, the upright sides are swapped
    target = turned ? targetSize(p.height, p.width, s.size) : targetSize(p.width, p.height, s.size)
  } catch (e) {
    throw fromEngine(e)
  }
  let out
  try {
    const network = s.own?.photo ? { network: s.own.photo } : {}
    out = await addon.enhance(bytes, { model: s.model, format, exif: s.keepMeta, dpi: s.dpi, quality: s.quality, ...target, ...network }, signal, onProgress)
  } catch (e) {
    throw fromEngine(e)
  }
  await writeAtomic(item.output, out.data, parts).catch((e: Error) => {
    throw new ItemError(engineErrorCode('storage'), `cannot write ${item.output}: ${e.message}`)
  })
  return { width: out.width, height: out.height, ms: out.ms }
}

/** Even-rounded video target for an input of w x h (display orientation). */
export function videoTarget(w: number, h: number, scale: number, s: EnhanceSettings): [number, number] {
  if (s.resolution) return s.resolution
  const t = targetSize(w, h, s.size)
  return t ? bothSides(w, h, t) : [w * scale, h * scale]
}

/** The video model for this run, or an ItemError (no such video model). */
export function videoModelFor(s: EnhanceSettings): VideoModel | ItemError {
  const name = s.videoModel ?? s.model
  return videoModel(name) ?? (s.own?.video?.model.name === name ? s.own.video.model : undefined)
    ?? new ItemError(110400005, `${name} is not a video model (pick one with --video-model)`)
}

/** One video: probe, limits, the server's video job (server/video/job.ts) with the addon's enhanceFrames, atomic rename. */
export async function enhanceVideo(addon: Addon, item: Planned, s: EnhanceSettings, signal: AbortSignal, parts: Set<string>,
  onProgress: (pct: number) => void): Promise<ItemResult> {
  const t0 = performance.now()
  const model = videoModelFor(s)
  if (model instanceof ItemError) throw model
  const missing = await missingVideoTools(s.video)
  if (missing) throw new ItemError(100500005, missing)
  let pr
  try {
    pr = await probeVideo(item.file, s.video.ffprobe)
  } catch (e) {
    if (e instanceof ProbeError && e.reason === 'missing_ffprobe') throw new ItemError(100500005, e.message)
    throw new ItemError(110400007, `not a video ffmpeg can read: ${(e as Error).message}`)
  }
  const bad = videoInputError(pr, model)
  if (bad) throw new ItemError(bad.code, bad.detail)
  const lim = model.limits
  const { width: w, height: h } = displaySize(pr)
  const target = videoTarget(w, h, model.scale, s)
  if (target[0] * target[1] > lim.maxOutMP * 1e6) throw new ItemError(110400010, `${target[0]}x${target[1]} is over the ${lim.maxOutMP} MP limit of ${model.name}`)
  const container = normExt(path.extname(item.output))!
  // frame interpolation: the server's rules (decideInterp); the job itself is the server's (server/video/job.ts)
  const decision = decideInterp({ fps: s.fps, slowmo: s.slowmo }, {
    model: model.name, scale: model.scale, fps: pr.fps, fpsRational: pr.fpsRational, duration: pr.duration, ext: container, maxSeconds: lim.maxSeconds,
  })
  if (!decision.ok) throw new ItemError(decision.code, decision.detail)
  await fsp.mkdir(path.dirname(item.output), { recursive: true })
  const tmp = partPath(item.output)
  parts.add(tmp)
  try {
    await runVideoJob({
      input: item.file, output: tmp, container, target, model, probe: pr, plan: decision.plan,
      // as the server's worker: at most the frames of the declared duration
      declaredDuration: pr.duration, maxFrames: decision.outFrames,
      tools: s.video, signal,
      engine: {
        enhanceFrames: (frames, o) => addon.enhanceFrames(frames, {
          ...o, faceState: o.faceState as Buffer | undefined, ...(s.own?.video?.model === model ? { network: s.own.video.network } : {}),
        }, signal),
        interpolateFrames: (frames, o) => addon.interpolateFrames(frames, o, signal),
      },
      onProgress: (done, total) => onProgress(Math.min(100, (done / Math.max(1, total)) * 100)),
    })
    await fsp.rename(tmp, item.output)
  } catch (e) {
    if (signal.aborted) throw fromEngine({ code: 'aborted', message: 'interrupted' })
    if (!(e instanceof TranscodeError)) throw e instanceof ItemError ? e : new ItemError(100500000, String((e as Error)?.message ?? e))
    if (e.reason === 'engine') throw new ItemError(engineErrorCode(e.engineCode), e.message, e.engineCode)
    if (e.reason === 'decode') throw new ItemError(engineErrorCode('decode_failed'), e.message, 'decode_failed')
    throw new ItemError(engineErrorCode('encode_failed'), e.message, 'encode_failed')
  } finally {
    parts.delete(tmp)
    await Promise.all([tmp, `${tmp}.v.mkv`, `${tmp}.t.mkv`, `${tmp}.ts.txt`].map((f) => fsp.rm(f, { force: true })))
  }
  const [width, height] = encodedSize(target, container)
  return { width, height, ms: performance.now() - t0 }
}

