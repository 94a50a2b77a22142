/**
 * The video job runner: original -> probe -> the one video job (server/video/job.ts, shared with `lucent
 * enhance`: per-frame timestamps, server/video/transcode.ts with the engine's enhanceFrames through the engine
 * pool, one batch of frames per task) -> result in storage -> completed. Any failure fails the run (ERROR + refund). Temporary files (a copy of the original when storage
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
 * The video plan (server/video/plan.ts, `params.plan`, made at submission): the worker decodes the planned
 * stream as the planned container, at the planned network size, and meters its work against the plan
 * (server/video/meter.ts): a job that would do more fails with BUDGET_CODE (110400015 "The job exceeded the work
 * its price covers" where server/errors.ts has it, else 110400008). A job stored before plans existed gets one
 * from the file here (the same counts, no pre-scale: it was priced the old way).
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
import { engineErrorCode, type ErrorCode } from '../errors.js'
import { VIDEO_MODELS } from '../catalog.js'
import { contentTypeFor } from '../media/formats.js'
import type { MediaStorage } from '../storage/types.js'
import { probeVideo, ProbeError } from '../video/probe.js'
import { TranscodeError } from '../video/transcode.js'
import { missingVideoTools } from '../video/tools.js'
import { pricedFrames } from '../video/interp.js'
import { runVideoJob, displaySize, type FrameEngine } from '../video/job.js'
import { readVideo, shape, PlanError, type VideoPlan } from '../video/plan.js'
import { settleAborted, type Run } from './lifecycle.js'
import type { VideoJob } from './params.js'
import { deliveryFor, type OutputPutter } from './output-put.js'
import { framesBudget, interpBudget, usesFaces } from './budget.js'
import { isThreadDeath } from '../engine/pool.js'
import { ownNetwork, type OwnModels } from '../own-models/registry.js'

export interface VideoRunnerDeps {
  storage: MediaStorage
  /** The engine pool (a fake one in the runners' unit tests). */
  pool: Pick<EnginePool, 'enhanceFrames' | 'interpolateFrames'>
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  video: VideoSettings
  /** Extension: the PUT of a result to a job's output_put_url (server/jobs/output-put.ts); absent: not done. */
  outputPut?: OutputPutter
  /** The operator's own models (bring your own model); absent: catalog models only. */
  ownModels?: Pick<OwnModels, 'network' | 'video'>
}

/** A job that would do more work than its plan priced fails with this code (the work meter, issue 29). */
export const BUDGET_CODE: ErrorCode = 110400015

/** Frames per engine call (server/video/job.ts, the one video job of the server and `lucent enhance`). */
export { batchFor } from '../video/job.js'

