/**
 * The video job runner: original -> probe (+ per-frame timestamps) -> server/video/transcode.ts with the
 * engine's enhanceFrames (through the engine pool, one batch of frames per task) -> result in storage ->
 * completed. Any failure fails the run (ERROR + refund). Temporary files (a copy of the original when storage
 * has no local path, the encoded output before it is stored, VFR intermediates) are removed on success,
 * failure, timeout and shutdown: the run's signal (lifecycle.ts) stops ffmpeg and the running batch.
 *
 * Why the pool and not the addon from this thread: the pool is the one place that loads and initialises the
 * addon (model dir, threads) and its size (LUCENT_WORKERS) bounds how much engine work runs at once, for
 * photos and video batches alike; each batch's frames are transferred to the thread and back (no copy), so
 * the cost is one message per batch, and the gateway's event loop never runs engine code.
 *
 * Frame interpolation (`params.interp`, server/video/interp.ts): the output is constant-rate at the plan's
 * rate, its frames placed by the source frames' own times (VFR included); batches go through the model and
 * the engine's interpolateFrames (./video-interp.ts); slow motion drops audio and subtitles.
 *
 * Settings (server/config.ts `video`): ffmpeg / ffprobe / mkvmerge, CRF, preset, batch size, temp dir.
 */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { VideoSettings } from '../config.js'
import type { EnginePool } from '../engine/pool.js'
import { engineErrorCode } from '../errors.js'
import { VIDEO_MODELS } from '../catalog.js'
import { contentTypeFor } from '../media/formats.js'
import type { MediaStorage } from '../storage/types.js'
import { probeVideo, probeTimestamps, ProbeError } from '../video/probe.js'
import { transcode, keepsVfr, TranscodeError } from '../video/transcode.js'
import { missingVideoTools, toolWorks } from '../video/tools.js'
import { FrameSchedule } from '../video/interp.js'
import { interpProcessor } from './video-interp.js'
import { settleAborted, type Run } from './lifecycle.js'
import type { VideoJob } from './params.js'
import type { OutputPutter } from './output-put.js'

export interface VideoRunnerDeps {
  storage: MediaStorage
  /** The engine pool (a fake one in the runners' unit tests). */
  pool: Pick<EnginePool, 'enhanceFrames' | 'interpolateFrames'>
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  video: VideoSettings
  /** Extension: the PUT of a result to a job's output_put_url (server/jobs/output-put.ts); absent: not done. */
  outputPut?: OutputPutter
}

/** Frames per engine call: about `batchMb` MiB of output frames, 1..8. */
export function batchFor(width: number, height: number, scale: number, batchMb: number): number {
  const outFrame = width * scale * height * scale * 3
  return Math.max(1, Math.min(8, Math.floor((batchMb * 1024 * 1024) / Math.max(1, outFrame))))
}

