/**
 * Per-key quotas (issue 29: stored bytes and files, jobs in flight): the interface, the defaults from settings and
 * the shared rules; SQLite in quotas-sqlite.ts, PostgreSQL in quotas-postgres.ts. Reachable as `store.quotas`.
 *
 * - A key's quotas are the defaults (LUCENT_QUOTA_STORED_BYTES, LUCENT_QUOTA_STORED_FILES, LUCENT_QUOTA_JOBS_IN_FLIGHT)
 *   with the key's overrides merged over them (`set`; null as a value = unlimited; `set(key, null)` = defaults).
 * - Stored objects of a key (uploads and transfers) are rows `quota_objects` (object key, size, expiry): what has
 *   expired (its retention passed) stops counting. A streamed object is `reserve`d first (one file, the bytes known
 *   so far, a short expiry), cut while streaming at the key's remaining bytes, then `commit`ted with its real size
 *   and retention, atomically checked again (parallel uploads of one key cannot pass the quota together), or
 *   `release`d (nothing kept).
 * - A pre-signed PUT on S3 goes to the bucket, never through the gateway: its row is also in `quota_presigned` (the
 *   link's expiry) until its bytes are measured for good (server/routes/presigned.ts: HEAD at a job's first use, and
 *   once the link has expired); `measure` records the real size as `commit` does, atomically checked against what
 *   the key's other objects hold.
 * - Jobs in flight = the key's CONVERTING jobs (read from the jobs table).
 */
import { readSetting } from '../settings.js'

/** null = unlimited. */
export interface KeyQuotas {
  maxStoredBytes: number | null
  maxStoredFiles: number | null
  maxJobsInFlight: number | null
}

export interface QuotaUsage {
  /** Bytes of the key's unexpired stored objects (reserved ones count what they reserved). */
  storedBytes: number
  /** The key's unexpired stored objects (reserved ones included). */
  storedFiles: number
  /** The key's CONVERTING jobs. */
  jobsInFlight: number
}

/** Which quota refused. */
export type QuotaName = 'stored_bytes' | 'stored_files' | 'jobs_in_flight'

export type ReserveResult =
  /** `remainingBytes`: what the object may still grow to (null: unlimited) — cut the stream there. */
  | { ok: true; remainingBytes: number | null; quotas: KeyQuotas; usage: QuotaUsage }
  /** `retryAt`: when the earliest object of the key expires (ms epoch; null: unknown). */
  | { ok: false; quota: QuotaName; limit: number; used: number; retryAt: number | null; quotas: KeyQuotas; usage: QuotaUsage }

export type CommitResult =
  | { ok: true }
  | { ok: false; quota: QuotaName; limit: number; used: number; retryAt: number | null }

export interface QuotaStore {
  /** The defaults every key has unless overridden (config.quotas, from LUCENT_QUOTA_*; set where the store is opened). */
  defaults: KeyQuotas
  /** The key's quotas: its overrides merged over the defaults. */
  get(keyId: string): Promise<KeyQuotas>
  /** Only the key's overrides (admin views; {} = all defaults). */
  overrides(keyId: string): Promise<Partial<KeyQuotas>>
  /** Merges `patch` into the key's overrides (a field set to null = unlimited, a field absent = unchanged);
   *  `null` = back to the defaults. Returns the key's quotas after. */
  set(keyId: string, patch: Partial<KeyQuotas> | null): Promise<KeyQuotas>
  usage(keyId: string, now?: number): Promise<QuotaUsage>
  /** Records a new stored object of the key (one file, `bytes` reserved, expiring at `expiresAt`: RESERVATION_MS
   *  ahead for a stream, the link's expiry for a pre-signed PUT) if the key's file
   *  and byte quotas allow it; atomic against parallel reservations of the key. The same `objectKey` again (an
   *  overwrite) replaces its row and counts once. `linkExpiresAt`: the object is a pre-signed PUT to the bucket (S3),
   *  its bytes to be measured (`presigned`, `presignedDue`, `measure`), in the same transaction. */
  reserve(keyId: string, o: { objectKey: string; bytes: number; expiresAt: number; now?: number; linkExpiresAt?: number }): Promise<ReserveResult>
  /** The object's final size and expiry; refused (and the row dropped) when the key's other objects plus `size` pass
   *  the byte quota. ok:false with quota 'stored_files' when the row is gone. */
  commit(objectKey: string, o: { size: number; expiresAt: number; now?: number }): Promise<CommitResult>
  /** The row of `objectKey` now under `newKey` (a transfer reserves before its object's name is known). */
  rekey(objectKey: string, newKey: string): Promise<void>
  /** Drops the object's row (nothing was kept), its pre-signed mark too. */
  release(objectKey: string): Promise<void>
  /** A pre-signed S3 object whose bytes are still to be measured: the key that asked for it and its link's expiry
   *  (ms epoch); null when none (its quota row gone, or measured for good). */
  presigned(objectKey: string): Promise<{ keyId: string; linkExpiresAt: number } | null>
  /** Pre-signed S3 objects whose link expired at or before `now`, oldest presign first (at most `limit`); keyId null
   *  where the object's quota row is gone (its retention over: nothing counts it). */
  presignedDue(now: number, limit: number): Promise<Array<{ objectKey: string; keyId: string | null }>>
  /** A pre-signed object's measured `size` (its row's expiry now `expiresAt`), atomically checked as `commit` is:
   *  the key's other objects plus `size` within the byte quota, or ok:false with the row kept at 0 bytes (the caller
   *  deletes the object, then `release`s it when `final`). `final` (the link has expired: nothing can change the object
   *  any more) and ok: the pre-signed mark goes. ok:false with quota 'stored_files' when the row is gone. */
  measure(objectKey: string, o: { size: number; expiresAt: number; final: boolean; now?: number }): Promise<CommitResult>
  /** The key owning a reserved/stored object (signed uploads: the PUT carries no API key); null when none. */
  owner(objectKey: string, now?: number): Promise<string | null>
  /** Drops rows expired before `before` (ms epoch); returns how many. */
  purge(before: number): Promise<number>
}

