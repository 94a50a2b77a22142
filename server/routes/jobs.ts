/** POST /api/photo-enhancer, /api/video-enhancer, /api/image-segmentation (with an optional Idempotency-Key: idempotency.ts),
 *  /api/task-status, /api/task-cancel (extension). */
import crypto from 'node:crypto'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError, CANCELED_CODE, QUEUE_FULL_CODE } from '../errors.js'
import { PHOTO_INPUT_FORMATS, contentTypeFor, normExt, photoFormat, videoOutputExtensions } from '../media/formats.js'
import { photoJobPrice } from '../pricing.js'
import { sniff } from '../media/sniff.js'
import { missingVideoTools } from '../video/tools.js'
import { slowmoError } from '../video/interp.js'
import { displaySize } from '../video/job.js'
import { planVideo, readVideo, PlanError } from '../video/plan.js'
import { loadToFile, photoFacts, readHead, withPhotoInput } from '../input.js'
import { ok, type Lucent } from '../context.js'
import { JobCreated, PhotoBody, SegmentBody, TaskStatus, TaskStatusBody, VideoBody, conflictResponses, errorResponses } from './schemas.js'
import { IdempotencyHeaders, idempotencyOf, lookup, replayAnswer } from './idempotency.js'
import type { JobStatusRow, NewJob } from '../store/types.js'
import type { WebhookSub } from '../store/webhooks.js'
import { webhookFor } from '../webhooks/subscribe.js'
import { outboundRules } from '../fetch/policy.js'
import type { JobSpec } from '../jobs/params.js'
import type { SubmitResult } from '../jobs/lifecycle.js'
import { taskStatusData, type TaskStatusData } from '../jobs/status.js'
import { asksForSize, outputSize } from '../jobs/output-size.js'
import { checkOutputPutUrl, outputPutAnswer } from '../jobs/output-put.js'
import { ownPin } from '../own-models/registry.js'
import { checkJobsInFlight, quotaError } from './quota.js'
import { measureInput } from './presigned.js'
import { SEG_MODELS, SEG_OUTPUT_FORMATS, segCoins, segModel } from '../segmentation.js'
import { segmentationTable } from '../pricing.js'

const newJobId = () => crypto.randomBytes(16).toString('hex')

/** Reserves a queue place for `keyId`'s job for the duration of `fn`: 503 + Retry-After when the queue is at its
 *  bound; 429 + Retry-After when this key already holds its share of it (LUCENT_QUEUE_MAX_PER_KEY). */
async function withQueueSlot<T>(l: Lucent, keyId: string, fn: (commit: () => void) => Promise<T>): Promise<T> {
  const r = l.queue.reserve(keyId)
  if (r === 'full') throw new ApiError(QUEUE_FULL_CODE, { status: 503, headers: { 'retry-after': '5' } })
  if (r === 'key_full') {
    // the RateLimit header fields as the quotas give them (server/routes/quota.ts), quota "queue_share"
    const why = `this key holds its share of the job queue (${l.queue.maxPerKey} jobs waiting, LUCENT_QUEUE_MAX_PER_KEY): retry when some have started`
    throw new ApiError(100429000, {
      status: 429, detail: why, hint: why,
      headers: { 'retry-after': '5', 'ratelimit-policy': `"queue_share";q=${l.queue.maxPerKey};qu="concurrent-requests"`, ratelimit: '"queue_share";r=0;t=5' },
    })
  }
  let reserved = true
  try {
    return await fn(() => { reserved = false })
  } finally {
    if (reserved) l.queue.release(keyId)
  }
}

function submitError(r: Extract<SubmitResult, { ok: false }>): ApiError {
  if (r.reason === 'trial_exhausted') return new ApiError(110402004)
  if (r.reason === 'no_key') return new ApiError(110400000)
  if (r.reason === 'not_queued') return new ApiError(100500000, { detail: `enqueue failed: ${r.error.message}` })
  if (r.reason === 'idempotency_conflict') return new ApiError(110409001)
  // the jobs-in-flight quota as counted in the debit's transaction: the same 429 as the early check (./quota.ts)
  if (r.reason === 'jobs_in_flight') return quotaError('jobs_in_flight', { limit: r.limit, used: r.used, retryAt: null })
  return new ApiError(110402000)
}

