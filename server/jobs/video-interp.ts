/**
 * The frame processor of a video job with frame interpolation (`fps` / `slowmo`): each decoded batch goes
 * through the model's super-resolution and the engine's interpolateFrames in the plan's order
 * (server/video/interp.ts `interpOrder`), the output frames the schedule (`FrameSchedule`) asks for come
 * out. The last frame of each batch is carried into the next one (in the space interpolation works in:
 * input size before SR, output size after it), so every pair of neighbours is interpolated whole; `flush`
 * repeats the last frame to the end of the duration.
 */
import type { FrameProcessor, ProcessedFrames } from '../video/transcode.js'
import type { FrameSchedule, InterpPlan } from '../video/interp.js'

export interface InterpSteps {
  /** The model's per-frame enhancement (enhanceFrames through the pool); null for frame_interpolation. */
  enhance: FrameProcessor | null
  /** The engine's interpolateFrames: one output frame per position of the `count` frames given. */
  interpolate: (frames: Buffer, width: number, height: number, count: number, positions: number[]) => Promise<{ data: Buffer; cuts: number[] }>
}

export interface InterpProcessor {
  process: FrameProcessor
  flush: () => Promise<ProcessedFrames | null>
  /** Output frames copied at scene cuts so far. */
  cuts: () => number
}

export function interpProcessor(schedule: FrameSchedule, order: InterpPlan['order'], steps: InterpSteps): InterpProcessor {
  let decoded = 0
  let cuts = 0
  /** The previous batch's last frame, in the space interpolation runs in. */
  let carry: { data: Buffer; width: number; height: number } | null = null
  /** Last frame after every step (the output's size): what `flush` repeats. */
  let lastOut: { data: Buffer; width: number; height: number } | null = null

  const frameOf = (b: Buffer, w: number, h: number, i: number) => Buffer.from(b.subarray(i * w * h * 3, (i + 1) * w * h * 3))
  const repeat = (f: Buffer, n: number) => Buffer.concat(Array.from({ length: n }, () => f))

  const process: FrameProcessor = async (frames, w, h, count) => {
    let space = { data: frames, width: w, height: h }
    if (order === 'after' && steps.enhance) {
      const sr = await steps.enhance(frames, w, h, count)
      space = { data: sr.data, width: sr.width, height: sr.height }
    }
    const { width: W, height: H } = space
    const base = decoded - (carry ? 1 : 0)
    decoded += count
    const positions = schedule.take(decoded).map((p) => p - base)
    const window = carry ? Buffer.concat([carry.data, space.data]) : space.data
    const n = count + (carry ? 1 : 0)
    carry = { data: frameOf(space.data, W, H, count - 1), width: W, height: H }
    if (order === 'after' || !steps.enhance) lastOut = carry
    if (positions.length === 0) return { data: Buffer.alloc(0), width: W, height: H, count: 0 }
    const made = await steps.interpolate(window, W, H, n, positions)
    cuts += made.cuts.length
    if (order === 'after' || !steps.enhance) return { data: made.data, width: W, height: H, count: positions.length }
    const out = await steps.enhance(made.data, W, H, positions.length)
    return { ...out, count: positions.length }
  }

  const flush = async (): Promise<ProcessedFrames | null> => {
    const rest = schedule.finish(decoded).length
    if (rest === 0 || !carry) return null
    // The last source frame, repeated: enhanced once (before-order) and copied.
    if (!lastOut && steps.enhance) {
      const c: { data: Buffer; width: number; height: number } = carry
      const sr = await steps.enhance(Buffer.from(c.data), c.width, c.height, 1)
      lastOut = { data: sr.data, width: sr.width, height: sr.height }
    }
    const last = lastOut ?? carry
    return { data: repeat(last.data, rest), width: last.width, height: last.height, count: rest }
  }

  return { process, flush, cuts: () => cuts }
}
