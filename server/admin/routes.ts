/**
 * The admin API's routes under /admin/v1 (docs/api.md "Admin API"): keys (create, list, read, disable / enable,
 * rate, expiry, webhook), coins (topup / adjust with a reason), ledger, usage, quotas, the audit trail. Every route
 * wants `Authorization: Bearer <admin token>` (server/admin/token.ts); an `Apikey` is never looked at here, and the
 * customers' auth hook skips these routes (`config.admin`, server/plugins/auth.ts). The work is server/admin/keys.ts
 * (shared with `lucent keys`). Mounted by server/plugins/admin.ts on the public app or on its own listener.
 */
import crypto from 'node:crypto'
import { Type, type Static, type TSchema } from 'typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import { ok } from '../context.js'
import { Envelope, ErrorBody, errorResponses } from '../routes/schemas.js'
import type { ApiKey, LedgerEntry } from '../store/types.js'
import type { AuditEntry } from '../store/audit.js'
import type { KeyQuotas, QuotaUsage } from '../store/quotas.js'
import { bearer, matchAdminToken } from './token.js'
import * as keys from './keys.js'

declare module 'fastify' {
  interface FastifyContextConfig { admin?: boolean }
  interface FastifyRequest { admin: { actor: string; requestId: string } | null }
}

export const ADMIN_PREFIX = '/admin/v1'
const LIST_MAX = 1000

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
// null first: the body coercion would turn a null into "" (or 0) for the other branch
const Nullable = <T extends TSchema>(t: T) => Type.Union([Type.Null(), t])

const Key = Type.Object({
  id: Type.String(),
  coins: Type.Integer(),
  trial: Type.Object({ total: Type.Integer(), left: Type.Integer() }),
  expires_at: Nullable(Type.String()),
  rate: Nullable(Type.Number({ description: 'requests/s; null: the server\'s' })),
  disabled: Type.Boolean(),
  created_at: Type.String(),
})
const keyJson = (k: ApiKey): Static<typeof Key> => ({
  id: k.id, coins: k.coins, trial: { total: k.trialTotal, left: k.trialLeft }, expires_at: iso(k.expiresAt), rate: k.rate, disabled: k.revoked,
  created_at: iso(k.createdAt)!,
})
const Audit = Type.Object({
  id: Type.Integer(), at: Type.String(), actor: Type.String(), action: Type.String(), key_id: Nullable(Type.String()),
  before: Type.Unknown(), after: Type.Unknown(), delta: Nullable(Type.Integer()), reason: Nullable(Type.String()), request_id: Nullable(Type.String()),
})
const auditJson = (a: AuditEntry): Static<typeof Audit> => ({
  id: a.id, at: iso(a.at)!, actor: a.actor, action: a.action, key_id: a.keyId, before: a.before ?? null, after: a.after ?? null, delta: a.delta,
  reason: a.reason, request_id: a.requestId,
})
const Ledger = Type.Object({
  id: Type.Integer(), job_id: Nullable(Type.String()), kind: Type.String(), delta: Type.Integer(), balance_after: Type.Integer(), at: Type.String(),
  reason: Nullable(Type.String()),
})
const ledgerJson = (r: LedgerEntry): Static<typeof Ledger> => ({
  id: r.id, job_id: r.jobId, kind: r.kind, delta: r.delta, balance_after: r.balanceAfter, at: iso(r.at)!, reason: r.reason,
})
const Quotas = Type.Object({
  max_stored_bytes: Nullable(Type.Integer()), max_stored_files: Nullable(Type.Integer()), max_jobs_in_flight: Nullable(Type.Integer()),
}, { description: 'null: unlimited' })
const quotasJson = (q: KeyQuotas) => ({ max_stored_bytes: q.maxStoredBytes, max_stored_files: q.maxStoredFiles, max_jobs_in_flight: q.maxJobsInFlight })
const overridesJson = (q: Partial<KeyQuotas>) => ({
  ...(q.maxStoredBytes !== undefined ? { max_stored_bytes: q.maxStoredBytes } : {}),
  ...(q.maxStoredFiles !== undefined ? { max_stored_files: q.maxStoredFiles } : {}),
  ...(q.maxJobsInFlight !== undefined ? { max_jobs_in_flight: q.maxJobsInFlight } : {}),
})
const Usage = Type.Object({ stored_bytes: Type.Integer(), stored_files: Type.Integer(), jobs_in_flight: Type.Integer() })
const usageJson = (u: QuotaUsage) => ({ stored_bytes: u.storedBytes, stored_files: u.storedFiles, jobs_in_flight: u.jobsInFlight })

