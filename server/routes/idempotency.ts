/**
 * `Idempotency-Key` on submissions (POST /api/photo-enhancer, /api/video-enhancer): a retry with the same key
 * and the same request within 24 h answers the first job again (the same job_id and consume_coins), debited
 * once; the same key with another request is refused (409, 110409001). Keys are per API key, 1-255 printable
 * ASCII characters.
 *
 * The store is the arbiter (`Store.debitAndCreateJob` records the key with the job in the debit transaction,
 * unique per (API key, Idempotency-Key); parallel submissions with one key are serialised there: SQLite's
 * IMMEDIATE transaction, PostgreSQL's lock on the key row), so it holds across HTTP processes, gateways and
 * hosts. A retry of a finished submission is answered before anything is fetched (`lookup`); submissions racing
 * each other each fetch their input, and all but the first answer the first one's job (their stored input is
 * deleted).
 *
 * The request is compared by a SHA-256 over the route and the JSON body with its object keys sorted (so key
 * order and whitespace do not matter; a changed or added field does).
 */
import crypto from 'node:crypto'
import { Type } from 'typebox'
import { ApiError } from '../errors.js'
import { ok, type Lucent } from '../context.js'
import { IDEMPOTENCY_MS, type Idempotency, type IdempotentJob } from '../store/types.js'

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$',
    description: 'Optional. Retries with the same key and body within 24 h return the first job, debited once; ' +
      'the same key with another body answers 409 (110409001). See README "API extensions".',
  })),
})

/** JSON with object keys sorted at every level (the request's canonical form for the hash). Hand-written: a
 *  dozen lines, and the bodies are small plain JSON already parsed by Fastify. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>
    return `{${Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`
  }
  return JSON.stringify(v) ?? 'null'
}

/** The submission's Idempotency-Key and request hash, or undefined without the header. */
export function idempotencyOf(route: string, headers: Record<string, unknown>, body: unknown): Idempotency | undefined {
  const key = headers['idempotency-key']
  if (key === undefined) return undefined
  if (typeof key !== 'string') throw new ApiError(100403000, { detail: 'one Idempotency-Key header at most' })
  const hash = crypto.createHash('sha256').update(route).update('\n').update(canonicalJson(body)).digest('hex')
  return { key, hash }
}

/** The answer a submission gets for a job made earlier under its Idempotency-Key. */
export function replayAnswer(prev: IdempotentJob) {
  return ok({ job_id: prev.jobId, consume_coins: prev.coins })
}

/** A retry of an earlier submission with this key: its answer (nothing fetched, nothing debited); another
 *  request under the same key: 409. Null when the key is new (or older than 24 h). */
export async function lookup(l: Lucent, keyId: string, idem: Idempotency | undefined) {
  if (!idem) return null
  const prev = await l.store.idempotentJob(keyId, idem.key, Date.now() - IDEMPOTENCY_MS)
  if (!prev) return null
  if (prev.hash !== idem.hash) throw new ApiError(110409001)
  return replayAnswer(prev)
}