export async function runVideo(d: VideoRunnerDeps, run: Run<VideoJob>): Promise<void> {
  const { job } = run
  const { ext, resolution: target } = job.params
  const model = VIDEO_MODELS.get(job.model)
  if (!model) return void await run.fail(110400005, `unknown video model ${job.model}`)

  const tools = d.video
  const missing = await missingVideoTools(tools)
  if (missing) return void await run.fail(100500005, missing)

  await fsp.mkdir(tools.tmpDir, { recursive: true })
  const prefix = path.join(tools.tmpDir, `lucent-vjob-${job.id}`)
  const outFile = `${prefix}-out.${ext}`
  let inFile = d.storage.localPath(job.originalKey)
  let inCopy: string | null = null
  try {
    if (!inFile) {
      const obj = await d.storage.stream(job.originalKey)
      if (!obj) return void await run.fail(engineErrorCode('storage'), 'original file is missing')
      inCopy = `${prefix}-in`
      await pipeline(obj.stream, fs.createWriteStream(inCopy))
      inFile = inCopy
    }
    let pr
    try {
      pr = await probeVideo(inFile, tools.ffprobe)
    } catch (e) {
      if (e instanceof ProbeError && e.reason === 'missing_ffprobe') return void await run.fail(100500005, e.message)
      return void await run.fail(engineErrorCode('decode_failed'), `cannot read the video: ${(e as Error).message}`)
    }
    const plan = job.params.interp
    // Per-frame timestamps: only needed (and only used) when the container can keep variable timing, or to
    // place interpolated frames.
    let timestamps: number[] | undefined
    let schedule: FrameSchedule | undefined
    if (plan) {
      const ts = await probeTimestamps(inFile, tools.ffprobe).catch(() => null)
      const [num, den] = plan.fps.split('/').map(Number)
      schedule = new FrameSchedule(ts?.pts ?? [], pr.fps, pr.frames, den ? num / den : num, plan.slowmo, ts?.lastDuration)
    } else if (keepsVfr(ext)) {
      const ts = await probeTimestamps(inFile, tools.ffprobe).catch(() => null)
      if (ts?.vfr) {
        if (await toolWorks(tools.mkvmerge, '--version')) timestamps = ts.pts
        else d.log.warn({ job: job.id }, 'variable-frame-rate input but mkvmerge is missing: output at the average constant rate')
      }
    }
    const rot = pr.rotation
    const [w, h] = rot === 90 || rot === 270 ? [pr.height, pr.width] : [pr.width, pr.height]
    // Opaque face-tracker state of face-aware models (smoothed boxes), carried across frame batches.
    let faceState: Uint8Array | undefined
    const enhance = async (frames: Buffer, width: number, height: number, count: number) => {
      const out = await d.pool.enhanceFrames(frames, { model: job.model, width, height, count, faceState }, { signal: run.signal })
      if (!out.ok) throw Object.assign(new Error(out.message), { code: out.error_code })
      faceState = out.faceState
      return { data: Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength), width: out.width, height: out.height }
    }
    const interp = plan && schedule && interpProcessor(schedule, plan.order, {
      enhance: model.name === 'frame_interpolation' ? null : enhance,
      interpolate: async (frames, width, height, count, positions) => {
        const out = await d.pool.interpolateFrames(frames, { width, height, count, positions }, { signal: run.signal })
        if (!out.ok) throw Object.assign(new Error(out.message), { code: out.error_code })
        return { data: Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength), cuts: out.cuts }
      },
    })
    // Interpolation makes up to 8 frames per source frame: fewer source frames per batch.
    const perFrame = schedule ? Math.max(1, Math.ceil(schedule.total / Math.max(1, pr.frames))) : 1
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
      batch: Math.max(1, Math.floor(batchFor(w, h, model.scale, tools.batchMb) / perFrame)),
      ffmpeg: tools.ffmpeg,
      mkvmerge: tools.mkvmerge,
      crf: tools.crf,
      preset: tools.preset,
      timestamps,
      signal: run.signal,
      process: interp ? interp.process : enhance,
      ...(interp && plan && schedule
        ? { flush: interp.flush, outFps: plan.fps, outFrames: schedule.total, dropAudio: plan.slowmo > 1 }
        : {}),
      onProgress: (done, total) => void run.progress((done / total) * 100),
    })
    if (run.stopped) return settleAborted(run)
    const key = `r/${job.id}.${ext}`
    await d.storage.putStream(key, fs.createReadStream(outFile), contentTypeFor(ext), Number.MAX_SAFE_INTEGER)
    // Extension: also into the caller's bucket, streamed from the local file; never fails the job.
    if (job.params.output_put_url && d.outputPut) {
      const put = await d.outputPut(job.id, job.params.output_put_url, { file: outFile, size: (await fsp.stat(outFile)).size }, contentTypeFor(ext), run.signal)
      if (put.status !== 'delivered') d.log.warn({ job: job.id, output_put: put }, 'output_put_url: not delivered; the result stays at res_url')
      if (run.stopped) return settleAborted(run)
    }
    if (await run.complete(key)) {
      d.log.info({ job: job.id, frames: r.frames, width: target[0], height: target[1], vfr: r.vfrRestored, ...(interp ? { fps: plan!.fps, slowmo: plan!.slowmo, cuts: interp.cuts() } : {}) }, 'video job completed')
    }
  } catch (e) {
    if (run.signal.aborted) return settleAborted(run)
    if (!(e instanceof TranscodeError)) return void await run.fail(100500000, String((e as Error)?.message ?? e))
    if (e.reason === 'engine') return void await run.fail(engineErrorCode(e.engineCode), e.message)
    if (e.reason === 'decode') return void await run.fail(engineErrorCode('decode_failed'), e.message)
    return void await run.fail(engineErrorCode('encode_failed'), e.message)
  } finally {
    await Promise.all([outFile, inCopy].filter((f): f is string => !!f).map((f) => fsp.rm(f, { force: true })))
  }
}
