/** POST /api/photo-enhancer, /api/video-enhancer, /api/task-status. */
import crypto from 'node:crypto'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError, QUEUE_FULL_CODE } from '../errors.js'
import { photoModel, videoModel } from '../catalog.js'
import { PHOTO_INPUT_FORMATS, contentTypeFor, normExt, photoFormat, videoOutputExtensions } from '../media/formats.js'
import { photoPrice, videoPrice } from '../pricing.js'
import { sniff } from '../media/sniff.js'
import { probeVideo, ProbeError } from '../video/probe.js'
import { missingVideoTools } from '../video/tools.js'
import { decideInterp, slowmoError, INTERP_MODEL } from '../video/interp.js'
import { loadBytes, loadToFile, readHead } from '../input.js'
import { ok, RETENTION_MS, type Lucent } from '../context.js'
import { JobCreated, PhotoBody, TaskStatus, TaskStatusBody, VideoBody, errorResponses } from './schemas.js'
import type { NewJob } from '../store/types.js'
import type { JobSpec } from '../jobs/params.js'
import type { SubmitResult } from '../jobs/lifecycle.js'
import type { TaskStatusData } from '../jobs/status.js'

const newJobId = () => crypto.randomBytes(16).toString('hex')

/** Reserves a queue place for the duration of `fn` (503 + Retry-After when the queue is at its bound). */
async function withQueueSlot<T>(l: Lucent, fn: (commit: () => void) => Promise<T>): Promise<T> {
  if (!l.queue.tryReserve()) throw new ApiError(QUEUE_FULL_CODE, { status: 503, headers: { 'retry-after': '5' } })
  let reserved = true
  try {
    return await fn(() => { reserved = false })
  } finally {
    if (reserved) l.queue.release()
  }
}

function submitError(r: Extract<SubmitResult, { ok: false }>): ApiError {
  if (r.reason === 'trial_exhausted') return new ApiError(110402004)
  if (r.reason === 'no_key') return new ApiError(110400000)
  if (r.reason === 'not_queued') return new ApiError(100500000, { detail: `enqueue failed: ${r.error.message}` })
  return new ApiError(110402000)
}

/** Debit, create and queue the job (server/jobs/lifecycle.ts). Not queued (Redis or the cluster primary
 *  unreachable): the lifecycle ends the job at once, refunded, rather than charge for a job the client never
 *  hears of. */