/** The defaults from settings (LUCENT_QUOTA_*; 0 = unlimited). */
export function defaultQuotas(env: NodeJS.ProcessEnv = process.env): KeyQuotas {
  const n = (name: string): number | null => {
    const v = Number(readSetting(env, name))
    return Number.isFinite(v) && v > 0 ? v : null
  }
  return {
    maxStoredBytes: n('LUCENT_QUOTA_STORED_BYTES'),
    maxStoredFiles: n('LUCENT_QUOTA_STORED_FILES'),
    maxJobsInFlight: n('LUCENT_QUOTA_JOBS_IN_FLIGHT'),
  }
}

const FIELDS = ['maxStoredBytes', 'maxStoredFiles', 'maxJobsInFlight'] as const

/** A patch checked: only known fields, each null or an integer >= 0. Throws TypeError otherwise. */
export function checkPatch(patch: Partial<KeyQuotas>): Partial<KeyQuotas> {
  const out: Partial<KeyQuotas> = {}
  for (const [k, v] of Object.entries(patch)) {
    if (!(FIELDS as readonly string[]).includes(k)) throw new TypeError(`unknown quota ${k}`)
    if (v === undefined) continue
    if (v !== null && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)) throw new TypeError(`quota ${k} must be null or an integer >= 0`)
    out[k as typeof FIELDS[number]] = v
  }
  return out
}

/** The overrides as stored (JSON text) merged over the defaults. */
export function mergeQuotas(defaults: KeyQuotas, overrides: Partial<KeyQuotas>): KeyQuotas {
  const q = { ...defaults }
  for (const f of FIELDS) if (f in overrides && overrides[f] !== undefined) q[f] = overrides[f] as number | null
  return q
}

export function parseOverrides(s: string | null | undefined): Partial<KeyQuotas> {
  if (!s) return {}
  try {
    return checkPatch(JSON.parse(s) as Partial<KeyQuotas>)
  } catch {
    return {}
  }
}

/** A reservation's verdict from the key's quotas and usage (before the new object): a file more must fit, and at
 *  least one byte more (a key at its byte quota stores nothing, not even a stream that might be empty). */
export function verdict(q: KeyQuotas, u: QuotaUsage, bytes: number, retryAt: number | null): ReserveResult {
  if (q.maxStoredFiles !== null && u.storedFiles + 1 > q.maxStoredFiles) return { ok: false, quota: 'stored_files', limit: q.maxStoredFiles, used: u.storedFiles, retryAt, quotas: q, usage: u }
  if (q.maxStoredBytes !== null && u.storedBytes + Math.max(1, bytes) > q.maxStoredBytes) return { ok: false, quota: 'stored_bytes', limit: q.maxStoredBytes, used: u.storedBytes, retryAt, quotas: q, usage: u }
  return { ok: true, remainingBytes: q.maxStoredBytes === null ? null : q.maxStoredBytes - u.storedBytes, quotas: q, usage: u }
}

/** How long a reservation counts before its commit (a process that died mid-upload frees it then). */
export const RESERVATION_MS = 3600_000
