/** build(config) -> the Fastify instance: config, store, storage, queue, engine pool, auth, rate limit, routes, docs. */
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { ApiError, errorBody, type ErrorCode } from './errors.js'
import { Metrics } from './metrics.js'
import { checkRole, openStore } from './roles/index.js'
import type { WorkerInfo, WorkerRegistry } from './roles/registry.js'
import type { MediaStorage } from './storage/types.js'
import type { Queue } from './queue/types.js'
import type { ApiKey } from './store/types.js'
import { SqliteStore } from './store/sqlite.js'
import { LocalStorage, loadSecret } from './storage/local.js'
import { MemoryQueue } from './queue/memory.js'
import { EnginePool } from './worker/pool.js'
import { loadPrices } from './pricing.js'
import { Authenticator, RateLimiter } from './auth.js'
import { makeRunner } from './jobs/runner.js'
import { StatusAnswers, watchJobWrites } from './jobs/status.js'
import { ClusterHub, IpcQueue, IpcRateLimiter, type ClusterLink } from './cluster.js'
import { ok, RETENTION_MS, type Lucent } from './context.js'
import jobRoutes from './routes/jobs.js'
import ossRoutes from './routes/oss.js'
import fileRoutes from './routes/files.js'
import modelRoutes from './routes/models.js'
import playground from './playground.js'

export type { Lucent } from './context.js'

function mapValidation(err: FastifyError): ErrorCode {
  const v = err.validation?.[0]
  if (v && v.keyword === 'enum' && v.instancePath === '/model_name') return 110400005
  return 100403000
}

/**
 * Cluster mode (server/cluster.ts): `primary` = the engine host of an embedded cluster (runs jobs, never serves
 * the API); `child` = one of its HTTP processes (serves the API; queue, rate limits and engine state from the
 * primary unless Redis is configured).
 */
export type ClusterMode = { mode: 'primary' } | { mode: 'child'; link: ClusterLink }

