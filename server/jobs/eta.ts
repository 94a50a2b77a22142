/**
 * Time estimates for task-status (`eta_seconds` while a job runs; `queue_position` while it waits comes from the
 * store's count of waiting jobs ahead of it, `Store.jobsAhead`).
 *
 * Measured, never constant: when a run completes, its time per unit of work is folded into an exponential moving
 * average per (model, engine backend) in the store (`throughput`, shared by every worker, kept across restarts).
 * A unit is one megapixel of network input: a photo's width x height, a video's summed over its frames (the
 * cost of a model grows with it; the model's scale is fixed per model, so per-model figures absorb it). A
 * video's frames are its frame count only where that agrees with what was priced (declared duration x rate,
 * within `FRAMES_AGREE`); else the priced count: a crafted nb_frames (10^6 in a 1 s file, or 1) would
 * otherwise move everyone's figure by orders of magnitude (issue 22). A job with a video plan (server/video/plan.ts)
 * reads it: the frames through the model's network (interpolation's frames for an interpolation model) x the
 * network's input megapixels (the plan's pre-scaled size).
 *
 * While a job runs, the process that runs it writes the expected finish (`jobs.eta_at`, ms epoch) at the start
 * and with every progress write (server/jobs/lifecycle.ts); task-status answers `ceil((eta_at - now) / 1 s)`.
 * The remaining time blends two figures, weighted by the progress f (0..1):
 *   history   (1 - f) x expected run time (the moving average x the job's units)
 *   this run  elapsed x (1 - f) / f       (its own observed speed; trusted more as it advances)
 * With no history, the job's own speed once it has reached 5 %; before that the estimate is unknown (null).
 */
import type { Store, Throughput } from '../store/types.js'
import type { TypedJob } from './params.js'

/** Weight of the newest run in the moving average. */
export const ETA_ALPHA = 0.3
/** Progress (0..1) from which a run's own speed is used when there is no history. */
const OWN_SPEED_FROM = 0.05
/** How long a (model, backend) figure read from the store is reused by this process. */
const CACHE_MS = 10_000
/** A video's frame count is used when within this fraction (+ 2 frames) of duration x rate. */
const FRAMES_AGREE = 0.1

/** Megapixels of network input the job processes (video: over all its frames); null when unknown. */
export function workUnits(job: TypedJob): number | null {
  const { width, height } = job.params.input
  if (!(width > 0 && height > 0)) return null
  const mp = (width * height) / 1e6
  if (job.kind === 'photo') return mp
  if (job.kind === 'segment') return (job.params.upright.width * job.params.upright.height) / 1e6
  const plan = job.params.plan
  if (plan) {
    const n = plan.srFrames > 0 ? plan.srFrames : plan.rifeFrames || plan.frames
    return n > 0 ? (n * plan.netIn.width * plan.netIn.height) / 1e6 : null
  }
  const { frames, duration, fps } = job.params.input
  const priced = Math.round(duration * fps)
  const n = frames > 0 && (!(priced > 0) || Math.abs(frames - priced) <= priced * FRAMES_AGREE + 2) ? frames : priced
  return n > 0 ? n * mp : null
}

/** Remaining ms of a run (see the header), or null when unknown. */
export function remainingMs(expectedMs: number | null, elapsedMs: number, progress: number): number | null {
  const f = Math.max(0, Math.min(0.99, progress / 100))
  const own = f > 0 ? (elapsedMs * (1 - f)) / f : null
  if (expectedMs === null) return own !== null && f >= OWN_SPEED_FROM ? own : null
  const hist = f > 0 ? (1 - f) * expectedMs : Math.max(0, expectedMs - elapsedMs)
  return own === null ? hist : (1 - f) * hist + f * own
}

export class EtaModel {
  private readonly cache = new Map<string, { v: Throughput | null; at: number }>()

  /** `backend()`: the engine backend this process runs jobs on ('cpu' | 'gpu'), null before the engine loaded. */
  constructor(private readonly store: Pick<Store, 'throughput' | 'recordThroughput'>, private readonly backend: () => string | null) {}

  /** Expected run time of the job on this process's backend (ms), or null without history. */
  async expectedMs(job: TypedJob): Promise<number | null> {
    const units = workUnits(job)
    const backend = this.backend()
    if (units === null || !backend) return null
    const k = `${job.model}\u0000${backend}`
    let c = this.cache.get(k)
    if (!c || Date.now() - c.at > CACHE_MS) {
      c = { v: await this.store.throughput(job.model, backend).catch(() => null), at: Date.now() }
      this.cache.set(k, c)
    }
    return c.v ? c.v.msPerUnit * units : null
  }

  /** A completed run of `ms`: folded into the (model, backend) moving average. */
  async record(job: TypedJob, ms: number): Promise<void> {
    const units = workUnits(job)
    const backend = this.backend()
    if (units === null || !backend || !(ms > 0)) return
    await this.store.recordThroughput(job.model, backend, ms / units, ETA_ALPHA)
    this.cache.delete(`${job.model}\u0000${backend}`)
  }
}