/** Debit, create and queue the job (server/jobs/lifecycle.ts). Not queued (Redis or the cluster primary
 *  unreachable): the lifecycle ends the job at once, refunded, rather than charge for a job the client never
 *  hears of. A webhook subscription is written first (held), so the job's final event finds it, and armed once
 *  the job is queued: a job the client never gets a job_id for sends no webhook (server/store/webhooks.ts). */
async function submit(l: Lucent, job: Omit<NewJob, 'kind' | 'params'> & JobSpec, commit: () => void, hook: WebhookSub | null) {
  if (hook) await l.store.webhooks.subscribe(job.id, job.keyId, hook, { held: true })
  const r = await l.jobs.submit(job, { reserved: true })
  if (r.ok || r.reason === 'not_queued') commit() // the queue consumed the reservation
  if (!r.ok) {
    if (hook) await l.store.webhooks.unsubscribe(job.id).catch(() => {})
    if (r.reason !== 'not_queued') await l.storage.delete(job.originalKey).catch(() => {})
    // a parallel submission with the same Idempotency-Key and body made the job first: its answer
    if (r.reason === 'replay') return armed(l, replayAnswer(r.job))
    // ended at once (refunded): a retry with the same Idempotency-Key submits again
    if (r.reason === 'not_queued' && job.idempotency) await l.store.forgetIdempotency(job.keyId, job.idempotency.key, job.id).catch(() => {})
    throw submitError(r)
  }
  if (hook) await l.store.webhooks.arm(job.id)
  return ok({ job_id: job.id, consume_coins: r.charged })
}

/** An earlier job's answer given again (Idempotency-Key): the client has its job_id now, so its webhooks go
 *  live, also when the first answer was lost (a crash between queueing and answering). */
async function armed<A extends { data: { job_id: string } }>(l: Lucent, answer: A): Promise<A> {
  await l.store.webhooks.arm(answer.data.job_id)
  return answer
}

/** The task-status answer of a job (a fresh read), with the extension fields. */
async function statusData(l: Lucent, job: JobStatusRow): Promise<{ data: TaskStatusData; etaAt?: number }> {
  const data = taskStatusData(job, l.storage)
  if (job.status !== 'CONVERTING') return { data }
  if (job.attempts === 0) data.queue_position = 1 + await l.store.jobsAhead(job.id)
  else if (job.etaAt !== null) return { data: withEta(data, job.etaAt), etaAt: job.etaAt }
  return { data }
}

