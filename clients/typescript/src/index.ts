/**
 * @lucent/client: a typed client of the Lucent API (Node 20+, its built-in fetch; no dependencies).
 *
 *   const lucent = new LucentClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.LUCENT_KEY! })
 *   const { url } = await lucent.upload('photo.jpg')
 *   const { job_id } = await lucent.submitPhoto({ model_name: 'general_4x', img_url: url, extension: '.png', scale: 3 })
 *   const done = await lucent.wait(job_id, { onProgress: (p) => console.log(p) })
 *   console.log(done.res_url)
 *
 * Every failed call throws LucentError with the API's `error_code` (a failed job: LucentJobError).
 */
import fs from 'node:fs'
import path from 'node:path'
import type {
  Account, Envelope, ErrorBody, JobCreated, Models, PhotoRequest, Presigned, SegmentationRequest, Stored, TaskStatus, VideoRequest,
} from './types.js'

export * from './types.js'
export { verifyWebhook, signWebhook, webhookKey, WebhookVerificationError, type VerifyOptions } from './webhook.js'

/** An answer of the API that is not a success: HTTP status and the API's error_code. */
export class LucentError extends Error {
  constructor(
    message: string,
    /** The API's error_code (api.md), e.g. 110402000 = coins not enough; 0 when the answer had none. */
    readonly errorCode: number,
    /** HTTP status (0: no answer). */
    readonly status: number,
    readonly body?: unknown,
  ) {
    super(message)
    this.name = 'LucentError'
  }
}

/** A job that ended in ERROR (wait()): its status answer, with the job's error_code. */
export class LucentJobError extends LucentError {
  constructor(readonly job: TaskStatus) {
    super(`job ${job.job_id} failed: ${job.message ?? 'error'} (${job.error_code ?? 0})`, job.error_code ?? 0, 200, job)
    this.name = 'LucentJobError'
  }
}

export interface ClientOptions {
  /** e.g. http://127.0.0.1:8080 */
  baseUrl: string
  apiKey: string
  /** Another fetch (tests, proxies). Default: the global fetch. */
  fetch?: typeof fetch
}

export interface SubmitOptions {
  /** Extension: the same key and body within 24 h return the same job, charged once. */
  idempotencyKey?: string
  signal?: AbortSignal
}

export interface WaitOptions {
  /** Called with 0..100 whenever the progress changes. */
  onProgress?: (progress: number, status: TaskStatus) => void
  /** Between two polls (default 1000 ms). Polls count against the key's rate limit. */
  intervalMs?: number
  /** Give up after this long (default: never). */
  timeoutMs?: number
  signal?: AbortSignal
}

export interface UploadOptions {
  /** Default: from the file's extension. */
  contentType?: string
  /** Default: the file's name. */
  filename?: string
}

/** Content types of the extensions the upload facility takes. */
const TYPES: Record<string, string> = {
  jpg: 'image/jpeg', jpeg: 'image/jpeg', jfif: 'image/jpeg', png: 'image/png', webp: 'image/webp', bmp: 'image/bmp',
  tif: 'image/tiff', tiff: 'image/tiff', tga: 'image/x-tga', heic: 'image/heic', heif: 'image/heif', gif: 'image/gif',
  avif: 'image/avif', mp4: 'video/mp4', m4v: 'video/x-m4v', mov: 'video/quicktime', mkv: 'video/x-matroska',
  webm: 'video/webm', avi: 'video/x-msvideo',
}

const sleep = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve, reject) => {
  if (signal?.aborted) return reject(signal.reason)
  const t = setTimeout(() => { signal?.removeEventListener('abort', stop); resolve() }, ms)
  function stop() {
    clearTimeout(t)
    reject(signal!.reason)
  }
  signal?.addEventListener('abort', stop, { once: true })
})

export class LucentClient {
  private readonly base: string
  private readonly key: string
  private readonly fetch: typeof fetch

  constructor(o: ClientOptions) {
    this.base = o.baseUrl.replace(/\/+$/, '')
    this.key = o.apiKey
    this.fetch = o.fetch ?? globalThis.fetch
  }

