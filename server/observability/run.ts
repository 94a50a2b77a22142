/**
 * A job run as the logs and traces see it (called by server/jobs/runner.ts): the run executes inside the job's
 * context (the submitting request's id: every log line of the run carries `reqId`, server/observability/context.ts),
 * one info line at its start and end, and with tracing on a `job.queue` span (submission -> this first run) and a
 * `job.run` span, children of the submitting request's span; the engine calls' spans hang under `job.run`.
 */
import type { Run } from '../jobs/lifecycle.js'
import { obsOf, withJobObs, type JobObs } from './context.js'
import { tracing } from './tracing.js'

export async function runObserved<T>(r: Run, log: { info(o: object, msg: string): void }, fn: () => Promise<T>): Promise<T> {
  const obs = obsOf(r.job.params)
  const t = tracing()
  const attrs = { 'lucent.job_id': r.job.id, 'lucent.kind': r.job.kind, 'lucent.model': r.job.model, 'lucent.attempt': r.attempt }
  if (t && r.attempt === 1) t.span('job.queue', { parent: obs.traceparent, startTime: r.job.createdAt, attrs }).end()
  const span = t?.span('job.run', { kind: 'consumer', parent: obs.traceparent, attrs })
  const ctx: JobObs = { ...obs, ...(span ? { traceparent: span.traceparent } : {}) }
  return withJobObs(ctx, async () => {
    const t0 = Date.now()
    log.info({ job: r.job.id, kind: r.job.kind, model: r.job.model, attempt: r.attempt }, 'job run started')
    try {
      const out = await fn()
      log.info({ job: r.job.id, state: r.state, ms: Date.now() - t0 }, 'job run ended')
      span?.set({ 'lucent.state': r.state })
      span?.end(r.state === 'failed' ? 'failed' : undefined)
      return out
    } catch (e) {
      span?.end(e)
      throw e
    }
  })
}
