/**
 * task-status answers kept in memory, so that polling costs no store read and no link signing:
 * - a finished job (COMPLETED / ERROR) never changes again: its answer is kept (bounded, oldest first out);
 * - a converting job's answer is kept only where this process hears of every change to the job's state
 *   (`live`): the embedded single process, and an embedded cluster's HTTP children (the primary, which runs the
 *   jobs, broadcasts each change). Every progress / completion / failure / cancel the job lifecycle writes drops
 *   the kept answer (`changed`, subscribed with `jobs.onChange` where the Lucent context is made), and a kept
 *   converting answer is also dropped after `liveMs` at the latest, should a change ever come from elsewhere.
 *   With Redis or PostgreSQL (workers on other hosts) `live` is off.
 */
import { BoundedCache } from '../cache.js'

export interface TaskStatusData {
  job_id: string; status: string; progress: number; original_url: string; consume_coins: number
  res_url?: string; error_code?: number; message?: string
  /** Extension: the PUT to the job's output_put_url (server/jobs/output-put.ts). */
  output_put?: { status: 'pending' | 'delivered' | 'failed'; http_status: number | null; attempts: number; error: string | null }
}

interface Kept { keyId: string; data: TaskStatusData; until: number }

export class StatusAnswers {
  private readonly kept = new BoundedCache<string, Kept>(20_000)

  constructor(private readonly live: boolean, private readonly liveMs = 2000) {}

  get(jobId: string, now = Date.now()): Kept | undefined {
    const k = this.kept.get(jobId)
    if (k && k.until < now) {
      this.kept.delete(jobId)
      return undefined
    }
    return k
  }

  put(jobId: string, keyId: string, data: TaskStatusData, now = Date.now()): void {
    if (data.status !== 'CONVERTING') this.kept.set(jobId, { keyId, data, until: Infinity })
    else if (this.live) this.kept.set(jobId, { keyId, data, until: now + this.liveMs })
  }

  /** The job's state changed: its kept answer (if any) is dropped. */
  changed(jobId: string): void {
    this.kept.delete(jobId)
  }
}
