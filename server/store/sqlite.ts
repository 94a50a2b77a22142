/** Store on SQLite (better-sqlite3, WAL). Writes use BEGIN IMMEDIATE transactions. */
import Database from 'better-sqlite3'
import fs from 'node:fs'
import path from 'node:path'
import { IDEMPOTENCY_MS, type ApiKey, type DebitResult, type IdempotentJob, type Job, type JobKind, type JobStatus, type JobStatusRow, type LedgerEntry, type NewJob, type OutputPutState, type Store, type Throughput } from './types.js'
import { SqliteWebhooks, WEBHOOK_SCHEMA_SQLITE } from './webhooks-sqlite.js'
import { OWN_MODELS_SCHEMA_SQLITE, SqliteOwnModels } from './own-models.js'
import { AUDIT_SCHEMA_SQLITE } from './audit.js'
import { SqliteAudit } from './audit-sqlite.js'
import { SqliteQuotas } from './quotas-sqlite.js'
import { SqliteRuns } from './job-runs.js'
import { refundFor, type EndCause } from '../jobs/refund.js'

const SCHEMA = `
CREATE TABLE IF NOT EXISTS keys (
  id TEXT PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  coins INTEGER NOT NULL CHECK (coins >= 0),
  trial_total INTEGER NOT NULL DEFAULT 0,
  trial_left INTEGER NOT NULL DEFAULT 0 CHECK (trial_left >= 0),
  expires_at INTEGER,
  rate REAL,
  revoked INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL REFERENCES keys(id),
  kind TEXT NOT NULL,
  model TEXT NOT NULL,
  params TEXT NOT NULL,
  status TEXT NOT NULL,
  progress INTEGER NOT NULL DEFAULT 0,
  coins INTEGER NOT NULL,
  trial INTEGER NOT NULL DEFAULT 0,
  refunded INTEGER NOT NULL DEFAULT 0,
  original_key TEXT NOT NULL,
  result_key TEXT,
  error_code INTEGER,
  error_message TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  completed_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
CREATE TABLE IF NOT EXISTS ledger (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key_id TEXT NOT NULL REFERENCES keys(id),
  job_id TEXT,
  kind TEXT NOT NULL,
  delta INTEGER NOT NULL,
  balance_after INTEGER NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger(key_id);
CREATE UNIQUE INDEX IF NOT EXISTS ledger_one_refund ON ledger(job_id, kind) WHERE kind IN ('refund', 'trial_refund', 'debit', 'trial');
CREATE TABLE IF NOT EXISTS output_puts (
  job_id TEXT PRIMARY KEY REFERENCES jobs(id),
  status TEXT NOT NULL,
  http_status INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  updated_at INTEGER NOT NULL
);
`

// --- job API: idempotency keys, measured throughput, expected finish (issue 12: cancel / idempotency / ETA) ---
// Idempotency-Key records: one per (API key, Idempotency-Key), written in the debit transaction (same as
// PostgreSQL's migration "job API: idempotency, throughput, eta").
const SCHEMA_JOB_API = `
CREATE TABLE IF NOT EXISTS idempotency (
  key_id TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  job_id TEXT NOT NULL,
  coins INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (key_id, idem_key)
);
CREATE INDEX IF NOT EXISTS idempotency_age ON idempotency(created_at);
CREATE TABLE IF NOT EXISTS throughput (
  model TEXT NOT NULL,
  backend TEXT NOT NULL,
  ms_per_unit REAL NOT NULL,
  samples INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (model, backend)
);
`
/** jobs.eta_at (expected finish, ms epoch): added to databases made before it. */
function addEtaColumn(db: Database.Database): void {
  const cols = db.prepare<[], { name: string }>('PRAGMA table_info(jobs)').all()
  if (!cols.some((c) => c.name === 'eta_at')) db.exec('ALTER TABLE jobs ADD COLUMN eta_at INTEGER')
}
/** ledger.reason (why a refund was given, server/jobs/refund.ts): added to databases made before it. */
function addLedgerReason(db: Database.Database): void {
  const cols = db.prepare<[], { name: string }>('PRAGMA table_info(ledger)').all()
  if (!cols.some((c) => c.name === 'reason')) db.exec('ALTER TABLE ledger ADD COLUMN reason TEXT')
}