async function submit(l: Lucent, job: Omit<NewJob, 'kind' | 'params'> & JobSpec, commit: () => void) {
  const r = await l.jobs.submit(job, { reserved: true })
  if (r.ok || r.reason === 'not_queued') commit() // the queue consumed the reservation
  if (!r.ok) {
    if (r.reason !== 'not_queued') await l.storage.delete(job.originalKey).catch(() => {})
    throw submitError(r)
  }
  return ok({ job_id: job.id, consume_coins: r.charged })
}

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent

  app.post('/api/photo-enhancer', {
    schema: { summary: 'Submit a photo job', tags: ['jobs'], security: [{ apikey: [] }], body: PhotoBody, response: { 200: JobCreated, ...errorResponses } },
  }, async (req) => {
    const b = req.body
    const model = photoModel(b.model_name)
    if (!model) throw new ApiError(110400005)
    const ext = normExt(b.extension)
    const format = ext ? photoFormat(ext) : undefined
    if (!ext || !format) throw new ApiError(110400007)
    return withQueueSlot(l, async (commit) => {
      const bytes = await loadBytes(b.img_url, 'photo', l.config, l.storage, l.config.fetchMaxBytes)
      const sn = sniff(bytes)
      if (!sn || sn.kind !== 'image' || !PHOTO_INPUT_FORMATS.has(sn.format) || !sn.width || !sn.height) throw new ApiError(110400007)
      const lim = model.limits
      const inPx = sn.width * sn.height
      if (inPx > lim.maxInMP * 1e6) throw new ApiError(110400009)
      const outPx = inPx * model.scale * model.scale
      if (outPx > lim.maxOutMP * 1e6) throw new ApiError(110400010)
      const coins = photoPrice(l.prices, model.priceClass, outPx)
      const id = newJobId()
      const originalKey = `o/${id}.${sn.format}`
      await l.storage.put(originalKey, bytes, contentTypeFor(sn.format))
      return submit(l, {
        id, keyId: req.apiKey!.id, kind: 'photo', model: model.name, coins, originalKey,
        params: {
          format, ext, exif: b.exif ?? false, dpi: model.category === 'enhance' ? b.DPI ?? null : null,
          input: { format: sn.format, width: sn.width, height: sn.height },
          output: { width: sn.width * model.scale, height: sn.height * model.scale },
        },
      }, commit)
    })
  })

  /** frame_interpolation without `resolution` keeps the input size: the request gets a placeholder the
   *  schema accepts (every other request is validated exactly as before). */
  const keepSize = new WeakSet<object>()
  app.post('/api/video-enhancer', {
    schema: { summary: 'Submit a video job', tags: ['jobs'], security: [{ apikey: [] }], body: VideoBody, response: { 200: JobCreated, ...errorResponses } },
    preValidation: async (req) => {
      const b = req.body as Record<string, unknown> | null
      if (b && typeof b === 'object' && b.model_name === INTERP_MODEL && b.resolution === undefined) {
        b.resolution = [1, 1]
        keepSize.add(req)
      }
    },
  }, async (req) => {
    const b = req.body
    const model = videoModel(b.model_name)
    if (!model) throw new ApiError(110400005)
    const ext = normExt(b.extension ?? '.mp4')
    if (!ext || !videoOutputExtensions.includes(ext)) throw new ApiError(110400007)
    let [w, h] = b.resolution
    if (w * h > model.limits.maxOutMP * 1e6) throw new ApiError(110400010)
    const badSlowmo = slowmoError(b.slowmo)
    if (badSlowmo) throw new ApiError(100403000, { detail: badSlowmo, hint: badSlowmo })
    // ffmpeg + ffprobe must run (LUCENT_FFMPEG / LUCENT_FFPROBE); photos do not need them.
    const missingTools = await missingVideoTools(l.config.video)
    if (missingTools) throw new ApiError(100500005, { detail: missingTools })
    return withQueueSlot(l, async (commit) => {
      const input = await loadToFile(b.video_url, 'video', l.config, l.storage, l.config.fetchMaxVideoBytes)
      try {
        // Fetched but not a video ffmpeg can decode (a photo, text, garbage) -> 110400007.
        const sn = sniff(await readHead(input.file))
        if (sn && sn.kind === 'image' && sn.format !== 'gif') throw new ApiError(110400007)
        let pr
        try {
          pr = await probeVideo(input.file, l.config.video.ffprobe)
        } catch (e) {
          if (e instanceof ProbeError && e.reason === 'missing_ffprobe') throw new ApiError(100500005, { detail: e.message })
          throw new ApiError(110400007)
        }
        if (/(^|,)(image2|[a-z0-9]+_pipe)(,|$)/.test(pr.format) || !pr.width || !pr.height) throw new ApiError(110400007)
        if (!(pr.duration >= model.limits.minSeconds && pr.duration <= model.limits.maxSeconds)) throw new ApiError(110400011)
        if (keepSize.has(req)) {
          ;[w, h] = pr.rotation === 90 || pr.rotation === 270 ? [pr.height, pr.width] : [pr.width, pr.height]
          if (w * h > model.limits.maxOutMP * 1e6) throw new ApiError(110400010)
        }
        // fps / slowmo (server/video/interp.ts): null plan = the old path, old price.
        const ip = decideInterp(b, {
          model: model.name, scale: model.scale, fps: pr.fps, fpsRational: pr.fpsRational, duration: pr.duration, ext,
          maxSeconds: model.limits.maxSeconds,
        })
        if (!ip.ok) throw new ApiError(ip.code, { detail: ip.detail, hint: ip.detail })
        const coins = ip.plan
          ? videoPrice(l.prices, model.priceClass, w, h, ip.outFps, ip.outSeconds, true)
          : videoPrice(l.prices, model.priceClass, w, h, pr.fps, pr.duration)
        const id = newJobId()
        const format = sn?.format ?? pr.format.split(',')[0]
        const originalKey = `o/${id}.${format}`
        await l.storage.putStream(originalKey, fs.createReadStream(input.file), contentTypeFor(format), Number.MAX_SAFE_INTEGER)
        return await submit(l, {
          id, keyId: req.apiKey!.id, kind: 'video', model: model.name, coins, originalKey,
          params: {
            ext, resolution: [w, h],
            input: { format, width: pr.width, height: pr.height, rotation: pr.rotation, fps: pr.fps, duration: pr.duration, frames: pr.frames, codec: pr.codec },
            ...(ip.plan ? { interp: ip.plan } : {}),
          },
        }, commit)
      } finally {
        await fsp.rm(input.file, { force: true })
      }
    })
  })

  app.post('/api/task-status', {
    schema: { summary: 'Job status', tags: ['jobs'], security: [{ apikey: [] }], body: TaskStatusBody, response: { 200: TaskStatus, ...errorResponses } },
  }, async (req) => {
    // kept answers: server/jobs/status.ts (finished jobs; converting ones where every change is heard)
    const kept = l.status.get(req.body.job_id)
    if (kept) {
      if (kept.keyId !== req.apiKey!.id) throw new ApiError(110400002)
      return ok(kept.data)
    }
    const job = await l.store.jobStatus(req.body.job_id)
    // Another key's job is reported as unknown: job ids are not shared across keys.
    if (!job || job.keyId !== req.apiKey!.id) throw new ApiError(110400002)
    const data: TaskStatusData = {
      job_id: job.id,
      status: job.status,
      progress: job.status === 'COMPLETED' ? 100 : job.progress,
      original_url: l.storage.signedGetUrl(job.originalKey, job.createdAt + RETENTION_MS),
      consume_coins: job.coins,
    }
    if (job.status === 'COMPLETED' && job.resultKey) data.res_url = l.storage.signedGetUrl(job.resultKey, (job.completedAt ?? job.createdAt) + RETENTION_MS)
    if (job.status === 'ERROR') {
      data.error_code = job.errorCode ?? 100500006
      data.message = job.errorMessage ?? ''
    }
    l.status.put(job.id, job.keyId, data)
    return ok(data)
  })
}

export default routes