const withEta = (data: TaskStatusData, etaAt: number, now = Date.now()): TaskStatusData =>
  ({ ...data, eta_seconds: Math.max(0, Math.ceil((etaAt - now) / 1000)) })

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent

  app.post('/api/photo-enhancer', {
    schema: {
      summary: 'Submit a photo job', tags: ['jobs'], security: [{ apikey: [] }], body: PhotoBody, headers: IdempotencyHeaders,
      response: { 200: JobCreated, ...conflictResponses },
    },
  }, async (req) => {
    const b = req.body
    const idempotency = idempotencyOf('/api/photo-enhancer', req.headers, b)
    const replay = await lookup(l, req.apiKey!.id, idempotency)
    if (replay) return armed(l, replay)
    await checkJobsInFlight(l, req.apiKey!.id) // per-key quota (./quota.ts): 429 before anything is fetched or debited
    // the catalog's models, then the operator's own (server/own-models/registry.ts)
    const model = l.ownModels.photo(b.model_name)
    if (!model) throw new ApiError(110400005)
    const ext = normExt(b.extension)
    const format = ext ? photoFormat(ext) : undefined
    if (!ext || !format) throw new ApiError(110400007)
    const hook = await webhookFor(l.store.webhooks, req.apiKey!.id, outboundRules(l.config), b)
    // Extension: the result also PUT to the caller's bucket (checked before anything is fetched).
    if (b.output_put_url !== undefined) await checkOutputPutUrl(b.output_put_url, l.config)
    // a pre-signed S3 upload named: its real bytes counted against its key's quota first (./presigned.ts)
    await measureInput(l, b.img_url, 'photo', req.apiKey!.id)
    // the input spooled to a temporary file, read whole only for its header facts within the gateway's input memory
    // budget (server/input.ts: LUCENT_INPUT_MEMORY_BYTES; past a short wait 503 + Retry-After, nothing debited)
    return withQueueSlot(l, req.apiKey!.id, (commit) => withPhotoInput(b.img_url, l.config, l.storage, async (input) => {
      // the sides the networks see: every format's orientation, as the engine applies it (server/media/orientation.ts)
      const { sn, upright } = await photoFacts(input.file, input.size, l.config)
      if (!sn || sn.kind !== 'image' || !PHOTO_INPUT_FORMATS.has(sn.format) || !sn.width || !sn.height || !upright) throw new ApiError(110400007)
      const inPx = sn.width * sn.height
      let run = model
      let output = { width: sn.width * model.scale, height: sn.height * model.scale }
      let target: { width?: number; height?: number } | undefined
      if (asksForSize(b)) {
        // Extension: any output size (server/jobs/output-size.ts): the family member that runs, its limits.
        const o = outputSize(b, model, upright.width, upright.height, undefined, l.ownModels.photoModels())
        run = o.model
        output = { width: o.width, height: o.height }
        target = o.target
      } else {
        const lim = model.limits
        if (inPx > lim.maxInMP * 1e6) throw new ApiError(110400009)
        if (inPx * model.scale * model.scale > lim.maxOutMP * 1e6) throw new ApiError(110400010)
      }
      // the larger of the output asked for and the networks' own output (server/pricing.ts)
      const coins = photoJobPrice(l.prices, run, upright, target ? output : undefined, l.ownModels.photoModels())
      const id = newJobId()
      const originalKey = `o/${id}.${sn.format}`
      await l.storage.putStream(originalKey, fs.createReadStream(input.file), contentTypeFor(sn.format), Number.MAX_SAFE_INTEGER)
      const created = await submit(l, {
        id, keyId: req.apiKey!.id, kind: 'photo', model: run.name, coins, originalKey, idempotency,
        params: {
          format, ext, exif: b.exif ?? false, dpi: run.category === 'enhance' ? b.DPI ?? null : null,
          input: { format: sn.format, width: sn.width, height: sn.height },
          output,
          ...(target ? { target } : {}),
          ...(b.output_put_url !== undefined ? { output_put_url: b.output_put_url } : {}),
          // an own model: the identity it was priced with; its runner refuses another (own-models/registry.ts)
          ...ownPin(run),
        },
      }, commit, hook)
      if (!target) return created
      return { ...created, data: { ...created.data, model_name: run.name, output_width: output.width, output_height: output.height } }
    }))
  })

  // Background removal (issue 31; server/segmentation.ts): the photo path's input rules (fetch policy, pre-signed
  // uploads measured, formats, EXIF orientation, the 70 MP limit) and the usual submission (debit, queue, refunds).
  app.post('/api/image-segmentation', {
    schema: {
      summary: 'Submit a background-removal job', tags: ['jobs'], security: [{ apikey: [] }], body: SegmentBody, headers: IdempotencyHeaders,
      response: { 200: JobCreated, ...conflictResponses },
    },
  }, async (req) => {
    const b = req.body
    const idempotency = idempotencyOf('/api/image-segmentation', req.headers, b)
    const replay = await lookup(l, req.apiKey!.id, idempotency)
    if (replay) return armed(l, replay)
    await checkJobsInFlight(l, req.apiKey!.id)
    const returnType = b.return_type ?? 'matted'
    // u2net where a live worker holds its file, else u2netp (server/models/installed.ts: the workers' `missing`)
    const model = b.model_name === undefined
      ? segModel((await l.workerNetworks.check())([SEG_MODELS[1].network]) === true ? 'u2net' : 'u2netp')!
      : segModel(b.model_name)
    if (!model) throw new ApiError(110400005)
    const ext = normExt(b.extension ?? '.png')
    const format = ext ? photoFormat(ext) : undefined
    if (!ext || !format || !SEG_OUTPUT_FORMATS.has(format)) throw new ApiError(110400007)
    // the thumbnail is scaled from the matted image by ffmpeg, which reads no HEIF
    if (returnType === 'all' && format === 'heif') {
      const why = 'return_type all: the thumbnail is made from the matted image, which ffmpeg cannot read as HEIF: ask for .png, .webp, .tiff or .tga'
      throw new ApiError(110400007, { detail: why, hint: why })
    }
    // `all` makes a thumbnail with ffmpeg (server/jobs/segment.ts): refused before anything is debited without it
    if (returnType === 'all') {
      const missingTools = await missingVideoTools(l.config.video)
      if (missingTools) throw new ApiError(100500005, { detail: missingTools })
    }
    const hook = await webhookFor(l.store.webhooks, req.apiKey!.id, outboundRules(l.config), b)
    // Extension: the matted image also PUT to the caller's bucket (the photo route's check, before anything is fetched)
    if (b.output_put_url !== undefined) await checkOutputPutUrl(b.output_put_url, l.config)
    await measureInput(l, b.file_url, 'photo', req.apiKey!.id)
    return withQueueSlot(l, req.apiKey!.id, (commit) => withPhotoInput(b.file_url, l.config, l.storage, async (input) => {
      const { sn, upright } = await photoFacts(input.file, input.size, l.config)
      if (!sn || sn.kind !== 'image' || !PHOTO_INPUT_FORMATS.has(sn.format) || !sn.width || !sn.height || !upright) throw new ApiError(110400007)
      if (sn.width * sn.height > model.limits.maxInMP * 1e6) throw new ApiError(110400009)
      const coins = segCoins(segmentationTable(l.prices), upright.width, upright.height)
      const id = newJobId()
      const originalKey = `o/${id}.${sn.format}`
      await l.storage.putStream(originalKey, fs.createReadStream(input.file), contentTypeFor(sn.format), Number.MAX_SAFE_INTEGER)
      return submit(l, {
        id, keyId: req.apiKey!.id, kind: 'segment', model: model.name, coins, originalKey, idempotency,
        params: {
          format, ext, return_type: returnType,
          input: { format: sn.format, width: sn.width, height: sn.height },
          upright: { width: upright.width, height: upright.height },
          ...(b.output_put_url !== undefined ? { output_put_url: b.output_put_url } : {}),
        },
      }, commit, hook)
    }))
  })

  /** An interpolation model (the catalog's `interpolation`: frame_interpolation) without `resolution` keeps the
   *  input size: the request gets a placeholder the schema accepts (every other request is validated exactly as
   *  before). */
  const keepSize = new WeakSet<object>()
  app.post('/api/video-enhancer', {
    schema: {
      summary: 'Submit a video job', tags: ['jobs'], security: [{ apikey: [] }], body: VideoBody, headers: IdempotencyHeaders,
      response: { 200: JobCreated, ...conflictResponses },
    },
    preValidation: async (req) => {
      const b = req.body as Record<string, unknown> | null
      if (b && typeof b === 'object' && typeof b.model_name === 'string' && l.ownModels.video(b.model_name)?.interpolation && b.resolution === undefined) {
        b.resolution = [1, 1]
        keepSize.add(req)
      }
    },
  }, async (req) => {
    const b = req.body
    const idempotency = idempotencyOf('/api/video-enhancer', req.headers, b)
    const replay = await lookup(l, req.apiKey!.id, idempotency)
    if (replay) return armed(l, replay)
    await checkJobsInFlight(l, req.apiKey!.id) // per-key quota (./quota.ts): 429 before anything is fetched or debited
    const model = l.ownModels.video(b.model_name)
    if (!model) throw new ApiError(110400005)
    const ext = normExt(b.extension ?? '.mp4')
    if (!ext || !videoOutputExtensions.includes(ext)) throw new ApiError(110400007)
    let [w, h] = b.resolution
    if (w * h > model.limits.maxOutMP * 1e6) throw new ApiError(110400010)
    if (b.output_put_url !== undefined) await checkOutputPutUrl(b.output_put_url, l.config)
    const badSlowmo = slowmoError(b.slowmo)
    if (badSlowmo) throw new ApiError(100403000, { detail: badSlowmo, hint: badSlowmo })
    // ffmpeg + ffprobe must run (LUCENT_FFMPEG / LUCENT_FFPROBE); photos do not need them.
    const missingTools = await missingVideoTools(l.config.video)
    if (missingTools) throw new ApiError(100500005, { detail: missingTools })
    const hook = await webhookFor(l.store.webhooks, req.apiKey!.id, outboundRules(l.config), b)
    await measureInput(l, b.video_url, 'video', req.apiKey!.id) // a pre-signed S3 upload: its real bytes counted first (./presigned.ts)
    return withQueueSlot(l, req.apiKey!.id, async (commit) => {
      const input = await loadToFile(b.video_url, 'video', l.config, l.storage, l.config.fetchMaxVideoBytes)
      try {
        // Fetched but not a video ffmpeg can decode (a photo, text, garbage) -> 110400007.
        const sn = sniff(await readHead(input.file))
        if (sn && sn.kind === 'image' && sn.format !== 'gif') throw new ApiError(110400007)
        // THE video plan (server/video/plan.ts): the stream decoded, its frames counted (fail closed), the network's
        // sizes within the priced tier, the frames through each network, the price; refusals before any debit.
        let vplan
        try {
          const facts = await readVideo(input.file, { ffprobe: l.config.video.ffprobe, sniffed: sn?.format ?? null, listingTimeoutMs: l.config.video.probeTimeoutMs })
          vplan = { ...planVideo(facts, { model, resolution: keepSize.has(req) ? null : [w, h], body: b, ext, prices: l.prices }), pr: facts.probe }
        } catch (e) {
          if (e instanceof PlanError) throw new ApiError(e.code, { detail: e.detail, hint: e.detail })
          throw e
        }
        const { plan, interp, pr } = vplan
        if (keepSize.has(req)) [w, h] = [displaySize(pr).width, displaySize(pr).height]
        const coins = plan.price.coins
        const id = newJobId()
        const format = sn?.format ?? pr.format.split(',')[0]
        const originalKey = `o/${id}.${format}`
        await l.storage.putStream(originalKey, fs.createReadStream(input.file), contentTypeFor(format), Number.MAX_SAFE_INTEGER)
        return await submit(l, {
          id, keyId: req.apiKey!.id, kind: 'video', model: model.name, coins, originalKey, idempotency,
          params: {
            ext, resolution: [w, h],
            input: { format, width: pr.width, height: pr.height, rotation: pr.rotation, fps: pr.fps, duration: pr.duration, frames: pr.frames, codec: pr.codec },
            ...(b.output_put_url !== undefined ? { output_put_url: b.output_put_url } : {}),
            ...(interp ? { interp } : {}),
            ...ownPin(model),
            plan,
          },
        }, commit, hook)
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
      return ok(kept.etaAt === undefined ? kept.data : withEta(kept.data, kept.etaAt))
    }
    const [job, put] = await Promise.all([l.store.jobStatus(req.body.job_id), l.store.outputPut(req.body.job_id)])
    // Another key's job is reported as unknown: job ids are not shared across keys.
    if (!job || job.keyId !== req.apiKey!.id) throw new ApiError(110400002)
    const { data, etaAt } = await statusData(l, job)
    if (put) data.output_put = outputPutAnswer(put) // extension: only for jobs that gave an output_put_url
    l.status.put(job.id, job.keyId, data, Date.now(), etaAt)
    return ok(data)
  })

  // Extension: cancel a waiting or running job (server/jobs/lifecycle.ts cancel(); a run elsewhere is stopped
  // through the cluster IPC / Redis relay). The job ends ERROR with error_code 110400014 and reason "canceled",
  // refunded as the money policy says (server/jobs/refund.ts: all of it while waiting, the unprocessed share once
  // running); a finished job, or one whose result exists (being delivered), answers 409 (110409000).
  app.post('/api/task-cancel', {
    schema: {
      summary: 'Cancel a job (extension)', tags: ['jobs'], security: [{ apikey: [] }], body: TaskStatusBody,
      description: 'A waiting job never runs; a running one is stopped. Answers the task-status of the canceled job ' +
        '(status ERROR, error_code 110400014, reason "canceled"). Refund: all coins while the job waits, the unprocessed ' +
        'share (by progress) once it runs. A finished job, or one whose result exists (being delivered to output_put_url): ' +
        '409, 110409000, nothing refunded.',
      response: { 200: TaskStatus, ...conflictResponses },
    },
  }, async (req) => {
    const id = req.body.job_id
    const job = await l.store.jobStatus(id)
    if (!job || job.keyId !== req.apiKey!.id) throw new ApiError(110400002)
    if (job.status !== 'CONVERTING') throw new ApiError(110409000)
    const canceled = await l.jobs.cancel(id, { errorCode: CANCELED_CODE, message: 'canceled by the client' })
    const now = await l.store.jobStatus(id)
    // not canceled: it finished (or was canceled) meanwhile; the store let exactly one outcome through
    if (!canceled || !now || now.errorCode !== CANCELED_CODE) throw new ApiError(110409000)
    return ok((await statusData(l, now)).data)
  })
}

export default routes
