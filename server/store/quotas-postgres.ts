/** Per-key quotas on PostgreSQL (see ./quotas.ts): the migration appended to the store's list, and the queries.
 *  Reservations and commits of one key are serialised by a transaction-scoped advisory lock on the key, so parallel
 *  uploads on several gateways cannot pass the quota together. */
import type pg from 'pg'
import { pgTx } from './pg-tx.js'
import { checkPatch, defaultQuotas, mergeQuotas, parseOverrides, verdict, type CommitResult, type KeyQuotas, type QuotaStore, type QuotaUsage, type ReserveResult } from './quotas.js'

/** One migration (appended to the store's list; idempotent). */
export const QUOTAS_MIGRATION_PG = `
  CREATE TABLE IF NOT EXISTS quota_overrides (
    key_id TEXT PRIMARY KEY,
    overrides TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS quota_objects (
    object_key TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    size BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    state TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS quota_objects_key ON quota_objects(key_id, expires_at);
  CREATE INDEX IF NOT EXISTS jobs_key_status ON jobs(key_id, status);
`

/** The next migration (appended after QUOTAS_MIGRATION_PG): pre-signed S3 objects whose bytes are still to be
 *  measured (./quotas.ts). */
export const QUOTAS_PRESIGNED_MIGRATION_PG = `
  CREATE TABLE IF NOT EXISTS quota_presigned (
    object_key TEXT PRIMARY KEY,
    link_expires_at BIGINT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS quota_presigned_due ON quota_presigned(link_expires_at);
`

/** Advisory lock namespace of the quota rows of one key (pg_advisory_xact_lock(ns, hashtext(key))). */
const LOCK_NS = 0x71756f74 // 'quot'

