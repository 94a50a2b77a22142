/**
 * Start and stop of the process. onReady: where this process runs jobs, the queue consumer (runner ->
 * lifecycle), the engine load (for /healthz) and the registry heartbeat; where it owns the queue, crash
 * recovery (CONVERTING jobs re-queued) and the hourly sweep of expired objects and Idempotency-Key records. onClose: an orderly stop
 * (runs released, queue drained, engine threads, backends, store).
 */
import fp from 'fastify-plugin'
import { RETENTION_MS } from '../context.js'
import { makeRunner } from '../jobs/runner.js'
import { IDEMPOTENCY_MS } from '../store/types.js'
import { outputPutter } from '../jobs/output-put.js'

export default fp(async (app) => {
  const l = app.lucent
  const { config } = l
  const { store, storage, queue, registry } = l.backends
  let sweepTimer: NodeJS.Timeout | undefined
  let redeliverTimer: NodeJS.Timeout | undefined

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
          // stopping mid-job: hand the job back to the shared queue (another worker picks it up)
          if (await runner(jobId) === 'released') throw new Error('worker stopped; job handed back')
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
      if (registry) {
        await registry.register(() => {
          const w = l.localWorker()
          return { backend: w.backend, adapter: w.adapter, concurrency: w.concurrency, running: w.running }
        })
      }
    }
    if (!l.role.recovers) return
    await l.jobs.recover()
    const sweep = () => {
      const before = Date.now() - RETENTION_MS
      for (const p of ['u', 'o', 'r', 'tmp']) storage.sweep(p, before).catch(() => {})
      store.purgeIdempotency(Date.now() - IDEMPOTENCY_MS).catch(() => {})
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
    l.jobs.shutdown()
    clearInterval(sweepTimer)
    clearInterval(redeliverTimer)
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
