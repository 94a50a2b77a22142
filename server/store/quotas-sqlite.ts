/** Per-key quotas on SQLite (see ./quotas.ts): the schema block applied at open, and the queries. Reservations and
 *  commits run in IMMEDIATE transactions, so parallel uploads of one key (across processes too) are checked one
 *  after the other. */
import type Database from 'better-sqlite3'
import { checkPatch, defaultQuotas, mergeQuotas, parseOverrides, verdict, type CommitResult, type KeyQuotas, type QuotaStore, type QuotaUsage, type ReserveResult } from './quotas.js'

/** Applied at open (idempotent). `quota_objects.state`: reserved (streaming) | stored. `quota_presigned`: pre-signed
 *  S3 objects whose bytes are still to be measured (./quotas.ts). */
export const QUOTAS_SCHEMA_SQLITE = `
CREATE TABLE IF NOT EXISTS quota_overrides (
  key_id TEXT PRIMARY KEY,
  overrides TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS quota_objects (
  object_key TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  size INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS quota_objects_key ON quota_objects(key_id, expires_at);
CREATE INDEX IF NOT EXISTS jobs_key_status ON jobs(key_id, status);
CREATE TABLE IF NOT EXISTS quota_presigned (
  object_key TEXT PRIMARY KEY,
  link_expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS quota_presigned_due ON quota_presigned(link_expires_at);
`

export class SqliteQuotas implements QuotaStore {
  /** The defaults (LUCENT_QUOTA_*), read at open; a test or the process may replace them. */
  defaults: KeyQuotas
  private s
  private txReserve: Database.Transaction<(keyId: string, objectKey: string, bytes: number, expiresAt: number, now: number, linkExpiresAt: number | null) => ReserveResult>
  /** commit (measured: false) and measure (measured: true): ./quotas.ts. */
  private txSettle: Database.Transaction<(objectKey: string, size: number, expiresAt: number, now: number, measured: boolean, final: boolean) => CommitResult>

  constructor(db: Database.Database, defaults: KeyQuotas = defaultQuotas()) {
    db.exec(QUOTAS_SCHEMA_SQLITE)
    this.defaults = defaults
    this.s = {
      overrides: db.prepare<[string], { overrides: string }>('SELECT overrides FROM quota_overrides WHERE key_id = ?'),
      putOverrides: db.prepare(`INSERT INTO quota_overrides (key_id, overrides, updated_at) VALUES (?, ?, ?)
        ON CONFLICT (key_id) DO UPDATE SET overrides = excluded.overrides, updated_at = excluded.updated_at`),
      dropOverrides: db.prepare('DELETE FROM quota_overrides WHERE key_id = ?'),
      stored: db.prepare<[string, number, string], { bytes: number | null; files: number; first: number | null }>(`SELECT SUM(size) AS bytes, COUNT(*) AS files,
        MIN(expires_at) AS first FROM quota_objects WHERE key_id = ? AND expires_at > ? AND object_key <> ?`),
      jobs: db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE key_id = ? AND status = 'CONVERTING'"),
      put: db.prepare(`INSERT INTO quota_objects (object_key, key_id, size, expires_at, state, created_at) VALUES (?, ?, ?, ?, 'reserved', ?)
        ON CONFLICT (object_key) DO UPDATE SET key_id = excluded.key_id, size = excluded.size, expires_at = excluded.expires_at,
        state = 'reserved', created_at = excluded.created_at`),
      row: db.prepare<[string], { key_id: string; expires_at: number }>('SELECT key_id, expires_at FROM quota_objects WHERE object_key = ?'),
      settle: db.prepare("UPDATE quota_objects SET size = ?, expires_at = ?, state = 'stored' WHERE object_key = ?"),
      drop: db.prepare('DELETE FROM quota_objects WHERE object_key = ?'),
      rekey: db.prepare('UPDATE quota_objects SET object_key = ? WHERE object_key = ?'),
      purge: db.prepare('DELETE FROM quota_objects WHERE expires_at <= ?'),
      purgeKey: db.prepare('DELETE FROM quota_objects WHERE key_id = ? AND expires_at <= ?'),
      mark: db.prepare(`INSERT INTO quota_presigned (object_key, link_expires_at) VALUES (?, ?)
        ON CONFLICT (object_key) DO UPDATE SET link_expires_at = excluded.link_expires_at`),
      unmark: db.prepare('DELETE FROM quota_presigned WHERE object_key = ?'),
      presigned: db.prepare<[string], { key_id: string; link_expires_at: number }>(`SELECT o.key_id, p.link_expires_at FROM quota_presigned p
        JOIN quota_objects o ON o.object_key = p.object_key WHERE p.object_key = ?`),
      due: db.prepare<[number, number], { object_key: string; key_id: string | null }>(`SELECT p.object_key, o.key_id FROM quota_presigned p
        LEFT JOIN quota_objects o ON o.object_key = p.object_key WHERE p.link_expires_at <= ? ORDER BY o.created_at, p.object_key LIMIT ?`),
      empty: db.prepare('UPDATE quota_objects SET size = 0 WHERE object_key = ?'),
    }
    const s = this.s
    const usageOf = (keyId: string, now: number, except: string) => {
      const r = s.stored.get(keyId, now, except)!
      return { u: { storedBytes: r.bytes ?? 0, storedFiles: r.files, jobsInFlight: s.jobs.get(keyId)!.n }, first: r.first }
    }
    this.txReserve = db.transaction((keyId, objectKey, bytes, expiresAt, now, linkExpiresAt) => {
      s.purgeKey.run(keyId, now) // the key's expired rows: they count no more
      const q = mergeQuotas(this.defaults, parseOverrides(s.overrides.get(keyId)?.overrides))
      const { u, first } = usageOf(keyId, now, objectKey)
      const v = verdict(q, u, bytes, first)
      if (v.ok) {
        s.put.run(objectKey, keyId, bytes, expiresAt, now)
        if (linkExpiresAt !== null) s.mark.run(objectKey, linkExpiresAt)
      }
      return v
    })
    this.txSettle = db.transaction((objectKey, size, expiresAt, now, measured, final): CommitResult => {
      const row = s.row.get(objectKey)
      if (!row) return { ok: false, quota: 'stored_files', limit: 0, used: 0, retryAt: null }
      const q = mergeQuotas(this.defaults, parseOverrides(s.overrides.get(row.key_id)?.overrides))
      const { u, first } = usageOf(row.key_id, now, objectKey)
      if (q.maxStoredBytes !== null && u.storedBytes + size > q.maxStoredBytes) {
        // a streamed object's row goes; a measured one is kept at 0 bytes (and marked) until the caller has deleted it
        if (measured) s.empty.run(objectKey)
        else s.drop.run(objectKey)
        return { ok: false, quota: 'stored_bytes', limit: q.maxStoredBytes, used: u.storedBytes, retryAt: first }
      }
      s.settle.run(size, expiresAt, objectKey)
      if (final) s.unmark.run(objectKey)
      return { ok: true }
    })
  }

