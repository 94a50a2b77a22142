/**
 * Operations routes in every role (docs/observability.md): GET /healthz (the process is up; where it runs models,
 * the engine is loaded: the same everywhere, public), GET /readyz (every backend this role needs answers; a gateway also needs a live worker;
 * LUCENT_WARMUP_MODELS warmed up), GET /metrics (Prometheus; an embedded cluster's child adds its primary's job
 * families).
 * Where they answer in full (server/observability/config.ts):
 * - LUCENT_METRICS_PORT: /metrics and the detailed /readyz on a listener of their own
 *   (server/observability/listener.ts, the same mechanism as the admin API's port);
 * - the public port: /readyz answers its status code with `status` and `role` only (probes), /metrics is an
 *   unknown route, unless LUCENT_METRICS_TOKEN (Authorization: Bearer; else 401 on /metrics, the short answers
 *   on the others) or LUCENT_METRICS_PUBLIC=1 (to anyone).
 * Also here: the engine pool's timing (server/observability/engine.ts) and the warm-up (observability/warmup.ts).
 */
import crypto from 'node:crypto'
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError, errorBody } from '../errors.js'
import { ok } from '../context.js'
import { SqliteStore } from '../store/sqlite.js'
import type { WorkerInfo } from '../roles/registry.js'
import type { Lucent } from '../context.js'
import { sideListener } from '../observability/listener.js'
import { instrumentPool } from '../observability/engine.js'
import { startWarmup, type WarmupState } from '../observability/warmup.js'

declare module 'fastify' {
  interface FastifyInstance { metricsServer: FastifyInstance | null }
}

/** Who may see the details on a listener: anyone, the metrics token's holder, nobody. */
type Access = 'open' | 'token' | 'none'

function tokenOk(req: FastifyRequest, token: string): boolean {
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')
  if (!m) return false
  const a = crypto.createHash('sha256').update(m[1]).digest()
  const b = crypto.createHash('sha256').update(token).digest()
  return crypto.timingSafeEqual(a, b)
}

/** Per dependency check (store, queue, storage) of a process: null = passed last time, a time = failing since
 *  then, absent = never passed (a process that starts with a dependency down is not ready). */
const failingSince = new WeakMap<Lucent, Map<string, number | null>>()
const DEPENDENCIES = new Set(['store', 'queue', 'storage'])

/** A dependency check that has passed before and fails for less than LUCENT_READY_GRACE_MS (a blip): still ready. */
function withinBlip(l: Lucent, check: string, value: unknown): boolean {
  if (!DEPENDENCIES.has(check)) return false
  let m = failingSince.get(l)
  if (!m) failingSince.set(l, (m = new Map()))
  if (value === true) {
    m.set(check, null)
    return false
  }
  if (!m.has(check)) return false
  const since = m.get(check) ?? Date.now()
  m.set(check, since)
  return Date.now() - since < l.config.readyGraceMs
}

function opsRoutes(l: Lucent, access: Access, warmup: WarmupState) {
  const { store, storage, queue, registry } = l.backends
  const { role, runsJobs, viaPrimary, childLink } = l.role
  const token = l.config.observability.metricsToken
  const storeOpen = () => (store instanceof SqliteStore ? store.db.open : !l.closing)
  const detailed = (req: FastifyRequest) => access === 'open' || (access === 'token' && token !== null && tokenOk(req, token))
  return async (app: FastifyInstance) => {
    app.get('/healthz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Health: store open and (worker/all roles) models loaded' } }, async (_req, reply) => {
      if (l.engine.state !== 'ready' || !storeOpen()) {
        return reply.code(503).send({ ...errorBody(100500006), status: l.engine.state, detail: l.engine.error })
      }
      return ok({ status: 'ok', role, pid: process.pid, engine: l.engine.info, models: l.engine.models, queue: queue.stats() })
    })

    app.get('/readyz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Readiness: store, queue, storage, engine / workers, warm-up' } }, async (req, reply) => {
      const checks: Record<string, boolean | number | string> = {}
      const timed = <T>(p: Promise<T>, fallback: T) => Promise.race([p, new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]).catch(() => fallback)
      checks.store = store.ping ? await timed(store.ping(), false) : storeOpen()
      if (queue.ping) checks.queue = await timed(queue.ping(), false)
      if (storage.ping) checks.storage = await timed(storage.ping(), false)
      if (runsJobs || viaPrimary) checks.engine = l.engine.state === 'ready'
      if (warmup.state !== 'none') checks.warmup = warmup.state === 'done'
      let workers: WorkerInfo[] = []
      if (registry) {
        workers = await timed(registry.list(), [] as WorkerInfo[])
        // workers whose engine has loaded
        if (role === 'gateway') checks.workers = workers.filter((w) => w.backend === 'gpu' || w.backend === 'cpu').length
      }
      // readiness = this process can serve: a drain answers 503 at once; a dependency that fails (a Redis or
      // PostgreSQL blip) only once it has failed for LUCENT_READY_GRACE_MS (not every gateway out at once)
      const passes = ([k, v]: [string, boolean | number | string]) => withinBlip(l, k, v) || (typeof v === 'number' ? v > 0 : v === true)
      const ready = !l.closing && !l.jobs.draining && Object.entries(checks).every(passes)
      const data = detailed(req)
        ? { status: ready ? 'ready' : 'not_ready', role, checks, workers: workers.map((w) => ({ id: w.id, backend: w.backend, concurrency: w.concurrency, running: w.running })), queue: queue.stats(), ...(warmup.state !== 'none' ? { warmup } : {}) }
        : { status: ready ? 'ready' : 'not_ready', role }
      if (!ready) return reply.code(503).send({ ...errorBody(100500006), data })
      return ok(data)
    })

    if (access === 'none') return
    app.get('/metrics', { config: { public: true }, schema: { tags: ['ops'], summary: 'Prometheus metrics' } }, async (req, reply) => {
      if (!detailed(req)) {
        throw new ApiError(100400000, { status: 401, headers: { 'www-authenticate': 'Bearer realm="lucent-metrics"' }, hint: 'the metrics token is required (Authorization: Bearer)' })
      }
      reply.header('content-type', l.metrics.contentType)
      if (!viaPrimary || !childLink) return l.metrics.text()
      const [own, jobs] = await Promise.all([l.metrics.text(), childLink.request<string>({ op: 'metrics' }).catch(() => '')])
      return own + jobs
    })
  }
}

export default fp(async (app) => {
  const l = app.lucent
  const o = l.config.observability
  if (l.pool) instrumentPool(l.pool, l.metrics)
  const warmup: WarmupState = { state: o.warmupModels.length && l.pool ? 'waiting' : 'none', done: [] }
  if (l.pool && o.warmupModels.length) {
    const pool = l.pool
    app.addHook('onReady', async () => {
      startWarmup(o.warmupModels, { pool, engine: () => l.engine, metrics: l.metrics, log: app.log, closing: () => l.closing }, warmup)
    })
  }
  const publicAccess: Access = o.metricsPublic ? 'open' : o.metricsToken ? 'token' : 'none'
  await app.register(opsRoutes(l, publicAccess, warmup))
  app.decorate('metricsServer', null)
  // an embedded cluster's primary serves no HTTP: its children share the port (as they share PORT)
  if (o.metricsPort !== null && !l.role.primary) {
    app.metricsServer = await sideListener(app, { port: o.metricsPort, host: o.metricsHost, routes: opsRoutes(l, 'open', warmup) })
  }
}, { name: 'lucent-ops' })
