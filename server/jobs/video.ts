/**
 * The video job runner: original -> probe (+ per-frame timestamps) -> server/video/transcode.ts with the
 * engine's enhanceFrames (through the piscina pool, one batch of frames per task) -> result in storage ->
 * COMPLETED. Any failure -> ERROR + refund (store.failJob). Temporary files (a copy of the original when
 * storage has no local path, the encoded output before it is stored, VFR intermediates) are removed on
 * success, failure, timeout and shutdown.
 *
 * Why the pool and not the addon from this thread: the pool is the one place that loads and initialises the
 * addon (model dir, threads) and its size (LUCENT_WORKERS) bounds how much engine work runs at once, for
 * photos and video batches alike; each batch's frames are transferred to the worker and back (no copy), so
 * the cost is one message per batch, and the gateway's event loop never runs engine code.
 *
 * Environment (read here; the gateway's config.ts holds LUCENT_FFPROBE):
 *   LUCENT_FFMPEG, LUCENT_MKVMERGE     tools (server/video/tools.ts)
 *   LUCENT_VIDEO_CRF     (18)          x264/x265 constant-rate factor of the output
 *   LUCENT_VIDEO_PRESET  (medium)      x264/x265 preset
 *   LUCENT_VIDEO_BATCH_MB (64)         target size of one batch of OUTPUT frames (1..8 frames per batch)
 *   LUCENT_VIDEO_TMP     (os tmpdir)   directory for the temporary files
 */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { FastifyBaseLogger } from 'fastify'
import { engineErrorCode, type ErrorCode } from '../errors.js'
import { VIDEO_MODELS, contentTypeFor } from '../catalog.js'
import type { Job, Store } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import type { EnginePool } from '../worker/pool.js'
import { probeVideo, probeTimestamps, ProbeError } from '../video/probe.js'
import { transcode, keepsVfr, TranscodeError } from '../video/transcode.js'
import { videoTools, missingVideoTools, toolWorks } from '../video/tools.js'

export interface VideoRunnerDeps {
  store: Store
  storage: MediaStorage
  pool: EnginePool
  log: FastifyBaseLogger
  jobTimeoutMs: number
  isClosing: () => boolean
  /** Overrides of the tool paths / temp dir (else environment, PATH, os.tmpdir()). */
  ffmpeg?: string
  ffprobe?: string
  tmpDir?: string
}

function envInt(name: string, def: number, min: number, max: number): number {
  const n = Number(process.env[name])
  return Number.isFinite(n) && n >= min && n <= max ? n : def
}

/** Frames per engine call: about LUCENT_VIDEO_BATCH_MB of output frames, 1..8. */
export function batchFor(width: number, height: number, scale: number): number {
  const outFrame = width * scale * height * scale * 3
  const budget = envInt('LUCENT_VIDEO_BATCH_MB', 64, 1, 4096) * 1024 * 1024
  return Math.max(1, Math.min(8, Math.floor(budget / Math.max(1, outFrame))))
}

export function tempPrefix(tmpDir: string, jobId: string): string {
  return path.join(tmpDir, `lucent-vjob-${jobId}`)
}