  async get(keyId: string) { return mergeQuotas(this.defaults, await this.overrides(keyId)) }
  async overrides(keyId: string) { return parseOverrides(this.s.overrides.get(keyId)?.overrides) }
  async set(keyId: string, patch: Partial<KeyQuotas> | null) {
    if (patch === null) this.s.dropOverrides.run(keyId)
    else {
      const p = checkPatch(patch)
      this.s.putOverrides.run(keyId, JSON.stringify({ ...(await this.overrides(keyId)), ...p }), Date.now())
    }
    return this.get(keyId)
  }
  async usage(keyId: string, now = Date.now()): Promise<QuotaUsage> {
    const r = this.s.stored.get(keyId, now, '')!
    return { storedBytes: r.bytes ?? 0, storedFiles: r.files, jobsInFlight: this.s.jobs.get(keyId)!.n }
  }
  async reserve(keyId: string, o: { objectKey: string; bytes: number; expiresAt: number; now?: number; linkExpiresAt?: number }) {
    return this.txReserve.immediate(keyId, o.objectKey, o.bytes, o.expiresAt, o.now ?? Date.now(), o.linkExpiresAt ?? null)
  }
  async commit(objectKey: string, o: { size: number; expiresAt: number; now?: number }) {
    return this.txSettle.immediate(objectKey, o.size, o.expiresAt, o.now ?? Date.now(), false, false)
  }
  /** Inside the store's debit transaction (sqlite.ts, synchronous): the key's jobs-in-flight quota and its CONVERTING
   *  jobs, when a new job would pass it; null when there is room. */
  jobsInFlightFull(keyId: string): { limit: number; used: number } | null {
    const limit = mergeQuotas(this.defaults, parseOverrides(this.s.overrides.get(keyId)?.overrides)).maxJobsInFlight
    if (limit === null) return null
    const used = this.s.jobs.get(keyId)!.n
    return used >= limit ? { limit, used } : null
  }
  async release(objectKey: string) {
    this.s.drop.run(objectKey)
    this.s.unmark.run(objectKey)
  }
  async presigned(objectKey: string) {
    const r = this.s.presigned.get(objectKey)
    return r ? { keyId: r.key_id, linkExpiresAt: r.link_expires_at } : null
  }
  async presignedDue(now: number, limit: number) {
    return this.s.due.all(now, limit).map((r) => ({ objectKey: r.object_key, keyId: r.key_id }))
  }
  async measure(objectKey: string, o: { size: number; expiresAt: number; final: boolean; now?: number }) {
    return this.txSettle.immediate(objectKey, o.size, o.expiresAt, o.now ?? Date.now(), true, o.final)
  }
  async rekey(objectKey: string, newKey: string) { this.s.rekey.run(newKey, objectKey) }
  async owner(objectKey: string, now = Date.now()) {
    const r = this.s.row.get(objectKey)
    return r && r.expires_at > now ? r.key_id : null
  }
  async purge(before: number) { return this.s.purge.run(before).changes }
}
