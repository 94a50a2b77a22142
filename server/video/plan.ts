/**
 * THE video plan (issue 29): one description of a video job, computed once at submission from what the file
 * really holds, stored with the job (server/jobs/params.ts VideoParams.plan), from which the price
 * (server/pricing.ts), the limits, the ETA (server/jobs/eta.ts) and the worker (server/video/job.ts,
 * server/jobs/video-interp.ts, the work meter server/video/meter.ts) all read:
 * - the stream decoded: the probed one, by its index (attached pictures / cover art never chosen), and the
 *   container ffmpeg is told to read it as (`demuxer`: the sniffed one, `-f`; never a playlist);
 * - the source frames: the stream's packets, counted (with or without a timestamp); a listing that fails, runs
 *   past its time (LUCENT_VIDEO_PROBE_TIMEOUT_MS) or past the packet bound refuses the job (fail closed);
 * - the network's input and output size per frame (pre-scaled so the output stays within the priced tier,
 *   server/price-rules.ts videoNetworkSize), checked against the per-frame megapixel limits;
 * - the frames through each network: the model's (SR) and interpolation's (RIFE): with interpolation after SR
 *   (1x / 2x models), only the source frames the output schedule shows (server/video/interp.ts FrameSchedule)
 *   go through SR, and the plan counts exactly those;
 * - the output frames, the work the price covers (`work`, output megapixels out of the networks) and the price.
 *
 * Refusals are PlanError (an API error_code and a detail), always before any debit.
 */
import type { VideoModel } from '../catalog.js'
import type { Prices } from '../pricing.js'
import { videoJobPrice, videoNetwork } from '../pricing.js'
import { decideInterp, FrameSchedule, packetBound, scheduleOf, timingError, framesSeconds, type InterpPlan } from './interp.js'
import { displaySize, probeTimestamps, probeVideo, ProbeError, videoInputError, type Timestamps, type VideoProbe } from './probe.js'

type Size = { width: number; height: number }

/** What a video job does, as stored with the job (all counts are of this file, not of what it declares). */
export interface VideoPlan {
  /** Index of the stream decoded (`-map 0:<stream>`), the probed one. */
  stream: number
  /** The container every ffmpeg / ffprobe reads the input as (`-f`); null: any of probe.ts SAFE_DEMUXERS. */
  demuxer: string | null
  /** Source frames: the stream's packets, counted. */
  frames: number
  /** The network's input per frame (the upright frames, pre-scaled) and its output. */
  netIn: Size
  netOut: Size
  /** Frames through the model's network (0 for an interpolation model). */
  srFrames: number
  /** Frames interpolation (RIFE) makes at most, and at what size (0 / netIn without interpolation). */
  rifeFrames: number
  rifeSize: Size
  /** Output frames encoded (at most). */
  outFrames: number
  /** The work the price covers: megapixels out of the networks (srFrames x netOut + rifeFrames x rifeSize). */
  work: number
  /** The price: the tier, the seconds and rate it was computed for, the coins. */
  price: { tier: string; seconds: number; fps: number; interpolated: boolean; coins: number }
}

export class PlanError extends Error {
  constructor(readonly code: 100403000 | 100500005 | 110400007 | 110400008 | 110400009 | 110400010 | 110400011, readonly detail: string) {
    super(detail)
    this.name = 'PlanError'
  }
}

/** The sniffed container (server/media/sniff.ts) -> ffmpeg's demuxer; null: no clean mapping. */
const DEMUXERS: Record<string, string> = {
  mp4: 'mov', mov: 'mov', m4v: 'mov', '3gp': 'mov', '3g2': 'mov', f4v: 'mov', mkv: 'matroska', webm: 'matroska',
  avi: 'avi', gif: 'gif', flv: 'flv', mpeg: 'mpeg', m2v: 'mpegvideo', mpegts: 'mpegts', m2ts: 'mpegts', asf: 'asf',
  ogg: 'ogg', rm: 'rm', mxf: 'mxf', nut: 'nut', dv: 'dv',
}

export function demuxerFor(sniffed: string | null | undefined): string | null {
  return (sniffed && DEMUXERS[sniffed]) || null
}

/** What the file holds: the probe of its video stream and that stream's packets. */
export interface VideoFacts {
  probe: VideoProbe
  packets: Timestamps & { packets: number }
  demuxer: string | null
}

export interface ReadOptions {
  ffprobe: string
  /** The container sniffed from the file's first bytes (server/media/sniff.ts), if any. */
  sniffed: string | null
  /** Most ms the packet listing may take (LUCENT_VIDEO_PROBE_TIMEOUT_MS). */
  listingTimeoutMs: number
}

/** Probes the file and counts its stream's packets; throws PlanError (fail closed). */
export async function readVideo(file: string, o: ReadOptions): Promise<VideoFacts> {
  const demuxer = demuxerFor(o.sniffed)
  let probe: VideoProbe
  try {
    probe = await probeVideo(file, o.ffprobe, undefined, { demuxer })
  } catch (e) {
    if (e instanceof ProbeError && e.reason === 'missing_ffprobe') throw new PlanError(100500005, e.message)
    throw new PlanError(110400007, 'not a video ffmpeg can read')
  }
  // a size is needed to count anything (the format's checks: planVideo, job.ts videoInputError)
  if (!probe.width || !probe.height) throw new PlanError(110400007, 'not a video')
  const bound = packetBound(probe.duration, probe.fps)
  let ts: Timestamps
  try {
    ts = await probeTimestamps(file, o.ffprobe, o.listingTimeoutMs, bound, { stream: probe.index, demuxer })
  } catch (e) {
    throw new PlanError(110400008, `cannot count the video's frames: ${(e as Error).message}`)
  }
  if (ts.truncated) throw new PlanError(110400008, timingError(ts, probe)!)
  const packets = ts.packets ?? ts.pts.length
  if (packets < 1) throw new PlanError(110400008, 'the video stream holds no frames')
  return { probe, packets: { ...ts, packets }, demuxer }
}

