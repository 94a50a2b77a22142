/**
 * The admin's store (SQLite: ./audit-sqlite.ts, PostgreSQL: ./audit-postgres.ts): every change an operator makes
 * to a key (create, disable / enable, rate, expiry, coins, quotas, webhook) together with its `audit` row, in ONE
 * transaction; and the admin's reads (the audit trail, a key's ledger by pages, its jobs by status).
 * The audit row says who (the admin token's label, or `cli`), what, which key, before/after (JSON) or the coins
 * delta, why, the request id and when. Coins never go below 0: an adjustment that would is refused, nothing written.
 * Used only through server/admin/keys.ts (the HTTP admin API and `lucent keys` share it).
 */
import type { ApiKey, JobStatus, LedgerEntry } from './rows.js'

export type AuditAction = 'key.create' | 'key.update' | 'coins.topup' | 'coins.adjust' | 'quotas.set' | 'webhook.update'

export interface AuditEntry {
  id: number
  at: number
  /** `admin:<token label>` for the HTTP admin API, `cli` for `lucent keys`. */
  actor: string
  action: AuditAction
  keyId: string | null
  /** The state before and after the change (JSON-able), null where it does not apply. */
  before: unknown
  after: unknown
  /** Coins added (negative: taken) by a coins change; null for other rows. */
  delta: number | null
  reason: string | null
  requestId: string | null
}

/** Who makes a change (and the request that carried it). */
export interface Actor { actor: string; requestId: string | null }

/** A new audit row (id and time are the store's). */
export type NewAudit = Omit<AuditEntry, 'id' | 'at'>

export interface NewKeyRow { id: string; hash: string; coins: number; trial: number; expiresAt: number | null; rate: number | null }
export interface KeyPatch { revoked?: boolean; rate?: number | null; expiresAt?: number | null }
export type CoinsKind = 'topup' | 'adjust'

export type CoinsResult =
  | { ok: true; key: ApiKey; ledger: LedgerEntry; audit: AuditEntry }
  | { ok: false; reason: 'no_key' }
  /** The balance would go below 0: nothing written. */
  | { ok: false; reason: 'negative'; balance: number }

export interface AuditStore {
  /** The key, its 'grant' ledger row and the audit row. */
  createKey(k: NewKeyRow, who: Actor, reason: string | null): Promise<{ key: ApiKey; audit: AuditEntry }>
  /** Applies the patch; null when there is no such key. No audit row when nothing changed (audit null). */
  updateKey(id: string, patch: KeyPatch, who: Actor, reason: string | null): Promise<{ before: ApiKey; after: ApiKey; audit: AuditEntry | null } | null>
  /** Adds `delta` coins (negative: takes them) with a ledger row of `kind` carrying the reason, and the audit row. */
  adjustCoins(id: string, delta: number, kind: CoinsKind, reason: string, who: Actor): Promise<CoinsResult>
  /** An audit row of a change made elsewhere (quotas, webhook settings: their stores write the change). */
  record(e: NewAudit): Promise<AuditEntry>
  /** Newest first; `keyId` filters, `beforeId` pages (rows with a smaller id). */
  list(q: { keyId?: string; limit: number; beforeId?: number }): Promise<AuditEntry[]>
  /** The key's ledger, newest first, `beforeId` pages. */
  ledgerPage(keyId: string, limit: number, beforeId?: number): Promise<LedgerEntry[]>
  /** The key's jobs counted by status. */
  jobCounts(keyId: string): Promise<Record<JobStatus, number>>
  /** The key's ledger deltas summed by kind (every kind present, 0 when none). */
  ledgerSums(keyId: string): Promise<Record<LedgerEntry['kind'], number>>
}

const TABLE = (int: string, serial: string) => `
CREATE TABLE IF NOT EXISTS audit (
  id ${serial},
  at ${int} NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  key_id TEXT,
  before_state TEXT,
  after_state TEXT,
  delta ${int},
  reason TEXT,
  request_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_key ON audit(key_id, id);
`
/** Applied at open by the SQLite store (idempotent). */
export const AUDIT_SCHEMA_SQLITE = TABLE('INTEGER', 'INTEGER PRIMARY KEY AUTOINCREMENT')
/** One PostgreSQL migration (appended to the store's list). */
export const AUDIT_MIGRATION_PG = TABLE('BIGINT', 'BIGSERIAL PRIMARY KEY')

export interface AuditRow {
  id: number; at: number; actor: string; action: AuditAction; key_id: string | null; before_state: string | null; after_state: string | null
  delta: number | null; reason: string | null; request_id: string | null
}
export const AUDIT_COLUMNS = 'at, actor, action, key_id, before_state, after_state, delta, reason, request_id'
export const auditValues = (e: NewAudit, at: number) => [at, e.actor, e.action, e.keyId, json(e.before), json(e.after), e.delta, e.reason, e.requestId]
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v))
export const toAudit = (r: AuditRow): AuditEntry => ({
  id: Number(r.id), at: Number(r.at), actor: r.actor, action: r.action, keyId: r.key_id,
  before: r.before_state === null ? null : JSON.parse(r.before_state), after: r.after_state === null ? null : JSON.parse(r.after_state),
  delta: r.delta === null ? null : Number(r.delta), reason: r.reason, requestId: r.request_id,
})

/** What an audit row keeps of a key (never its hash). */
export const keyState = (k: ApiKey) => ({
  coins: k.coins, trial_total: k.trialTotal, trial_left: k.trialLeft, expires_at: k.expiresAt, rate: k.rate, revoked: k.revoked,
})

/** The SET clause parts of a patch: [column, value] where the patch names the field. */
export function patchColumns(p: KeyPatch): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = []
  if (p.revoked !== undefined) out.push(['revoked', p.revoked])
  if (p.rate !== undefined) out.push(['rate', p.rate])
  if (p.expiresAt !== undefined) out.push(['expires_at', p.expiresAt])
  return out
}

/** The patch changes something of `k`. */
export function changes(k: ApiKey, p: KeyPatch): boolean {
  return (p.revoked !== undefined && p.revoked !== k.revoked) || (p.rate !== undefined && p.rate !== k.rate)
    || (p.expiresAt !== undefined && p.expiresAt !== k.expiresAt)
}

export const JOB_STATUSES: readonly JobStatus[] = ['CONVERTING', 'COMPLETED', 'ERROR']
export const LEDGER_KINDS: readonly LedgerEntry['kind'][] = ['grant', 'topup', 'adjust', 'debit', 'refund', 'trial', 'trial_refund']
export const zeroSums = () => Object.fromEntries(LEDGER_KINDS.map((k) => [k, 0])) as Record<LedgerEntry['kind'], number>