const KeyId = Type.Object({ id: Type.String({ maxLength: 64 }) })
const Reason = Type.Optional(Type.String({ maxLength: keys.REASON_MAX, description: 'why (kept in the audit row)' }))
const Page = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_MAX, default: 100 })),
  before_id: Type.Optional(Type.Integer({ minimum: 1, description: 'rows older than this id (the next page)' })),
})
const responses = { ...errorResponses, 404: ErrorBody }
const DateTime = Type.String({ maxLength: 64, description: 'ISO 8601' })

function date(v: string | null | undefined, name: string): number | null | undefined {
  if (v === undefined || v === null) return v
  const ms = Date.parse(v)
  if (!Number.isFinite(ms)) throw new ApiError(100403000, { hint: `${name} must be an ISO 8601 date/time` })
  return ms
}

/** A caller's X-Request-Id when it is a plain token, else a new one; answered in the same header. */
function requestId(req: FastifyRequest): string {
  const h = req.headers['x-request-id']
  const v = Array.isArray(h) ? h[0] : h
  return v && /^[A-Za-z0-9_.:-]{1,128}$/.test(v) ? v : crypto.randomUUID()
}

/** The admin token check of every admin route: no bearer token -> 401 (100400000), another token -> 403 (100403001). */
export function adminAuth(tokens: Parameters<typeof matchAdminToken>[0]) {
  return (req: FastifyRequest, reply: FastifyReply, done: (e?: Error) => void) => {
    const id = requestId(req)
    reply.header('x-request-id', id)
    const token = bearer(req.headers.authorization)
    if (token === null) return done(new ApiError(100400000, { status: 401, headers: { 'www-authenticate': 'Bearer realm="lucent-admin"' }, hint: 'an admin token is required (Authorization: Bearer)' }))
    const label = matchAdminToken(tokens, token)
    if (label === null) return done(new ApiError(100403001, { hint: 'not an admin token' }))
    req.admin = { actor: `admin:${label}`, requestId: id }
    done()
  }
}

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent
  app.decorateRequest('admin', null)
  app.addHook('onRequest', adminAuth(l.config.admin.tokens))
  app.addHook('onRoute', (r) => {
    r.config = { ...(r.config ?? {}), admin: true }
    r.schema = { ...(r.schema ?? {}), hide: true, tags: ['admin'] }
  })
  const ctx = (req: FastifyRequest): keys.AdminContext => ({
    store: l.store, actor: { actor: req.admin!.actor, requestId: req.admin!.requestId }, fetchAllow: l.config.fetchAllow,
    keyChanged: () => l.auth.forget(),
  })
  const P = ADMIN_PREFIX

  app.get(`${P}/keys`, { schema: { summary: 'Every key', response: { 200: Envelope(Type.Object({ keys: Type.Array(Key) })), ...responses } } },
    async () => ok({ keys: (await keys.listKeys(l.store)).map(keyJson) }))

  app.post(`${P}/keys`, {
    schema: {
      summary: 'Create a key (the key and its webhook secret are shown only in this answer)',
      body: Type.Object({
        coins: Type.Integer({ minimum: 0 }), trial: Type.Optional(Type.Integer({ minimum: 0 })), expires_at: Type.Optional(Nullable(DateTime)),
        rate: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0 }))), webhook_url: Type.Optional(Nullable(Type.String({ maxLength: 2048 }))), reason: Reason,
      }, { additionalProperties: false }),
      response: { 201: Envelope(Type.Object({ api_key: Type.String(), webhook_secret: Type.String(), webhook_url: Nullable(Type.String()), key: Key, audit_id: Type.Integer() })), ...responses },
    },
  }, async (req, reply) => {
    const b = req.body
    const c = await keys.createKey(ctx(req), { coins: b.coins, trial: b.trial, expiresAt: date(b.expires_at, 'expires_at'), rate: b.rate, webhookUrl: b.webhook_url, reason: b.reason })
    reply.code(201)
    return ok({ api_key: c.key, webhook_secret: c.webhookSecret, webhook_url: c.webhookUrl, key: keyJson(c.row), audit_id: c.audit.id })
  })

  app.get(`${P}/keys/:id`, { schema: { summary: 'One key', params: KeyId, response: { 200: Envelope(Key), ...responses } } },
    async (req) => ok(keyJson(await keys.getKey(l.store, req.params.id))))

  app.patch(`${P}/keys/:id`, {
    schema: {
      summary: 'Disable / enable a key, change its rate, expiry or webhook (each change: an audit row)',
      params: KeyId,
      body: Type.Object({
        disabled: Type.Optional(Type.Boolean()), rate: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0 }))), expires_at: Type.Optional(Nullable(DateTime)),
        webhook_url: Type.Optional(Nullable(Type.String({ maxLength: 2048 }))), new_webhook_secret: Type.Optional(Type.Boolean()), reason: Reason,
      }, { additionalProperties: false }),
      response: { 200: Envelope(Type.Object({ key: Key, audit_ids: Type.Array(Type.Integer()), webhook_secret: Type.Optional(Type.String()) })), ...responses },
    },
  }, async (req) => {
    const b = req.body
    const c = ctx(req)
    const ids: number[] = []
    const hook = b.webhook_url !== undefined || b.new_webhook_secret
    const patch = { revoked: b.disabled, rate: b.rate, expiresAt: date(b.expires_at, 'expires_at') }
    if (!hook && patch.revoked === undefined && patch.rate === undefined && patch.expiresAt === undefined) {
      throw new ApiError(100403000, { hint: 'nothing to change: give disabled, rate, expires_at, webhook_url and/or new_webhook_secret' })
    }
    let key = await keys.getKey(l.store, req.params.id)
    // the webhook URL is checked before anything is written
    const url = hook ? await keys.webhookUrl(b.webhook_url, l.config.fetchAllow) : undefined
    if (patch.revoked !== undefined || patch.rate !== undefined || patch.expiresAt !== undefined) {
      const r = await keys.updateKey(c, key.id, patch, b.reason)
      key = r.after
      if (r.audit) ids.push(r.audit.id)
    }
    let secret: string | undefined
    if (hook) {
      const w = await keys.setWebhook(c, key.id, { url, newSecret: b.new_webhook_secret, reason: b.reason })
      secret = w.secret
      ids.push(w.audit.id)
    }
    return ok({ key: keyJson(key), audit_ids: ids, ...(secret ? { webhook_secret: secret } : {}) })
  })

  app.post(`${P}/keys/:id/coins`, {
    schema: {
      summary: 'Top up (delta > 0) or adjust (delta of either sign, kind adjust) the coins, with a reason; never below 0',
      params: KeyId,
      body: Type.Object({
        delta: Type.Integer({ description: 'coins to add; negative takes them' }),
        kind: Type.Optional(Type.Union([Type.Literal('topup'), Type.Literal('adjust')], { description: 'default: topup when delta > 0, else adjust' })),
        reason: Type.String({ minLength: 1, maxLength: keys.REASON_MAX }),
      }, { additionalProperties: false }),
      response: { 200: Envelope(Type.Object({ key: Key, ledger: Ledger, audit_id: Type.Integer() })), ...responses },
    },
  }, async (req) => {
    const r = await keys.adjustCoins(ctx(req), req.params.id, req.body)
    if (!r.ok) throw new ApiError(100500000)
    return ok({ key: keyJson(r.key), ledger: ledgerJson(r.ledger), audit_id: r.audit.id })
  })

  app.get(`${P}/keys/:id/ledger`, {
    schema: { summary: 'The key\'s ledger, newest first', params: KeyId, querystring: Page, response: { 200: Envelope(Type.Object({ ledger: Type.Array(Ledger) })), ...responses } },
  }, async (req) => ok({ ledger: (await keys.ledger(l.store, req.params.id, { limit: req.query.limit ?? 100, beforeId: req.query.before_id })).map(ledgerJson) }))

  app.get(`${P}/keys/:id/usage`, {
    schema: {
      summary: 'Balance, jobs by status, ledger sums by kind, quotas and what counts against them', params: KeyId,
      response: {
        200: Envelope(Type.Object({
          key_id: Type.String(), coins: Type.Integer(), trial: Type.Object({ total: Type.Integer(), left: Type.Integer() }),
          jobs: Type.Record(Type.String(), Type.Integer()), ledger: Type.Record(Type.String(), Type.Integer()), quotas: Quotas, usage: Usage,
        })),
        ...responses,
      },
    },
  }, async (req) => {
    const u = await keys.usage(l.store, req.params.id)
    return ok({ key_id: req.params.id, coins: u.coins, trial: u.trial, jobs: u.jobs, ledger: u.ledger, quotas: quotasJson(u.quotas), usage: usageJson(u.usage) })
  })

  const QuotasAnswer = Envelope(Type.Object({
    quotas: Quotas, overrides: Type.Partial(Quotas, { description: 'the key\'s own values; the others are the settings\' defaults' }), usage: Usage,
    audit_id: Type.Optional(Type.Integer()),
  }))
  app.get(`${P}/keys/:id/quotas`, { schema: { summary: 'The key\'s quotas (its own over the defaults) and usage', params: KeyId, response: { 200: QuotasAnswer, ...responses } } },
    async (req) => {
      const q = await keys.quotas(l.store, req.params.id)
      return ok({ quotas: quotasJson(q.quotas), overrides: overridesJson(q.overrides), usage: usageJson(q.usage) })
    })

  app.put(`${P}/keys/:id/quotas`, {
    schema: {
      summary: 'Set the key\'s own quotas (fields given replace; null: unlimited; reset: back to the defaults)',
      params: KeyId,
      body: Type.Object({
        max_stored_bytes: Type.Optional(Nullable(Type.Integer({ minimum: 0 }))), max_stored_files: Type.Optional(Nullable(Type.Integer({ minimum: 0 }))),
        max_jobs_in_flight: Type.Optional(Nullable(Type.Integer({ minimum: 0 }))), reset: Type.Optional(Type.Boolean()), reason: Reason,
      }, { additionalProperties: false }),
      response: { 200: QuotasAnswer, ...responses },
    },
  }, async (req) => {
    const b = req.body
    const patch: Partial<KeyQuotas> = {}
    if (b.max_stored_bytes !== undefined) patch.maxStoredBytes = b.max_stored_bytes
    if (b.max_stored_files !== undefined) patch.maxStoredFiles = b.max_stored_files
    if (b.max_jobs_in_flight !== undefined) patch.maxJobsInFlight = b.max_jobs_in_flight
    if (b.reset && Object.keys(patch).length) throw new ApiError(100403000, { hint: 'reset takes no quota fields' })
    if (!b.reset && !Object.keys(patch).length) throw new ApiError(100403000, { hint: 'nothing to change: give max_stored_bytes, max_stored_files, max_jobs_in_flight or reset' })
    const r = await keys.setQuotas(ctx(req), req.params.id, b.reset ? null : patch, b.reason)
    const used = await l.store.quotas.usage(req.params.id)
    return ok({ quotas: quotasJson(r.quotas), overrides: overridesJson(r.overrides), usage: usageJson(used), audit_id: r.audit.id })
  })

  app.get(`${P}/audit`, {
    schema: {
      summary: 'The audit trail, newest first', querystring: Type.Object({ ...Page.properties, key_id: Type.Optional(Type.String({ maxLength: 64 })) }),
      response: { 200: Envelope(Type.Object({ audit: Type.Array(Audit) })), ...responses },
    },
  }, async (req) => ok({ audit: (await keys.auditLog(l.store, { keyId: req.query.key_id, limit: req.query.limit ?? 100, beforeId: req.query.before_id })).map(auditJson) }))
}

export default routes
