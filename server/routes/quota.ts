/**
 * Per-key quotas at the HTTP edge (the store's side: server/store/quotas.ts): the 429 answer and its headers, the
 * jobs-in-flight check of the submissions, and the stored-object bookkeeping of uploads and transfers (reserve before
 * a byte is read, cut the stream at the key's remaining bytes, commit with the object's retention, or nothing kept).
 *
 * Over a quota: HTTP 429, error_code 100429000, `Retry-After` (seconds), and the RateLimit header fields of
 * draft-ietf-httpapi-ratelimit-headers (-10 .. -12): `RateLimit-Policy: "<quota>";q=<limit>[;qu=<unit>][;w=<window>]`
 * and `RateLimit: "<quota>";r=<remaining>[;t=<seconds>]`, one policy per quota:
 * - "stored_bytes": q = bytes, qu = "content-bytes", w = the retention (what is stored stops counting after it);
 * - "stored_files": q = files, qu = "requests" (one upload or transfer each), w = the retention;
 * - "jobs_in_flight": q = jobs, qu = "concurrent-requests" (no window: a job stops counting when it ends).
 */
import type { FastifyReply } from 'fastify'
import { ApiError } from '../errors.js'
import { RETENTION_MS, type Lucent } from '../context.js'
import type { KeyQuotas, QuotaName, QuotaUsage } from '../store/quotas.js'

/** Retry-After of a refusal whose end is not known (jobs in flight, nothing of the key expiring). */
const RETRY_UNKNOWN_S = 5

const UNIT: Record<QuotaName, string> = { stored_bytes: 'content-bytes', stored_files: 'requests', jobs_in_flight: 'concurrent-requests' }

/** One RateLimit-Policy member (structured field: a quoted string with parameters). */
function policy(name: QuotaName, limit: number): string {
  const w = name === 'jobs_in_flight' ? '' : `;w=${Math.round(RETENTION_MS / 1000)}`
  return `"${name}";q=${limit};qu="${UNIT[name]}"${w}`
}

/** The 429 of a quota: Retry-After, RateLimit-Policy, RateLimit (remaining 0 or what is left), nothing else done. */
export function quotaError(name: QuotaName, o: { limit: number; used: number; retryAt: number | null; now?: number }): ApiError {
  const now = o.now ?? Date.now()
  const wait = o.retryAt !== null && o.retryAt > now ? Math.ceil((o.retryAt - now) / 1000) : RETRY_UNKNOWN_S
  const remaining = Math.max(0, o.limit - o.used)
  const what = name === 'stored_bytes' ? `${o.limit} bytes stored (${o.used} used)`
    : name === 'stored_files' ? `${o.limit} files stored (${o.used} used)` : `${o.limit} jobs in flight (${o.used} running or waiting)`
  return new ApiError(100429000, {
    detail: `quota ${name}: at most ${what}`,
    hint: `over the key's quota ${name}: at most ${what}`,
    headers: { 'retry-after': String(Math.max(1, wait)), 'ratelimit-policy': policy(name, o.limit), ratelimit: `"${name}";r=${remaining};t=${Math.max(1, wait)}` },
  })
}

/** `e` answered with `Connection: close`: a request body cut while streaming is not read to its end (the socket
 *  would hold its unread rest, and a client reusing the connection would hang). */
export function cutError(e: ApiError): ApiError {
  return new ApiError(e.errorCode, { detail: e.detail, status: e.status, hint: e.hint, headers: { ...e.headers, connection: 'close' } })
}

/** The key's stored-object quotas as headers of a successful upload/transfer (what is left after it). */
export function quotaHeaders(reply: FastifyReply, q: KeyQuotas, u: Pick<QuotaUsage, 'storedBytes' | 'storedFiles'>): void {
  const p: string[] = []
  const r: string[] = []
  if (q.maxStoredBytes !== null) {
    p.push(policy('stored_bytes', q.maxStoredBytes))
    r.push(`"stored_bytes";r=${Math.max(0, q.maxStoredBytes - u.storedBytes)}`)
  }
  if (q.maxStoredFiles !== null) {
    p.push(policy('stored_files', q.maxStoredFiles))
    r.push(`"stored_files";r=${Math.max(0, q.maxStoredFiles - u.storedFiles)}`)
  }
  if (p.length) reply.header('ratelimit-policy', p.join(', ')).header('ratelimit', r.join(', '))
}

/** A submission of a key at its jobs-in-flight quota: 429 before anything is fetched or debited. A fast path only:
 *  the exact count is taken again in the store's debit transaction (debitAndCreateJob refuses with reason
 *  'jobs_in_flight', answered with the same 429), so parallel submissions of one key cannot pass it together. */