  /** One API call; the envelope's data, or LucentError. */
  private async call<T>(method: 'GET' | 'POST', route: string, body?: unknown, extra: Record<string, string> = {}, signal?: AbortSignal): Promise<T> {
    let res: Response
    try {
      res = await this.fetch(`${this.base}${route}`, {
        method, signal,
        headers: { apikey: this.key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...extra },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      })
    } catch (e) {
      if (signal?.aborted) throw e
      throw new LucentError(`no answer from ${this.base}: ${(e as Error).message}`, 0, 0)
    }
    const text = await res.text()
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      throw new LucentError(`HTTP ${res.status}: not JSON`, 0, res.status, text)
    }
    const env = json as Partial<Envelope<T>> & Partial<ErrorBody>
    if (res.ok && env.code === 200 && 'data' in env) return env.data as T
    const code = env.error_code ?? env.code ?? 0
    throw new LucentError(env.message ?? env.msg ?? `HTTP ${res.status}`, code, res.status, json)
  }

  /** POST /api/photo-enhancer */
  submitPhoto(req: PhotoRequest, o: SubmitOptions = {}): Promise<JobCreated> {
    return this.call('POST', '/api/photo-enhancer', req, o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {}, o.signal)
  }

  /** POST /api/video-enhancer */
  submitVideo(req: VideoRequest, o: SubmitOptions = {}): Promise<JobCreated> {
    return this.call('POST', '/api/video-enhancer', req, o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {}, o.signal)
  }

  /** POST /api/image-segmentation (background removal; the answer's res_url / mask_url / thumbnail_url per return_type) */
  submitSegmentation(req: SegmentationRequest, o: SubmitOptions = {}): Promise<JobCreated> {
    return this.call('POST', '/api/image-segmentation', req, o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {}, o.signal)
  }

  /** POST /api/task-status */
  status(jobId: string, signal?: AbortSignal): Promise<TaskStatus> {
    return this.call('POST', '/api/task-status', { job_id: jobId }, {}, signal)
  }

  /**
   * Polls a job until it ends: resolves with the COMPLETED answer, throws LucentJobError for ERROR (a canceled
   * job ends in ERROR too), LucentError when a poll fails, the signal's reason when aborted.
   */
  async wait(jobId: string, o: WaitOptions = {}): Promise<TaskStatus> {
    const end = o.timeoutMs === undefined ? Infinity : Date.now() + o.timeoutMs
    let last = -1
    for (;;) {
      const s = await this.status(jobId, o.signal)
      if (s.progress !== last) {
        last = s.progress
        o.onProgress?.(s.progress, s)
      }
      if (s.status === 'COMPLETED') return s
      if (s.status === 'ERROR') throw new LucentJobError(s)
      if (Date.now() >= end) throw new LucentError(`job ${jobId} still ${s.status} after ${o.timeoutMs} ms`, 0, 0, s)
      await sleep(Math.min(o.intervalMs ?? 1000, Math.max(0, end - Date.now())), o.signal)
    }
  }

  /** POST /api/task-cancel (an extension): a waiting job never runs, a running one stops; refunded once. Answers
   *  the job's status (ERROR, reason `canceled`); a finished job is refused (LucentError, HTTP 409). */
  cancel(jobId: string, signal?: AbortSignal): Promise<TaskStatus> {
    return this.call('POST', '/api/task-cancel', { job_id: jobId }, {}, signal)
  }

  /** GET /api/account (an extension): balance, trial jobs left, rate limit, the newest ledger rows. */
  account(o: { ledger?: number } = {}): Promise<Account> {
    return this.call('GET', `/api/account${o.ledger !== undefined ? `?ledger=${o.ledger}` : ''}`)
  }

  /** GET /api/models: every model (kind, scale, price, limits, description) and the accepted formats. */
  models(): Promise<Models> {
    return this.call('GET', '/api/models')
  }

  /** POST /api/oss/presign-put: a URL to PUT a file to, and the URL to submit afterwards. */
  presign(filename: string, contentType: string, expireSeconds?: number): Promise<Presigned> {
    return this.call('POST', '/api/oss/presign-put', { filename, content_type: contentType, ...(expireSeconds ? { expire_seconds: expireSeconds } : {}) })
  }

  /** POST /api/oss/transfer: the service copies a remote file into its storage. */
  transfer(url: string, filename?: string): Promise<Stored> {
    return this.call('POST', '/api/oss/transfer', { url, ...(filename ? { filename } : {}) })
  }

  /**
   * Uploads a local file (streamed, never read whole into memory) through a pre-signed PUT URL; resolves with
   * the URL to give as img_url / video_url, and the object's key and size.
   */
  async upload(file: string, o: UploadOptions = {}): Promise<Stored> {
    const filename = o.filename ?? path.basename(file)
    const contentType = o.contentType ?? TYPES[path.extname(file).slice(1).toLowerCase()]
    if (!contentType) throw new LucentError(`unknown content type of ${filename}: give contentType`, 110400007, 0)
    const p = await this.presign(filename, contentType)
    const blob = await fs.openAsBlob(file, { type: contentType })
    let res: Response
    try {
      res = await this.fetch(p.upload_url, { method: 'PUT', body: blob, headers: { 'content-type': contentType } })
    } catch (e) {
      throw new LucentError(`upload failed: ${(e as Error).message}`, 0, 0)
    }
    if (!res.ok) {
      const text = await res.text()
      let body: unknown = text
      try { body = JSON.parse(text) } catch { /* S3's XML, or nothing */ }
      const code = (body as Partial<ErrorBody>)?.error_code ?? 0
      throw new LucentError(`upload failed: HTTP ${res.status}`, code, res.status, body)
    }
    await res.arrayBuffer()
    return { url: p.access_url, object_key: p.object_key, size: blob.size }
  }
}
