/**
 * task-status answers kept in memory, so that polling costs no store read and no link signing:
 * - a finished job (COMPLETED / ERROR) never changes again: its answer is kept (bounded, oldest first out);
 * - a converting job's answer is kept only where this process hears of every change to the job's state
 *   (`live`): the embedded single process, and an embedded cluster's HTTP children (the primary, which runs the
 *   jobs, broadcasts each change). Every progress / completion / failure written through the store drops the
 *   kept answer (`watchJobWrites`), and a kept converting answer is also dropped after `liveMs` at the latest,
 *   should a change ever come from elsewhere. With Redis or PostgreSQL (workers on other hosts) `live` is off.
 */
import { BoundedCache } from '../cache.js'
import type { Store } from '../store/types.js'

export interface TaskStatusData {
  job_id: string; status: string; progress: number; original_url: string; consume_coins: number
  res_url?: string; error_code?: number; message?: string
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

/**
 * Wraps the store's job-state writes (progress, completion, failure) so that `onChange(jobId)` runs after each
 * one. Returns the same store object.
 */
export function watchJobWrites<S extends Store>(store: S, onChange: (jobId: string) => void): S {
  const setProgress = store.setProgress.bind(store)
  const completeJob = store.completeJob.bind(store)
  const failJob = store.failJob.bind(store)
  store.setProgress = async (id, progress) => {
    try {
      return await setProgress(id, progress)
    } finally {
      onChange(id)
    }
  }
  store.completeJob = async (id, resultKey) => {
    try {
      return await completeJob(id, resultKey)
    } finally {
      onChange(id)
    }
  }
  store.failJob = async (id, code, message) => {
    try {
      return await failJob(id, code, message)
    } finally {
      onChange(id)
    }
  }
  return store
}