export async function checkJobsInFlight(l: Lucent, keyId: string): Promise<void> {
  const q = await l.store.quotas.get(keyId)
  if (q.maxJobsInFlight === null) return
  const u = await l.store.quotas.usage(keyId)
  if (u.jobsInFlight >= q.maxJobsInFlight) throw quotaError('jobs_in_flight', { limit: q.maxJobsInFlight, used: u.jobsInFlight, retryAt: null })
}

/** A key already at its file or byte quota (batch requests answer 429 as a whole then). */
export async function checkStoredRoom(l: Lucent, keyId: string): Promise<void> {
  const q = await l.store.quotas.get(keyId)
  if (q.maxStoredFiles === null && q.maxStoredBytes === null) return
  const u = await l.store.quotas.usage(keyId)
  if (q.maxStoredFiles !== null && u.storedFiles >= q.maxStoredFiles) throw quotaError('stored_files', { limit: q.maxStoredFiles, used: u.storedFiles, retryAt: null })
  if (q.maxStoredBytes !== null && u.storedBytes >= q.maxStoredBytes) throw quotaError('stored_bytes', { limit: q.maxStoredBytes, used: u.storedBytes, retryAt: null })
}

/** An object being stored for a key: reserved (one file) before any byte is read; `maxBytes` = what it may hold
 *  (the per-upload limit or the key's remaining bytes, the smaller); `overQuota(n)`: whether a cut at n bytes was
 *  the quota's (429) rather than the upload limit's (400). */
export interface Reservation {
  maxBytes: number
  overQuota(): boolean
  /** The object is stored with `size` bytes: recorded with its retention; throws the 429 when parallel uploads of
   *  the key passed the quota meanwhile (the caller deletes the object). */
  commit(size: number): Promise<void>
  /** Nothing was kept. */
  release(): Promise<void>
  /** The reservation now stands for `objectKey` (commit and release follow it). */
  rekey(objectKey: string): Promise<void>
  /** The quota's 429 for a stream cut at maxBytes (`Connection: close`: the rest of the body is not read). */
  error(): ApiError
}

/** Reserves `objectKey` for `keyId` (429 when the key is at its file or byte quota). `expiresAt`: how long the
 *  reservation counts before its commit (default: an hour; a pre-signed PUT: its link's expiry). `hold`: the object's
 *  whole cut (the smaller of `limitBytes` and the key's remaining bytes) is reserved, not only its file: what parallel
 *  transfers of one key hold on disk at once stays within the key's remaining bytes (each one's cut is what the
 *  others' reservations leave; the commit sets the real size). `linkExpiresAt`: a pre-signed PUT to the bucket (S3),
 *  its bytes measured later (./presigned.ts). */
export async function reserveObject(l: Lucent, keyId: string, objectKey: string, limitBytes: number, expiresAt?: number, opts: { hold?: boolean; linkExpiresAt?: number } = {}): Promise<Reservation> {
  const now = Date.now()
  const exp = expiresAt ?? now + 3600_000
  let r = await l.store.quotas.reserve(keyId, { objectKey, bytes: 0, expiresAt: exp, now, linkExpiresAt: opts.linkExpiresAt })
  if (!r.ok) throw quotaError(r.quota, r)
  // hold: grow the row to the cut, atomically checked; another reservation meanwhile leaves less: try what it left
  for (let i = 0; opts.hold && r.ok && r.remainingBytes !== null && i < 5; i++) {
    const want = Math.max(1, Math.min(limitBytes, r.remainingBytes))
    const g = await l.store.quotas.reserve(keyId, { objectKey, bytes: want, expiresAt: exp, now })
    if (g.ok) {
      r = { ...g, remainingBytes: want }
      break
    }
    if (g.quota !== 'stored_bytes' || g.limit - g.used < 1 || i === 4) {
      await l.store.quotas.release(objectKey).catch(() => {})
      // the room was there a moment ago: other transfers' reservations took it, they end soon (Retry-After 5)
      throw quotaError(g.quota, g.quota === 'stored_bytes' ? { ...g, retryAt: null } : g)
    }
    r = { ok: true, remainingBytes: g.limit - g.used, quotas: g.quotas, usage: g.usage }
  }
  const quotaCap = r.remainingBytes
  const maxBytes = quotaCap === null ? limitBytes : Math.max(0, Math.min(limitBytes, quotaCap))
  const limit = r.quotas.maxStoredBytes ?? 0
  const err = () => cutError(quotaError('stored_bytes', { limit, used: r.usage.storedBytes, retryAt: null }))
  return {
    maxBytes,
    overQuota: () => quotaCap !== null && quotaCap < limitBytes,
    error: err,
    async commit(size: number) {
      const c = await l.store.quotas.commit(objectKey, { size, expiresAt: Date.now() + RETENTION_MS })
      if (!c.ok) throw quotaError(c.quota, c)
    },
    async release() { await l.store.quotas.release(objectKey) },
    async rekey(to: string) {
      await l.store.quotas.rekey(objectKey, to)
      objectKey = to
    },
  }
}
