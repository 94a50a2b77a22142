/**
 * The operator's key administration, ONE code path for the HTTP admin API (server/admin/routes.ts) and `lucent
 * keys` (server/admin/cli.ts): create, list, disable / enable, rate and expiry, coins (topup / adjust, with a reason,
 * never below 0), ledger, usage, quotas (store.quotas), webhook settings, the audit trail. Every change goes through
 * the store's audit module (server/store/audit.ts), which writes the change and its audit row in one transaction
 * (quotas and webhook settings live in their own stores: their audit row follows the change). Reads write nothing.
 * Bad input and unknown keys throw ApiError with a `hint` (the HTTP answer's `detail`, the CLI's message).
 */
import { ApiError } from '../errors.js'
import { hashKey, newApiKey } from '../auth.js'
import type { ApiKey, JobStatus, LedgerEntry, Store } from '../store/types.js'
import type { Actor, AuditEntry, CoinsKind, KeyPatch } from '../store/audit.js'
import { checkPatch, type KeyQuotas, type QuotaUsage } from '../store/quotas.js'
import { newWebhookSecret } from '../webhooks/signing.js'
import { checkCallbackUrl } from '../webhooks/target.js'

/** Who acts and with what: the store, the actor for the audit rows, the outbound rules for webhook URLs, and what to
 *  tell when a key changed (the gateway forgets its cached keys, so a disabled key is refused at once). */
export interface AdminContext {
  store: Store
  actor: Actor
  fetchAllow: readonly string[]
  keyChanged?: (keyId: string) => void
}

/** The longest reason kept. */
export const REASON_MAX = 500

const bad = (hint: string) => new ApiError(100403000, { hint })
const noKey = (id: string) => new ApiError(100403000, { status: 404, hint: `no such key: ${id}` })

function reasonOf(r: unknown, required: boolean): string | null {
  if (r === undefined || r === null || (typeof r === 'string' && r.trim() === '')) {
    if (required) throw bad('a reason is required')
    return null
  }
  if (typeof r !== 'string' || r.length > REASON_MAX) throw bad(`the reason must be a string of at most ${REASON_MAX} characters`)
  return r.trim()
}
const count = (v: unknown, name: string) => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw bad(`${name} must be an integer >= 0`)
  return v
}

export async function getKey(store: Store, id: string): Promise<ApiKey> {
  const k = await store.findKey(id)
  if (!k || k.id !== id) throw noKey(id)
  return k
}

/** The CLI's way to name a key: the key itself, its id, or an unambiguous id / hash prefix. */
export async function resolveKey(store: Store, ref: string): Promise<ApiKey> {
  const k = (await store.keyByHash(hashKey(ref))) ?? (await store.findKey(ref))
  if (!k) throw noKey(ref)
  return k
}

export interface NewKeyInput {
  coins: number
  trial?: number
  /** ms epoch; null: never. */
  expiresAt?: number | null
  /** requests per second; null: the server's. */
  rate?: number | null
  webhookUrl?: string | null
  reason?: string | null
}

export interface CreatedKey {
  /** The key itself: shown once, never stored. */
  key: string
  /** The key's webhook signing secret (shown once). */
  webhookSecret: string
  webhookUrl: string | null
  row: ApiKey
  audit: AuditEntry
}

function checkRate(rate: unknown): number | null {
  if (rate === null || rate === undefined) return null
  if (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0) throw bad('rate must be a positive number (requests per second)')
  return rate
}
function checkExpiry(e: unknown): number | null {
  if (e === null || e === undefined) return null
  if (typeof e !== 'number' || !Number.isFinite(e)) throw bad('expires_at must be an ISO 8601 date/time')
  return e
}

export async function webhookUrl(raw: string | null | undefined, fetchAllow: readonly string[]): Promise<string | null | undefined> {
  if (raw === undefined) return undefined
  if (raw === null || raw.trim() === '') return null
  const c = await checkCallbackUrl(raw.trim(), fetchAllow)
  if (!c.ok) throw bad(`webhook: ${c.detail}`)
  return c.url
}

export async function createKey(ctx: AdminContext, i: NewKeyInput): Promise<CreatedKey> {
  const coins = count(i.coins, 'coins')
  const trial = count(i.trial ?? 0, 'trial')
  const rate = checkRate(i.rate)
  const expiresAt = checkExpiry(i.expiresAt)
  const reason = reasonOf(i.reason, false)
  const url = (await webhookUrl(i.webhookUrl, ctx.fetchAllow)) ?? null
  const k = newApiKey()
  const secret = newWebhookSecret()
  const { key: row, audit } = await ctx.store.audit.createKey({ id: k.id, hash: k.hash, coins, trial, expiresAt, rate }, ctx.actor, reason)
  await ctx.store.webhooks.setKeyWebhook(k.id, { url, secret })
  return { key: k.key, webhookSecret: secret, webhookUrl: url, row, audit }
}

export const listKeys = (store: Store): Promise<ApiKey[]> => store.listKeys()

