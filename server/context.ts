/** What the routes share (decorated on the Fastify instance as `lucent`). */
import type { Config } from './config.js'
import type { Store } from './store/types.js'
import type { MediaStorage } from './storage/types.js'
import type { Queue } from './queue/types.js'
import type { EnginePool } from './worker/pool.js'
import type { Prices } from './pricing.js'
import type { Authenticator } from './auth.js'
import type { Metrics } from './metrics.js'
import type { ApiKey } from './store/types.js'
import type { StatusAnswers } from './jobs/status.js'

export interface Lucent {
  config: Config
  store: Store
  storage: MediaStorage
  queue: Queue
  /** The engine pool; null in the gateway role (which never runs models). */
  pool: EnginePool
  prices: Prices
  auth: Authenticator
  /** In-process token buckets, or Redis ones shared by gateways (async). */
  rate: { take(keyId: string, keyRate: number | null): void | Promise<void> }
  engine: { state: 'starting' | 'ready' | 'error'; info?: unknown; models?: string[]; error?: string }
  closing: boolean
  metrics: Metrics
  /** task-status answers kept in memory (server/jobs/status.ts). */
  status: StatusAnswers
}

declare module 'fastify' {
  interface FastifyInstance { lucent: Lucent }
  interface FastifyRequest { apiKey: ApiKey | null }
  interface FastifyContextConfig { public?: boolean }
}

export const ok = <T>(data: T) => ({ code: 200 as const, message: 'OK' as const, data })

export const RETENTION_MS = 7 * 24 * 3600 * 1000
