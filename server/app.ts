/** build(config) -> the Fastify instance: config, store, storage, queue, engine pool, auth, rate limit, routes, docs. */
import path from 'node:path'
import Fastify, { LogController, type FastifyError, type FastifyInstance } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { ApiError, errorBody, type ErrorCode } from './errors.js'
import { SqliteStore } from './store/sqlite.js'
import { LocalStorage, loadSecret } from './storage/local.js'
import { MemoryQueue } from './queue/memory.js'
import { EnginePool } from './worker/pool.js'
import { loadPrices } from './pricing.js'
import { Authenticator, RateLimiter } from './auth.js'
import { makeRunner } from './jobs/runner.js'
import { ok, RETENTION_MS, type Lucent } from './context.js'
import jobRoutes from './routes/jobs.js'
import ossRoutes from './routes/oss.js'
import fileRoutes from './routes/files.js'

export type { Lucent } from './context.js'

function mapValidation(err: FastifyError): ErrorCode {
  const v = err.validation?.[0]
  if (v && v.keyword === 'enum' && v.instancePath === '/model_name') return 110400005
  return 100403000
}

export async function build(config: Config): Promise<FastifyInstance> {
  const app = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
    bodyLimit: 1 << 20,
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>()

  const store = new SqliteStore(path.join(config.dataDir, 'lucent.db'))
  const storage = new LocalStorage(config.dataDir, loadSecret(config.dataDir), () => config.publicUrl)
  const queue = new MemoryQueue(config.queueMax, config.workers)
  const pool = new EnginePool({ workers: config.workers, modelDir: config.modelDir, threads: config.engineThreads })
  const lucent: Lucent = {
    config, store, storage, queue, pool,
    prices: loadPrices(config.pricesFile),
    auth: new Authenticator((h) => store.keyByHashSync(h), config.keyCacheMs),
    rate: new RateLimiter(config.rateBurst, config.ratePerSec),
    engine: { state: 'starting' },
    closing: false,
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
    return reply.code(status).send(errorBody(code))
  })
  app.setNotFoundHandler((_req, reply) => reply.code(400).send(errorBody(100400002)))

  // --- auth + rate limit on every route not marked public ------------------------------------------------
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public) return
    const key = await lucent.auth.authenticate(req.headers.apikey)
    lucent.rate.take(key.id, key.rate)
    req.apiKey = key
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

  app.get('/healthz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Readiness: store open and models loaded' } }, async (_req, reply) => {
    if (lucent.engine.state !== 'ready' || !store.db.open) {
      return reply.code(503).send({ ...errorBody(100500006), status: lucent.engine.state, detail: lucent.engine.error })
    }
    return ok({ status: 'ok', engine: lucent.engine.info, models: lucent.engine.models, queue: queue.stats() })
  })

  await app.register(jobRoutes)
  await app.register(ossRoutes)
  await app.register(fileRoutes)

  // --- lifecycle: recover CONVERTING jobs, start the queue, load the engine; sweep expired objects -------
  let sweepTimer: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    queue.process(makeRunner({
      store, storage, pool, log: app.log, jobTimeoutMs: config.jobTimeoutMs, maxAttempts: config.jobMaxAttempts,
      isClosing: () => lucent.closing,
    }))
    for (const job of await store.jobsByStatus('CONVERTING')) await queue.enqueue(job.id, { force: true })
    pool.init().then((r) => {
      if (r.ok) Object.assign(lucent.engine, { state: 'ready', info: r.info, models: r.models })
      else Object.assign(lucent.engine, { state: 'error', error: `${r.error_code}: ${r.message}` })
      if (!r.ok) app.log.error({ engine: r }, 'engine failed to load')
    }, (e) => Object.assign(lucent.engine, { state: 'error', error: String(e) }))
    const sweep = () => {
      const before = Date.now() - RETENTION_MS
      for (const p of ['u', 'o', 'r', 'tmp']) storage.sweep(p, before).catch(() => {})
    }
    sweep()
    sweepTimer = setInterval(sweep, 3600_000).unref()
  })
  app.addHook('onClose', async () => {
    lucent.closing = true
    clearInterval(sweepTimer)
    queue.pause()
    await pool.close().catch(() => {})
    await queue.close()
    await store.close()
  })

  return app
}
