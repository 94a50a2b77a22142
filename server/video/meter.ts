/**
 * The work meter of one video job (issue 29), on the gateway side: every call to a network is counted before it is
 * made (frames x output megapixels: the model's enhanceFrames, interpolation's interpolateFrames) against the work
 * the job's plan priced (server/video/plan.ts `work`), and decoded frames against the plan's frame count. A job
 * whose work would pass its plan by more than the margin (2 % + one frame of the largest network output) stops
 * with WorkLimitError (the job fails: the budget error code, server/jobs/video.ts). The engine's own per-call
 * `budget` (when the addon has it) gets the meter's remaining work, so the two bounds agree.
 */

/** The margin over the plan: this fraction of the planned work / frames, + one frame. */
export const WORK_MARGIN = { ratio: 0.02, frames: 1 } as const

export class WorkLimitError extends Error {
  readonly code = 'budget_exceeded'
  constructor(message: string) {
    super(message)
    this.name = 'WorkLimitError'
  }
}

export class WorkMeter {
  private used = 0
  private decoded = 0
  /** Most work units (output megapixels) and decoded frames allowed. */
  readonly workLimit: number
  readonly frameLimit: number

  /** `work`: planned work (MP); `frameMp`: the largest network output per frame (MP); `frames`: planned source frames. */
  constructor(work: number, frameMp: number, frames: number) {
    this.workLimit = work * (1 + WORK_MARGIN.ratio) + frameMp * WORK_MARGIN.frames + 1e-9
    this.frameLimit = Math.floor(frames * (1 + WORK_MARGIN.ratio)) + WORK_MARGIN.frames
  }

  /** Work done so far (MP). */
  get work(): number {
    return this.used
  }

  /** What is left of the budget (MP), for the engine's per-call `budget`. */
  get remaining(): number {
    return Math.max(0, this.workLimit - this.used)
  }

  /** Counts `frames` of width x height out of a network; throws past the limit (before the call is made). */
  charge(frames: number, width: number, height: number, what: string): void {
    const add = (frames * width * height) / 1e6
    if (this.used + add > this.workLimit) {
      throw new WorkLimitError(`the job exceeded the work its price covers: ${what} of ${frames} frames of ${width}x${height} would make ${(this.used + add).toFixed(3)} MP of network output, over the ${this.workLimit.toFixed(3)} MP priced (+${WORK_MARGIN.ratio * 100} % + ${WORK_MARGIN.frames} frame)`)
    }
    this.used += add
  }

  /** Counts decoded source frames; throws past the plan's frames + the margin. */
  decode(frames: number): void {
    this.decoded += frames
    if (this.decoded > this.frameLimit) {
      throw new WorkLimitError(`the video decodes into more frames than were counted and priced (${this.decoded} > ${this.frameLimit})`)
    }
  }
}
