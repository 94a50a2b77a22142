/**
 * Frame interpolation on `POST /api/video-enhancer`: the request fields' rules (`fps`, `slowmo`), the order
 * of interpolation and super-resolution, and the output frame schedule (which source position each output
 * frame shows). The engine makes the frames (the addon's `interpolateFrames`: RIFE v4.6, scene cuts copied).
 *
 * Rules (compat.md: clients already send an `fps` field the old service ignored, so `fps` is read leniently):
 * - `fps` is meaningful only as a finite number above the source's rate by more than 1 % (NTSC rounding:
 *   30 for a 29.97 source is the source's rate). Anything else (absent, null, a string, a boolean, a value at
 *   or below the source rate) is ignored, as before: the request answers exactly as without it.
 * - A meaningful `fps`: at most 120 and at most 8x the source rate (-> 100403000); GIF output at most 50
 *   (GIF delays are whole centiseconds and players slow down shorter ones).
 * - `slowmo` is new (no old client sends it), so it is strict: absent or null, else 2, 4 or 8 (-> 100403000).
 *   Each source second is shown over `slowmo` seconds at the output rate (`fps` if meaningful, else the
 *   source's): frames made per source second = output rate x slowmo, at most 8x the source rate. Audio and
 *   subtitles are dropped (their timing no longer applies); the duration limit applies to the stretched output.
 * - An interpolation model (the catalog's `interpolation`: frame_interpolation) needs a meaningful `fps` or
 *   `slowmo` (-> 100403000).
 * - The price covers the declared duration, the schedule follows the packets' times: a file whose video
 *   timestamps run past its declared duration (a gap, a last packet lasting an hour) is refused at submission
 *   (`timingError` -> 110400008, before any debit), and the worker never makes more than the priced frames
 *   (`pricedFrames`, the schedule's `maxTotal`), in pieces of a bounded size (server/jobs/video-interp.ts).
 */
import { videoModel } from '../catalog.js'

export const INTERP_LIMITS = {
  /** Highest output frame rate. */
  maxFps: 120,
  /** Frames made per source second, at most this times the source rate. */
  maxFactor: 8,
  slowmo: [2, 4, 8] as readonly number[],
  /** GIF output: highest frame rate (whole-centisecond delays of 2 or more). */
  gifMaxFps: 50,
  /** An `fps` within this fraction above the source rate is the source rate. */
  sameRate: 0.01,
  /** Submission: the video's timestamps (first packet to the end of the last) may run this far past the
   *  declared duration (a fraction of it plus seconds) before the file is refused (`timingError`). */
  timing: { ratio: 0.05, seconds: 1 },
} as const

/** What a job does about frame rate (stored with the job: server/jobs/params.ts VideoParams.interp). */
export interface InterpPlan {
  /** Output frame rate (the encoder's rate) as ffmpeg reads it: "60", "30000/1001". */
  fps: string
  /** 1 = none; 2, 4, 8 = slow motion (duration x slowmo, audio dropped). */
  slowmo: number
  /** Interpolate before super-resolution (at the input size) or after it (at the output size). */
  order: 'before' | 'after'
}

export type InterpDecision =
  | { ok: true; plan: InterpPlan | null; outFps: number; outSeconds: number; outFrames: number }
  | { ok: false; code: 100403000 | 110400011; detail: string }

/** The cheaper order (`npm run bench:interp-order`, docs/models.md "Frame interpolation"): one RIFE frame costs a
 *  fraction of one SR frame at the same size (RIFE works mostly at 1/4 .. 1/32 scale), so SR first and RIFE
 *  at the output size (after) wins unless the output has many times the pixels: 1x and 2x models run after,
 *  4x (16x the pixels) before. After also gives RIFE the enhanced frames (SR never sees RIFE's artefacts). */
export function interpOrder(scale: number): 'before' | 'after' {
  return scale >= 4 ? 'before' : 'after'
}

const rate = (s: string): number => {
  const [n, d] = s.split('/').map(Number)
  return d ? n / d : n
}

/** What is wrong with a `slowmo` value (null: fine, or absent). Checked before the input is fetched. */
export function slowmoError(v: unknown): string | null {
  if (v === undefined || v === null) return null
  return typeof v === 'number' && INTERP_LIMITS.slowmo.includes(v) ? null : `slowmo must be 2, 4 or 8 (got ${JSON.stringify(v)})`
}

/**
 * The decision for one request: `plan` null keeps the old path (same frames, same price); else the output
 * rate and the stretched duration the price and limits use.
 */
