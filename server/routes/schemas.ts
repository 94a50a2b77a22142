import { Type, type TSchema } from 'typebox'
import { PHOTO_MODEL_FORMAT, VIDEO_MODEL_FORMAT } from '../own-models/formats.js'
import { WEBHOOK_EVENTS } from '../store/webhooks.js'

export const Envelope = <T extends TSchema>(data: T) => Type.Object({
  code: Type.Integer({ examples: [200] }), message: Type.String({ examples: ['OK'] }), data,
})

export const ErrorBody = Type.Object({
  error_code: Type.Integer(), message: Type.String(), code: Type.Integer(), msg: Type.String(),
  detail: Type.Optional(Type.String({ description: 'what is wrong, for errors of the fps / slowmo fields' })),
}, { description: 'Error: error_code/code and message/msg (see server/errors.ts)' })

export const errorResponses = {
  400: ErrorBody, 401: ErrorBody, 402: ErrorBody, 403: ErrorBody, 429: ErrorBody, 500: ErrorBody, 503: ErrorBody,
}
/** Routes that can answer 409 (task-cancel of a finished job, an Idempotency-Key reused with another body). */
export const conflictResponses = { ...errorResponses, 409: ErrorBody }

/** Webhooks (extension) on every submission: optional, ignored by the original contract. */
const callbackFields = {
  callback_url: Type.Optional(Type.String({ maxLength: 2048, description: 'http(s) URL POSTed the job\'s events (Standard Webhooks signature with the key\'s secret); default: the key\'s webhook URL. Private addresses are refused (110400021)' })),
  callback_events: Type.Optional(Type.Array(Type.String({ enum: [...WEBHOOK_EVENTS] }), {
    minItems: 1, maxItems: WEBHOOK_EVENTS.length, uniqueItems: true, description: 'Events to send; default job.completed, job.failed, job.canceled',
  })),
}

export const PhotoBody = Type.Object({
  model_name: Type.String({ format: PHOTO_MODEL_FORMAT, description: "Photo model (aliases sharpen_denoise, detail_denoise accepted; also the operator's own models, GET /api/models)" }),
  img_url: Type.String({ description: 'http(s) URL of the image, or an access_url/url from the upload facility' }),
  extension: Type.String({ description: 'Output file extension with a leading dot: .bmp .jpeg .jpg .png .jfif .tga .tiff .webp .heif' }),
  exif: Type.Optional(Type.Boolean({ default: false })),
  DPI: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Output DPI metadata (enhance/denoise models only)' })),
  ...callbackFields,
  // API extensions (absent: the answer is the commercial one, byte for byte)
  target_width: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Extension: output width in px (alone: the aspect ratio is kept). The model family runs at the next scale it has, then the result is resampled (Lanczos3)' })),
  target_height: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Extension: output height in px (alone: the aspect ratio is kept)' })),
  scale: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 16, description: 'Extension: output side = input side x scale (e.g. 1.5, 3); not with target_width/target_height' })),
  output_put_url: Type.Optional(Type.String({ maxLength: 8192, description: "Extension: a pre-signed PUT URL (S3, GCS, Azure SAS) of the caller's bucket; the result is also PUT there (task-status `output_put`)" })),
}, { description: 'Unknown extra fields are ignored' })

export const VideoBody = Type.Object({
  video_url: Type.String(),
  model_name: Type.String({ format: VIDEO_MODEL_FORMAT, description: "Video model (also the operator's own models, GET /api/models)" }),
  resolution: Type.Array(Type.Integer({ minimum: 1 }), { minItems: 2, maxItems: 2, description: '[width, height] of the output (may be left out for frame_interpolation: the input size)' }),
  extension: Type.Optional(Type.String({ default: '.mp4', description: '.mp4 .mov .mkv .m4v .avi .gif' })),
  original_resolution: Type.Optional(Type.Array(Type.Integer({ minimum: 0 }))),
  ...callbackFields,
  output_put_url: Type.Optional(Type.String({ maxLength: 8192, description: "Extension: a pre-signed PUT URL (S3, GCS, Azure SAS) of the caller's bucket; the result is also PUT there (task-status `output_put`)" })),
  fps: Type.Optional(Type.Unknown({
    description: 'Target frame rate, made by interpolation (RIFE): a number above the source rate (by > 1 %), at most 120 and 8x the source ' +
      '(GIF: 50). Any other value (at or below the source rate, not a number) is ignored, as clients send this field to the old service',
  })),
  slowmo: Type.Optional(Type.Unknown({
    description: 'Slow motion: 2, 4 or 8 (frames interpolated, duration stretched that many times, audio and subtitles dropped)',
  })),
}, { description: 'Unknown extra fields are ignored' })

