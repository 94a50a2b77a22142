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
 * Once the schedule is done, later batches are skipped.
 *
 * Super-resolution only where the output needs it (issue 29): with SR after interpolation's order (1x / 2x
 * models), only the source frames some output frame lies on or between go through SR (each once: the last two
^ * enhanced are kept for the next piece / batch / the flush); interpolation gets those frames, compacted
 * (a pair of neighbours stays a pair, so every position keeps its t). A packet flood (1,000 frames in half a
 * second, `fps: 8`) sends a handful of frames through SR, not 1,000. server/video/plan.ts `scheduleDemand`
 * counts the same frames for the price and the work budget.
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
  /** Frames per enhance call (SR of source frames): half a piece. */
  const srBatch = Math.max(1, Math.ceil(max / 2))
  let decoded = 0
  let cuts = 0
  /** The source frames the current batch made available: [base, base + n), the previous batch's last one first. */
  let raw: { data: Buffer; base: number; n: number; width: number; height: number } | null = null
  /** SR after: the two highest source frames enhanced so far (positions only move forward: a piece may start
   *  between the last pair of the one before). */
  let srKept = new Map<number, Buffer>()
  let srSize: { width: number; height: number } | null = null
  /** Size of the frames handed on so far (what a batch with no output frame reports). */
  let outSize: { width: number; height: number } | null = null

  const frameOf = (b: Buffer, w: number, h: number, i: number) => Buffer.from(b.subarray(i * w * h * 3, (i + 1) * w * h * 3))
  const rawFrame = (i: number) => frameOf(raw!.data, raw!.width, raw!.height, i - raw!.base)
  const repeat = (f: Buffer, n: number) => Buffer.concat(Array.from({ length: n }, () => f))
  const none = (w: number, h: number): ProcessedFrames => ({ data: Buffer.alloc(0), ...(outSize ?? { width: w, height: h }), count: 0 })
  const handed = (p: ProcessedFrames): ProcessedFrames => {
    outSize = { width: p.width, height: p.height }
    return p
  }

  /** The enhanced source frames `idx` (ascending, distinct), each enhanced at most once. */
  const enhanced = async (idx: number[]): Promise<{ frames: Buffer[]; width: number; height: number }> => {
    const todo = idx.filter((i) => !srKept.has(i))
    const done = new Map(srKept)
    for (let k = 0; k < todo.length; k += srBatch) {
      const part = todo.slice(k, k + srBatch)
      const sr = await steps.enhance!(Buffer.concat(part.map(rawFrame)), raw!.width, raw!.height, part.length)
      srSize = { width: sr.width, height: sr.height }
      part.forEach((i, j) => done.set(i, frameOf(sr.data, sr.width, sr.height, j)))
    }
    const frames = idx.map((i) => done.get(i)!)
    srKept = new Map(idx.slice(-2).map((i) => [i, done.get(i)!]))
    return { frames, ...srSize! }
  }

  /** The next piece of output: at most `max` positions; null when the frames decoded so far make no more. */
  const piece = async (): Promise<ProcessedFrames | null> => {
    const ps = schedule.take(decoded, max)
    if (ps.length === 0) return null
    const more = schedule.ready(decoded)
    // the source frames these positions lie on or between, compacted: p -> (its left frame's place) + t
    const idx: number[] = []
    for (const p of ps) {
      for (const i of [Math.floor(p), Math.ceil(p)]) if (!idx.length || i > idx[idx.length - 1]) idx.push(i)
    }
    const place = new Map(idx.map((i, k) => [i, k]))
    const local = ps.map((p) => place.get(Math.floor(p))! + (p - Math.floor(p)))
    let space: { frames: Buffer[]; width: number; height: number }
    if (order === 'after' && steps.enhance) space = await enhanced(idx)
    else space = { frames: idx.map(rawFrame), width: raw!.width, height: raw!.height }
    const { width: W, height: H } = space
    const made = await steps.interpolate(Buffer.concat(space.frames), W, H, idx.length, local)
    cuts += made.cuts.length
    const next = more ? { more: () => piece() } : {}
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
    const carry = raw && raw.base + raw.n === decoded ? rawFrame(decoded - 1) : null
    raw = carry
      ? { data: Buffer.concat([carry, frames]), base: decoded - 1, n: count + 1, width: w, height: h }
      : { data: frames, base: decoded, n: count, width: w, height: h }
    decoded += count
    return (await piece()) ?? none(w, h)
  }

  const flush = async (): Promise<ProcessedFrames | null> => {
    if (!raw) return null
    const rest = schedule.finish(decoded, max).length
    if (rest === 0) return null
    // The last source frame, repeated: through SR once (unless it was the last one enhanced) and copied, `max` at a time.
    let last: { data: Buffer; width: number; height: number }
    const lastIndex = decoded - 1
    if (!steps.enhance) last = { data: rawFrame(lastIndex), width: raw.width, height: raw.height }
    else if (order === 'after') {
      const e = await enhanced([lastIndex])
      last = { data: e.frames[0], width: e.width, height: e.height }
    } else {
      const sr = await steps.enhance(rawFrame(lastIndex), raw.width, raw.height, 1)
      last = { data: sr.data, width: sr.width, height: sr.height }
    }
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
