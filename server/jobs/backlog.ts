/**
 * The queue's backlog in seconds of engine work: the autoscaling signal for workers (`lucent_queue_backlog_seconds`,
 * docs/deploy.md "Autoscaling workers: the signal"), better than a job count because a 4K video and a thumbnail
 * are not the same amount of work.
 *
 * What it is: the sum, over every job the store holds as CONVERTING (waiting, delayed for a retry, or running: the
 * store is the truth for the in-process queue and BullMQ alike), of the job's expected run time x the share of it
 * not done yet (1 - progress). The expected run time is the one task-status's ETA uses (server/jobs/eta.ts): the
 * measured ms per megapixel of the job's model on the workers' backend x the job's megapixels of network input
 * (`workUnits`). Not divided by anything: seconds of ONE job slot; N idle slots clear it in about backlog / N s.
 *
 * Which backend's figure: the backend most live workers run (ties: gpu), else the other one's for a model only
 * measured there. A job whose model has no measurement on either backend (a new deployment, a new model) is not
 * guessed: it is counted in `unestimated` (`lucent_queue_backlog_unestimated_jobs`), which the chart's KEDA query
 * adds at a configured number of seconds each.
 *
 * Cost: one read of the CONVERTING jobs (the same query the queue reconciler runs) and one throughput read per
 * model in them, at most once per `CACHE_MS` per process however often it is scraped.
 */
import type { Store, Throughput } from '../store/types.js'
import { decodeJob } from './params.js'
import { workUnits } from './eta.js'

export interface Backlog {
  /** Estimated seconds of engine work the CONVERTING jobs still need (one job slot's time). */
  seconds: number
  /** CONVERTING jobs without an estimate (no measured speed for their model, or no known size). */
  unestimated: number
  /** CONVERTING jobs (waiting, delayed or running). */
  jobs: number
}

/** A computed backlog is reused for this long: scrapes by several Prometheus servers cost one read. */
const CACHE_MS = 2_000

export class QueueBacklog {
  private last: { at: number; value: Promise<Backlog> } | null = null

  /** `backends()`: the engine backends of the live workers, one entry per worker ('gpu' | 'cpu' | 'starting'). */
  constructor(private readonly store: Pick<Store, 'jobsByStatus' | 'throughput'>, private readonly backends: () => Promise<string[]>) {}

  /** The backlog now (a cached answer up to `CACHE_MS` old). */
  get(): Promise<Backlog> {
    const now = Date.now()
    if (!this.last || now - this.last.at > CACHE_MS) {
      const value = this.compute()
      this.last = { at: now, value }
      value.catch(() => { if (this.last?.value === value) this.last = null })
    }
    return this.last.value
  }

  private async compute(): Promise<Backlog> {
    const [jobs, workerBackends] = await Promise.all([this.store.jobsByStatus('CONVERTING'), this.backends().catch(() => [])])
    const order = backendOrder(workerBackends)
    const speeds = new Map<string, Promise<Throughput | null>>()
    const speed = (model: string) => {
      let s = speeds.get(model)
      if (!s) {
        s = (async () => {
          for (const b of order) {
            const t = await this.store.throughput(model, b).catch(() => null)
            if (t && t.msPerUnit > 0) return t
          }
          return null
        })()
        speeds.set(model, s)
      }
      return s
    }
    let ms = 0
    let unestimated = 0
    for (const job of jobs) {
      const typed = decodeJob(job)
      const units = typeof typed === 'string' ? null : workUnits(typed)
      const t = units === null ? null : await speed(job.model)
      if (units === null || !t) {
        unestimated++
        continue
      }
      ms += t.msPerUnit * units * (1 - Math.max(0, Math.min(100, job.progress)) / 100)
    }
    return { seconds: ms / 1000, unestimated, jobs: jobs.length }
  }
}

/** The backends whose measurements count, the one most workers run first (ties and no worker: gpu first). */
export function backendOrder(workerBackends: string[]): string[] {
  const n = (b: string) => workerBackends.filter((w) => w === b).length
  return n('cpu') > n('gpu') ? ['cpu', 'gpu'] : ['gpu', 'cpu']
}