/** POST /api/image-segmentation (background removal; the official MCP client's field names). */
export const SegmentBody = Type.Object({
  file_url: Type.String({ description: 'http(s) URL of the image, or an access_url/url from the upload facility' }),
  return_type: Type.Optional(Type.Union([Type.Literal('matted'), Type.Literal('mask'), Type.Literal('all')], {
    default: 'matted', description: 'matted: the subject on a transparent background (res_url); mask: also mask_url; all: also thumbnail_url',
  })),
  model_name: Type.Optional(Type.String({ description: 'Extension: u2netp (small) or u2net (full; the default where installed, else u2netp)' })),
  extension: Type.Optional(Type.String({ default: '.png', description: 'Extension: the matted image format: .png .webp .tiff .tga .heif (formats with alpha)' })),
  ...callbackFields,
  output_put_url: Type.Optional(Type.String({ maxLength: 8192, description: "Extension: a pre-signed PUT URL (S3, GCS, Azure SAS) of the caller's bucket; the matted image (res_url) is also PUT there (task-status `output_put`)" })),
}, { description: 'Unknown extra fields are ignored' })

export const JobCreated = Envelope(Type.Object({
  job_id: Type.String(), consume_coins: Type.Integer(),
  // Extension, only when the submission asked for an output size:
  model_name: Type.Optional(Type.String({ description: 'Extension: the family member that runs (e.g. general_4x for scale 3)' })),
  output_width: Type.Optional(Type.Integer()),
  output_height: Type.Optional(Type.Integer()),
}))

/** Extension: the outcome of the PUT to a submission's output_put_url. */
export const OutputPut = Type.Object({
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  http_status: Type.Union([Type.Integer(), Type.Null()], { description: 'the last answer, null when none came' }),
  attempts: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'why it failed (the result stays at res_url)' }),
}, { description: 'Extension: delivery of the result to output_put_url' })

export const TaskStatusBody = Type.Object({ job_id: Type.String() })
export const TaskStatus = Envelope(Type.Object({
  job_id: Type.String(),
  status: Type.String({ enum: ['CONVERTING', 'COMPLETED', 'ERROR'] }),
  progress: Type.Integer({ minimum: 0, maximum: 100 }),
  original_url: Type.String(),
  res_url: Type.Optional(Type.String()),
  consume_coins: Type.Integer(),
  error_code: Type.Optional(Type.Integer()),
  message: Type.Optional(Type.String()),
  // extensions (docs/api.md): answers only add fields
  reason: Type.Optional(Type.Literal('canceled', { description: 'ERROR because the job was canceled (POST /api/task-cancel; error_code 110400014)' })),
  eta_seconds: Type.Optional(Type.Integer({ minimum: 0, description: 'Running job: seconds until it is expected to finish, from measured throughput per model and backend; absent when unknown' })),
  queue_position: Type.Optional(Type.Integer({ minimum: 1, description: 'Waiting job: 1 = next to start' })),
  output_put: Type.Optional(OutputPut),
  mask_url: Type.Optional(Type.String({ description: 'Background removal (return_type mask / all): the 8-bit grey mask (PNG) of the subject' })),
  thumbnail_url: Type.Optional(Type.String({ description: 'Background removal (return_type all): the matted image scaled to 256 px on its long side (PNG)' })),
}))

export const PresignItem = Type.Object({
  filename: Type.String({ minLength: 1, maxLength: 255 }),
  content_type: Type.String({ minLength: 1, maxLength: 100 }),
  expire_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 7200, default: 3600 })),
})
export const Presigned = Type.Object({
  upload_url: Type.String(), access_url: Type.String(), object_key: Type.String(), content_type: Type.String(),
  expire_at: Type.String({ description: 'ISO 8601 time the upload_url expires' }),
})
export const Stored = Type.Object({ url: Type.String(), object_key: Type.String(), size: Type.Integer() })

// --- webhooks (extension): GET /api/webhooks/deliveries, POST /api/webhooks/deliveries/{id}/replay ---
const isoOrNull = (description: string) => Type.Union([Type.String(), Type.Null()], { description })
export const WebhookDelivery = Type.Object({
  id: Type.String({ description: 'The webhook-id header: the same on every attempt and replay' }),
  event: Type.String({ enum: [...WEBHOOK_EVENTS] }),
  job_id: Type.String(),
  url: Type.String(),
  status: Type.String({ enum: ['pending', 'delivered', 'failed'], description: 'failed: the receiver answered 410, or retries ran out' }),
  attempts: Type.Integer({ minimum: 0 }),
  last_status: Type.Union([Type.Integer(), Type.Null()], { description: 'HTTP status of the last answer (null: none, e.g. a timeout)' }),
  last_error: Type.Union([Type.String(), Type.Null()]),
  last_attempt_at: isoOrNull('ISO 8601 time of the last attempt'),
  next_attempt_at: isoOrNull('ISO 8601 time of the next attempt (pending only)'),
  created_at: Type.String(),
  delivered_at: isoOrNull('ISO 8601 time of the 2xx answer'),
})
export const DeliveriesQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  job_id: Type.Optional(Type.String({ maxLength: 64 })),
  status: Type.Optional(Type.String({ enum: ['pending', 'delivered', 'failed'] })),
})
export const DeliveryList = Envelope(Type.Object({ deliveries: Type.Array(WebhookDelivery) }))
export const DeliveryParams = Type.Object({ id: Type.String({ maxLength: 128 }) })
export const DeliveryOne = Envelope(WebhookDelivery)