export function decideInterp(
  body: { fps?: unknown; slowmo?: unknown },
  src: { model: string; scale: number; fps: number; fpsRational: string; duration: number; ext: string; maxSeconds: number },
): InterpDecision {
  const L = INTERP_LIMITS
  const interpolation = videoModel(src.model)?.interpolation ?? false
  const bad = (detail: string) => ({ ok: false as const, code: 100403000 as const, detail })
  let slowmo = 1
  const se = slowmoError(body.slowmo)
  if (se) return bad(se)
  if (typeof body.slowmo === 'number') slowmo = body.slowmo
  const srcFps = src.fps > 0 ? src.fps : rate(src.fpsRational)
  const f = body.fps
  const fps = typeof f === 'number' && Number.isFinite(f) && f > srcFps * (1 + L.sameRate) ? f : null
  const none = { ok: true as const, plan: null, outFps: srcFps, outSeconds: src.duration, outFrames: Math.round(src.duration * srcFps) }
  if (fps === null && slowmo === 1) {
    if (interpolation) return bad(`${src.model} needs fps above the source's ${+srcFps.toFixed(3)} fps, or slowmo`)
    return none
  }
  const outFps = fps ?? srcFps
  if (outFps > L.maxFps) return bad(`fps ${fps} is above ${L.maxFps}`)
  const made = outFps * slowmo
  if (made > srcFps * L.maxFactor * (1 + 1e-9)) {
    return bad(`${fps ? `fps ${fps}` : ''}${fps && slowmo > 1 ? ' with ' : ''}${slowmo > 1 ? `slowmo ${slowmo}` : ''} makes ${+(made / srcFps).toFixed(2)}x the source's frames (${+srcFps.toFixed(3)} fps); at most ${L.maxFactor}x`)
  }
  if (src.ext === 'gif' && outFps > L.gifMaxFps) return bad(`GIF output holds at most ${L.gifMaxFps} fps`)
  const outSeconds = src.duration * slowmo
  if (outSeconds > src.maxSeconds) return { ok: false, code: 110400011, detail: `slow motion makes ${outSeconds.toFixed(1)} s, over ${src.maxSeconds} s` }
  const outFrames = Math.round(outSeconds * outFps)
  if (outFrames > src.maxSeconds * L.maxFps) return { ok: false, code: 110400011, detail: `${outFrames} output frames` }
  const plan: InterpPlan = {
    fps: fps === null ? src.fpsRational : String(fps),
    slowmo,
    order: interpOrder(interpolation ? 1 : src.scale),
  }
  return { ok: true, plan, outFps, outSeconds, outFrames }
}

/** Output frames the price covers (decideInterp's `outFrames`): the declared duration x slowmo at the plan's
 *  rate. The worker's schedule stops there. */
export function pricedFrames(duration: number, plan: Pick<InterpPlan, 'fps' | 'slowmo'>): number {
  return Math.round(duration * plan.slowmo * rate(plan.fps))
}

/** Most packets read for `timingError` (memory: 8 bytes each): 4x the declared duration at the declared rate,
 *  + 1000. An interpolated source is at most 120 fps (the output's cap), so at most ~1.7 M for an hour. */
export function packetBound(duration: number, fps: number): number {
  return Math.ceil(Math.max(0, duration) * Math.min(Math.max(fps, 1), INTERP_LIMITS.maxFps) * 4) + 1000
}

/**
 * What is wrong with a video's packet timestamps for interpolation (null: nothing), checked at submission
 * before any debit: the price uses the declared duration, the schedule the packets' times, so they must
 * agree: from the first packet to the end of the last (its own duration, else one frame at `fps`) at most
 * `INTERP_LIMITS.timing` past the declared duration. Gaps inside the duration are variable frame rate, not
 * refused. `truncated`: the packets were not all read (more of them than the duration holds).
 */
export function timingError(ts: { pts: number[]; lastDuration?: number; truncated?: boolean }, src: { duration: number; fps: number }): string | null {
  const declared = `the file declares ${+src.duration.toFixed(3)} s`
  if (ts.truncated) return `video has more packets than ${declared} holds at ${+src.fps.toFixed(3)} fps; its timestamps disagree with the duration it declares`
  if (ts.pts.length === 0) return null
  let lo = Infinity
  let hi = -Infinity
  for (const p of ts.pts) {
    if (p < lo) lo = p
    if (p > hi) hi = p
  }
  const last = ts.lastDuration && ts.lastDuration > 0 ? ts.lastDuration : src.fps > 0 ? 1 / src.fps : 0
  const span = hi - lo + last
  const { ratio, seconds } = INTERP_LIMITS.timing
  if (!(span <= src.duration * (1 + ratio) + seconds)) {
    return `video timestamps run ${+span.toFixed(3)} s (packets from ${+lo.toFixed(3)} s to ${+hi.toFixed(3)} s, the last lasting ${+last.toFixed(3)} s) but ${declared}; interpolation needs timestamps that agree with the declared duration`
  }
  return null
}

/**
 * The seconds a video without interpolation is priced for: its declared duration, unless its packets (one
 * frame each through the networks) are clearly more than that duration holds at its rate (over 10 % + 2
 * frames): then the packets' count at that rate. Honest files keep the declared duration exactly.
 */
