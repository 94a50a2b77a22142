/** The admin's store on PostgreSQL (see ./audit.ts): each change and its audit row in one transaction, the key
 *  row locked (SELECT ... FOR UPDATE) so a concurrent debit and an adjustment see one balance after the other. */
import type pg from 'pg'
import { pgTx } from './pg-tx.js'
import type { ApiKey, JobStatus, LedgerEntry } from './types.js'
import {
  AUDIT_COLUMNS, JOB_STATUSES, auditValues, zeroSums, changes, keyState, patchColumns, toAudit,
  type Actor, type AuditEntry, type AuditRow, type AuditStore, type CoinsKind, type CoinsResult, type KeyPatch, type NewAudit, type NewKeyRow,
} from './audit.js'

/** What the PostgreSQL store lends: its row mappers and its key insert (key + 'grant' ledger row) on our client. */
export interface PgKeyHooks {
  toKey(row: unknown): ApiKey
  toLedger(row: unknown): LedgerEntry
  insertKey(c: pg.PoolClient, k: NewKeyRow): Promise<ApiKey>
}

const INSERT = `INSERT INTO audit (${AUDIT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`

export class PgAudit implements AuditStore {
  constructor(private readonly pool: pg.Pool, private readonly h: PgKeyHooks) {}

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return pgTx(this.pool, fn)
  }
  private async insert(c: pg.PoolClient | pg.Pool, e: NewAudit, at = Date.now()): Promise<AuditEntry> {
    return toAudit((await c.query<AuditRow>(INSERT, auditValues(e, at))).rows[0])
  }
  private async lockKey(c: pg.PoolClient, id: string): Promise<ApiKey | null> {
    const r = await c.query('SELECT * FROM keys WHERE id = $1 FOR UPDATE', [id])
    return r.rows[0] ? this.h.toKey(r.rows[0]) : null
  }

  async createKey(k: NewKeyRow, who: Actor, reason: string | null) {
    return this.tx(async (c) => {
      const key = await this.h.insertKey(c, k)
      const audit = await this.insert(c, { ...who, action: 'key.create', keyId: key.id, before: null, after: keyState(key), delta: k.coins, reason })
      return { key, audit }
    })
  }

  async updateKey(id: string, patch: KeyPatch, who: Actor, reason: string | null) {
    return this.tx(async (c) => {
      const before = await this.lockKey(c, id)
      if (!before) return null
      if (!changes(before, patch)) return { before, after: before, audit: null }
      const cols = patchColumns(patch)
      const r = await c.query(`UPDATE keys SET ${cols.map(([col], i) => `${col} = $${i + 1}`).join(', ')} WHERE id = $${cols.length + 1} RETURNING *`,
        [...cols.map(([, v]) => v), id])
      const after = this.h.toKey(r.rows[0])
      const audit = await this.insert(c, { ...who, action: 'key.update', keyId: id, before: keyState(before), after: keyState(after), delta: null, reason })
      return { before, after, audit }
    })
  }

  async adjustCoins(id: string, delta: number, kind: CoinsKind, reason: string, who: Actor): Promise<CoinsResult> {
    return this.tx(async (c): Promise<CoinsResult> => {
      const before = await this.lockKey(c, id)
      if (!before) return { ok: false, reason: 'no_key' }
      if (before.coins + delta < 0) return { ok: false, reason: 'negative', balance: before.coins }
      const key = this.h.toKey((await c.query('UPDATE keys SET coins = coins + $1 WHERE id = $2 RETURNING *', [delta, id])).rows[0])
      const now = Date.now()
      const ledger = this.h.toLedger((await c.query(`INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at, reason)
        VALUES ($1, NULL, $2, $3, $4, $5, $6) RETURNING *`, [id, kind, delta, key.coins, now, reason])).rows[0])
      const audit = await this.insert(c, { ...who, action: kind === 'topup' ? 'coins.topup' : 'coins.adjust', keyId: id, before: { coins: before.coins },
        after: { coins: key.coins, ledger_id: ledger.id }, delta, reason }, now)
      return { ok: true, key, ledger, audit }
    })
  }

  async record(e: NewAudit) { return this.insert(this.pool, e) }

  async list(q: { keyId?: string; limit: number; beforeId?: number }) {
    const where: string[] = []
    const args: unknown[] = []
    if (q.keyId !== undefined) { args.push(q.keyId); where.push(`key_id = $${args.length}`) }
    if (q.beforeId !== undefined) { args.push(q.beforeId); where.push(`id < $${args.length}`) }
    args.push(q.limit)
    const r = await this.pool.query<AuditRow>(`SELECT * FROM audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${args.length}`, args)
    return r.rows.map(toAudit)
  }

  async ledgerPage(keyId: string, limit: number, beforeId?: number) {
    const r = beforeId === undefined
      ? await this.pool.query('SELECT * FROM ledger WHERE key_id = $1 ORDER BY id DESC LIMIT $2', [keyId, limit])
      : await this.pool.query('SELECT * FROM ledger WHERE key_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3', [keyId, beforeId, limit])
    return r.rows.map((x) => this.h.toLedger(x))
  }

  async jobCounts(keyId: string) {
    const out = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>
    const r = await this.pool.query<{ status: JobStatus; n: number }>('SELECT status, COUNT(*)::int AS n FROM jobs WHERE key_id = $1 GROUP BY status', [keyId])
    for (const x of r.rows) out[x.status] = x.n
    return out
  }

  async ledgerSums(keyId: string) {
    const out = zeroSums()
    const r = await this.pool.query<{ kind: LedgerEntry['kind']; s: number }>('SELECT kind, SUM(delta)::bigint AS s FROM ledger WHERE key_id = $1 GROUP BY kind', [keyId])
    for (const x of r.rows) out[x.kind] = x.s
    return out
  }
}
