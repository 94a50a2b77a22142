/**
 * Start and stop of the process. onReady: where this process runs jobs, the queue consumer (runner ->
 * lifecycle), the engine load (for /healthz) and the registry heartbeat; where it owns the queue, crash
 * recovery (CONVERTING jobs re-queued) and the hourly sweep of expired objects and Idempotency-Key records. onClose: an orderly stop
 * (runs released, queue drained, engine threads, backends, store).
 *
 * Drain (SIGTERM, server/cli.ts -> drainForStop()): /readyz answers 503 at once, the queue stops handing jobs to
 * this process, the job routes answer 503 + Retry-After (a gateway behind a load balancer that has not yet seen
 * the 503), running jobs and result deliveries go on for up to LUCENT_DRAIN_GRACE_MS; a run still going then is
 * released and handed back to the shared queue at its place (no attempt used, server/store/job-runs.ts; no BullMQ
 * retry counted). A second signal stops at once (the same release). Then the orderly close below.
 * Shared queue: the queue reconciler (server/queue/reconcile.ts) runs where the process recovers, and processes
 * that run jobs keep their running jobs' rows fresh for it.
 */
import fp from 'fastify-plugin'
import { RETENTION_MS } from '../context.js'
import { makeRunner } from '../jobs/runner.js'
import { IDEMPOTENCY_MS } from '../store/types.js'
import { outputPutter } from '../jobs/output-put.js'
import { measurePresigned } from '../routes/presigned.js'
import { BullQueue } from '../queue/bullmq.js'
import { QueueReconciler, checkRedis } from '../queue/reconcile.js'
import { ApiError, QUEUE_FULL_CODE } from '../errors.js'
import type { FastifyInstance } from 'fastify'

/** Routes that take new jobs: refused while draining. */
const SUBMITS = new Set(['/api/photo-enhancer', '/api/video-enhancer'])

/** The graceful part of a stop (SIGTERM): see the header. Resolves when the runs of this process have ended or
 *  were released at the deadline (`graceMs`, default LUCENT_DRAIN_GRACE_MS); app.close() comes after. */
export async function drainForStop(app: FastifyInstance, graceMs = app.lucent.config.drainGraceMs): Promise<void> {
  const l = app.lucent
  const running = l.jobs.running + l.jobs.delivering
  app.log.info({ running, graceMs }, 'draining: not ready, no new jobs; running jobs may finish')
  l.queue.pause()
  const cut = await l.jobs.finish(graceMs)
  app.log.info({ cut }, cut ? 'drained: jobs still running at the deadline went back to the queue' : 'drained')
}

