/**
 * Job parameters: what a submission route stores with a job and its runner reads back, as TypeBox schemas
 * shared by both sides. Routes build `PhotoParams` / `VideoParams` values; the lifecycle decodes a stored job
 * (`decodeJob`) against the same schemas before a runner sees it, so runners read typed fields, no casts.
 */
import { Type, type Static } from 'typebox'
import { Compile } from 'typebox/compile'
import type { Job } from '../store/types.js'

const Size = Type.Object({ width: Type.Integer({ minimum: 1 }), height: Type.Integer({ minimum: 1 }) })

export const PhotoParams = Type.Object({
  /** Engine output format (canonical: jpeg, png, ...). */
  format: Type.String(),
  /** The requested extension as given (normalised, no dot). */
  ext: Type.String(),
  exif: Type.Boolean(),
  /** DPI to write (enhance-category models only), else null. */
  dpi: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
  input: Type.Object({ format: Type.String(), ...Size.properties }),
  output: Size,
  /** Extension (server/jobs/output-size.ts): the sides the engine resamples to (one alone: aspect kept). */
  target: Type.Optional(Type.Object({ width: Type.Optional(Type.Integer({ minimum: 1 })), height: Type.Optional(Type.Integer({ minimum: 1 })) })),
  /** Extension (server/jobs/output-put.ts): a pre-signed PUT URL the result is also written to. */
  output_put_url: Type.Optional(Type.String()),
})
export type PhotoParams = Static<typeof PhotoParams>

export const VideoParams = Type.Object({
  /** Output container (no dot). */
  ext: Type.String(),
  /** Target [width, height]. */
  resolution: Type.Tuple([Type.Integer({ minimum: 1 }), Type.Integer({ minimum: 1 })]),
  input: Type.Object({
    format: Type.String(), width: Type.Integer(), height: Type.Integer(), rotation: Type.Integer(), fps: Type.Number(),
    duration: Type.Number(), frames: Type.Integer(), codec: Type.String(),
  }),
  /** Extension (server/jobs/output-put.ts): a pre-signed PUT URL the result is also written to. */
  output_put_url: Type.Optional(Type.String()),
  /** Frame interpolation (fps / slowmo, server/video/interp.ts InterpPlan); absent: the frames as decoded. */
  interp: Type.Optional(Type.Object({
    fps: Type.String(), slowmo: Type.Integer({ minimum: 1 }), order: Type.Union([Type.Literal('before'), Type.Literal('after')]),
  })),
  /** The video plan (server/video/plan.ts VideoPlan): what the file holds, what each network does, the work and the
   *  price; absent on a job stored before plans (the worker makes one from the file). */
  plan: Type.Optional(Type.Object({
    stream: Type.Integer({ minimum: 0 }),
    demuxer: Type.Union([Type.String(), Type.Null()]),
    frames: Type.Integer({ minimum: 1 }),
    netIn: Size, netOut: Size,
    srFrames: Type.Integer({ minimum: 0 }),
    rifeFrames: Type.Integer({ minimum: 0 }),
    rifeSize: Size,
    outFrames: Type.Integer({ minimum: 0 }),
    work: Type.Number({ minimum: 0 }),
    price: Type.Object({ tier: Type.String(), seconds: Type.Number(), fps: Type.Number(), interpolated: Type.Boolean(), coins: Type.Integer() }),
  })),
})
export type VideoParams = Static<typeof VideoParams>

/** Background removal (POST /api/image-segmentation, server/segmentation.ts): the model is the job's `model`. */
export const SegmentParams = Type.Object({
  /** Engine output format of the matted image (png, webp, tiff, tga, heif). */
  format: Type.String(),
  /** The requested extension (normalised, no dot). */
  ext: Type.String(),
  return_type: Type.Union([Type.Literal('matted'), Type.Literal('mask'), Type.Literal('all')]),
  input: Type.Object({ format: Type.String(), ...Size.properties }),
  /** The sides the engine works at (EXIF orientation applied): the price and the work budget's basis. */
  upright: Size,
  /** Extension (server/jobs/output-put.ts): a pre-signed PUT URL the matted image (the job's result) is also written to. */
  output_put_url: Type.Optional(Type.String()),
})
export type SegmentParams = Static<typeof SegmentParams>

/** A new job as a route submits it: the kind decides the parameters' type. */
export type JobSpec = { kind: 'photo'; params: PhotoParams } | { kind: 'video'; params: VideoParams } | { kind: 'segment'; params: SegmentParams }

/** A stored job whose parameters have been checked against their kind's schema. */
export type TypedJob = Omit<Job, 'kind' | 'params'> & JobSpec
export type PhotoJob = Extract<TypedJob, { kind: 'photo' }>
export type VideoJob = Extract<TypedJob, { kind: 'video' }>
export type SegmentJob = Extract<TypedJob, { kind: 'segment' }>

const checkPhoto = Compile(PhotoParams)
const checkVideo = Compile(VideoParams)
const checkSegment = Compile(SegmentParams)

/** The job with typed parameters, or a message naming the first problem (a row this version cannot run). */
export function decodeJob(job: Job): TypedJob | string {
  const { kind, params } = job
  if (kind === 'photo' && checkPhoto.Check(params)) return { ...job, kind, params }
  if (kind === 'video' && checkVideo.Check(params)) return { ...job, kind, params }
  if (kind === 'segment' && checkSegment.Check(params)) return { ...job, kind, params }
  const e = (kind === 'photo' ? checkPhoto : kind === 'segment' ? checkSegment : checkVideo).Errors(params)[0]
  return `job parameters do not match the ${job.kind} schema: ${e ? `${e.instancePath || '/'} ${e.message}` : 'invalid'}`
}
