/**
 * task-status answers kept in memory, so that polling costs no store read and no link signing:
 * - a finished job (COMPLETED / ERROR) never changes again: its answer is kept (bounded, oldest first out);
 * - a converting job's answer is kept only where this process hears of every change to the job's state
 *   (`live`): the embedded single process, and an embedded cluster's HTTP children (the primary, which runs the
 *   jobs, broadcasts each change). Every progress / completion / failure / cancel the job lifecycle writes drops
 *   the kept answer (`changed`, subscribed with `jobs.onChange` where the Lucent context is made), and a kept
 *   converting answer is also dropped after `liveMs` at the latest, should a change ever come from elsewhere.
 *   With Redis or PostgreSQL (workers on other hosts) `live` is off. A waiting job's answer (queue_position) is
 *   dropped on ANY job change (a start, cancel or end ahead of it moves it up); a running job's eta_seconds is
 *   recomputed from its expected finish per answer.
 */
import { BoundedCache } from '../cache.js'
import { CANCELED_CODE } from '../errors.js'
import type { JobStatusRow } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import { segLinks } from '../segmentation.js'

export interface TaskStatusData {
  job_id: string; status: string; progress: number; original_url: string; consume_coins: number
  res_url?: string; error_code?: number; message?: string
  // extensions (docs/api.md)
  reason?: 'canceled'; eta_seconds?: number; queue_position?: number
  /** Extension: the PUT to the job's output_put_url (server/jobs/output-put.ts). */
  output_put?: { status: 'pending' | 'delivered' | 'failed'; http_status: number | null; attempts: number; error: string | null }
  /** Background removal (server/segmentation.ts): the grey mask (return_type mask / all) and the thumbnail (all). */
  mask_url?: string; thumbnail_url?: string
}

/** Kept links (original, result) stay valid as long as the objects are kept. */
export const RETENTION_MS = 7 * 24 * 3600 * 1000

/** The task-status answer of a job row (links signed by the storage): the one builder, for POST
 *  /api/task-status and the webhook payloads. */
export function taskStatusData(job: JobStatusRow, storage: Pick<MediaStorage, 'signedGetUrl'>): TaskStatusData {
  const data: TaskStatusData = {
    job_id: job.id,
    status: job.status,
    progress: job.status === 'COMPLETED' ? 100 : job.progress,
    original_url: storage.signedGetUrl(job.originalKey, job.createdAt + RETENTION_MS),
    consume_coins: job.coins,
  }
  if (job.status === 'COMPLETED' && job.resultKey) {
    const until = (job.completedAt ?? job.createdAt) + RETENTION_MS
    data.res_url = storage.signedGetUrl(job.resultKey, until)
    // a segmentation job's extra files (named by its result key: seg/<id>/subject.<return_type>.<ext>); none on other jobs
    const seg = segLinks(job.resultKey)
    if (seg?.mask) data.mask_url = storage.signedGetUrl(seg.mask, until)
    if (seg?.thumbnail) data.thumbnail_url = storage.signedGetUrl(seg.thumbnail, until)
  }
  if (job.status === 'ERROR') {
    data.error_code = job.errorCode ?? 100500006
    data.message = job.errorMessage ?? ''
    if (job.errorCode === CANCELED_CODE) data.reason = 'canceled'
  }
  return data
}

/** `etaAt`: a running job's expected finish (ms epoch): the route recomputes eta_seconds from it per answer. */
interface Kept { keyId: string; data: TaskStatusData; until: number; etaAt?: number }

export class StatusAnswers {
  private readonly kept = new BoundedCache<string, Kept>(20_000)
  /** Kept answers of waiting jobs (with a queue_position): every job change drops them. */
  private waiting = new Set<string>()

  constructor(private readonly live: boolean, private readonly liveMs = 2000) {}

  get(jobId: string, now = Date.now()): Kept | undefined {
    const k = this.kept.get(jobId)
    if (k && k.until < now) {
      this.kept.delete(jobId)
      return undefined
    }
    return k
  }

  put(jobId: string, keyId: string, data: TaskStatusData, now = Date.now(), etaAt?: number): void {
    if (data.status !== 'CONVERTING') this.kept.set(jobId, { keyId, data, until: Infinity })
    else if (this.live) {
      this.kept.set(jobId, { keyId, data, until: now + this.liveMs, etaAt })
      if (data.queue_position !== undefined) this.waiting.add(jobId)
    }
  }

  /** The job's state changed: its kept answer (if any) is dropped. */
  changed(jobId: string): void {
    this.kept.delete(jobId)
    if (this.waiting.size === 0) return
    for (const id of this.waiting) this.kept.delete(id)
    this.waiting = new Set()
  }
}
