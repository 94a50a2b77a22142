/**
 * The wire types of the Lucent API, as the server's route schemas (server/routes/schemas.ts, account.ts,
 * models.ts) describe them. Written out here so the package needs nothing of the server at run time; the
 * repository's test/client/types.ts checks them against the server's TypeBox schemas, both ways, so they
 * cannot drift.
 */

/** Every answer of the API wraps its data in this envelope. */
export interface Envelope<T> { code: number; message: string; data: T }

/** An error answer (HTTP 4xx/5xx): `error_code` / `code` and `message` / `msg`. */
export interface ErrorBody {
  error_code: number; message: string; code: number; msg: string
  /** What is wrong, for errors of the video fps / slowmo fields. */
  detail?: string
}

/** POST /api/photo-enhancer */
export interface PhotoRequest {
  /** e.g. general_2x, general_4x, face_v2_4x, generative_1x (GET /api/models lists them). */
  model_name: string
  /** http(s) URL of the image, or a url / access_url from an upload. */
  img_url: string
  /** Output extension with a leading dot: .png .jpg .webp ... */
  extension: string
  exif?: boolean
  DPI?: number
  /** Extension: http(s) URL POSTed the job's events (Standard Webhooks signature with the key's secret; default: the key's webhook URL). */
  callback_url?: string
  /** Extension: events to send (job.completed, job.failed, job.canceled, job.progress); default the three final ones. */
  callback_events?: string[]
  /** Extension: output width in px (alone: the aspect ratio is kept). */
  target_width?: number
  /** Extension: output height in px (alone: the aspect ratio is kept). */
  target_height?: number
  /** Extension: output side = input side x scale (e.g. 1.5, 3); not with target_width/target_height. */
  scale?: number
  /** Extension: a pre-signed PUT URL of your bucket; the result is also PUT there. */
  output_put_url?: string
}

/** POST /api/image-segmentation: background removal (the official client's image_segmentation call). */
export interface SegmentationRequest {
  /** http(s) URL of the image, or an access_url/url from an upload. */
  file_url: string
  /** matted (default): the subject on a transparent background (res_url); mask: also mask_url; all: also thumbnail_url. */
  return_type?: 'matted' | 'mask' | 'all'
  /** Extension: u2netp (small) or u2net (full; the default where installed). */
  model_name?: string
  /** Extension: the matted image's format: .png (default) .webp .tiff .tga .heif. */
  extension?: string
  /** Extension: http(s) URL POSTed the job's events. */
  callback_url?: string
  /** Extension: events to send. */
  callback_events?: string[]
  /** Extension: a pre-signed PUT URL of your bucket; the matted image (res_url) is also PUT there. */
  output_put_url?: string
}

/** POST /api/video-enhancer */
export interface VideoRequest {
  video_url: string
  model_name: string
  /** [width, height] of the output. */
  resolution: number[]
  /** Output container with a leading dot (default .mp4). */
  extension?: string
  original_resolution?: number[]
  /** Extension: http(s) URL POSTed the job's events (Standard Webhooks signature with the key's secret; default: the key's webhook URL). */
  callback_url?: string
  /** Extension: events to send (job.completed, job.failed, job.canceled, job.progress); default the three final ones. */
  callback_events?: string[]
  /** Extension: a pre-signed PUT URL of your bucket; the result is also PUT there. */
  output_put_url?: string
  /** Extension: target frame rate made by interpolation (RIFE), a number above the source rate, at most 120 and 8x
   *  the source; other values are ignored (old clients send this field). */
  fps?: unknown
  /** Extension: slow motion 2, 4 or 8 (audio and subtitles dropped). */
  slowmo?: unknown
}

/** The data of a submission's answer. */
export interface JobCreated {
  job_id: string
  consume_coins: number
  /** Extension, when an output size was asked for: the family member that runs. */
  model_name?: string
  output_width?: number
  output_height?: number
}

/** Extension: the PUT of the result to output_put_url. */
export interface OutputPut {
  status: 'pending' | 'delivered' | 'failed'
  http_status: number | null
  attempts: number
  error: string | null
}

/** The data of POST /api/task-status. */
export interface TaskStatus {
  job_id: string
  status: string
  progress: number
  original_url: string
  res_url?: string
  consume_coins: number
  error_code?: number
  message?: string
  /** Extension: ERROR because the job was canceled (POST /api/task-cancel; error_code 110400014). */
  reason?: 'canceled'
  /** Extension: a running job's expected seconds to finish (absent when unknown). */
  eta_seconds?: number
  /** Extension: a waiting job's place in the queue (1 = next). */
  queue_position?: number
  output_put?: OutputPut
  /** Background removal (return_type mask / all): the 8-bit grey mask (PNG). */
  mask_url?: string
  /** Background removal (return_type all): the matted image scaled to 256 px on its long side (PNG). */
  thumbnail_url?: string
}

/** The statuses of TaskStatus.status. */
export type JobStatus = 'CONVERTING' | 'COMPLETED' | 'ERROR'

export interface LedgerRow {
  id: number
  job_id: string | null
  kind: string
  delta: number
  balance_after: number
  /** ISO 8601 */
  at: string
  /** Why a refund was given (money policy); absent on other rows. */
  reason?: string
}

/** The data of GET /api/account (an extension). */
export interface Account {
  key_id: string
  /** coins (1 coin = 0.001 USD) */
  balance: number
  trial: { total: number; left: number }
  rate_limit: { per_second: number; burst: number }
  expires_at: string | null
  created_at: string
  /** newest first */
  ledger: LedgerRow[]
}

export interface PhotoPrice {
  unit: 'output_megapixels'
  tiers: Array<{ below_mp: number | null; coins: number }>
}

export interface VideoPrice {
  unit: 'output_second'
  tiers: Array<{ name: string; max_short_side: number | null; coins_per_second: number }>
  fps_over_30_factor: number
  /** Multiplies coins_per_second above 60 fps of interpolated output (fps / slowmo), instead of fps_over_30_factor. */
  fps_over_60_factor: number
  minimum_coins: number
}

/** Background removal: coins per image by the input's megapixels. */
export interface SegmentationPrice {
  unit: 'input_megapixels'
  tiers: Array<{ below_mp: number | null; coins: number }>
}

export interface ModelInfo {
  name: string
  /** segmentation: POST /api/image-segmentation. */
  kind: 'photo' | 'video' | 'segmentation'
  family: string
  scale: number
  /** The scales of the model's family, ascending (output sizes: the next one at or above is run, then resampled). */
  family_scales: number[]
  category: string
  aliases: string[]
  description: string
  available: boolean
  price: PhotoPrice | VideoPrice | SegmentationPrice
  /** Extension: present on the operator's own models (bring your own model), absent on the catalog's. */
  own?: { architecture: string; format: string; sha256: string }
  limits: {
    max_input_mp: number | null
    max_output_mp: number
    dpi?: boolean
    min_seconds?: number
    max_seconds?: number
    /** Video: the limits of the fps / slowmo request fields. */
    interpolation?: { max_fps: number; max_fps_factor: number; slowmo: number[]; gif_max_fps: number }
  }
}

/** The data of GET /api/models. */
export interface Models {
  models: ModelInfo[]
  formats: { photo: string[]; video_input: string[]; video_output: string[] }
}

/** The data of POST /api/oss/presign-put. */
export interface Presigned {
  upload_url: string
  access_url: string
  object_key: string
  content_type: string
  expire_at: string
}

/** The data of POST /api/oss/upload and /api/oss/transfer. */
export interface Stored { url: string; object_key: string; size: number }
