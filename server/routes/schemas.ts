import { Type, type TSchema } from 'typebox'
import { PHOTO_MODEL_NAMES, VIDEO_MODEL_NAMES } from '../catalog.js'

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

export const PhotoBody = Type.Object({
  model_name: Type.String({ enum: PHOTO_MODEL_NAMES, description: 'Photo model (aliases sharpen_denoise, detail_denoise accepted)' }),
  img_url: Type.String({ description: 'http(s) URL of the image, or an access_url/url from the upload facility' }),
  extension: Type.String({ description: 'Output file extension with a leading dot: .bmp .jpeg .jpg .png .jfif .tga .tiff .webp .heif' }),
  exif: Type.Optional(Type.Boolean({ default: false })),
  DPI: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Output DPI metadata (enhance/denoise models only)' })),
}, { description: 'Unknown extra fields are ignored' })

export const VideoBody = Type.Object({
  video_url: Type.String(),
  model_name: Type.String({ enum: VIDEO_MODEL_NAMES }),
  resolution: Type.Array(Type.Integer({ minimum: 1 }), { minItems: 2, maxItems: 2, description: '[width, height] of the output (may be left out for frame_interpolation: the input size)' }),
  extension: Type.Optional(Type.String({ default: '.mp4', description: '.mp4 .mov .mkv .m4v .avi .gif' })),
  original_resolution: Type.Optional(Type.Array(Type.Integer({ minimum: 0 }))),
  fps: Type.Optional(Type.Unknown({
    description: 'Target frame rate, made by interpolation (RIFE): a number above the source rate (by > 1 %), at most 120 and 8x the source ' +
      '(GIF: 50). Any other value (at or below the source rate, not a number) is ignored, as clients send this field to the old service',
  })),
  slowmo: Type.Optional(Type.Unknown({
    description: 'Slow motion: 2, 4 or 8 (frames interpolated, duration stretched that many times, audio and subtitles dropped)',
  })),
}, { description: 'Unknown extra fields are ignored' })

export const JobCreated = Envelope(Type.Object({ job_id: Type.String(), consume_coins: Type.Integer() }))

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