/** Disable (revoked) / enable, rate, expiry. No audit row when nothing changes. */
export async function updateKey(ctx: AdminContext, id: string, patch: KeyPatch, reason?: string | null) {
  const p: KeyPatch = {}
  if (patch.revoked !== undefined) {
    if (typeof patch.revoked !== 'boolean') throw bad('disabled must be true or false')
    p.revoked = patch.revoked
  }
  if (patch.rate !== undefined) p.rate = checkRate(patch.rate)
  if (patch.expiresAt !== undefined) p.expiresAt = checkExpiry(patch.expiresAt)
  if (!Object.keys(p).length) throw bad('nothing to change: give disabled, rate and/or expires_at')
  const r = await ctx.store.audit.updateKey(id, p, ctx.actor, reasonOf(reason, false))
  if (!r) throw noKey(id)
  if (r.audit) ctx.keyChanged?.(id)
  return r
}

export interface CoinsInput {
  /** Coins to add; negative takes them (kind adjust). */
  delta: number
  /** Default: topup for a positive delta, adjust for a negative one. A topup adds. */
  kind?: CoinsKind
  reason: string
}

/** Adds or takes coins through the ledger (kind topup / adjust, the reason on the row), with the audit row. The
 *  balance never goes below 0: such an adjustment is refused and nothing is written. */
export async function adjustCoins(ctx: AdminContext, id: string, i: CoinsInput) {
  if (typeof i.delta !== 'number' || !Number.isSafeInteger(i.delta) || i.delta === 0) throw bad('delta must be a non-zero integer (coins)')
  const kind = i.kind ?? (i.delta > 0 ? 'topup' : 'adjust')
  if (kind !== 'topup' && kind !== 'adjust') throw bad('kind must be topup or adjust')
  if (kind === 'topup' && i.delta < 0) throw bad('a topup adds coins: use kind adjust to take them')
  const reason = reasonOf(i.reason, true)!
  const r = await ctx.store.audit.adjustCoins(id, i.delta, kind, reason, ctx.actor)
  if (!r.ok && r.reason === 'no_key') throw noKey(id)
  if (!r.ok) throw bad(`the balance would go below 0: the key has ${r.balance} coins, the adjustment takes ${-i.delta}`)
  return r
}

export async function ledger(store: Store, id: string, o: { limit: number; beforeId?: number }): Promise<LedgerEntry[]> {
  await getKey(store, id)
  return store.audit.ledgerPage(id, o.limit, o.beforeId)
}

export interface KeyUsage {
  coins: number
  trial: { total: number; left: number }
  jobs: Record<JobStatus, number>
  /** Sums over the key's ledger, by kind (coins; debits negative). */
  ledger: Record<LedgerEntry['kind'], number>
  quotas: KeyQuotas
  usage: QuotaUsage
}

export async function usage(store: Store, id: string): Promise<KeyUsage> {
  const k = await getKey(store, id)
  const [jobs, sums, quotas, used] = await Promise.all([store.audit.jobCounts(id), store.audit.ledgerSums(id), store.quotas.get(id), store.quotas.usage(id)])
  return { coins: k.coins, trial: { total: k.trialTotal, left: k.trialLeft }, jobs, ledger: sums, quotas, usage: used }
}

export async function quotas(store: Store, id: string) {
  await getKey(store, id)
  const [effective, overrides, used] = await Promise.all([store.quotas.get(id), store.quotas.overrides(id), store.quotas.usage(id)])
  return { quotas: effective, overrides, usage: used }
}

/** Merges `patch` into the key's quota overrides (null field: unlimited); `null`: back to the defaults. */
export async function setQuotas(ctx: AdminContext, id: string, patch: Partial<KeyQuotas> | null, reason?: string | null) {
  await getKey(ctx.store, id)
  let p: Partial<KeyQuotas> | null
  try {
    p = patch === null ? null : checkPatch(patch)
  } catch (e) {
    throw bad((e as Error).message)
  }
  const why = reasonOf(reason, false)
  const before = await ctx.store.quotas.overrides(id)
  const effective = await ctx.store.quotas.set(id, p)
  const after = await ctx.store.quotas.overrides(id)
  const audit = await ctx.store.audit.record({ ...ctx.actor, action: 'quotas.set', keyId: id, before: { overrides: before }, after: { overrides: after, quotas: effective }, delta: null, reason: why })
  return { quotas: effective, overrides: after, audit }
}

/** The key's default webhook URL (undefined: unchanged, null: none) and / or a new signing secret (returned once). */
export async function setWebhook(ctx: AdminContext, id: string, o: { url?: string | null; newSecret?: boolean; reason?: string | null }) {
  await getKey(ctx.store, id)
  const url = await webhookUrl(o.url, ctx.fetchAllow)
  if (url === undefined && !o.newSecret) throw bad('nothing to change: give a webhook URL (empty: none) and/or a new secret')
  const why = reasonOf(o.reason, false)
  const before = await ctx.store.webhooks.keyWebhook(id)
  const secret = o.newSecret ? newWebhookSecret() : undefined
  const after = await ctx.store.webhooks.setKeyWebhook(id, { url, secret })
  const audit = await ctx.store.audit.record({ ...ctx.actor, action: 'webhook.update', keyId: id, before: { url: before.url, secret: before.secret ? 'set' : 'none' },
    after: { url: after.url, secret: secret ? 'new' : after.secret ? 'set' : 'none' }, delta: null, reason: why })
  return { after, secret, audit }
}

export const auditLog = (store: Store, q: { keyId?: string; limit: number; beforeId?: number }) => store.audit.list(q)
