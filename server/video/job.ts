/**
 * THE video job, shared by the server's runner (server/jobs/video.ts: storage, the job's lifecycle run, the
 * output PUT) and `lucent enhance` (server/enhance/engine.ts: files, the report): the checks of a probed input
 * against a model (also POST /api/video-enhancer's, server/routes/jobs.ts), then, given the probe, the model,
 * the target and the frame-rate plan, the frame schedule (interpolation) or the VFR timestamps, the model's
 * per-frame enhancement and the engine's interpolation in the plan's order (server/jobs/video-interp.ts),
 * and the transcode (server/video/transcode.ts) into the output file.
 *
 * The engine comes as two functions (`FrameEngine`): the server's engine pool or the CLI's addon; each caller
 * maps a failure (TranscodeError, its engine's errors) to its own answer (run.fail, ItemError).
 *
 * With a video plan (server/video/plan.ts, the server's jobs): the planned stream is decoded (by its index, read
 * as the planned container), scaled to the network's planned input size, the schedule is the plan's, and a work
 * meter (server/video/meter.ts) counts every frame decoded and every frame x output megapixel sent to a network
 * against the plan: past it (+ the margin) the job stops (TranscodeError 'engine', code 'budget_exceeded'). The
 * engine's own per-call budget (faces included) is the runner's to add (server/jobs/video.ts).
 */
import type { VideoSettings } from '../config.js'
import type { VideoModel } from '../catalog.js'
import { interpProcessor } from '../jobs/video-interp.js'
import { FrameSchedule, packetBound, scheduleOf, type InterpPlan } from './interp.js'
import { displaySize, probeTimestamps, type VideoProbe } from './probe.js'
// a probe's facts (./probe.ts), also imported from here by older callers
export { displaySize, videoInputError } from './probe.js'
import type { VideoPlan } from './plan.js'
import { WorkMeter } from './meter.js'
import { keepsVfr, transcode } from './transcode.js'
import { toolWorks } from './tools.js'

/** Frames per engine call: about `batchMb` MiB of output frames, 1..8. */
export function batchFor(width: number, height: number, scale: number, batchMb: number): number {
  const outFrame = width * scale * height * scale * 3
  return Math.max(1, Math.min(8, Math.floor((batchMb * 1024 * 1024) / Math.max(1, outFrame))))
}

/** The engine's two video calls, from the server's pool or the CLI's addon; each throws on failure (an error
 *  with the engine's `code`). `faceState`: the face tracker's opaque state, carried from batch to batch. */
export interface FrameEngine {
  enhanceFrames: (frames: Buffer, o: { model: string; width: number; height: number; count: number; faceState?: Uint8Array }) =>
    Promise<{ data: Buffer; width: number; height: number; faceState?: Uint8Array }>
  interpolateFrames: (frames: Buffer, o: { width: number; height: number; count: number; positions: number[] }) =>
    Promise<{ data: Buffer; cuts: number[] }>
}

export interface VideoJobOptions {
  input: string
  output: string
  /** Output container (no dot). */
  container: string
  /** Output [width, height]. */
  target: [number, number]
  model: VideoModel
  probe: VideoProbe
  /** The frame-rate plan (server/video/interp.ts decideInterp); null: the source's frames, one for one. */
  plan: InterpPlan | null
  /** Interpolation: the duration the price covers (the declared one, at submission) bounds the packets read,
   *  and `maxFrames` (the priced output frames) the schedule: a crafted file never makes more. */
  declaredDuration: number
  maxFrames: number
  /** The job's video plan (server/video/plan.ts): stream, sizes, schedule and the work meter's budget. */
  videoPlan?: Omit<VideoPlan, 'price'> | null
  tools: VideoSettings
  engine: FrameEngine
  signal: AbortSignal
  onProgress: (done: number, total: number) => void
  /** A VFR input whose timing cannot be restored (mkvmerge missing): encoded at the average constant rate. */
  onVfrLost?: () => void
}

export interface VideoJobResult {
  frames: number
  width: number
  height: number
  vfrRestored: boolean
  /** Interpolation: the output rate, slow motion and the frames copied at scene cuts. */
  interp: { fps: string; slowmo: number; cuts: number } | null
  /** Work done (megapixels out of the networks, as the meter counted), with a plan. */
  work?: number
}

