/**
 * The backends, chosen in ONE place from the configuration:
 *   store    LUCENT_DATABASE_URL -> PostgreSQL (PgStore, migrated on open), else SQLite in DATA_DIR
 *   storage  LUCENT_S3_ENDPOINT  -> S3 (pre-signed links), else local disk in DATA_DIR
 *   queue    LUCENT_REDIS_URL    -> BullMQ; an embedded cluster's child -> the primary's queue over IPC;
 *            else the in-process queue
 *   rate     LUCENT_REDIS_URL    -> Redis token buckets shared by gateways; a cluster child -> tokens leased
 *            from the primary; else in-process buckets
 *   registry LUCENT_REDIS_URL    -> the worker registry in Redis (live workers for /readyz and /metrics)
 * The scale-out backends are imported lazily: the embedded default never loads pg, ioredis or the AWS SDK.
 */
import path from 'node:path'
import type { Config } from './config.js'
import type { Store } from './store/types.js'
import type { MediaStorage } from './storage/types.js'
import type { Queue } from './queue/types.js'
import type { ProcessRole } from './roles/index.js'
import type { WorkerRegistry } from './roles/registry.js'
import { SqliteStore } from './store/sqlite.js'
import { LocalStorage, loadSecret } from './storage/local.js'
import { MemoryQueue } from './queue/memory.js'
import { RateLimiter } from './auth.js'
import { IpcQueue, IpcRateLimiter } from './cluster.js'

/** Per-key token buckets: in-process (sync), Redis (async) or leased from a cluster primary. */
export interface RateLimit { take(keyId: string, keyRate: number | null): void | Promise<void> }

export interface Backends {
  store: Store & { ping?: () => Promise<boolean> }
  storage: MediaStorage & { ping?: () => Promise<boolean>; close?: () => Promise<void> }
  queue: Queue & { ping?: () => Promise<boolean>; counts?: () => Promise<{ waiting: number; active: number; delayed: number; failed: number }> }
  rate: RateLimit
  /** The in-process buckets when this process owns them (a cluster primary leases tokens from them). */
  localRate: RateLimiter | null
  registry: WorkerRegistry | null
  /** Closes what only this module knows of (the Redis rate limiter's connection). */
  close(): Promise<void>
}

export async function openStore(config: Config): Promise<Backends['store']> {
  if (config.databaseUrl) {
    if (!/^postgres(ql)?:\/\//.test(config.databaseUrl)) throw new Error('configuration: LUCENT_DATABASE_URL must be a postgres:// URL')
    const { PgStore } = await import('./store/postgres.js')
    const pgStore = await PgStore.open(config.databaseUrl)
    pgStore.quotas.defaults = config.quotas
    return pgStore
  }
  const store = new SqliteStore(path.join(config.dataDir, 'lucent.db'))
  store.quotas.defaults = config.quotas // per-key quotas' defaults (LUCENT_QUOTA_*)
  return store
}

export async function openStorage(config: Config): Promise<Backends['storage']> {
  if (config.s3) {
    const { S3Storage } = await import('./storage/s3.js')
    return new S3Storage(config.s3)
  }
  return new LocalStorage(config.dataDir, loadSecret(config.dataDir), () => config.publicUrl, () => config.filesBaseUrl ?? config.publicUrl)
}

export async function openBackends(config: Config, role: ProcessRole): Promise<Backends> {
  const store = await openStore(config)
  const storage = await openStorage(config)
  if (config.redisUrl) {
    const { BullQueue } = await import('./queue/bullmq.js')
    const { RedisRateLimiter } = await import('./ratelimit/redis.js')
    const { WorkerRegistry } = await import('./roles/registry.js')
    const rate = new RedisRateLimiter(config.redisUrl, config.rateBurst, config.ratePerSec)
    return {
      store, storage, rate, localRate: null,
      queue: new BullQueue({
        redisUrl: config.redisUrl, max: config.queueMax, maxPerKey: config.queueMaxPerKey, concurrency: config.workers,
        // the store's attempt counter ends a job first (lifecycle.start); BullMQ's limits are the safety net. Stalls:
        // the run log gives a job back up to jobMaxAttempts attempts lost in company (server/store/job-runs.ts), so a
        // job may stall up to twice that before the store ends it
        attempts: config.jobMaxAttempts + 1, maxStalledCount: 2 * config.jobMaxAttempts + 1,
        backoffMs: config.queueBackoffMs, lockDurationMs: config.queueLockMs, stalledIntervalMs: config.queueStalledMs,
      }),
      registry: new WorkerRegistry(config.redisUrl),
      close: () => rate.close(),
    }
  }
  if (role.childLink) {
    return {
      store, storage, localRate: null, registry: null, close: async () => {},
      queue: new IpcQueue(role.childLink, config.queueMax, config.queueMaxPerKey),
      rate: new IpcRateLimiter(role.childLink, config.ratePerSec),
    }
  }
  const rate = new RateLimiter(config.rateBurst, config.ratePerSec)
  return {
    store, storage, rate, localRate: rate, registry: null, close: async () => {},
    queue: new MemoryQueue(config.queueMax, config.workers, config.queueMaxPerKey),
  }
}
