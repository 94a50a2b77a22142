/**
 * What the plugins and routes share, decorated on the Fastify instance as `app.lucent`, and how it is made
 * (`createLucent`): the backends, the job lifecycle with its subscribers (metrics, kept task-status answers),
 * the engine pool where this process runs jobs, prices, key lookup and the engine's state.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from './config.js'
import type { ApiKey, Store } from './store/types.js'
import type { MediaStorage } from './storage/types.js'
import type { Queue } from './queue/types.js'
import type { Backends, RateLimit } from './backends.js'
import type { ProcessRole } from './roles/index.js'
import type { WorkerInfo } from './roles/registry.js'
import { EnginePool, type EngineState } from './engine/pool.js'
import { JobLifecycle } from './jobs/lifecycle.js'
import { EtaModel } from './jobs/eta.js'
import { QueueBacklog } from './jobs/backlog.js'
import { StatusAnswers } from './jobs/status.js'
import { loadPrices, type Prices } from './pricing.js'
import { Authenticator } from './auth.js'
import { Metrics } from './metrics.js'
import { SqliteStore } from './store/sqlite.js'
import { OwnModels } from './own-models/registry.js'
import { SEG_MODELS } from './segmentation.js'
import { InstalledNetworks, WorkerNetworks } from './models/installed.js'
import { readCatalog } from './catalog.js'
import path from 'node:path'

export interface Lucent {
  config: Config
  role: ProcessRole
  store: Store
  storage: MediaStorage
  queue: Queue
  backends: Backends
  /** The engine pool; null where this process runs no jobs (gateway, cluster child). */
  pool: EnginePool | null
  /** The job lifecycle: every transition of a job, and the events to subscribe to (server/jobs/lifecycle.ts). */
  jobs: JobLifecycle
  prices: Prices
  auth: Authenticator
  rate: RateLimit
  engine: EngineState
  closing: boolean
  metrics: Metrics
  /** The operator's own models (bring your own model), refreshed from the store (server/own-models/registry.ts). */
  ownModels: OwnModels
  /** task-status answers kept in memory (server/jobs/status.ts). */
  status: StatusAnswers
  /** This process as a worker (registry heartbeat, /metrics, the cluster broadcast). */
  localWorker(): WorkerInfo
  /** The live workers: the registry's (Redis), else this process, else the cluster primary's. */
  workers(): Promise<WorkerInfo[]>
  /** Which catalog networks this process's model directory lacks (server/models/installed.ts); null where it runs no jobs. */
  installed: InstalledNetworks | null
  /** What the live workers hold, read at most every few seconds (server/models/installed.ts). */
  workerNetworks: WorkerNetworks
}

declare module 'fastify' {
  interface FastifyInstance { lucent: Lucent }
  interface FastifyRequest { apiKey: ApiKey | null }
  interface FastifyContextConfig { public?: boolean }
}

export const ok = <T>(data: T) => ({ code: 200 as const, message: 'OK' as const, data })

export { RETENTION_MS } from './jobs/status.js'

export function createLucent(config: Config, role: ProcessRole, backends: Backends, log: FastifyBaseLogger): Lucent {
  const { store, storage, queue, registry } = backends
  const pool = role.runsJobs
    ? new EnginePool({ workers: config.workers, modelDir: config.modelDir, threads: config.engineThreads, backend: config.backend, adapter: config.adapter })
    : null
  // time estimates from the throughput measured on this process's engine backend (server/jobs/eta.ts)
  const eta = role.runsJobs ? new EtaModel(store, () => {
    const e = lucent.engine
    return e.state === 'ready' && e.info && 'backend' in e.info ? e.info.backend : null
  }) : undefined
  const jobs = new JobLifecycle({ store, queue, log, jobTimeoutMs: config.jobTimeoutMs, maxAttempts: config.jobMaxAttempts, eta, deliveryDeadlineMs: config.outputPut.deadlineMs })
  const startedAt = Date.now()
  const backlog = new QueueBacklog(store, async () => (await lucent.workers()).map((w) => w.backend))
  const lucent: Lucent = {
    config, role, store, storage, queue, backends, pool, jobs,
    prices: loadPrices(config.pricesFile),
    auth: new Authenticator(store instanceof SqliteStore ? (h) => store.keyByHashSync(h) : (h) => store.keyByHash(h), config.keyCacheMs),
    rate: backends.rate,
    engine: role.runsJobs || role.viaPrimary ? { state: 'starting' } : { state: 'ready', info: { role: role.role } },
    closing: false,
    metrics: new Metrics({
      queueCounts: async () => queue.counts ? queue.counts() : { waiting: queue.stats().waiting, active: queue.stats().running },
      workers: () => lucent.workers(),
      // the workers' autoscaling signal, read from the store for either queue (server/jobs/backlog.ts)
      backlog: () => backlog.get(),
    }),
    status: new StatusAnswers(role.hearsAllJobChanges),
    ownModels: new OwnModels(store.ownModels, storage, {
      cacheDir: path.join(config.dataDir, 'own-models'),
      refreshMs: config.ownModelsRefreshMs,
      // a removed model's loaded network and local copy go once every job that could hold its path has ended
      releaseAfterMs: config.jobTimeoutMs,
      forget: pool ? async (p) => { const r = await pool.forgetNetwork(p); return r.ok && r.forgotten } : undefined,
    }),
    // the catalog's networks and the segmentation models' (server/segmentation.ts: not catalog entries)
    installed: role.runsJobs ? new InstalledNetworks(config.modelDir, [...readCatalog().filter((m) => m.available).flatMap((m) => m.networks), ...SEG_MODELS.map((m) => m.network)]) : null,
    workerNetworks: new WorkerNetworks(() => lucent.workers()),
    async workers() {
      return registry ? registry.list() : pool ? [lucent.localWorker()] : role.childLink?.state?.worker ? [role.childLink.state.worker] : []
    },
    localWorker() {
      const e = lucent.engine
      const info = e.info && 'backend' in e.info ? e.info : undefined
      return {
        id: `local:${process.pid}`, host: 'local', pid: process.pid, backend: e.state === 'ready' ? info?.backend ?? 'cpu' : 'starting',
        adapter: info?.adapter ?? '', concurrency: config.workers, running: queue.stats().running, startedAt, heartbeatAt: Date.now(),
        missing: lucent.installed?.missing() ?? undefined,
      }
    },
  }
  // subscribers of the job lifecycle in every process (the cluster plugin adds the broadcast)
  lucent.metrics.watch(jobs)
  jobs.onChange((jobId) => lucent.status.changed(jobId))
  if (role.viaPrimary) lucent.metrics.dropJobFamilies()
  return lucent
}
