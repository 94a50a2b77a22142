/**
 * Pre-signed PUTs on S3 storage, counted by what the bucket holds (issue 29, per-key quotas). Such a link is signed for
 * its content-type only (compat.md: the request carries no size, the official client PUTs raw bytes) and the PUT goes
 * to the bucket, never through the gateway: presign-put reserves one file of the key's quota and marks the object
 * (./oss.ts; server/store/quotas.ts `quota_presigned`), and its bytes are measured here, with a HEAD of the object:
 * - when a job first names its access_url (`measureInput`, from routes/jobs.ts before anything is read or debited);
 * - once its link has expired (`measurePresigned`, from the hourly sweep of server/plugins/lifecycle.ts): for good,
 *   nothing can change the object any more (one PUT again, bigger, to a link still valid after a job's measure is
 *   measured then).
 * A measure, in this order:
 * - no object: while the link is valid nothing changes; once it has expired its row goes (the file stops counting);
 * - bigger than the largest upload the service accepts (LUCENT_UPLOAD_MAX_BYTES, the multipart and PUT limit): the
 *   object is deleted and stops counting; a job naming it gets its kind's too-large answer (110400009 photo,
 *   110400008 video), nothing debited;
 * - else its size is recorded against the key that asked for the link, atomically checked against what the key's other
 *   objects hold (the store's `measure`); past the key's stored-bytes quota it is deleted (the sweep measures oldest
 *   presign first, so the newest over-quota objects go) and a job naming it gets the quota's 429, nothing debited;
 * - it counts until its retention from its last change is over (LastModified + RETENTION_MS: when the bucket sweep
 *   deletes it).
 * A key at its byte quota then gets 429 from presign-put and uploads (./quota.ts), as for every other upload.
 */
import { ApiError, fetchErrorCode } from '../errors.js'
import { RETENTION_MS, type Lucent } from '../context.js'
import { quotaError } from './quota.js'

/** What one measure found and did. */
export type Measure =
  | { state: 'absent' }
  | { state: 'kept'; size: number }
  | { state: 'oversize'; size: number }
  | { state: 'over_quota'; size: number; refusal: { limit: number; used: number; retryAt: number | null } }
  /** Its quota row was gone (the retention of its presign over): nothing counted it, deleted. */
  | { state: 'untracked' }

/** HEADs one pre-signed object and records it (see the header). `final`: its link has expired. */
async function measureOne(l: Lucent, objectKey: string, final: boolean, now: number): Promise<Measure> {
  const h = await l.storage.head!(objectKey)
  if (!h) {
    if (final) await l.store.quotas.release(objectKey)
    return { state: 'absent' }
  }
  const expiresAt = h.modifiedAt + RETENTION_MS
  if (h.size > l.config.uploadMaxBytes) {
    // deleted first: a failure leaves the rows (and the mark), the next sweep tries again
    await l.storage.delete(objectKey)
    if (final) await l.store.quotas.release(objectKey)
    else await l.store.quotas.measure(objectKey, { size: 0, expiresAt, final: false, now })
    return { state: 'oversize', size: h.size }
  }
  const m = await l.store.quotas.measure(objectKey, { size: h.size, expiresAt, final, now })
  if (m.ok) return { state: 'kept', size: h.size }
  await l.storage.delete(objectKey)
  if (m.quota !== 'stored_bytes') {
    await l.store.quotas.release(objectKey)
    return { state: 'untracked' }
  }
  // the row stays at 0 bytes while the link is valid (a PUT again is measured when it has expired)
  if (final) await l.store.quotas.release(objectKey)
  return { state: 'over_quota', size: h.size, refusal: m }
}

/** A job's input URL: when it is the access_url of a pre-signed S3 object not measured for good, its bytes are
 *  measured now, before anything is read or debited; throws the too-large answer (object over the upload limit) or
 *  the stored-bytes 429 (object past the quota of the key that asked for its link; to another key naming it, the
 *  answer of an input that cannot be read, never the owner's figures). Anything else is left to the
 *  input's loading (server/input.ts). */
export async function measureInput(l: Lucent, url: string, kind: 'photo' | 'video', requester: string): Promise<void> {
  if (!l.storage.head) return
  const key = l.storage.ownKey(url)
  if (key === null || key === 'invalid') return
  const p = await l.store.quotas.presigned(key)
  if (!p) return
  const now = Date.now()
  const m = await measureOne(l, key, now >= p.linkExpiresAt, now)
  if (m.state === 'oversize') {
    throw new ApiError(fetchErrorCode('too_large', kind), { detail: `the uploaded object holds ${m.size} bytes, over the upload limit of ${l.config.uploadMaxBytes}: deleted` })
  }
  // the owner's limit and usage are the owner's: another key naming the object learns only that it is gone
  if (m.state === 'over_quota') throw p.keyId === requester ? quotaError('stored_bytes', m.refusal) : new ApiError(fetchErrorCode('not_found', kind))
}

export interface PresignedSweep {
  /** Objects HEADed. */
  measured: number
  kept: number
  /** Deleted: over the upload limit, past the key's quota, or no longer counted. */
  deleted: number
  /** Links never used (no object): their file freed. */
  absent: number
  /** Not measured this time (storage or store error): tried again at the next sweep. */
  failed: number
}

async function sweep(l: Lucent, o: { now?: number; batch?: number }): Promise<PresignedSweep> {
  const out: PresignedSweep = { measured: 0, kept: 0, deleted: 0, absent: 0, failed: 0 }
  if (!l.storage.head) return out
  const now = o.now ?? Date.now()
  const batch = o.batch ?? 500
  const failed = new Set<string>()
  while (!l.closing) {
    const due = (await l.store.quotas.presignedDue(now, batch + failed.size)).filter((d) => !failed.has(d.objectKey))
    if (!due.length) break
    let progress = false
    for (const d of due) {
      if (l.closing) break
      try {
        if (d.keyId === null) {
          // its quota row is gone (the presign's retention over): nothing counts it, nothing is kept
          await l.storage.delete(d.objectKey)
          await l.store.quotas.release(d.objectKey)
          out.deleted++
        } else {
          const m = await measureOne(l, d.objectKey, true, now)
          out.measured++
          if (m.state === 'kept') out.kept++
          else if (m.state === 'absent') out.absent++
          else out.deleted++
        }
        progress = true
      } catch {
        failed.add(d.objectKey)
        out.failed++
      }
    }
    if (!progress) break // storage or store down: the next sweep tries again
  }
  return out
}

const runs = new WeakMap<Lucent, { current: Promise<PresignedSweep> | null; waiting: Promise<PresignedSweep> | null }>()

/** Measures every pre-signed S3 object whose link has expired by `now` (default: the time of the call), oldest presign
 *  first, in batches of `batch`. One sweep at a time per process: a call while one runs waits for it and runs after
 *  it (at most one waits; further calls share it). A no-op where uploads cannot bypass the service (local storage). */
export function measurePresigned(l: Lucent, o: { now?: number; batch?: number } = {}): Promise<PresignedSweep> {
  let r = runs.get(l)
  if (!r) runs.set(l, (r = { current: null, waiting: null }))
  const st = r
  if (st.waiting) return st.waiting
  const start = (): Promise<PresignedSweep> => {
    const p: Promise<PresignedSweep> = sweep(l, o).finally(() => { if (st.current === p) st.current = null })
    st.current = p
    return p
  }
  if (!st.current) return start()
  st.waiting = st.current.catch(() => {}).then(() => {
    st.waiting = null
    return start()
  })
  return st.waiting
}