/** One video through the model (and interpolation) into `output`; throws TranscodeError or the engine's error. */
export async function runVideoJob(o: VideoJobOptions): Promise<VideoJobResult> {
  const { probe: pr, plan, model, tools } = o
  const vp = o.videoPlan ?? null
  const at = vp ? { stream: vp.stream, demuxer: vp.demuxer } : {}
  // Per-frame timestamps: only needed (and only used) when the container can keep variable timing, or to place
  // interpolated frames.
  let timestamps: number[] | undefined
  let schedule: FrameSchedule | undefined
  if (plan) {
    const ts = await probeTimestamps(o.input, tools.ffprobe, undefined, packetBound(o.declaredDuration, pr.fps), at).catch(() => null)
    if (vp) schedule = scheduleOf(ts ?? { pts: [] }, pr.fps, vp.frames, plan, o.declaredDuration)
    else {
      const [num, den] = plan.fps.split('/').map(Number)
      schedule = new FrameSchedule(ts?.pts ?? [], pr.fps, pr.frames, den ? num / den : num, plan.slowmo, ts?.lastDuration, o.maxFrames)
    }
  } else if (keepsVfr(o.container)) {
    const ts = await probeTimestamps(o.input, tools.ffprobe, undefined, Infinity, at).catch(() => null)
    if (ts?.vfr) {
      if (await toolWorks(tools.mkvmerge, '--version')) timestamps = ts.pts
      else o.onVfrLost?.()
    }
  }
  const up = displaySize(pr)
  // the frames the network gets: the plan's (pre-scaled) input size
  const { width: w, height: h } = vp ? vp.netIn : up
  const meter = vp ? new WorkMeter(vp.work, Math.max(vp.netOut.width * vp.netOut.height, vp.rifeSize.width * vp.rifeSize.height) / 1e6, vp.frames) : null
  let faceState: Uint8Array | undefined
  const enhance = async (frames: Buffer, width: number, height: number, count: number) => {
    meter?.charge(count, width * model.scale, height * model.scale, 'enhanceFrames')
    const out = await o.engine.enhanceFrames(frames, { model: model.name, width, height, count, faceState })
    faceState = out.faceState
    return { data: out.data, width: out.width, height: out.height }
  }
  const interp = plan && schedule && interpProcessor(schedule, plan.order, {
    enhance: model.interpolation ? null : enhance,
    interpolate: (frames, width, height, count, positions) => {
      meter?.charge(positions.length, width, height, 'interpolateFrames')
      return o.engine.interpolateFrames(frames, { width, height, count, positions })
    },
  }, { maxFrames: 2 * batchFor(w, h, model.scale, tools.batchMb) })
  // Interpolation makes up to 8 frames per source frame: fewer source frames per batch.
  const srcFrames = vp ? vp.frames : pr.frames
  const perFrame = schedule ? Math.max(1, Math.ceil(schedule.total / Math.max(1, srcFrames))) : 1
  const r = await transcode({
    input: o.input,
    output: o.output,
    container: o.container,
    target: o.target,
    info: {
      width: pr.width, height: pr.height, rotation: pr.rotation, fps: pr.fpsRational, frames: srcFrames,
      hasAudio: pr.hasAudio, hasSubtitles: pr.hasSubtitles, subtitleCodecs: pr.subtitleCodecs,
      videoOffset: Math.max(0, pr.videoStart - pr.fileStart),
    },
    batch: Math.max(1, Math.floor(batchFor(w, h, model.scale, tools.batchMb) / perFrame)),
    ffmpeg: tools.ffmpeg,
    mkvmerge: tools.mkvmerge,
    crf: tools.crf,
    preset: tools.preset,
    timestamps,
    signal: o.signal,
    process: interp ? interp.process : enhance,
    ...(interp && plan && schedule
      ? { flush: interp.flush, outFps: plan.fps, outFrames: schedule.total, dropAudio: plan.slowmo > 1 }
      : {}),
    ...(vp ? { stream: vp.stream, demuxer: vp.demuxer } : {}),
    ...(vp && (vp.netIn.width !== up.width || vp.netIn.height !== up.height) ? { decodeSize: vp.netIn } : {}),
    ...(meter ? { onDecoded: (n: number) => meter.decode(n) } : {}),
    onProgress: o.onProgress,
  })
  return { ...r, interp: interp && plan ? { fps: plan.fps, slowmo: plan.slowmo, cuts: interp.cuts() } : null, ...(meter ? { work: meter.work } : {}) }
}