export async function runVideo(d: VideoRunnerDeps, run: Run<VideoJob>): Promise<void> {
  const { job } = run
  const { ext, resolution: target } = job.params
  const model = VIDEO_MODELS.get(job.model) ?? d.ownModels?.video(job.model)
  if (!model) return void await run.fail(110400005, `unknown video model ${job.model}`)
  const own = await ownNetwork(d, run, 'video')
  if (!own) return

  const tools = d.video
  const missing = await missingVideoTools(tools)
  if (missing) return void await run.fail(100500005, missing)

  await fsp.mkdir(tools.tmpDir, { recursive: true })
  const prefix = path.join(tools.tmpDir, `lucent-vjob-${job.id}`)
  const outFile = `${prefix}-out.${ext}`
  let inFile = d.storage.localPath(job.originalKey)
  let inCopy: string | null = null
  let keepOut = false
  try {
    if (!inFile) {
      const obj = await d.storage.stream(job.originalKey)
      if (!obj) return void await run.fail(engineErrorCode('storage'), 'original file is missing')
      inCopy = `${prefix}-in`
      await pipeline(obj.stream, fs.createWriteStream(inCopy))
      inFile = inCopy
    }
    const plan = job.params.interp ?? null
    let vp: Omit<VideoPlan, 'price'> | null = job.params.plan ?? null
    let pr
    try {
      pr = await probeVideo(inFile, tools.ffprobe, undefined, { demuxer: vp ? vp.demuxer : null })
    } catch (e) {
      if (e instanceof ProbeError && e.reason === 'missing_ffprobe') return void await run.fail(100500005, e.message)
      return void await run.fail(engineErrorCode('decode_failed'), `cannot read the video: ${(e as Error).message}`)
    }
    if (!vp) {
      // stored before plans: the file's own counts, the network at input x scale (as it was priced)
      try {
        const facts = await readVideo(inFile, { ffprobe: tools.ffprobe, sniffed: job.params.input.format, listingTimeoutMs: tools.probeTimeoutMs })
        const up = displaySize(facts.probe)
        vp = shape(facts, model, { input: up, output: { width: up.width * model.scale, height: up.height * model.scale } }, plan, job.params.input.duration)
      } catch (e) {
        if (e instanceof PlanError) return void await run.fail(e.code, e.detail)
        throw e
      }
    }
    // each engine call bounded by its own frames' work (faces included): the engine's meter (server/jobs/budget.ts)
    const faces = usesFaces('video', model.name)
    const engine: FrameEngine = {
      enhanceFrames: async (frames, o0) => {
        const o = { ...o0, budget: framesBudget(o0.count, o0.width * model.scale, o0.height * model.scale, faces) }
        const out = await d.pool.enhanceFrames(frames, own.network ? { ...o, network: own.network } : o, { signal: run.signal })
        if (!out.ok) throw Object.assign(new Error(out.message), { code: out.error_code })
        return { data: Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength), width: out.width, height: out.height, faceState: out.faceState }
      },
      interpolateFrames: async (frames, o) => {
        const out = await d.pool.interpolateFrames(frames, { ...o, budget: interpBudget(o.positions.length, o.width, o.height) }, { signal: run.signal })
        if (!out.ok) throw Object.assign(new Error(out.message), { code: out.error_code })
        return { data: Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength), cuts: out.cuts }
      },
    }
    const r = await runVideoJob({
      input: inFile, output: outFile, container: ext, target, model, probe: pr, plan,
      // never more frames than the price covers (the declared duration at submission; the timestamps or the
      // frame count of a crafted file may claim far more)
      declaredDuration: job.params.input.duration,
      maxFrames: plan ? pricedFrames(job.params.input.duration, plan) : 0,
      videoPlan: vp,
      tools, engine, signal: run.signal,
      onProgress: (done, total) => void run.progress((done / total) * 100),
      onVfrLost: () => d.log.warn({ job: job.id }, 'variable-frame-rate input but mkvmerge is missing: output at the average constant rate'),
    })
    if (run.stopped) return settleAborted(run)
    const key = `r/${job.id}.${ext}`
    await d.storage.putStream(key, fs.createReadStream(outFile), contentTypeFor(ext), Number.MAX_SAFE_INTEGER)
    // Extension: also into the caller's bucket, streamed from the local file after the run (which keeps the
    // file until then); never fails the job.
    const deliver = deliveryFor({ ...d, tmpDir: tools.tmpDir }, job, key, { file: outFile, size: (await fsp.stat(outFile)).size },
      () => fsp.rm(outFile, { force: true }))
    const completed = await run.complete(key, deliver)
    keepOut = completed && !!deliver   // the delivery removes it when it is over
    if (completed) {
      d.log.info({ job: job.id, frames: r.frames, width: target[0], height: target[1], vfr: r.vfrRestored, work: r.work, planned: vp.work, ...(r.interp ?? {}) }, 'video job completed')
    }
  } catch (e) {
    if (run.signal.aborted) return settleAborted(run)
    // the engine thread running a batch died: the runner queues the job again (server/jobs/runner.ts)
    if (isThreadDeath(e)) throw e
    if (!(e instanceof TranscodeError)) return void await run.fail(100500000, String((e as Error)?.message ?? e))
    if (e.reason === 'engine' && e.engineCode === 'budget_exceeded') return void await run.fail(BUDGET_CODE, e.message)
    if (e.reason === 'engine') return void await run.fail(engineErrorCode(e.engineCode), e.message)
    if (e.reason === 'decode') return void await run.fail(engineErrorCode('decode_failed'), e.message)
    return void await run.fail(engineErrorCode('encode_failed'), e.message)
  } finally {
    await Promise.all([keepOut ? null : outFile, inCopy].filter((f): f is string => !!f).map((f) => fsp.rm(f, { force: true })))
  }
}