export class PgQuotas implements QuotaStore {
  defaults: KeyQuotas
  constructor(private readonly pool: pg.Pool, defaults: KeyQuotas = defaultQuotas()) { this.defaults = defaults }

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return pgTx(this.pool, fn)
  }
  private async usageOf(c: pg.Pool | pg.PoolClient, keyId: string, now: number, except: string) {
    const r = (await c.query<{ bytes: string | null; files: string; first: number | null }>(`SELECT SUM(size) AS bytes, COUNT(*) AS files, MIN(expires_at) AS first
      FROM quota_objects WHERE key_id = $1 AND expires_at > $2 AND object_key <> $3`, [keyId, now, except])).rows[0]
    const j = (await c.query<{ n: string }>("SELECT COUNT(*) AS n FROM jobs WHERE key_id = $1 AND status = 'CONVERTING'", [keyId])).rows[0]
    return { u: { storedBytes: Number(r.bytes ?? 0), storedFiles: Number(r.files), jobsInFlight: Number(j.n) }, first: r.first === null ? null : Number(r.first) }
  }
  private async quotasOf(c: pg.Pool | pg.PoolClient, keyId: string) {
    const r = await c.query<{ overrides: string }>('SELECT overrides FROM quota_overrides WHERE key_id = $1', [keyId])
    return mergeQuotas(this.defaults, parseOverrides(r.rows[0]?.overrides))
  }

  async get(keyId: string) { return this.quotasOf(this.pool, keyId) }
  async overrides(keyId: string) {
    return parseOverrides((await this.pool.query<{ overrides: string }>('SELECT overrides FROM quota_overrides WHERE key_id = $1', [keyId])).rows[0]?.overrides)
  }
  async set(keyId: string, patch: Partial<KeyQuotas> | null) {
    if (patch === null) await this.pool.query('DELETE FROM quota_overrides WHERE key_id = $1', [keyId])
    else {
      const p = checkPatch(patch)
      await this.tx(async (c) => {
        const cur = await c.query<{ overrides: string }>('SELECT overrides FROM quota_overrides WHERE key_id = $1 FOR UPDATE', [keyId])
        await c.query(`INSERT INTO quota_overrides (key_id, overrides, updated_at) VALUES ($1, $2, $3)
          ON CONFLICT (key_id) DO UPDATE SET overrides = EXCLUDED.overrides, updated_at = EXCLUDED.updated_at`,
        [keyId, JSON.stringify({ ...parseOverrides(cur.rows[0]?.overrides), ...p }), Date.now()])
      })
    }
    return this.get(keyId)
  }
  async usage(keyId: string, now = Date.now()): Promise<QuotaUsage> { return (await this.usageOf(this.pool, keyId, now, '')).u }
  async reserve(keyId: string, o: { objectKey: string; bytes: number; expiresAt: number; now?: number; linkExpiresAt?: number }): Promise<ReserveResult> {
    const now = o.now ?? Date.now()
    return this.tx(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_NS, keyId])
      await c.query('DELETE FROM quota_objects WHERE key_id = $1 AND expires_at <= $2', [keyId, now]) // they count no more
      const q = await this.quotasOf(c, keyId)
      const { u, first } = await this.usageOf(c, keyId, now, o.objectKey)
      const v = verdict(q, u, o.bytes, first)
      if (v.ok) {
        await c.query(`INSERT INTO quota_objects (object_key, key_id, size, expires_at, state, created_at) VALUES ($1, $2, $3, $4, 'reserved', $5)
          ON CONFLICT (object_key) DO UPDATE SET key_id = EXCLUDED.key_id, size = EXCLUDED.size, expires_at = EXCLUDED.expires_at,
          state = 'reserved', created_at = EXCLUDED.created_at`, [o.objectKey, keyId, o.bytes, o.expiresAt, now])
        if (o.linkExpiresAt !== undefined) {
          await c.query(`INSERT INTO quota_presigned (object_key, link_expires_at) VALUES ($1, $2)
            ON CONFLICT (object_key) DO UPDATE SET link_expires_at = EXCLUDED.link_expires_at`, [o.objectKey, o.linkExpiresAt])
        }
      }
      return v
    })
  }
  async commit(objectKey: string, o: { size: number; expiresAt: number; now?: number }): Promise<CommitResult> {
    return this.settle(objectKey, o.size, o.expiresAt, o.now ?? Date.now(), false, false)
  }
  /** Inside the store's debit transaction (postgres.ts, `c` holding the key's row lock): the key's jobs-in-flight
   *  quota and its CONVERTING jobs, when a new job would pass it; null when there is room. */
  async jobsInFlightFull(c: pg.PoolClient, keyId: string): Promise<{ limit: number; used: number } | null> {
    const limit = (await this.quotasOf(c, keyId)).maxJobsInFlight
    if (limit === null) return null
    const used = Number((await c.query<{ n: string }>("SELECT COUNT(*) AS n FROM jobs WHERE key_id = $1 AND status = 'CONVERTING'", [keyId])).rows[0].n)
    return used >= limit ? { limit, used } : null
  }
  async rekey(objectKey: string, newKey: string) { await this.pool.query('UPDATE quota_objects SET object_key = $1 WHERE object_key = $2', [newKey, objectKey]) }
  async release(objectKey: string) {
    await this.tx(async (c) => {
      await c.query('DELETE FROM quota_objects WHERE object_key = $1', [objectKey])
      await c.query('DELETE FROM quota_presigned WHERE object_key = $1', [objectKey])
    })
  }
  async presigned(objectKey: string) {
    const r = (await this.pool.query<{ key_id: string; link_expires_at: string }>(`SELECT o.key_id, p.link_expires_at FROM quota_presigned p
      JOIN quota_objects o ON o.object_key = p.object_key WHERE p.object_key = $1`, [objectKey])).rows[0]
    return r ? { keyId: r.key_id, linkExpiresAt: Number(r.link_expires_at) } : null
  }
  async presignedDue(now: number, limit: number) {
    const r = await this.pool.query<{ object_key: string; key_id: string | null }>(`SELECT p.object_key, o.key_id FROM quota_presigned p
      LEFT JOIN quota_objects o ON o.object_key = p.object_key WHERE p.link_expires_at <= $1 ORDER BY o.created_at NULLS FIRST, p.object_key LIMIT $2`, [now, limit])
    return r.rows.map((x) => ({ objectKey: x.object_key, keyId: x.key_id }))
  }
  async measure(objectKey: string, o: { size: number; expiresAt: number; final: boolean; now?: number }): Promise<CommitResult> {
    return this.settle(objectKey, o.size, o.expiresAt, o.now ?? Date.now(), true, o.final)
  }
  /** commit (measured: false) and measure (measured: true): ./quotas.ts. */
  private settle(objectKey: string, size: number, expiresAt: number, now: number, measured: boolean, final: boolean): Promise<CommitResult> {
    return this.tx(async (c) => {
      const row = (await c.query<{ key_id: string }>('SELECT key_id FROM quota_objects WHERE object_key = $1', [objectKey])).rows[0]
      if (!row) return { ok: false, quota: 'stored_files', limit: 0, used: 0, retryAt: null }
      await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_NS, row.key_id])
      const q = await this.quotasOf(c, row.key_id)
      const { u, first } = await this.usageOf(c, row.key_id, now, objectKey)
      if (q.maxStoredBytes !== null && u.storedBytes + size > q.maxStoredBytes) {
        // a streamed object's row goes; a measured one is kept at 0 bytes (and marked) until the caller has deleted it
        await c.query(measured ? 'UPDATE quota_objects SET size = 0 WHERE object_key = $1' : 'DELETE FROM quota_objects WHERE object_key = $1', [objectKey])
        return { ok: false, quota: 'stored_bytes', limit: q.maxStoredBytes, used: u.storedBytes, retryAt: first }
      }
      const r = await c.query("UPDATE quota_objects SET size = $1, expires_at = $2, state = 'stored' WHERE object_key = $3", [size, expiresAt, objectKey])
      if (r.rowCount !== 1) return { ok: false, quota: 'stored_files', limit: 0, used: 0, retryAt: null }
      if (final) await c.query('DELETE FROM quota_presigned WHERE object_key = $1', [objectKey])
      return { ok: true }
    })
  }
  async owner(objectKey: string, now = Date.now()) {
    const r = (await this.pool.query<{ key_id: string }>('SELECT key_id FROM quota_objects WHERE object_key = $1 AND expires_at > $2', [objectKey, now])).rows[0]
    return r?.key_id ?? null
  }
  async purge(before: number) { return (await this.pool.query('DELETE FROM quota_objects WHERE expires_at <= $1', [before])).rowCount ?? 0 }
}