export interface PlanRequest {
  model: VideoModel
  /** The output asked for; null: the upright input's own size (an interpolation model without `resolution`). */
  resolution: [number, number] | null
  /** The request's `fps` / `slowmo` (server/video/interp.ts decideInterp). */
  body: { fps?: unknown; slowmo?: unknown }
  /** Output container (no dot). */
  ext: string
  prices: Prices
}

/** Mp of a size. */
const mp = (s: Size) => (s.width * s.height) / 1e6

/**
 * The output schedule's demand on the source frames, simulated as the worker runs it (server/jobs/video-interp.ts):
 * the output frames and, for interpolation after SR, the distinct source frames any output frame lies on or
 * between (each through SR once; the last frame once more when the schedule repeats it and it was not needed).
 */
export function scheduleDemand(schedule: FrameSchedule, frames: number): { outFrames: number; srFrames: number } {
  let last = -1
  let sr = 0
  const need = (i: number) => {
    if (i > last) {
      sr++
      last = i
    }
  }
  let out = 0
  for (;;) {
    const ps = schedule.take(frames, 4096)
    if (ps.length === 0) break
    out += ps.length
    for (const p of ps) {
      need(Math.floor(p))
      need(Math.ceil(p))
    }
  }
  for (;;) {
    const rest = schedule.finish(frames, 4096).length
    if (rest === 0) break
    out += rest
    need(frames - 1)
  }
  return { outFrames: out, srFrames: sr }
}

/**
 * The plan of a submission: refusals (PlanError) for what the model or the limits do not take, else the plan
 * with its price, and the frame-rate plan (server/video/interp.ts; null: no interpolation).
 */
export function planVideo(facts: VideoFacts, req: PlanRequest): { plan: VideoPlan; interp: InterpPlan | null } {
  const { probe: pr, packets: ts } = facts
  const { model } = req
  const unfit = videoInputError(pr, model)
  if (unfit) throw new PlanError(unfit.code, unfit.detail)
  const upright = displaySize(pr)
  const resolution: [number, number] = req.resolution ?? [upright.width, upright.height]
  const lim = model.limits
  if (resolution[0] * resolution[1] > lim.maxOutMP * 1e6) throw new PlanError(110400010, `${resolution[0]}x${resolution[1]} is over ${lim.maxOutMP} MP`)
  // decoded frames: at most the model's per-frame limit too (every frame is decoded whole before it is scaled)
  if (mp(upright) > lim.maxOutMP) throw new PlanError(110400009, `${upright.width}x${upright.height} frames are over ${lim.maxOutMP} MP`)
  const ip = decideInterp(req.body, {
    model: model.name, scale: model.scale, fps: pr.fps, fpsRational: pr.fpsRational, duration: pr.duration, ext: req.ext,
    maxSeconds: lim.maxSeconds,
  })
  if (!ip.ok) throw new PlanError(ip.code, ip.detail)
  if (ip.plan) {
    // the schedule follows the packets' times, the price the declared duration: they must agree (issue 22)
    const bad = timingError(ts, pr)
    if (bad) throw new PlanError(110400008, bad)
  }
  const sizes = videoNetwork(req.prices, model, upright, resolution)
  // the network's real output per frame: never over the model's per-frame limit (the tier caps it; own models too)
  if (mp(sizes.output) > lim.maxOutMP + 1e-9) throw new PlanError(110400010, `the network would output ${sizes.output.width}x${sizes.output.height} per frame, over ${lim.maxOutMP} MP`)
  const plan = shape(facts, model, sizes, ip.plan, pr.duration)
  const seconds = ip.plan ? ip.outSeconds : framesSeconds(facts.packets.packets, pr)
  const fps = ip.plan ? ip.outFps : pr.fps
  const netFrames = model.interpolation ? 0 : plan.srFrames
  const coins = videoJobPrice(req.prices, model, upright, resolution, fps, seconds, !!ip.plan, netFrames)
  return { plan: { ...plan, price: { tier: sizes.tier, seconds, fps, interpolated: !!ip.plan, coins } }, interp: ip.plan }
}

/** The frames and sizes of a job (no refusals): the submission's plan, and a job stored before plans existed. */
export function shape(
  facts: VideoFacts, model: Pick<VideoModel, 'interpolation'>, sizes: { input: Size; output: Size },
  interp: InterpPlan | null, declaredDuration: number,
): Omit<VideoPlan, 'price'> {
  const { probe: pr, packets: ts } = facts
  const frames = ts.packets
  const netIn = sizes.input
  const netOut = model.interpolation ? netIn : sizes.output
  let srFrames = model.interpolation ? 0 : frames
  let rifeFrames = 0
  let rifeSize = netIn
  let outFrames = frames
  if (interp) {
    const d = scheduleDemand(scheduleOf(ts, pr.fps, frames, interp, declaredDuration), frames)
    outFrames = d.outFrames
    rifeFrames = d.outFrames
    if (model.interpolation) srFrames = 0
    else if (interp.order === 'after') {
      srFrames = d.srFrames
      rifeSize = netOut
    } else srFrames = d.outFrames
  }
  const work = srFrames * mp(netOut) + rifeFrames * mp(rifeSize)
  return { stream: pr.index, demuxer: facts.demuxer, frames, netIn, netOut, srFrames, rifeFrames, rifeSize, outFrames, work }
}
