/** Runs one queued job: engine in the worker pool -> result in storage -> COMPLETED; failures -> ERROR + refund. */
import type { FastifyBaseLogger } from 'fastify'
import { engineErrorCode } from '../errors.js'
import { contentTypeFor } from '../catalog.js'
import type { Store } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import type { EnginePool } from '../worker/pool.js'
import { runVideoJob } from './video.js'

export interface RunnerDeps {
  store: Store
  storage: MediaStorage
  pool: EnginePool
  log: FastifyBaseLogger
  jobTimeoutMs: number
  maxAttempts: number
  isClosing: () => boolean
  /** Shared queue (BullMQ): true = rethrow an unexpected exception of this attempt so the queue retries it with
   *  backoff, instead of failing the job now. Engine failures (deterministic) always fail the job. */
  rethrow?: (e: unknown, attempt: number) => boolean
}

const EXT: Record<string, string> = { jpeg: 'jpg', tiff: 'tiff', heif: 'heif', png: 'png', webp: 'webp', bmp: 'bmp', tga: 'tga' }

export function makeRunner(d: RunnerDeps) {
  const fail = async (id: string, engineCode: string, message: string) => {
    await d.store.failJob(id, engineErrorCode(engineCode), message)
    d.log.warn({ job: id, code: engineCode, msg: message }, 'job failed')
  }

  return async function run(jobId: string): Promise<void> {
    const job = await d.store.getJob(jobId)
    if (!job || job.status !== 'CONVERTING') return
    let attempt = 0
    try {
      attempt = await d.store.startAttempt(jobId)
      if (attempt > d.maxAttempts) return await fail(jobId, 'crashed', `job did not finish after ${d.maxAttempts} attempts`)
      if (job.kind === 'video') return await runVideoJob(d, job)
      const original = await d.storage.get(job.originalKey)
      if (!original) return await fail(jobId, 'storage', 'original file is missing')
      const p = job.params as { format: string; exif?: boolean; dpi?: number | null }
      let lastWrite = 0
      let lastPct = -1
      const out = await d.pool.enhance(original.data, { model: job.model, format: p.format, exif: p.exif, dpi: p.dpi ?? undefined },
        d.jobTimeoutMs, (pct) => {
          const now = Date.now()
          if (pct > lastPct && pct < 100 && now - lastWrite >= 200) {
            lastPct = pct
            lastWrite = now
            d.store.setProgress(jobId, pct).catch(() => {})
          }
        })
      if (d.isClosing()) return
      if (!out.ok) return await fail(jobId, out.error_code, out.message)
      const ext = EXT[p.format] ?? p.format
      const key = `r/${jobId}.${ext}`
      const data = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength)
      await d.storage.put(key, data, contentTypeFor(ext))
      await d.store.completeJob(jobId, key)
      d.log.info({ job: jobId, ms: out.ms, width: out.width, height: out.height }, 'job completed')
    } catch (e) {
      // Shutting down: leave the job CONVERTING; it is picked up again at the next start.
      if (d.isClosing()) return
      if (d.rethrow?.(e, attempt)) throw e
      await fail(jobId, 'internal', String((e as Error)?.message ?? e)).catch(() => {})
    }
  }
}