interface KeyRow { id: string; hash: string; coins: number; trial_total: number; trial_left: number; expires_at: number | null; rate: number | null; revoked: number; created_at: number }
interface JobRow {
  id: string; key_id: string; kind: JobKind; model: string; params: string; status: JobStatus; progress: number; coins: number; trial: number
  refunded: number; original_key: string; result_key: string | null; error_code: number | null; error_message: string | null; attempts: number
  created_at: number; updated_at: number; completed_at: number | null
}

const toKey = (r: KeyRow): ApiKey => ({
  id: r.id, hash: r.hash, coins: r.coins, trialTotal: r.trial_total, trialLeft: r.trial_left, expiresAt: r.expires_at,
  rate: r.rate, revoked: r.revoked !== 0, createdAt: r.created_at,
})
interface LedgerRow { id: number; key_id: string; job_id: string | null; kind: LedgerEntry['kind']; delta: number; balance_after: number; at: number; reason: string | null }
const toLedger = (r: LedgerRow): LedgerEntry =>
  ({ id: r.id, keyId: r.key_id, jobId: r.job_id, kind: r.kind, delta: r.delta, balanceAfter: r.balance_after, at: r.at, reason: r.reason })
const toJob = (r: JobRow): Job => ({
  id: r.id, keyId: r.key_id, kind: r.kind, model: r.model, params: JSON.parse(r.params), status: r.status, progress: r.progress,
  coins: r.coins, trial: r.trial !== 0, originalKey: r.original_key, resultKey: r.result_key, errorCode: r.error_code,
  errorMessage: r.error_message, attempts: r.attempts, createdAt: r.created_at, updatedAt: r.updated_at, completedAt: r.completed_at,
})

export class SqliteStore implements Store {
  readonly db: Database.Database
  readonly webhooks: SqliteWebhooks
  readonly ownModels: SqliteOwnModels
  readonly audit: SqliteAudit
  readonly quotas: SqliteQuotas
  readonly runs: SqliteRuns
  private s
  private txDebit: Database.Transaction<(j: NewJob) => DebitResult>
  private txFail: Database.Transaction<(id: string, code: number, msg: string, cause: EndCause) => boolean>
  private txTopup: Database.Transaction<(id: string, coins: number) => ApiKey | null>
  private txCreateKey: Database.Transaction<(k: Parameters<Store['createKey']>[0]) => ApiKey>

