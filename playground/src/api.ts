/**
 * The playground's client of the public API (api.md, compat.md, GET /api/models): JSON calls with the Apikey
 * header, the multipart upload with progress, and task-status polling. Paths are relative to the page, so a
 * gateway behind a path prefix works. Every failure becomes an ApiFailure carrying the API's message.
 */

/** One model of GET /api/models (server/routes/models.ts); only the fields the page reads. */
export interface CatalogModel {
  name: string
  /** segmentation: background removal (POST /api/image-segmentation; docs/segmentation.md). */
  kind: 'photo' | 'video' | 'segmentation'
  family: string
  scale: number
  /** The scales of this model's family, ascending. */
  family_scales: number[]
  category: string
  description: string
  available: boolean
  price: PhotoPrice | VideoPrice | SegmentationPrice
  limits: { max_input_mp: number | null; max_output_mp: number; min_seconds?: number; max_seconds?: number }
}
export interface PhotoPrice { unit: 'output_megapixels'; tiers: Array<{ below_mp: number | null; coins: number }> }
/** Background removal: coins per image by the upright input's megapixels. */
export interface SegmentationPrice { unit: 'input_megapixels'; tiers: Array<{ below_mp: number | null; coins: number }> }
export interface VideoPrice {
  unit: 'output_second'
  tiers: Array<{ name: string; max_short_side: number | null; coins_per_second: number }>
  fps_over_30_factor: number
  fps_over_60_factor: number
  minimum_coins: number
}
export interface Catalog { models: CatalogModel[]; formats: { photo: string[]; video_input: string[]; video_output: string[] } }

export interface TaskStatus {
  job_id: string
  status: 'CONVERTING' | 'COMPLETED' | 'ERROR'
  progress?: number
  res_url?: string
  /** Background removal: the grey mask (return_type mask, all) and the thumbnail (all). */
  mask_url?: string
  thumbnail_url?: string
  original_url?: string
  consume_coins?: number
  error_code?: number
  message?: string
}

/** A failed call: the API's message and code when it answered with an error body. */
export class ApiFailure extends Error {
  constructor(message: string, readonly errorCode: number | null = null, readonly status = 0, readonly retryAfter = 0) {
    super(message)
  }
}

interface Envelope<T> { code: number; message: string; data: T }

/** The error body of api.md ({error_code, message}, compat: also {code, msg}) as an ApiFailure. */
function failure(status: number, body: unknown, retryAfter: string | null): ApiFailure {
  const b = (body ?? {}) as { error_code?: unknown; code?: unknown; message?: unknown; msg?: unknown }
  const code = typeof b.error_code === 'number' ? b.error_code : typeof b.code === 'number' && b.code !== 200 ? b.code : null
  const message = typeof b.message === 'string' && b.message ? b.message : typeof b.msg === 'string' ? b.msg : `HTTP ${status}`
  return new ApiFailure(message, code, status, Number(retryAfter) || 0)
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

function unwrap<T>(status: number, text: string, retryAfter: string | null): T {
  const body = parse(text) as Envelope<T> | null
  if (status === 200 && body && body.code === 200) return body.data
  throw failure(status, body, retryAfter)
}

async function call<T>(method: 'GET' | 'POST', path: string, key: string | null, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {}
  if (key) headers.Apikey = key
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-cache' })
  } catch {
    throw new ApiFailure('The server could not be reached (network error)')
  }
  return unwrap<T>(res.status, await res.text(), res.headers.get('retry-after'))
}

export const getCatalog = () => call<Catalog>('GET', 'api/models', null)

/** POST /api/oss/upload (multipart, field `file`) with upload progress (0..1); resolves to the staged file's URL. */
export function upload(key: string, file: File, onProgress: (fraction: number) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', 'api/oss/upload')
    xhr.setRequestHeader('Apikey', key)
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total)
    }
    xhr.onerror = () => reject(new ApiFailure('The upload could not reach the server (network error)'))
    xhr.onload = () => {
      try {
        resolve(unwrap<{ url: string }>(xhr.status, xhr.responseText, xhr.getResponseHeader('retry-after')).url)
      } catch (e) {
        reject(e)
      }
    }
    const form = new FormData()
    form.append('file', file, file.name)
    xhr.send(form)
  })
}

export interface PhotoJob { model_name: string; img_url: string; extension: string }
export interface VideoJob { model_name: string; video_url: string; resolution: [number, number]; extension: string; fps?: number; slowmo?: number }
/** POST /api/image-segmentation (background removal). */
export interface SegmentationJob { file_url: string; model_name: string; return_type: 'matted' | 'mask' | 'all'; extension: string }
export interface Submitted { job_id: string; consume_coins: number }

export const submitPhoto = (key: string, job: PhotoJob) => call<Submitted>('POST', 'api/photo-enhancer', key, job)
export const submitVideo = (key: string, job: VideoJob) => call<Submitted>('POST', 'api/video-enhancer', key, job)
export const submitSegmentation = (key: string, job: SegmentationJob) => call<Submitted>('POST', 'api/image-segmentation', key, job)
export const taskStatus = (key: string, jobId: string) => call<TaskStatus>('POST', 'api/task-status', key, { job_id: jobId })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Polls task-status until COMPLETED or ERROR: every 1.5 s at first, slowing by a quarter per poll to 5 s
 * (api.md recommends 5-10 s; the first answers come sooner for short jobs); a 429 waits its Retry-After.
 * Gives up after `maxMs`.
 */
export async function waitForJob(key: string, jobId: string, onUpdate: (s: TaskStatus) => void, maxMs = 3 * 3600_000): Promise<TaskStatus> {
  const end = Date.now() + maxMs
  let delay = 1500
  for (;;) {
    await sleep(delay)
    let s: TaskStatus
    try {
      s = await taskStatus(key, jobId)
    } catch (e) {
      if (e instanceof ApiFailure && e.status === 429) {
        await sleep(Math.max(1, e.retryAfter) * 1000)
        continue
      }
      throw e
    }
    onUpdate(s)
    if (s.status !== 'CONVERTING') return s
    if (Date.now() > end) throw new ApiFailure('Gave up waiting for the job; its status can still be queried with its job_id')
    delay = Math.min(5000, delay * 1.25)
  }
}