export function framesSeconds(packets: number, src: { duration: number; fps: number }): number {
  if (!(src.fps > 0)) return src.duration
  return packets > src.duration * src.fps * 1.1 + 2 ? packets / src.fps : src.duration
}

/**
 * The output frame schedule of one video: output frame k shows the source at time k / (outFps x slowmo)
 * after the first frame, as a position in frame index space (`i + t`: t of the way from frame i to i + 1),
 * over the source frames' own times (variable frame rate and odd timestamps included), so the output is
 * constant-rate and lasts as long as the source (times slowmo). Positions within 0.5 ms of a frame snap
 * to it (a copy, no network run). After the last source frame, the last frame repeats until the duration
 * is filled (the last frame lasts one median interval).
 *
 * Streaming: `take(have, max)` gives the positions that need only frames below `have` (decoded so far), in
 * order, each once, at most `max` at a time; `finish(have, max)` the rest, clamped to the last frame decoded.
 * `maxTotal` caps the output frames (the priced count: the timestamps or the frame count may claim more).
 */
export class FrameSchedule {
  private readonly ts: number[]
  private readonly step: number
  private readonly interval: number
  /** Output frames in all. */
  readonly total: number
  private k = 0
  private i = 0

  /**
   * @param times source frame presentation times (seconds, any origin, sorted); may be shorter than the
   *   decoded frames (continued at the median interval) or empty (constant rate from `srcFps`)
   * @param srcFps the source's average rate (for missing times and the last frame's length)
   * @param frames expected source frames
   * @param lastDuration how long the last frame lasts (its packet's duration; 0: the median interval)
   * @param maxTotal at most this many output frames (the priced count)
   */
  constructor(times: number[], srcFps: number, frames: number, outFps: number, slowmo: number, lastDuration = 0, maxTotal = Infinity) {
    const t0 = times.length ? times[0] : 0
    const rel = times.map((x) => x - t0)
    const d: number[] = []
    for (let j = 1; j < rel.length; j++) d.push(rel[j] - rel[j - 1])
    const sorted = d.filter((x) => x > 0).sort((a, b) => a - b)
    const interval = sorted.length ? sorted[sorted.length >> 1] : 1 / srcFps
    this.ts = rel.length ? rel : [0]
    this.interval = interval
    const n = Math.max(frames, this.ts.length)
    const end = this.time(n - 1) + (n === this.ts.length && lastDuration > 0 ? lastDuration : interval)
    this.step = 1 / (outFps * slowmo)
    this.total = Math.max(1, Math.min(Math.round(end / this.step), Math.floor(maxTotal)))
  }

  /** Every output frame has been given out. */
  get done(): boolean {
    return this.k >= this.total
  }

  /** Whether `take(have)` has a position now. */
  ready(have: number): boolean {
    return this.k < this.total && Math.ceil(this.position(this.k)) <= have - 1
  }

  /** Time of source frame j (continued at the median interval past the known times). */
  private time(j: number): number {
    const n = this.ts.length
    return j < n ? this.ts[j] : this.ts[n - 1] + (j - n + 1) * this.interval
  }

  /** Position of output frame k in source frame index space. */
  position(k: number): number {
    const T = k * this.step
    while (this.time(this.i + 1) <= T) this.i++
    const a = this.time(this.i)
    const b = this.time(this.i + 1)
    let p = this.i + (b > a ? (T - a) / (b - a) : 0)
    const snap = 0.0005
    if (T - a < snap) p = this.i
    else if (b - T < snap) p = this.i + 1
    return p
  }

  /** Positions (global) of the next output frames that need only source frames 0 .. have - 1. */
  take(have: number, max = Infinity): number[] {
    const out: number[] = []
    while (this.k < this.total && out.length < max) {
      const p = this.position(this.k)
      if (Math.ceil(p) > have - 1) break
      out.push(p)
      this.k++
    }
    return out
  }

  /** The remaining positions once the source has ended after `have` frames: the last frame, repeated. */
  finish(have: number, max = Infinity): number[] {
    const out: number[] = []
    for (; this.k < this.total && out.length < max; this.k++) out.push(Math.min(this.position(this.k), have - 1))
    return out
  }
}

/** The schedule of an interpolated job (the same in the plan and in the worker). */
export function scheduleOf(ts: { pts: number[]; lastDuration?: number }, fps: number, frames: number, interp: Pick<InterpPlan, 'fps' | 'slowmo'>, declaredDuration: number): FrameSchedule {
  const [num, den] = interp.fps.split('/').map(Number)
  return new FrameSchedule(ts.pts, fps, frames, den ? num / den : num, interp.slowmo, ts.lastDuration, pricedFrames(declaredDuration, interp))
}