export default fp(async (app) => {
  const l = app.lucent
  const { config } = l
  const { store, storage, queue, registry } = l.backends
  let sweepTimer: NodeJS.Timeout | undefined
  let redeliverTimer: NodeJS.Timeout | undefined
  let touchTimer: NodeJS.Timeout | undefined
  let reconciler: QueueReconciler | undefined

  app.addHook('onRequest', async (req) => {
    if (l.jobs.draining && req.method === 'POST' && SUBMITS.has(req.routeOptions.url ?? '')) {
      throw new ApiError(QUEUE_FULL_CODE, { status: 503, headers: { 'retry-after': '5' }, detail: 'this process is stopping (drain): submit again, another one takes it' })
    }
  })

  app.addHook('onReady', async () => {
    // the operator's own models: loaded before the first request, then refreshed (server/own-models/registry.ts)
    l.ownModels.onRelease((r) => app.log.info({ model: r.name, sha256: r.sha256, forgotten: r.forgotten }, 'own model removed: weights released'))
    await l.ownModels.start().catch((err) => app.log.warn({ err }, 'own models: the registry could not be read'))
    const pool = l.pool
    if (pool) {
      const shared = !!config.redisUrl
      const runner = makeRunner({
        jobs: l.jobs, storage, pool, log: app.log, video: config.video, outputPut: outputPutter({ store, config }), ownModels: l.ownModels,
        // BullMQ: a run that threw (storage/database hiccup) is retried with backoff until the last attempt
        retry: shared ? (_e, attempt) => attempt < config.jobMaxAttempts : undefined,
      })
      queue.process(shared
        ? async (jobId) => {
          const out = await runner(jobId)
          // stopping (drain): the job goes back to the shared queue at its place, for another worker, no retry
          // counted; taken just as the drain began (not started): the same
          if (l.jobs.draining && (out === 'released' || out === 'none')) return 'handback'
          if (out === 'released') throw new Error('run released; job handed back')
        }
        : async (jobId) => { await runner(jobId) })
      pool.init().then((r) => {
        if (r.ok) l.engine = { state: 'ready', info: r.info, models: r.models }
        else {
          l.engine = { state: 'error', error: `${r.error_code}: ${r.message}` }
          app.log.error({ engine: r }, 'engine failed to load')
        }
        registry?.beatNow().catch(() => {})
      }, (e) => { l.engine = { state: 'error', error: String(e) } })
      // which catalog networks the model directory lacks (optional ones never fetched): published before the first
      // heartbeat, refreshed while the process runs (a `lucent models fetch` shows in GET /api/models' `available`)
      await l.installed?.start()
      if (registry) {
        await registry.register(() => {
          const w = l.localWorker()
          return { backend: w.backend, adapter: w.adapter, concurrency: w.concurrency, running: w.running, missing: w.missing }
        })
      }
    }
    // the queue reconciler reads a running job's row as live while it is fresh (server/queue/reconcile.ts)
    if (pool && queue instanceof BullQueue) touchTimer = setInterval(() => { void l.jobs.touchRunning() }, Math.max(250, config.reconcileMs / 2)).unref()
    if (!l.role.recovers) return
    await l.jobs.recover()
    if (queue instanceof BullQueue) {
      await checkRedis(queue, app.log).catch((err) => app.log.warn({ err }, 'Redis settings not checked'))
      reconciler = new QueueReconciler({ store, queue, jobs: l.jobs, log: app.log, everyMs: config.reconcileMs })
      await reconciler.start()
    }
    const sweep = () => {
      const before = Date.now() - RETENTION_MS
      for (const p of ['u', 'o', 'r', 'tmp']) storage.sweep(p, before).catch(() => {})
      store.purgeIdempotency(Date.now() - IDEMPOTENCY_MS).catch(() => {})
      // S3: pre-signed PUTs whose link has expired, their bytes measured against their key's quota (routes/presigned.ts)
      measurePresigned(l).then((r) => { if (r.deleted || r.failed) app.log.info({ presigned: r }, 'pre-signed uploads measured') },
        (err) => app.log.warn({ err }, 'pre-signed uploads not measured'))
    }
    sweep()
    sweepTimer = setInterval(sweep, 3600_000).unref()
    // results whose delivery a crashed worker left behind (server/jobs/lifecycle.ts redeliverStale)
    const deadline = config.outputPut.deadlineMs
    redeliverTimer = setInterval(() => {
      l.jobs.redeliverStale(deadline + 10_000).catch((err) => app.log.warn({ err }, 'redelivery check failed'))
    }, Math.min(60_000, Math.max(1000, deadline / 2))).unref()
  })

  app.addHook('onClose', async () => {
    l.closing = true
    l.ownModels.stop()
    l.installed?.stop()
    l.jobs.shutdown()
    clearInterval(sweepTimer)
    clearInterval(redeliverTimer)
    clearInterval(touchTimer)
    reconciler?.stop()
    await l.jobs.drain()
    queue.pause()
    await l.pool?.close().catch(() => {})
    await queue.close()
    await registry?.close()
    await l.backends.close().catch(() => {})
    await storage.close?.().catch(() => {})
    await store.close()
  })
}, { name: 'lucent-lifecycle' })