export async function runVideoJob(d: VideoRunnerDeps, job: Job): Promise<void> {
  const fail = async (code: ErrorCode, message: string) => {
    await d.store.failJob(job.id, code, message)
    d.log.warn({ job: job.id, code, msg: message }, 'video job failed')
  }
  const p = job.params as { ext?: string; resolution?: [number, number] }
  const ext = p.ext ?? 'mp4'
  const target = p.resolution
  const model = VIDEO_MODELS.get(job.model)
  if (!model || !target) return fail(110400005, `unknown video model ${job.model}`)

  const tools = videoTools({ ffmpeg: d.ffmpeg, ffprobe: d.ffprobe })
  const missing = await missingVideoTools(tools)
  if (missing) return fail(100500005, missing)

  const tmpDir = d.tmpDir ?? process.env.LUCENT_VIDEO_TMP ?? os.tmpdir()
  await fsp.mkdir(tmpDir, { recursive: true })
  const prefix = tempPrefix(tmpDir, job.id)
  const outFile = `${prefix}-out.${ext}`
  let inFile = d.storage.localPath(job.originalKey)
  let inCopy: string | null = null
  const ac = new AbortController()
  const timer = setTimeout(() => ac.abort(new Error('timeout')), d.jobTimeoutMs)
  const closing = setInterval(() => { if (d.isClosing()) ac.abort(new Error('closing')) }, 500)
  closing.unref()
  try {
    if (!inFile) {
      const obj = await d.storage.stream(job.originalKey)
      if (!obj) return await fail(engineErrorCode('storage'), 'original file is missing')
      inCopy = `${prefix}-in`
      await pipeline(obj.stream, fs.createWriteStream(inCopy))
      inFile = inCopy
    }
    let pr
    try {
      pr = await probeVideo(inFile, tools.ffprobe)
    } catch (e) {
      if (e instanceof ProbeError && e.reason === 'missing_ffprobe') return await fail(100500005, e.message)
      return await fail(engineErrorCode('decode_failed'), `cannot read the video: ${(e as Error).message}`)
    }
    // Per-frame timestamps: only needed (and only used) when the container can keep variable timing.
    let timestamps: number[] | undefined
    if (keepsVfr(ext)) {
      const ts = await probeTimestamps(inFile, tools.ffprobe).catch(() => null)
      if (ts?.vfr) {
        if (await toolWorks(tools.mkvmerge, '--version')) timestamps = ts.pts
        else d.log.warn({ job: job.id }, 'variable-frame-rate input but mkvmerge is missing: output at the average constant rate')
      }
    }
    const rot = pr.rotation
    const [w, h] = rot === 90 || rot === 270 ? [pr.height, pr.width] : [pr.width, pr.height]
    const batch = batchFor(w, h, model.scale)
    const batchTimeout = Math.max(60_000, d.jobTimeoutMs)
    let lastWrite = 0
    let lastPct = -1
    // Opaque face-tracker state of face-aware models (smoothed boxes), carried across frame batches.
    let faceState: Uint8Array | undefined
    const r = await transcode({
      input: inFile,
      output: outFile,
      container: ext,
      target,
      info: {
        width: pr.width, height: pr.height, rotation: pr.rotation, fps: pr.fpsRational, frames: pr.frames,
        hasAudio: pr.hasAudio, hasSubtitles: pr.hasSubtitles, subtitleCodecs: pr.subtitleCodecs,
        videoOffset: Math.max(0, pr.videoStart - pr.fileStart),
      },
      batch,
      ffmpeg: tools.ffmpeg,
      mkvmerge: tools.mkvmerge,
      crf: envInt('LUCENT_VIDEO_CRF', 18, 0, 51),
      preset: process.env.LUCENT_VIDEO_PRESET || 'medium',
      timestamps,
      signal: ac.signal,
      process: async (frames, width, height, count) => {
        const out = await d.pool.enhanceFrames(frames, { model: job.model, width, height, count, faceState }, batchTimeout, ac.signal)
        if (!out.ok) throw Object.assign(new Error(out.message), { code: out.error_code })
        faceState = out.faceState
        return { data: Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength), width: out.width, height: out.height }
      },
      onProgress: (done, total) => {
        const pct = Math.min(99, Math.floor((done / total) * 100))
        const now = Date.now()
        if (pct > lastPct && now - lastWrite >= 200) {
          lastPct = pct
          lastWrite = now
          d.store.setProgress(job.id, pct).catch(() => {})
        }
      },
    })
    if (d.isClosing()) return
    const key = `r/${job.id}.${ext}`
    await d.storage.putStream(key, fs.createReadStream(outFile), contentTypeFor(ext), Number.MAX_SAFE_INTEGER)
    await d.store.completeJob(job.id, key)
    d.log.info({ job: job.id, frames: r.frames, width: target[0], height: target[1], vfr: r.vfrRestored }, 'video job completed')
  } catch (e) {
    // Shutting down: leave the job CONVERTING; it is picked up again at the next start.
    if (d.isClosing()) return
    if (e instanceof TranscodeError) {
      if (e.reason === 'aborted') return await fail(100500007, `job exceeded ${d.jobTimeoutMs} ms`)
      if (e.reason === 'engine') return await fail(engineErrorCode(e.engineCode), e.message)
      if (e.reason === 'decode') return await fail(engineErrorCode('decode_failed'), e.message)
      return await fail(engineErrorCode('encode_failed'), e.message)
    }
    await fail(100500000, String((e as Error)?.message ?? e))
  } finally {
    clearTimeout(timer)
    clearInterval(closing)
    await Promise.all([outFile, inCopy].filter((f): f is string => !!f).map((f) => fsp.rm(f, { force: true })))
  }
}