export async function build(config: Config, opts: { cluster?: ClusterMode } = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
    bodyLimit: 1 << 20,
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>()

  // --- backends by configuration (server/roles/index.ts): SQLite|PostgreSQL, disk|S3, memory|BullMQ -------
  checkRole(config)
  const role = config.role
  const cl = opts.cluster
  const runsJobs = cl ? cl.mode === 'primary' : role !== 'gateway'
  const servesApi = cl ? cl.mode === 'child' : role !== 'worker'
  // re-queues CONVERTING jobs at start: the process that owns the queue (gateways too when the queue is shared)
  const recovers = cl ? (cl.mode === 'primary' || role === 'gateway') : servesApi
  const childLink = cl?.mode === 'child' ? cl.link : null
  // an embedded cluster's HTTP child (role all): engine state and job metrics come from the primary
  const viaPrimary = !!childLink && role === 'all'
  const store = await openStore(config)
  let storage: MediaStorage & { ping?: () => Promise<boolean>; close?: () => Promise<void> }
  if (config.s3) {
    const { S3Storage } = await import('./storage/s3.js')
    storage = new S3Storage(config.s3)
  } else {
    storage = new LocalStorage(config.dataDir, loadSecret(config.dataDir), () => config.publicUrl)
  }
  let queue: Queue & { ping?: () => Promise<boolean>; counts?: () => Promise<{ waiting: number; active: number; delayed: number; failed: number }> }
  let rate: Lucent['rate']
  let registry: WorkerRegistry | null = null
  const closers: Array<() => Promise<unknown>> = []
  if (config.redisUrl) {
    const { BullQueue } = await import('./queue/bullmq.js')
    const { RedisRateLimiter } = await import('./ratelimit/redis.js')
    const { WorkerRegistry } = await import('./roles/registry.js')
    queue = new BullQueue({
      redisUrl: config.redisUrl, max: config.queueMax, concurrency: config.workers,
      // the store's attempt counter ends a job first (runner); BullMQ's limits are the safety net
      attempts: config.jobMaxAttempts + 1, maxStalledCount: config.jobMaxAttempts + 1,
      backoffMs: config.queueBackoffMs, lockDurationMs: config.queueLockMs, stalledIntervalMs: config.queueStalledMs,
      onFailed: (jobId, reason) => store.failJob(jobId, 100500000, `job failed after retries: ${reason}`.slice(0, 500)),
    })
    const limiter = new RedisRateLimiter(config.redisUrl, config.rateBurst, config.ratePerSec)
    rate = limiter
    closers.push(() => limiter.close())
    registry = new WorkerRegistry(config.redisUrl)
  } else if (childLink) {
    queue = new IpcQueue(childLink, config.queueMax)
    rate = new IpcRateLimiter(childLink, config.ratePerSec)
  } else {
    queue = new MemoryQueue(config.queueMax, config.workers)
    rate = new RateLimiter(config.rateBurst, config.ratePerSec)
  }
  const pool = runsJobs ? new EnginePool({ workers: config.workers, modelDir: config.modelDir, threads: config.engineThreads }) : null
  const metrics = new Metrics({
    queueCounts: async () => queue.counts ? queue.counts() : { waiting: queue.stats().waiting, active: queue.stats().running },
    workers: async () => registry ? registry.list() : pool ? [localWorker()] : childLink?.state?.worker ? [childLink.state.worker] : [],
  })
  metrics.meter(store)
  // task-status answers: converting jobs' too where this process hears of every job change (server/jobs/status.ts)
  const hearsAllJobChanges = !config.redisUrl && !config.databaseUrl && role === 'all' && (!cl || cl.mode === 'child')
  const status = new StatusAnswers(hearsAllJobChanges)
  let hub: ClusterHub | null = null
  watchJobWrites(store, (jobId) => {
    status.changed(jobId)
    hub?.jobChanged(jobId)
    childLink?.jobChanged(jobId)
  })
  childLink?.onJobChanged((jobId) => status.changed(jobId))
  if (viaPrimary) metrics.dropJobFamilies()
  const lucent: Lucent = {
    config, store, storage, queue, pool: pool as EnginePool,
    prices: loadPrices(config.pricesFile),
    auth: new Authenticator(store instanceof SqliteStore ? (h) => store.keyByHashSync(h) : (h) => store.keyByHash(h), config.keyCacheMs),
    rate,
    engine: runsJobs || viaPrimary ? { state: 'starting' } : { state: 'ready', info: { role } },
    closing: false,
    metrics,
    status,
  }
  const startedAt = Date.now()
  function localWorker(): WorkerInfo {
    const info = lucent.engine.info as { backend?: string; adapter?: string } | undefined
    return {
      id: `local:${process.pid}`, host: 'local', pid: process.pid, backend: lucent.engine.state === 'ready' ? info?.backend ?? 'cpu' : 'starting',
      adapter: info?.adapter ?? '', concurrency: config.workers, running: queue.stats().running, startedAt, heartbeatAt: Date.now(),
    }
  }
  app.decorate('lucent', lucent)
  app.decorateRequest('apiKey', null)

  // --- errors: every failure leaves as a spec error body -------------------------------------------------
  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    let code: ErrorCode
    let status: number
    if (err instanceof ApiError) {
      code = err.errorCode
      status = err.status
      if (err.headers) reply.headers(err.headers)
      if (err.detail) req.log.info({ code, detail: err.detail }, 'request rejected')
    } else if ((err as FastifyError).validation) {
      code = mapValidation(err as FastifyError)
      status = code === 110400005 ? 400 : 403
    } else if ((err as FastifyError).code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || (err instanceof SyntaxError && (err as FastifyError).statusCode === 400)
      || (err as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      code = 100403000
      status = 403
    } else if (((err as FastifyError).statusCode ?? 500) < 500) {
      code = 100400002
      status = 400
    } else {
      req.log.error({ err }, 'internal error')
      code = (err as { code?: string }).code?.startsWith('SQLITE') ? 100500001 : 100500000
      status = 500
    }
    if ((code === 100400001 || code === 110400008 || code === 110400009) && err instanceof ApiError && err.detail) {
      metrics.fetchErrors.inc({ kind: code === 110400008 ? 'video' : 'photo' })
    }
    return reply.code(status).send(errorBody(code))
  })
  app.setNotFoundHandler((_req, reply) => reply.code(400).send(errorBody(100400002)))

  // --- auth + rate limit on every route not marked public ------------------------------------------------
  // Callback style and synchronous when it can be (cached key, in-process bucket): no promise per request.
  const admit = (req: FastifyRequest, key: ApiKey): void | Promise<void> => {
    req.apiKey = key
    return lucent.rate.take(key.id, key.rate)
  }
  app.addHook('onRequest', (req, _reply, done) => {
    if (req.routeOptions.config?.public) return done()
    let pending: void | Promise<void>
    try {
      const key = lucent.auth.authenticate(req.headers.apikey)
      pending = key instanceof Promise ? key.then((k) => admit(req, k)) : admit(req, key)
    } catch (e) {
      return done(e as Error)
    }
    if (pending instanceof Promise) pending.then(() => done(), done)
    else done()
  })

  // docs routes are public
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...(route.config ?? {}), public: true }
  })
  // --- docs ---------------------------------------------------------------------------------------------
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Lucent media enhancement API', version: '0.1.0',
        description: 'Asynchronous photo/video enhancement. Errors: {error_code, message, code, msg}; invalid or missing fields -> 100403000; queue full -> HTTP 503 + Retry-After with 100500007.',
      },
      components: { securitySchemes: { apikey: { type: 'apiKey', in: 'header', name: 'Apikey' } } },
    },
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list' } })

  const storeOpen = () => (store instanceof SqliteStore ? store.db.open : !lucent.closing)
  app.get('/healthz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Health: store open and (worker/all roles) models loaded' } }, async (_req, reply) => {
    if (lucent.engine.state !== 'ready' || !storeOpen()) {
      return reply.code(503).send({ ...errorBody(100500006), status: lucent.engine.state, detail: lucent.engine.error })
    }
    return ok({ status: 'ok', role, pid: process.pid, engine: lucent.engine.info, models: lucent.engine.models, queue: queue.stats() })
  })

  // Readiness: every backend this role needs answers; a gateway also needs at least one live worker.
  app.get('/readyz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Readiness: store, queue, storage, engine / workers' } }, async (_req, reply) => {
    const checks: Record<string, boolean | number | string> = {}
    const timed = <T>(p: Promise<T>, fallback: T) => Promise.race([p, new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]).catch(() => fallback)
    checks.store = store.ping ? await timed(store.ping(), false) : storeOpen()
    if (queue.ping) checks.queue = await timed(queue.ping(), false)
    if (storage.ping) checks.storage = await timed(storage.ping(), false)
    if (runsJobs || viaPrimary) checks.engine = lucent.engine.state === 'ready'
    let workers: WorkerInfo[] = []
    if (registry) {
      workers = await timed(registry.list(), [] as WorkerInfo[])
      // workers whose engine has loaded
      if (role === 'gateway') checks.workers = workers.filter((w) => w.backend === 'gpu' || w.backend === 'cpu').length
    }
    const ready = !lucent.closing && Object.values(checks).every((v) => (typeof v === 'number' ? v > 0 : v === true))
    const data = { status: ready ? 'ready' : 'not_ready', role, checks, workers: workers.map((w) => ({ id: w.id, backend: w.backend, concurrency: w.concurrency, running: w.running })), queue: queue.stats() }
    if (!ready) return reply.code(503).send({ ...errorBody(100500006), data })
    return ok(data)
  })

  app.get('/metrics', { config: { public: true }, schema: { tags: ['ops'], summary: 'Prometheus metrics' } }, async (_req, reply) => {
    reply.header('content-type', metrics.contentType)
    if (!viaPrimary) return metrics.text()
    const [own, jobs] = await Promise.all([metrics.text(), childLink!.request<string>({ op: 'metrics' }).catch(() => '')])
    return own + jobs
  })

  if (servesApi) {
    await app.register(jobRoutes)
    await app.register(ossRoutes)
    await app.register(fileRoutes)
    await app.register(modelRoutes)
    if (config.playground) await app.register(playground)
  }

  // --- lifecycle: recover CONVERTING jobs, start the queue, load the engine; sweep expired objects -------
  let sweepTimer: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    if (pool) {
      const shared = !!config.redisUrl
      const runner = metrics.timeRunner(store, makeRunner({
        store, storage, pool, log: app.log, jobTimeoutMs: config.jobTimeoutMs, maxAttempts: config.jobMaxAttempts,
        isClosing: () => lucent.closing,
        // BullMQ: a run that threw (storage/database hiccup) is retried with backoff until the last attempt
        rethrow: shared ? (_e, attempt) => attempt < config.jobMaxAttempts : undefined,
      }))
      queue.process(shared
        ? async (jobId) => {
          await runner(jobId)
          // stopping mid-job: hand the job back to the shared queue (another worker picks it up)
          if (lucent.closing && (await store.jobStatus(jobId))?.status === 'CONVERTING') throw new Error('worker stopped; job handed back')
        }
        : runner)
      pool.init().then((r) => {
        if (r.ok) Object.assign(lucent.engine, { state: 'ready', info: r.info, models: r.models })
        else Object.assign(lucent.engine, { state: 'error', error: `${r.error_code}: ${r.message}` })
        if (!r.ok) app.log.error({ engine: r }, 'engine failed to load')
        registry?.beatNow().catch(() => {})
      }, (e) => Object.assign(lucent.engine, { state: 'error', error: String(e) }))
      if (registry) {
        await registry.register(() => {
          const w = localWorker()
          return { backend: w.backend, adapter: w.adapter, concurrency: w.concurrency, running: w.running }
        })
      }
    }
    if (cl?.mode === 'primary') {
      hub = new ClusterHub({
        state: () => {
          const q = queue.stats()
          return { engine: lucent.engine, queue: { waiting: q.waiting, running: q.running, max: q.max }, worker: pool ? localWorker() : null }
        },
        enqueue: (jobId) => queue.enqueue(jobId, { force: true }),
        rate: rate instanceof RateLimiter ? rate : { grant: () => { throw new Error('rate limits are in Redis') } },
        metrics: () => metrics.jobsText(),
      })
      hub.start()
    }
    if (viaPrimary) {
      childLink!.onState((st) => {
        lucent.engine = st.engine
      })
    }
    if (!recovers) return
    // crash recovery: re-queue CONVERTING jobs (BullMQ ignores ids it already holds)
    for (const job of await store.jobsByStatus('CONVERTING')) await queue.enqueue(job.id, { force: true })
    const sweep = () => {
      const before = Date.now() - RETENTION_MS
      for (const p of ['u', 'o', 'r', 'tmp']) storage.sweep(p, before).catch(() => {})
    }
    sweep()
    sweepTimer = setInterval(sweep, 3600_000).unref()
  })
  app.addHook('onClose', async () => {
    lucent.closing = true
    hub?.stop()
    clearInterval(sweepTimer)
    queue.pause()
    await pool?.close().catch(() => {})
    await queue.close()
    await registry?.close()
    for (const c of closers) await c().catch(() => {})
    await storage.close?.().catch(() => {})
    await store.close()
  })

  return app
}
