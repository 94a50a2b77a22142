/**
 * GET /api/account (an API extension): the calling key's balance, trial jobs left, rate limit and its newest
 * ledger rows (debits, refunds, top-ups). Read from the store, not the auth cache, so a balance is current.
 */
import { Type, type Static } from 'typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError } from '../errors.js'
import { ok } from '../context.js'
import { Envelope, errorResponses } from './schemas.js'

/** How many ledger rows the answer carries by default, and at most. */
export const LEDGER_ROWS = 20
export const LEDGER_ROWS_MAX = 200

const LedgerRow = Type.Object({
  id: Type.Integer(),
  job_id: Type.Union([Type.String(), Type.Null()]),
  kind: Type.String({ enum: ['grant', 'topup', 'adjust', 'debit', 'refund', 'trial', 'trial_refund'] }),
  delta: Type.Integer({ description: 'coins: negative for a debit' }),
  balance_after: Type.Integer(),
  at: Type.String({ description: 'ISO 8601' }),
  reason: Type.Optional(Type.String({ description: "why a refund was given ('canceled while waiting', 'canceled at 40%', 'failed 100500003' (the service's failure: all back), 'input failed 100400002 at 83%' (the input's: the unprocessed share); docs/api.md money policy); absent on other rows" })),
})

export const AccountData = Type.Object({
  key_id: Type.String(),
  balance: Type.Integer({ description: 'coins (1 coin = 0.001 USD)' }),
  trial: Type.Object({ total: Type.Integer(), left: Type.Integer({ description: 'trial jobs left (each free, whatever its price)' }) }),
  rate_limit: Type.Object({
    per_second: Type.Number({ description: "token refill per second (the key's own rate, else the server's)" }),
    burst: Type.Integer({ description: 'bucket size: requests allowed at once' }),
  }),
  expires_at: Type.Union([Type.String(), Type.Null()], { description: 'ISO 8601; null = never' }),
  created_at: Type.String(),
  ledger: Type.Array(LedgerRow, { description: 'newest first' }),
})
export type AccountData = Static<typeof AccountData>

const iso = (ms: number) => new Date(ms).toISOString()

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent
  app.get('/api/account', {
    schema: {
      summary: 'Extension: balance, trial jobs left, rate limit and recent ledger rows of the calling key', tags: ['account'],
      security: [{ apikey: [] }],
      querystring: Type.Object({ ledger: Type.Optional(Type.Integer({ minimum: 0, maximum: LEDGER_ROWS_MAX, default: LEDGER_ROWS, description: 'ledger rows to return' })) }),
      response: { 200: Envelope(AccountData), ...errorResponses },
    },
  }, async (req) => {
    const key = await l.store.findKey(req.apiKey!.id)
    if (!key) throw new ApiError(110400000)
    const rows = await l.store.recentLedger(key.id, req.query.ledger ?? LEDGER_ROWS)
    const data: AccountData = {
      key_id: key.id,
      balance: key.coins,
      trial: { total: key.trialTotal, left: key.trialLeft },
      rate_limit: { per_second: key.rate ?? l.config.ratePerSec, burst: l.config.rateBurst },
      expires_at: key.expiresAt === null ? null : iso(key.expiresAt),
      created_at: iso(key.createdAt),
      ledger: rows.map((r) => ({ id: r.id, job_id: r.jobId, kind: r.kind, delta: r.delta, balance_after: r.balanceAfter, at: iso(r.at), ...(r.reason ? { reason: r.reason } : {}) })),
    }
    return ok(data)
  })
}

export default routes
