/** The admin's store on SQLite (see ./audit.ts): each change and its audit row in one IMMEDIATE transaction. */
import type Database from 'better-sqlite3'
import type { ApiKey, JobStatus, LedgerEntry } from './types.js'
import {
  AUDIT_COLUMNS, JOB_STATUSES, auditValues, zeroSums, changes, keyState, patchColumns, toAudit,
  type Actor, type AuditEntry, type AuditRow, type AuditStore, type CoinsKind, type CoinsResult, type KeyPatch, type NewAudit, type NewKeyRow,
} from './audit.js'

/** What the SQLite store lends: its row mappers and its key insert (key + 'grant' ledger row, run inside ours). */
export interface SqliteKeyHooks {
  toKey(row: unknown): ApiKey
  toLedger(row: unknown): LedgerEntry
  insertKey(k: NewKeyRow): ApiKey
}

export class SqliteAudit implements AuditStore {
  private readonly ins
  private readonly keyById
  constructor(private readonly db: Database.Database, private readonly h: SqliteKeyHooks) {
    this.ins = db.prepare<unknown[], AuditRow>(`INSERT INTO audit (${AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`)
    this.keyById = db.prepare('SELECT * FROM keys WHERE id = ?')
  }

  private insert(e: NewAudit, at = Date.now()): AuditEntry {
    return toAudit(this.ins.get(...auditValues(e, at))!)
  }
  private key(id: string): ApiKey | null {
    const r = this.keyById.get(id)
    return r ? this.h.toKey(r) : null
  }

  async createKey(k: NewKeyRow, who: Actor, reason: string | null) {
    return this.db.transaction(() => {
      const key = this.h.insertKey(k)
      const audit = this.insert({ ...who, action: 'key.create', keyId: key.id, before: null, after: keyState(key), delta: k.coins, reason })
      return { key, audit }
    }).immediate()
  }

  async updateKey(id: string, patch: KeyPatch, who: Actor, reason: string | null) {
    return this.db.transaction(() => {
      const before = this.key(id)
      if (!before) return null
      if (!changes(before, patch)) return { before, after: before, audit: null }
      const cols = patchColumns(patch)
      this.db.prepare(`UPDATE keys SET ${cols.map(([c]) => `${c} = ?`).join(', ')} WHERE id = ?`)
        .run(...cols.map(([, v]) => (typeof v === 'boolean' ? (v ? 1 : 0) : v)), id)
      const after = this.key(id)!
      const audit = this.insert({ ...who, action: 'key.update', keyId: id, before: keyState(before), after: keyState(after), delta: null, reason })
      return { before, after, audit }
    }).immediate()
  }

  async adjustCoins(id: string, delta: number, kind: CoinsKind, reason: string, who: Actor): Promise<CoinsResult> {
    return this.db.transaction((): CoinsResult => {
      const before = this.key(id)
      if (!before) return { ok: false, reason: 'no_key' }
      if (before.coins + delta < 0) return { ok: false, reason: 'negative', balance: before.coins }
      this.db.prepare('UPDATE keys SET coins = coins + ? WHERE id = ?').run(delta, id)
      const key = this.key(id)!
      const now = Date.now()
      const ledger = this.h.toLedger(this.db.prepare('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at, reason) VALUES (?, NULL, ?, ?, ?, ?, ?) RETURNING *')
        .get(id, kind, delta, key.coins, now, reason))
      const audit = this.insert({ ...who, action: kind === 'topup' ? 'coins.topup' : 'coins.adjust', keyId: id, before: { coins: before.coins },
        after: { coins: key.coins, ledger_id: ledger.id }, delta, reason }, now)
      return { ok: true, key, ledger, audit }
    }).immediate()
  }

  async record(e: NewAudit) { return this.insert(e) }

  async list(q: { keyId?: string; limit: number; beforeId?: number }) {
    const where: string[] = []
    const args: unknown[] = []
    if (q.keyId !== undefined) { where.push('key_id = ?'); args.push(q.keyId) }
    if (q.beforeId !== undefined) { where.push('id < ?'); args.push(q.beforeId) }
    const sql = `SELECT * FROM audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`
    return this.db.prepare<unknown[], AuditRow>(sql).all(...args, q.limit).map(toAudit)
  }

  async ledgerPage(keyId: string, limit: number, beforeId?: number) {
    const rows = beforeId === undefined
      ? this.db.prepare('SELECT * FROM ledger WHERE key_id = ? ORDER BY id DESC LIMIT ?').all(keyId, limit)
      : this.db.prepare('SELECT * FROM ledger WHERE key_id = ? AND id < ? ORDER BY id DESC LIMIT ?').all(keyId, beforeId, limit)
    return rows.map((r) => this.h.toLedger(r))
  }

  async jobCounts(keyId: string) {
    const out = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>
    for (const r of this.db.prepare<[string], { status: JobStatus; n: number }>('SELECT status, COUNT(*) AS n FROM jobs WHERE key_id = ? GROUP BY status').all(keyId)) {
      out[r.status] = r.n
    }
    return out
  }

  async ledgerSums(keyId: string) {
    const out = zeroSums()
    for (const r of this.db.prepare<[string], { kind: LedgerEntry['kind']; s: number }>('SELECT kind, SUM(delta) AS s FROM ledger WHERE key_id = ? GROUP BY kind').all(keyId)) {
      out[r.kind] = r.s
    }
    return out
  }
}
