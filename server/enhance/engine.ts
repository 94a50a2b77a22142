/**
 * `lucent enhance` on the engine, in this process: the addon `@lucent/native` (server/engine/addon.ts loads it,
 * as the server's engine threads do) for photos, and the server's video pipeline (server/video/: probe,
 * transcode) fed by the addon's enhanceFrames for videos. Limits are the catalog's (the engine checks a photo's
 * own; a video's are checked here as POST /api/video-enhancer checks them), and every failure carries the API's
 * error_code (server/errors.ts), the one mapping of engine codes.
 */
import path from 'node:path'
import fsp from 'node:fs/promises'
import { ERRORS, engineErrorCode, isEngineErrorCode, type ErrorCode } from '../errors.js'
import { loadAddon, type Addon } from '../engine/addon.js'
import { photoFormat, videoOutputExtensions, normExt } from '../media/formats.js'
import { videoModel, type VideoModel } from '../catalog.js'
import type { VideoSettings } from '../config.js'
import { probeVideo, probeTimestamps, ProbeError } from '../video/probe.js'
import { transcode, keepsVfr, encodedSize, TranscodeError } from '../video/transcode.js'
import { missingVideoTools, toolWorks } from '../video/tools.js'
import { batchFor } from '../jobs/video.js'
import { interpProcessor } from '../jobs/video-interp.js'
import { decideInterp, FrameSchedule } from '../video/interp.js'
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

