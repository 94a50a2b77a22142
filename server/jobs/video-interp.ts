/**
 * The frame processor of a video job with frame interpolation (`fps` / `slowmo`): each decoded batch goes
 * through the model's super-resolution and the engine's interpolateFrames in the plan's order
 * (server/video/interp.ts `interpOrder`), the output frames the schedule (`FrameSchedule`) asks for come
 * out. The last frame of each batch is carried into the next one (in the space interpolation works in:
 * input size before SR, output size after it), so every pair of neighbours is interpolated whole; `flush`
 * repeats the last frame to the end of the duration.
 *
 * Bounded (issue 22): the schedule may ask for many frames per source frame (a timestamp gap, a long last
 * frame; the schedule itself stops at the priced count), so positions go to interpolateFrames, and repeats
 * are copied, at most `maxFrames` at a time, handed on piece by piece (`ProcessedFrames.more`): memory holds
 * a few pieces, never one buffer of every in-between frame. A batch whose positions fit one piece makes
 * exactly the call it made before (the whole window). Once the schedule is done, later batches are skipped
 * (no SR for frames no output frame shows).
 */
import type { FrameProcessor, ProcessedFrames } from '../video/transcode.js'
import type { FrameSchedule, InterpPlan } from '../video/interp.js'

export interface InterpSteps {
  /** The model's per-frame enhancement (enhanceFrames through the pool); null for an interpolation model (the catalog's `interpolation`: frame_interpolation). */
  enhance: FrameProcessor | null
  /** The engine's interpolateFrames: one output frame per position of the `count` frames given. */
  interpolate: (frames: Buffer, width: number, height: number, count: number, positions: number[]) => Promise<{ data: Buffer; cuts: number[] }>
}

export interface InterpOptions {
  /** Most output frames per interpolateFrames call and per piece handed on (the runner: twice the engine
   *  batch, server/jobs/video.ts). Default 16. */
  maxFrames?: number
}

export interface InterpProcessor {
  process: FrameProcessor
  flush: () => Promise<ProcessedFrames | null>
  /** Output frames copied at scene cuts so far. */
  cuts: () => number
}

export function interpProcessor(schedule: FrameSchedule, order: InterpPlan['order'], steps: InterpSteps, opts: InterpOptions = {}): InterpProcessor {
  const max = Math.max(1, Math.floor(opts.maxFrames ?? 16))
  let decoded = 0
  let cuts = 0
  /** The previous batch's last frame, in the space interpolation runs in. */
  let carry: { data: Buffer; width: number; height: number } | null = null
  /** Last frame after every step (the output's size): what `flush` repeats. */
  let lastOut: { data: Buffer; width: number; height: number } | null = null
  /** Size of the frames handed on so far (what a batch with no output frame reports). */
  let outSize: { width: number; height: number } | null = null

  const frameOf = (b: Buffer, w: number, h: number, i: number) => Buffer.from(b.subarray(i * w * h * 3, (i + 1) * w * h * 3))
  const repeat = (f: Buffer, n: number) => Buffer.concat(Array.from({ length: n }, () => f))
  const none = (w: number, h: number): ProcessedFrames => ({ data: Buffer.alloc(0), ...(outSize ?? { width: w, height: h }), count: 0 })
  const handed = (p: ProcessedFrames): ProcessedFrames => {
    outSize = { width: p.width, height: p.height }
    return p
  }

  /** The frames of one batch (with the carried frame) in the space interpolation runs in. */
  interface Window { data: Buffer; n: number; base: number; width: number; height: number }

  /** The next piece of a window's output: at most `max` positions; null when the window has no more. */
  const piece = async (win: Window, first: boolean): Promise<ProcessedFrames | null> => {
    const ps = schedule.take(decoded, max).map((p) => p - win.base)
    if (ps.length === 0) return null
    const more = schedule.ready(decoded)
    const { width: W, height: H } = win
    let frames = win.data
    let count = win.n
    let positions = ps
    if (!first || more) {
      // One of several pieces: only the frames these positions lie between (the window stays whole for the
      // next piece; what is given to the engine is transferred). Integer shifts keep every t exact.
      const fb = W * H * 3
      const lo = Math.floor(ps[0])
      const hi = Math.min(win.n - 1, Math.ceil(ps[ps.length - 1]))
      frames = Buffer.from(win.data.subarray(lo * fb, (hi + 1) * fb))
      count = hi - lo + 1
      positions = ps.map((p) => p - lo)
    }
    const made = await steps.interpolate(frames, W, H, count, positions)
    cuts += made.cuts.length
    const next = more ? { more: () => piece(win, false) } : {}
    if (order === 'after' || !steps.enhance) return handed({ data: made.data, width: W, height: H, count: ps.length, ...next })
    const out = await steps.enhance(made.data, W, H, ps.length)
    return handed({ ...out, count: ps.length, ...next })
  }

  const process: FrameProcessor = async (frames, w, h, count) => {
    // Every output frame made (the priced count reached): the rest of the source is not needed.
    if (schedule.done) {
      decoded += count
      return none(w, h)
    }
    let space = { data: frames, width: w, height: h }
    if (order === 'after' && steps.enhance) {
      const sr = await steps.enhance(frames, w, h, count)
      space = { data: sr.data, width: sr.width, height: sr.height }
    }
    const { width: W, height: H } = space
    const base = decoded - (carry ? 1 : 0)
    decoded += count
    const window = carry ? Buffer.concat([carry.data, space.data]) : space.data
    const n = count + (carry ? 1 : 0)
    carry = { data: frameOf(space.data, W, H, count - 1), width: W, height: H }
    if (order === 'after' || !steps.enhance) lastOut = carry
    return (await piece({ data: window, n, base, width: W, height: H }, true)) ?? none(W, H)
  }

  const flush = async (): Promise<ProcessedFrames | null> => {
    if (!carry) return null
    const rest = schedule.finish(decoded, max).length
    if (rest === 0) return null
    // The last source frame, repeated: enhanced once (before-order) and copied, `max` at a time.
    if (!lastOut && steps.enhance) {
      const c: { data: Buffer; width: number; height: number } = carry
      const sr = await steps.enhance(Buffer.from(c.data), c.width, c.height, 1)
      lastOut = { data: sr.data, width: sr.width, height: sr.height }
    }
    const last = lastOut ?? carry
    const repeats = (k: number): ProcessedFrames => ({
      data: repeat(last.data, k), width: last.width, height: last.height, count: k,
      ...(schedule.done ? {} : {
        more: async () => {
          const k2 = schedule.finish(decoded, max).length
          return k2 ? repeats(k2) : null
        },
      }),
    })
    return repeats(rest)
  }

  return { process, flush, cuts: () => cuts }
}