  constructor(file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true })
    this.db = new Database(file)
    this.db.pragma('journal_mode = WAL')
    this.db.pragma('synchronous = NORMAL')
    this.db.pragma('busy_timeout = 5000')
    this.db.pragma('foreign_keys = ON')
    this.db.exec(SCHEMA)
    this.db.transaction(() => {
      this.db.exec(SCHEMA_JOB_API)
      addEtaColumn(this.db)
      addLedgerReason(this.db)
    }).immediate()
    // --- webhooks: key secrets, job subscriptions, the outbox + its trigger on jobs (./webhooks-sqlite.ts) ---
    this.db.exec(WEBHOOK_SCHEMA_SQLITE)
    this.webhooks = new SqliteWebhooks(this.db)
    // --- bring your own model: the operator's networks (./own-models.ts) ---
    this.db.exec(OWN_MODELS_SCHEMA_SQLITE)
    this.ownModels = new SqliteOwnModels(this.db)
    // --- per-key quotas: overrides and stored objects (./quotas-sqlite.ts applies its schema) ---
    this.quotas = new SqliteQuotas(this.db)
    // --- the run log: which process runs which job (./job-runs.ts applies its schema) ---
    this.runs = new SqliteRuns(this.db)
    const db = this.db
    this.s = {
      keyByHash: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE hash = ?'),
      keyById: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE id = ?'),
      keyByPrefix: db.prepare<[string, string], KeyRow>("SELECT * FROM keys WHERE id LIKE ? || '%' OR hash LIKE ? || '%' LIMIT 2"),
      listKeys: db.prepare<[], KeyRow>('SELECT * FROM keys ORDER BY created_at'),
      insKey: db.prepare('INSERT INTO keys (id, hash, coins, trial_total, trial_left, expires_at, rate, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
      revoke: db.prepare('UPDATE keys SET revoked = 1 WHERE id = ?'),
      addCoins: db.prepare('UPDATE keys SET coins = coins + ? WHERE id = ?'),
      debitCoins: db.prepare('UPDATE keys SET coins = coins - ? WHERE id = ? AND coins >= ?'),
      useTrial: db.prepare('UPDATE keys SET trial_left = trial_left - 1 WHERE id = ? AND trial_left > 0'),
      giveTrial: db.prepare('UPDATE keys SET trial_left = trial_left + 1 WHERE id = ?'),
      insLedger: db.prepare('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at) VALUES (?, ?, ?, ?, ?, ?)'),
      insRefund: db.prepare('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      ledger: db.prepare<[string], LedgerRow>('SELECT * FROM ledger WHERE key_id = ? ORDER BY id'),
      recentLedger: db.prepare<[string, number], LedgerRow>(
        'SELECT * FROM ledger WHERE key_id = ? ORDER BY id DESC LIMIT ?'),
      setOutputPut: db.prepare(`INSERT INTO output_puts (job_id, status, http_status, attempts, error, updated_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, http_status = excluded.http_status, attempts = excluded.attempts,
        error = excluded.error, updated_at = excluded.updated_at`),
      outputPut: db.prepare<[string], { status: OutputPutState['status']; http_status: number | null; attempts: number; error: string | null }>(
        'SELECT status, http_status, attempts, error FROM output_puts WHERE job_id = ?'),
      insJob: db.prepare(`INSERT INTO jobs (id, key_id, kind, model, params, status, progress, coins, trial, original_key, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, 'CONVERTING', 0, ?, ?, ?, ?, ?)`),
      getJob: db.prepare<[string], JobRow>('SELECT * FROM jobs WHERE id = ?'),
      jobStatus: db.prepare<[string], JobStatusRow>(`SELECT id, key_id AS keyId, status, progress, coins, original_key AS originalKey,
        result_key AS resultKey, error_code AS errorCode, error_message AS errorMessage, created_at AS createdAt, completed_at AS completedAt,
        attempts, eta_at AS etaAt FROM jobs WHERE id = ?`),
      jobsAhead: db.prepare<[string], { n: number }>(`SELECT COUNT(*) AS n FROM jobs o, jobs j WHERE j.id = ? AND o.status = 'CONVERTING'
        AND o.attempts = 0 AND (o.created_at < j.created_at OR (o.created_at = j.created_at AND o.id < j.id))`),
      progressEta: db.prepare("UPDATE jobs SET progress = ?, eta_at = ?, updated_at = ? WHERE id = ? AND status = 'CONVERTING'"),
      idemGet: db.prepare<[string, string, number], { request_hash: string; job_id: string; coins: number }>(
        'SELECT request_hash, job_id, coins FROM idempotency WHERE key_id = ? AND idem_key = ? AND created_at >= ?'),
      idemPut: db.prepare(`INSERT INTO idempotency (key_id, idem_key, request_hash, job_id, coins, created_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (key_id, idem_key) DO UPDATE SET request_hash = excluded.request_hash, job_id = excluded.job_id, coins = excluded.coins,
        created_at = excluded.created_at`),
      idemForget: db.prepare('DELETE FROM idempotency WHERE key_id = ? AND idem_key = ? AND job_id = ?'),
      idemPurge: db.prepare('DELETE FROM idempotency WHERE created_at < ?'),
      tpGet: db.prepare<[string, string], { ms_per_unit: number; samples: number }>('SELECT ms_per_unit, samples FROM throughput WHERE model = ? AND backend = ?'),
      tpPut: db.prepare(`INSERT INTO throughput (model, backend, ms_per_unit, samples, updated_at) VALUES (?, ?, ?, 1, ?)
        ON CONFLICT (model, backend) DO UPDATE SET ms_per_unit = throughput.ms_per_unit * (1 - ?) + excluded.ms_per_unit * ?,
        samples = throughput.samples + 1, updated_at = excluded.updated_at`),
      jobsByStatus: db.prepare<[string], JobRow>('SELECT * FROM jobs WHERE status = ? ORDER BY created_at'),
      attempt: db.prepare<[number, string], { attempts: number }>('UPDATE jobs SET attempts = attempts + 1, updated_at = ? WHERE id = ? RETURNING attempts'),
      progress: db.prepare("UPDATE jobs SET progress = ?, updated_at = ? WHERE id = ? AND status = 'CONVERTING'"),
      complete: db.prepare("UPDATE jobs SET status = 'COMPLETED', progress = 100, result_key = ?, updated_at = ?, completed_at = ? WHERE id = ? AND status = 'CONVERTING'"),
      staleResults: db.prepare<[number], { id: string }>(
        "SELECT id FROM jobs WHERE status = 'CONVERTING' AND result_key IS NOT NULL AND updated_at < ?"),
      storeResult: db.prepare(`UPDATE jobs SET result_key = ?, updated_at = ? WHERE id = ? AND status = 'CONVERTING'
        AND (result_key IS NULL OR result_key = ?)`),
      // a job whose result is stored can only complete (server/jobs/refund.ts)
      fail: db.prepare(`UPDATE jobs SET status = 'ERROR', error_code = ?, error_message = ?, updated_at = ?, completed_at = ?
        WHERE id = ? AND status = 'CONVERTING' AND result_key IS NULL`),
      markRefunded: db.prepare('UPDATE jobs SET refunded = 1 WHERE id = ? AND refunded = 0'),
    }
    const s = this.s
    const balance = (id: string) => (s.keyById.get(id) as KeyRow).coins

    this.txCreateKey = db.transaction((k: Parameters<Store['createKey']>[0]) => {
      const now = Date.now()
      s.insKey.run(k.id, k.hash, k.coins, k.trial, k.trial, k.expiresAt, k.rate, now)
      s.insLedger.run(k.id, null, 'grant', k.coins, k.coins, now)
      return toKey(s.keyById.get(k.id)!)
    })
    // --- admin: every change to a key with its audit row (./audit-sqlite.ts); creates keys through txCreateKey ---
    this.db.exec(AUDIT_SCHEMA_SQLITE)
    this.audit = new SqliteAudit(this.db, { toKey: (r) => toKey(r as KeyRow), toLedger: (r) => toLedger(r as LedgerRow), insertKey: (k) => this.txCreateKey(k) })
    this.txTopup = db.transaction((id: string, coins: number) => {
      if (!s.keyById.get(id)) return null
      s.addCoins.run(coins, id)
      s.insLedger.run(id, null, 'topup', coins, balance(id), Date.now())
      return toKey(s.keyById.get(id)!)
    })
    this.txDebit = db.transaction((j: NewJob): DebitResult => {
      const key = s.keyById.get(j.keyId)
      if (!key) return { ok: false, reason: 'no_key' }
      const now = Date.now()
      const idem = j.idempotency
      if (idem) {
        // an IMMEDIATE transaction: parallel submissions with one key are serialised here, across processes too
        const prev = s.idemGet.get(j.keyId, idem.key, now - IDEMPOTENCY_MS)
        if (prev && prev.request_hash !== idem.hash) return { ok: false, reason: 'idempotency_conflict' }
        if (prev) return { ok: false, reason: 'replay', job: { hash: prev.request_hash, jobId: prev.job_id, coins: prev.coins } }
      }
      // the key's jobs-in-flight quota counted here, in the IMMEDIATE transaction (the route's early check is a fast path)
      const full = this.quotas.jobsInFlightFull(j.keyId)
      if (full) return { ok: false, reason: 'jobs_in_flight', ...full }
      let trial = false
      let charged = j.coins
      if (key.trial_left > 0) {
        s.useTrial.run(j.keyId)
        trial = true
        charged = 0
      } else if (key.coins < j.coins || s.debitCoins.run(j.coins, j.keyId, j.coins).changes !== 1) {
        return { ok: false, reason: key.trial_total > 0 ? 'trial_exhausted' : 'insufficient' }
      }
      s.insJob.run(j.id, j.keyId, j.kind, j.model, JSON.stringify(j.params), charged, trial ? 1 : 0, j.originalKey, now, now)
      s.insLedger.run(j.keyId, j.id, trial ? 'trial' : 'debit', -charged, balance(j.keyId), now)
      if (idem) s.idemPut.run(j.keyId, idem.key, idem.hash, j.id, charged, now)
      return { ok: true, job: toJob(s.getJob.get(j.id)!), charged, trial }
    })
    this.txFail = db.transaction((id: string, code: number, msg: string, cause: EndCause): boolean => {
      const job = s.getJob.get(id)
      if (!job) return false
      const now = Date.now()
      if (s.fail.run(code, msg, now, now, id).changes !== 1) return false
      const refund = refundFor({ coins: job.coins, trial: job.trial !== 0, progress: job.progress, attempts: job.attempts, resultKey: job.result_key }, cause, code)
      if (!refund || s.markRefunded.run(id).changes !== 1) return true
      if (job.trial) {
        if (refund.trial) s.giveTrial.run(job.key_id)
        s.insRefund.run(job.key_id, id, 'trial_refund', 0, balance(job.key_id), now, refund.reason)
      } else {
        if (refund.coins > 0) s.addCoins.run(refund.coins, job.key_id)
        s.insRefund.run(job.key_id, id, 'refund', refund.coins, balance(job.key_id), now, refund.reason)
      }
      return true
    })
  }

  async createKey(k: Parameters<Store['createKey']>[0]) { return this.txCreateKey.immediate(k) }
  /** Synchronous fast path for the auth hot path (same result as keyByHash). */
  keyByHashSync(hash: string): ApiKey | null {
    const r = this.s.keyByHash.get(hash)
    return r ? toKey(r) : null
  }
  async keyByHash(hash: string) { return this.keyByHashSync(hash) }
  async findKey(ref: string) {
    const exact = this.s.keyById.get(ref)
    if (exact) return toKey(exact)
    if (ref.length < 4) return null
    const rows = this.s.keyByPrefix.all(ref, ref)
    return rows.length === 1 ? toKey(rows[0]) : null
  }
  async listKeys() { return this.s.listKeys.all().map(toKey) }
  async revokeKey(id: string) { return this.s.revoke.run(id).changes === 1 }
  async topup(id: string, coins: number) { return this.txTopup.immediate(id, coins) }
  async debitAndCreateJob(job: NewJob) { return this.txDebit.immediate(job) }
  /** Synchronous fast path for task-status. */
  getJobSync(id: string): Job | null {
    const r = this.s.getJob.get(id)
    return r ? toJob(r) : null
  }
  async getJob(id: string) { return this.getJobSync(id) }
  jobStatusSync(id: string): JobStatusRow | null { return this.s.jobStatus.get(id) ?? null }
  async jobStatus(id: string) { return this.jobStatusSync(id) }
  async jobsByStatus(status: JobStatus) { return this.s.jobsByStatus.all(status).map(toJob) }
  async startAttempt(id: string) { return this.s.attempt.get(Date.now(), id)?.attempts ?? 0 }
  async setProgress(id: string, progress: number, etaAt?: number | null) {
    const p = Math.max(0, Math.min(100, Math.round(progress)))
    if (etaAt === undefined) this.s.progress.run(p, Date.now(), id)
    else this.s.progressEta.run(p, etaAt === null ? null : Math.round(etaAt), Date.now(), id)
  }
  async jobsAhead(id: string) { return this.s.jobsAhead.get(id)?.n ?? 0 }
  async storeResult(id: string, resultKey: string) {
    return this.s.storeResult.run(resultKey, Date.now(), id, resultKey).changes === 1
  }
  async staleResults(before: number) { return this.s.staleResults.all(before).map((r) => r.id) }
  async completeJob(id: string, resultKey: string) {
    const now = Date.now()
    return this.s.complete.run(resultKey, now, now, id).changes === 1
  }
  async failJob(id: string, errorCode: number, message: string, cause: EndCause = 'failed') {
    return this.txFail.immediate(id, errorCode, message, cause)
  }
  async ledger(keyId: string): Promise<LedgerEntry[]> { return this.s.ledger.all(keyId).map(toLedger) }
  async idempotentJob(keyId: string, key: string, since: number): Promise<IdempotentJob | null> {
    const r = this.s.idemGet.get(keyId, key, since)
    return r ? { hash: r.request_hash, jobId: r.job_id, coins: r.coins } : null
  }
  async forgetIdempotency(keyId: string, key: string, jobId: string) { this.s.idemForget.run(keyId, key, jobId) }
  async purgeIdempotency(before: number) { return this.s.idemPurge.run(before).changes }
  async throughput(model: string, backend: string): Promise<Throughput | null> {
    const r = this.s.tpGet.get(model, backend)
    return r ? { msPerUnit: r.ms_per_unit, samples: r.samples } : null
  }
  async recordThroughput(model: string, backend: string, msPerUnit: number, alpha: number) {
    this.s.tpPut.run(model, backend, msPerUnit, Date.now(), alpha, alpha)
  }
  async recentLedger(keyId: string, limit: number): Promise<LedgerEntry[]> { return this.s.recentLedger.all(keyId, limit).map(toLedger) }
  async setOutputPut(jobId: string, o: OutputPutState) { this.s.setOutputPut.run(jobId, o.status, o.httpStatus, o.attempts, o.error, Date.now()) }
  outputPutSync(jobId: string): OutputPutState | null {
    const r = this.s.outputPut.get(jobId)
    return r ? { status: r.status, httpStatus: r.http_status, attempts: r.attempts, error: r.error } : null
  }
  async outputPut(jobId: string) { return this.outputPutSync(jobId) }
  async close() { if (this.db.open) this.db.close() }
}