/** The addon, initialised once for the process (backend from --backend, else LUCENT_BACKEND, else auto). */
export function openEngine(modelDir: string, backend: 'auto' | 'cpu' | 'gpu', threads?: number): { addon: Addon; info: ReturnType<Addon['init']> } {
  let addon: Addon
  try {
    addon = loadAddon()
  } catch (e) {
    throw new ItemError(100500005, `the native addon is not built (npm run build:native): ${(e as Error).message}`)
  }
  try {
    return { addon, info: addon.init({ modelDir, backend, threads }) }
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
 * EXIF orientation of a JPEG (1..8; 1 when absent or another format). The engine turns photos upright and takes
 * target sizes upright, so --scale needs the upright sides; the addon's probe() gives the stored ones. One tag of
 * IFD0 read here (a dependency for one tag was not worth it); other formats rarely carry a turning orientation.
 */
export function jpegOrientation(b: Buffer): number {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return 1
  let o = 2
  while (o + 4 <= b.length && b[o] === 0xff) {
    const marker = b[o + 1]!
    const len = b.readUInt16BE(o + 2)
    if (marker === 0xda || marker === 0xd9) break // start of scan: no EXIF before it
    if (marker === 0xe1 && b.toString('latin1', o + 4, o + 10) === 'Exif\0\0') {
      const t = o + 10
      const end = Math.min(b.length, o + 2 + len)
      if (t + 8 > end) return 1
      const le = b.toString('latin1', t, t + 2) === 'II'
      const u16 = (p: number) => (p + 2 <= end ? (le ? b.readUInt16LE(p) : b.readUInt16BE(p)) : 0)
      const u32 = (p: number) => (p + 4 <= end ? (le ? b.readUInt32LE(p) : b.readUInt32BE(p)) : 0)
      const ifd = t + u32(t + 4)
      const n = u16(ifd)
      for (let i = 0; i < n; i++) {
        const e = ifd + 2 + i * 12
        if (u16(e) === 0x0112) {
          const v = u16(e + 8)
          return v >= 1 && v <= 8 ? v : 1
        }
      }
      return 1
    }
    o += 2 + len
  }
  return 1
}

/** One photo: read, enhance on the engine, write atomically. */
export async function enhancePhoto(addon: Addon, item: Planned, s: EnhanceSettings, signal: AbortSignal, parts: Set<string>,
  onProgress: (pct: number) => void): Promise<ItemResult> {
  const bytes = await fsp.readFile(item.file)
  const ext = normExt(path.extname(item.output))!
  const format = photoFormat(ext === 'tif' ? 'tiff' : ext)!
  let target: ReturnType<typeof targetSize>
  try {
    const p = addon.probe(bytes)
    const turned = jpegOrientation(bytes) >= 5 // 5..8: a quarter turn, the upright sides are swapped
    target = turned ? targetSize(p.height, p.width, s.size) : targetSize(p.width, p.height, s.size)
  } catch (e) {
    throw fromEngine(e)
  }
  let out
  try {
    out = await addon.enhance(bytes, { model: s.model, format, exif: s.keepMeta, dpi: s.dpi, quality: s.quality, ...target }, signal, onProgress)
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
  return videoModel(name) ?? new ItemError(110400005, `${name} is not a video model (pick one with --video-model)`)
}

/** One video: probe, limits, the server's transcode pipeline with the addon's enhanceFrames, atomic rename. */
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
  if (/(^|,)(image2|[a-z0-9]+_pipe)(,|$)/.test(pr.format) || !pr.width || !pr.height) throw new ItemError(110400007, 'not a video')
  const lim = model.limits
  if (!(pr.duration >= lim.minSeconds && pr.duration <= lim.maxSeconds)) {
    throw new ItemError(110400011, `${pr.duration.toFixed(2)} s is outside ${lim.minSeconds}..${lim.maxSeconds} s for ${model.name}`)
  }
  const [w, h] = pr.rotation === 90 || pr.rotation === 270 ? [pr.height, pr.width] : [pr.width, pr.height]
  const target = videoTarget(w, h, model.scale, s)
  if (target[0] * target[1] > lim.maxOutMP * 1e6) throw new ItemError(110400010, `${target[0]}x${target[1]} is over the ${lim.maxOutMP} MP limit of ${model.name}`)
  const container = normExt(path.extname(item.output))!
  // frame interpolation: the server's rules (decideInterp) and frame schedule, the addon's interpolateFrames
  const decision = decideInterp({ fps: s.fps, slowmo: s.slowmo }, {
    model: model.name, scale: model.scale, fps: pr.fps, fpsRational: pr.fpsRational, duration: pr.duration, ext: container, maxSeconds: lim.maxSeconds,
  })
  if (!decision.ok) throw new ItemError(decision.code, decision.detail)
  const plan = decision.plan
  let schedule: FrameSchedule | undefined
  if (plan) {
    const ts = await probeTimestamps(item.file, s.video.ffprobe).catch(() => null)
    const [num, den] = plan.fps.split('/').map(Number)
    schedule = new FrameSchedule(ts?.pts ?? [], pr.fps, pr.frames, den ? num / den : num, plan.slowmo, ts?.lastDuration)
  }
  let timestamps: number[] | undefined
  if (!plan && keepsVfr(container)) {
    const ts = await probeTimestamps(item.file, s.video.ffprobe).catch(() => null)
    if (ts?.vfr && (await toolWorks(s.video.mkvmerge, '--version'))) timestamps = ts.pts
  }
  await fsp.mkdir(path.dirname(item.output), { recursive: true })
  const tmp = partPath(item.output)
  parts.add(tmp)
  let faceState: Buffer | undefined
  const enhance = async (frames: Buffer, width: number, height: number, count: number) => {
    const out = await addon.enhanceFrames(frames, { model: model.name, width, height, count, faceState }, signal)
    faceState = out.faceState
    return { data: out.data, width: out.width, height: out.height }
  }
  const interp = plan && schedule && interpProcessor(schedule, plan.order, {
    enhance: model.name === 'frame_interpolation' ? null : enhance,
    interpolate: (frames, width, height, count, positions) => addon.interpolateFrames(frames, { width, height, count, positions }, signal),
  })
  const perFrame = schedule ? Math.max(1, Math.ceil(schedule.total / Math.max(1, pr.frames))) : 1
  try {
    await transcode({
      input: item.file, output: tmp, container, target,
      info: {
        width: pr.width, height: pr.height, rotation: pr.rotation, fps: pr.fpsRational, frames: pr.frames,
        hasAudio: pr.hasAudio, hasSubtitles: pr.hasSubtitles, subtitleCodecs: pr.subtitleCodecs,
        videoOffset: Math.max(0, pr.videoStart - pr.fileStart),
      },
      batch: Math.max(1, Math.floor(batchFor(w, h, model.scale, s.video.batchMb) / perFrame)),
      ffmpeg: s.video.ffmpeg, mkvmerge: s.video.mkvmerge, crf: s.video.crf, preset: s.video.preset,
      timestamps, signal,
      process: interp ? interp.process : enhance,
      ...(interp && plan && schedule
        ? { flush: interp.flush, outFps: plan.fps, outFrames: schedule.total, dropAudio: plan.slowmo > 1 }
        : {}),
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

