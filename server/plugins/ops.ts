/**
 * Operations routes, public, in every role: GET /healthz (the process is up; where it runs models, the engine
 * is loaded), GET /readyz (every backend this role needs answers; a gateway also needs a live worker),
 * GET /metrics (Prometheus; an embedded cluster's child adds its primary's job families).
 */
import fp from 'fastify-plugin'
import { errorBody } from '../errors.js'
import { ok } from '../context.js'
import { SqliteStore } from '../store/sqlite.js'
import type { WorkerInfo } from '../roles/registry.js'
import type { Lucent as LucentCtx } from '../context.js'

/** Per dependency check (store, queue, storage) of a process: null = passed last time, a time = failing since
 *  then, absent = never passed (a process that starts with a dependency down is not ready). */
const failingSince = new WeakMap<LucentCtx, Map<string, number | null>>()
const DEPENDENCIES = new Set(['store', 'queue', 'storage'])

/** A dependency check that has passed before and fails for less than LUCENT_READY_GRACE_MS (a blip): still ready. */
function withinBlip(l: LucentCtx, check: string, value: unknown): boolean {
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

export default fp(async (app) => {
  const l = app.lucent
  const { store, storage, queue, registry } = l.backends
  const { role, runsJobs, viaPrimary, childLink } = l.role
  const storeOpen = () => (store instanceof SqliteStore ? store.db.open : !l.closing)

  app.get('/healthz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Health: store open and (worker/all roles) models loaded' } }, async (_req, reply) => {
    if (l.engine.state !== 'ready' || !storeOpen()) {
      return reply.code(503).send({ ...errorBody(100500006), status: l.engine.state, detail: l.engine.error })
    }
    return ok({ status: 'ok', role, pid: process.pid, engine: l.engine.info, models: l.engine.models, queue: queue.stats() })
  })

  app.get('/readyz', { config: { public: true }, schema: { tags: ['ops'], summary: 'Readiness: store, queue, storage, engine / workers' } }, async (_req, reply) => {
    const checks: Record<string, boolean | number | string> = {}
    const timed = <T>(p: Promise<T>, fallback: T) => Promise.race([p, new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]).catch(() => fallback)
    checks.store = store.ping ? await timed(store.ping(), false) : storeOpen()
    if (queue.ping) checks.queue = await timed(queue.ping(), false)
    if (storage.ping) checks.storage = await timed(storage.ping(), false)
    if (runsJobs || viaPrimary) checks.engine = l.engine.state === 'ready'
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
    const data = { status: ready ? 'ready' : 'not_ready', role, checks, workers: workers.map((w) => ({ id: w.id, backend: w.backend, concurrency: w.concurrency, running: w.running })), queue: queue.stats() }
    if (!ready) return reply.code(503).send({ ...errorBody(100500006), data })
    return ok(data)
  })

  app.get('/metrics', { config: { public: true }, schema: { tags: ['ops'], summary: 'Prometheus metrics' } }, async (_req, reply) => {
    reply.header('content-type', l.metrics.contentType)
    if (!viaPrimary || !childLink) return l.metrics.text()
    const [own, jobs] = await Promise.all([l.metrics.text(), childLink.request<string>({ op: 'metrics' }).catch(() => '')])
    return own + jobs
  })
}, { name: 'lucent-ops' })
