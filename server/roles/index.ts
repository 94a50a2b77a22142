/**
 * Role split and backend selection, from the configuration:
 *   store   : LUCENT_DATABASE_URL set -> PostgreSQL (PgStore, migrated on open), else SQLite in DATA_DIR
 *   storage : LUCENT_S3_ENDPOINT set  -> S3 (pre-signed links), else local disk in DATA_DIR
 *   queue   : LUCENT_REDIS_URL set    -> BullMQ, else the in-process queue
 *   rate    : LUCENT_REDIS_URL set    -> Redis token buckets shared by gateways, else in-process
 * Roles: gateway (HTTP API; never loads the engine), worker (consumes the queue with the engine pool; serves
 * only /healthz /readyz /metrics), all (both in one process: the embedded default).
 * The scale-out backends are imported lazily: the embedded default never loads pg, ioredis or the AWS SDK.
 */
import path from 'node:path'
import type { Config } from '../config.js'
import type { Store } from '../store/types.js'
import { SqliteStore } from '../store/sqlite.js'

export type Role = Config['role']

export async function openStore(config: Config): Promise<Store & { ping?: () => Promise<boolean> }> {
  if (config.databaseUrl) {
    if (!/^postgres(ql)?:\/\//.test(config.databaseUrl)) throw new Error('configuration: LUCENT_DATABASE_URL must be a postgres:// URL')
    const { PgStore } = await import('../store/postgres.js')
    return PgStore.open(config.databaseUrl)
  }
  return new SqliteStore(path.join(config.dataDir, 'lucent.db'))
}

/** Checks that the role can run with this configuration (split roles need a shared queue). */
export function checkRole(config: Config): void {
  if (config.role !== 'all' && !config.redisUrl) {
    throw new Error(`configuration: --role ${config.role} needs LUCENT_REDIS_URL (gateways and workers share the BullMQ queue)`)
  }
}
