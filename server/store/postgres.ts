/**
 * Store on PostgreSQL (node-postgres pool). Same interface and semantics as the SQLite store (sqlite.ts), safe
 * with many gateways and workers sharing one database:
 * - debits lock the key row (SELECT ... FOR UPDATE) inside one transaction, and `keys.coins >= 0` is a CHECK:
 *   a balance never goes negative however many processes debit at once;
 * - state transitions are conditional updates (`WHERE status = 'CONVERTING'`), so a job completes or fails once;
 * - a refund flips `jobs.refunded` and writes its ledger row in one transaction; a unique (job_id, kind) index on
 *   the ledger makes a second refund (or debit) of the same job impossible even across processes.
 * Migrations run on open (PgStore.open), serialised across processes with an advisory lock.
 */
import pg from 'pg'
import { pgTx } from './pg-tx.js'
import { IDEMPOTENCY_MS, type ApiKey, type DebitResult, type IdempotentJob, type Job, type JobKind, type JobStatus, type JobStatusRow, type LedgerEntry, type NewJob, type OutputPutState, type Store, type Throughput } from './types.js'
import { PgWebhooks, WEBHOOK_MIGRATION_PG, WEBHOOK_MIGRATION_PG_2 } from './webhooks-postgres.js'
import { OWN_MODELS_MIGRATION_PG, OWN_MODELS_MIGRATION_PG_2, PgOwnModels } from './own-models.js'
import { PgQuotas, QUOTAS_MIGRATION_PG, QUOTAS_PRESIGNED_MIGRATION_PG } from './quotas-postgres.js'
import { JOB_RUNS_SCHEMA_PG, PgRuns } from './job-runs.js'
import { AUDIT_MIGRATION_PG } from './audit.js'
import { PgAudit } from './audit-postgres.js'
import { refundFor, type EndCause } from '../jobs/refund.js'

/** Ordered migrations; index + 1 = schema version. Never edit a released entry: append. */
const MIGRATIONS: string[] = [
  `
  CREATE TABLE keys (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    coins BIGINT NOT NULL CHECK (coins >= 0),
    trial_total INTEGER NOT NULL DEFAULT 0,
    trial_left INTEGER NOT NULL DEFAULT 0 CHECK (trial_left >= 0),
    expires_at BIGINT,
    rate DOUBLE PRECISION,
    revoked BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL
  );
  CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL REFERENCES keys(id),
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    params JSONB NOT NULL,
    status TEXT NOT NULL,
    progress INTEGER NOT NULL DEFAULT 0,
    coins BIGINT NOT NULL,
    trial BOOLEAN NOT NULL DEFAULT FALSE,
    refunded BOOLEAN NOT NULL DEFAULT FALSE,
    original_key TEXT NOT NULL,
    result_key TEXT,
    error_code INTEGER,
    error_message TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    completed_at BIGINT
  );
  CREATE INDEX jobs_status ON jobs(status, created_at);
  CREATE TABLE ledger (
    id BIGSERIAL PRIMARY KEY,
    key_id TEXT NOT NULL REFERENCES keys(id),
    job_id TEXT,
    kind TEXT NOT NULL,
    delta BIGINT NOT NULL,
    balance_after BIGINT NOT NULL,
    at BIGINT NOT NULL
  );
  CREATE INDEX ledger_key ON ledger(key_id, id);
  CREATE UNIQUE INDEX ledger_once_per_job ON ledger(job_id, kind) WHERE kind IN ('refund', 'trial_refund', 'debit', 'trial');
  `,
  // --- job API: idempotency, throughput, eta (issue 12: cancel / idempotency / time estimates) -----------------
  // Idempotency-Key records, unique per (API key, Idempotency-Key), written in the debit transaction; measured
  // engine throughput per (model, backend); a running job's expected finish.
  `
  CREATE TABLE idempotency (
    key_id TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    job_id TEXT NOT NULL,
    coins BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (key_id, idem_key)
  );
  CREATE INDEX idempotency_age ON idempotency(created_at);
  CREATE TABLE throughput (
    model TEXT NOT NULL,
    backend TEXT NOT NULL,
    ms_per_unit DOUBLE PRECISION NOT NULL,
    samples INTEGER NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (model, backend)
  );
  ALTER TABLE jobs ADD COLUMN eta_at BIGINT;
  `,
  // --- webhooks: key secrets, job subscriptions, the outbox + its trigger on jobs (./webhooks-postgres.ts) ---
  WEBHOOK_MIGRATION_PG,
  // Extension: the PUT of a result to a job's output_put_url (server/jobs/output-put.ts).
  `
  CREATE TABLE output_puts (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    status TEXT NOT NULL,
    http_status INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    updated_at BIGINT NOT NULL
  );
  `,
  // --- money policy (server/jobs/refund.ts): every refund row says why -------------------------------------
  `
  ALTER TABLE ledger ADD COLUMN reason TEXT;
  `,
  // --- webhooks: held subscriptions, bounded replays (./webhooks-postgres.ts) ---
  WEBHOOK_MIGRATION_PG_2,
  // --- bring your own model: the operator's networks (./own-models.ts) ---
  OWN_MODELS_MIGRATION_PG,
  // --- per-key quotas: overrides and stored objects (./quotas-postgres.ts) ---
  QUOTAS_MIGRATION_PG,
  // --- admin: the audit trail of every change to a key (./audit.ts) ---
  AUDIT_MIGRATION_PG,
  // --- own models: each file's sha256 (./own-models.ts) ---
  OWN_MODELS_MIGRATION_PG_2,
  // --- per-key quotas: pre-signed S3 objects to measure (./quotas-postgres.ts) ---
  QUOTAS_PRESIGNED_MIGRATION_PG,
]

const MIGRATION_LOCK = 0x6c7563656e74 // 'lucent'

interface KeyRow { id: string; hash: string; coins: number; trial_total: number; trial_left: number; expires_at: number | null; rate: number | null; revoked: boolean; created_at: number }
interface JobRow {
  id: string; key_id: string; kind: JobKind; model: string; params: Record<string, unknown>; status: JobStatus; progress: number; coins: number
  trial: boolean; refunded: boolean; original_key: string; result_key: string | null; error_code: number | null; error_message: string | null
  attempts: number; created_at: number; updated_at: number; completed_at: number | null
}

interface LedgerRow { id: number; key_id: string; job_id: string | null; kind: LedgerEntry['kind']; delta: number; balance_after: number; at: number; reason: string | null }
const toLedger = (x: LedgerRow): LedgerEntry =>
  ({ id: x.id, keyId: x.key_id, jobId: x.job_id, kind: x.kind, delta: x.delta, balanceAfter: x.balance_after, at: x.at, reason: x.reason })
const toKey = (r: KeyRow): ApiKey => ({
  id: r.id, hash: r.hash, coins: r.coins, trialTotal: r.trial_total, trialLeft: r.trial_left, expiresAt: r.expires_at,
  rate: r.rate, revoked: r.revoked, createdAt: r.created_at,
})
const toJob = (r: JobRow): Job => ({
  id: r.id, keyId: r.key_id, kind: r.kind, model: r.model, params: r.params, status: r.status, progress: r.progress,
  coins: r.coins, trial: r.trial, originalKey: r.original_key, resultKey: r.result_key, errorCode: r.error_code,
  errorMessage: r.error_message, attempts: r.attempts, createdAt: r.created_at, updatedAt: r.updated_at, completedAt: r.completed_at,
})

/** A new key and its 'grant' ledger row, on the caller's transaction (createKey; the admin's, ./audit-postgres.ts). */
async function insertKey(c: pg.PoolClient, k: Parameters<Store['createKey']>[0]): Promise<ApiKey> {
  const now = Date.now()
  const r = await c.query<KeyRow>(`INSERT INTO keys (id, hash, coins, trial_total, trial_left, expires_at, rate, created_at)
    VALUES ($1, $2, $3, $4, $4, $5, $6, $7) RETURNING *`, [k.id, k.hash, k.coins, k.trial, k.expiresAt, k.rate, now])
  await c.query('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at) VALUES ($1, NULL, $2, $3, $3, $4)', [k.id, 'grant', k.coins, now])
  return toKey(r.rows[0])
}

// BIGINT (int8) columns hold ms timestamps and coin amounts: well inside 2^53, parse them as numbers.
// Per-pool type parsers: the process-wide pg.types stay untouched.
const INT8 = 20
const typeParser = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8) return (v: string) => (v === null ? null : Number(v))
    return pg.types.getTypeParser(oid, format as 'text')
  },
}

export interface PgStoreOptions {
  /** Pool size per process (default 10). */
  max?: number
  /** Extra pool options (tests). */
  pool?: pg.PoolConfig
}

export class PgStore implements Store {
  readonly pool: pg.Pool
  readonly webhooks: PgWebhooks
  readonly ownModels: PgOwnModels
  readonly quotas: PgQuotas
  readonly runs: PgRuns
  readonly audit: PgAudit
  private closed = false

  private constructor(url: string, o: PgStoreOptions) {
    this.pool = new pg.Pool({ connectionString: url, max: o.max ?? 10, types: typeParser as pg.CustomTypesConfig, ...o.pool })
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => {})
    this.webhooks = new PgWebhooks(this.pool)
    this.ownModels = new PgOwnModels(this.pool)
    this.quotas = new PgQuotas(this.pool)
    this.runs = new PgRuns(this.pool)
    this.audit = new PgAudit(this.pool, { toKey: (r) => toKey(r as KeyRow), toLedger: (r) => toLedger(r as LedgerRow), insertKey })
  }

  /** Connects, runs pending migrations (serialised across processes), returns the store. */
  static async open(url: string, o: PgStoreOptions = {}): Promise<PgStore> {
    const s = new PgStore(url, o)
    try {
      await s.migrate()
    } catch (e) {
      await s.pool.end().catch(() => {})
      throw e
    }
    return s
  }

  private async migrate(): Promise<void> {
    await this.tx(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await c.query('CREATE TABLE IF NOT EXISTS lucent_schema (version INTEGER NOT NULL)')
      const r = await c.query<{ version: number }>('SELECT version FROM lucent_schema')
      let version = r.rows[0]?.version ?? 0
      if (r.rowCount === 0) await c.query('INSERT INTO lucent_schema (version) VALUES (0)')
      while (version < MIGRATIONS.length) {
        await c.query(MIGRATIONS[version])
        version++
        await c.query('UPDATE lucent_schema SET version = $1', [version])
      }
      // schemas of their own (CREATE ... IF NOT EXISTS, under the same lock): the run log (./job-runs.ts)
      await c.query(JOB_RUNS_SCHEMA_PG)
    })
  }

  /** Schema version after migrations (for ops/tests). */
  async schemaVersion(): Promise<number> {
    return (await this.pool.query<{ version: number }>('SELECT version FROM lucent_schema')).rows[0].version
  }

  /** Runs `fn` in a transaction (READ COMMITTED + row locks where needed). */
  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return pgTx(this.pool, fn)
  }

  async ping(): Promise<boolean> {
    try {
      await this.pool.query('SELECT 1')
      return true
    } catch {
      return false
    }
  }

  get open(): boolean { return !this.closed }

  async createKey(k: Parameters<Store['createKey']>[0]): Promise<ApiKey> {
    return this.tx((c) => insertKey(c, k))
  }

  async keyByHash(hash: string): Promise<ApiKey | null> {
    const r = await this.pool.query<KeyRow>('SELECT * FROM keys WHERE hash = $1', [hash])
    return r.rows[0] ? toKey(r.rows[0]) : null
  }

  async findKey(ref: string): Promise<ApiKey | null> {
    const exact = await this.pool.query<KeyRow>('SELECT * FROM keys WHERE id = $1', [ref])
    if (exact.rows[0]) return toKey(exact.rows[0])
    if (ref.length < 4) return null
    const r = await this.pool.query<KeyRow>('SELECT * FROM keys WHERE starts_with(id, $1) OR starts_with(hash, $1) LIMIT 2', [ref])
    return r.rows.length === 1 ? toKey(r.rows[0]) : null
  }

  async listKeys(): Promise<ApiKey[]> {
    return (await this.pool.query<KeyRow>('SELECT * FROM keys ORDER BY created_at, id')).rows.map(toKey)
  }

  async revokeKey(id: string): Promise<boolean> {
    return ((await this.pool.query('UPDATE keys SET revoked = TRUE WHERE id = $1', [id])).rowCount ?? 0) === 1
  }

  async topup(id: string, coins: number): Promise<ApiKey | null> {
    return this.tx(async (c) => {
      const r = await c.query<KeyRow>('UPDATE keys SET coins = coins + $1 WHERE id = $2 RETURNING *', [coins, id])
      if (!r.rows[0]) return null
      await c.query('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at) VALUES ($1, NULL, $2, $3, $4, $5)',
        [id, 'topup', coins, r.rows[0].coins, Date.now()])
      return toKey(r.rows[0])
    })
  }

  async debitAndCreateJob(j: NewJob): Promise<DebitResult> {
    return this.tx(async (c): Promise<DebitResult> => {
      // The row lock serialises every debit of this key across all gateways until COMMIT.
      const k = await c.query<{ coins: number; trial_left: number; trial_total: number }>(
        'SELECT coins, trial_left, trial_total FROM keys WHERE id = $1 FOR UPDATE', [j.keyId])
      const key = k.rows[0]
      if (!key) return { ok: false, reason: 'no_key' }
      const now = Date.now()
      const idem = j.idempotency
      if (idem) {
        // the key row's lock above serialises every submission of this key: the earlier one has committed
        const p = await c.query<{ request_hash: string; job_id: string; coins: number }>(
          'SELECT request_hash, job_id, coins FROM idempotency WHERE key_id = $1 AND idem_key = $2 AND created_at >= $3',
          [j.keyId, idem.key, now - IDEMPOTENCY_MS])
        const prev = p.rows[0]
        if (prev && prev.request_hash !== idem.hash) return { ok: false, reason: 'idempotency_conflict' }
        if (prev) return { ok: false, reason: 'replay', job: { hash: prev.request_hash, jobId: prev.job_id, coins: prev.coins } }
      }
      // the key's jobs-in-flight quota counted under the key's row lock (the route's early check is a fast path)
      const full = await this.quotas.jobsInFlightFull(c, j.keyId)
      if (full) return { ok: false, reason: 'jobs_in_flight', ...full }
      let trial = false
      let charged = j.coins
      let balance: number
      if (key.trial_left > 0) {
        const r = await c.query<{ coins: number }>('UPDATE keys SET trial_left = trial_left - 1 WHERE id = $1 AND trial_left > 0 RETURNING coins', [j.keyId])
        balance = r.rows[0].coins
        trial = true
        charged = 0
      } else {
        const r = await c.query<{ coins: number }>('UPDATE keys SET coins = coins - $1 WHERE id = $2 AND coins >= $1 RETURNING coins', [j.coins, j.keyId])
        if (r.rowCount !== 1) return { ok: false, reason: key.trial_total > 0 ? 'trial_exhausted' : 'insufficient' }
        balance = r.rows[0].coins
      }
      const job = await c.query<JobRow>(`INSERT INTO jobs (id, key_id, kind, model, params, status, progress, coins, trial, original_key, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, 'CONVERTING', 0, $6, $7, $8, $9, $9) RETURNING *`,
      [j.id, j.keyId, j.kind, j.model, JSON.stringify(j.params), charged, trial, j.originalKey, now])
      await c.query('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at) VALUES ($1, $2, $3, $4, $5, $6)',
        [j.keyId, j.id, trial ? 'trial' : 'debit', -charged, balance, now])
      if (idem) {
        // the unique (key_id, idem_key) is the last word: a fresh record made meanwhile rolls this debit back
        const put = await c.query(`INSERT INTO idempotency (key_id, idem_key, request_hash, job_id, coins, created_at) VALUES ($1, $2, $3, $4, $5, $6)
          ON CONFLICT (key_id, idem_key) DO UPDATE SET request_hash = EXCLUDED.request_hash, job_id = EXCLUDED.job_id, coins = EXCLUDED.coins,
          created_at = EXCLUDED.created_at WHERE idempotency.created_at < $7`, [j.keyId, idem.key, idem.hash, j.id, charged, now, now - IDEMPOTENCY_MS])
        if (put.rowCount !== 1) throw new Error('idempotency key recorded concurrently')
      }
      return { ok: true, job: toJob(job.rows[0]), charged, trial }
    })
  }

  async getJob(id: string): Promise<Job | null> {
    const r = await this.pool.query<JobRow>('SELECT * FROM jobs WHERE id = $1', [id])
    return r.rows[0] ? toJob(r.rows[0]) : null
  }

  async jobStatus(id: string): Promise<JobStatusRow | null> {
    const r = await this.pool.query<JobStatusRow>(`SELECT id, key_id AS "keyId", status, progress, coins, original_key AS "originalKey",
      result_key AS "resultKey", error_code AS "errorCode", error_message AS "errorMessage", created_at AS "createdAt", completed_at AS "completedAt",
      attempts, eta_at AS "etaAt" FROM jobs WHERE id = $1`, [id])
    return r.rows[0] ?? null
  }

  async jobsByStatus(status: JobStatus): Promise<Job[]> {
    return (await this.pool.query<JobRow>('SELECT * FROM jobs WHERE status = $1 ORDER BY created_at, id', [status])).rows.map(toJob)
  }

  async startAttempt(id: string): Promise<number> {
    const r = await this.pool.query<{ attempts: number }>('UPDATE jobs SET attempts = attempts + 1, updated_at = $1 WHERE id = $2 RETURNING attempts', [Date.now(), id])
    return r.rows[0]?.attempts ?? 0
  }

  async setProgress(id: string, progress: number, etaAt?: number | null): Promise<void> {
    const p = Math.max(0, Math.min(100, Math.round(progress)))
    if (etaAt === undefined) {
      await this.pool.query("UPDATE jobs SET progress = $1, updated_at = $2 WHERE id = $3 AND status = 'CONVERTING'", [p, Date.now(), id])
    } else {
      await this.pool.query("UPDATE jobs SET progress = $1, eta_at = $2, updated_at = $3 WHERE id = $4 AND status = 'CONVERTING'",
        [p, etaAt === null ? null : Math.round(etaAt), Date.now(), id])
    }
  }

  async jobsAhead(id: string): Promise<number> {
    const r = await this.pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM jobs o, jobs j WHERE j.id = $1 AND o.status = 'CONVERTING'
      AND o.attempts = 0 AND (o.created_at < j.created_at OR (o.created_at = j.created_at AND o.id < j.id))`, [id])
    return r.rows[0]?.n ?? 0
  }

  async storeResult(id: string, resultKey: string): Promise<boolean> {
    const r = await this.pool.query(`UPDATE jobs SET result_key = $1, updated_at = $2
      WHERE id = $3 AND status = 'CONVERTING' AND (result_key IS NULL OR result_key = $1)`, [resultKey, Date.now(), id])
    return r.rowCount === 1
  }

  async staleResults(before: number): Promise<string[]> {
    const r = await this.pool.query<{ id: string }>(
      "SELECT id FROM jobs WHERE status = 'CONVERTING' AND result_key IS NOT NULL AND updated_at < $1", [before])
    return r.rows.map((x) => x.id)
  }

  async completeJob(id: string, resultKey: string): Promise<boolean> {
    const now = Date.now()
    const r = await this.pool.query(`UPDATE jobs SET status = 'COMPLETED', progress = 100, result_key = $1, updated_at = $2, completed_at = $2
      WHERE id = $3 AND status = 'CONVERTING'`, [resultKey, now, id])
    return r.rowCount === 1
  }

  /** Ends a job without a result and refunds it as server/jobs/refund.ts says, in one transaction (the job row
   *  locked, so progress and attempts are the ones the decision used). A job with a stored result is refused. */
  async failJob(id: string, errorCode: number, message: string, cause: EndCause = 'failed'): Promise<boolean> {
    return this.tx(async (c) => {
      const now = Date.now()
      const j = await c.query<{ key_id: string; coins: number; trial: boolean; progress: number; attempts: number; result_key: string | null; refunded: boolean }>(
        `SELECT key_id, coins, trial, progress, attempts, result_key, refunded FROM jobs WHERE id = $1 AND status = 'CONVERTING' AND result_key IS NULL
        FOR UPDATE`, [id])
      const job = j.rows[0]
      if (!job) return false
      const r = await c.query(`UPDATE jobs SET status = 'ERROR', error_code = $1, error_message = $2, updated_at = $3, completed_at = $3
        WHERE id = $4 AND status = 'CONVERTING' AND result_key IS NULL`, [errorCode, message, now, id])
      if (r.rowCount !== 1) return false
      const refund = refundFor({ coins: Number(job.coins), trial: job.trial, progress: job.progress, attempts: job.attempts, resultKey: job.result_key }, cause, errorCode)
      if (!refund || job.refunded) return true
      await c.query('UPDATE jobs SET refunded = TRUE WHERE id = $1', [id])
      const k = job.trial
        ? await c.query<{ coins: number }>(`UPDATE keys SET trial_left = trial_left + $1 WHERE id = $2 RETURNING coins`, [refund.trial ? 1 : 0, job.key_id])
        : await c.query<{ coins: number }>('UPDATE keys SET coins = coins + $1 WHERE id = $2 RETURNING coins', [refund.coins, job.key_id])
      await c.query('INSERT INTO ledger (key_id, job_id, kind, delta, balance_after, at, reason) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [job.key_id, id, job.trial ? 'trial_refund' : 'refund', job.trial ? 0 : refund.coins, k.rows[0].coins, now, refund.reason])
      return true
    })
  }

  async ledger(keyId: string): Promise<LedgerEntry[]> {
    const r = await this.pool.query<LedgerRow>('SELECT * FROM ledger WHERE key_id = $1 ORDER BY id', [keyId])
    return r.rows.map(toLedger)
  }

  async idempotentJob(keyId: string, key: string, since: number): Promise<IdempotentJob | null> {
    const r = await this.pool.query<{ request_hash: string; job_id: string; coins: number }>(
      'SELECT request_hash, job_id, coins FROM idempotency WHERE key_id = $1 AND idem_key = $2 AND created_at >= $3', [keyId, key, since])
    const x = r.rows[0]
    return x ? { hash: x.request_hash, jobId: x.job_id, coins: x.coins } : null
  }

  async forgetIdempotency(keyId: string, key: string, jobId: string): Promise<void> {
    await this.pool.query('DELETE FROM idempotency WHERE key_id = $1 AND idem_key = $2 AND job_id = $3', [keyId, key, jobId])
  }

  async purgeIdempotency(before: number): Promise<number> {
    return (await this.pool.query('DELETE FROM idempotency WHERE created_at < $1', [before])).rowCount ?? 0
  }

  async throughput(model: string, backend: string): Promise<Throughput | null> {
    const r = await this.pool.query<{ ms_per_unit: number; samples: number }>(
      'SELECT ms_per_unit, samples FROM throughput WHERE model = $1 AND backend = $2', [model, backend])
    return r.rows[0] ? { msPerUnit: r.rows[0].ms_per_unit, samples: r.rows[0].samples } : null
  }

  async recordThroughput(model: string, backend: string, msPerUnit: number, alpha: number): Promise<void> {
    await this.pool.query(`INSERT INTO throughput (model, backend, ms_per_unit, samples, updated_at) VALUES ($1, $2, $3, 1, $4)
      ON CONFLICT (model, backend) DO UPDATE SET ms_per_unit = throughput.ms_per_unit * (1 - $5::float8) + EXCLUDED.ms_per_unit * $5::float8,
      samples = throughput.samples + 1, updated_at = EXCLUDED.updated_at`, [model, backend, msPerUnit, Date.now(), alpha])
  }

  async recentLedger(keyId: string, limit: number): Promise<LedgerEntry[]> {
    const r = await this.pool.query<LedgerRow>('SELECT * FROM ledger WHERE key_id = $1 ORDER BY id DESC LIMIT $2', [keyId, limit])
    return r.rows.map(toLedger)
  }

  async setOutputPut(jobId: string, o: OutputPutState): Promise<void> {
    await this.pool.query(`INSERT INTO output_puts (job_id, status, http_status, attempts, error, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
      ON CONFLICT (job_id) DO UPDATE SET status = EXCLUDED.status, http_status = EXCLUDED.http_status, attempts = EXCLUDED.attempts,
      error = EXCLUDED.error, updated_at = EXCLUDED.updated_at`, [jobId, o.status, o.httpStatus, o.attempts, o.error, Date.now()])
  }

  async outputPut(jobId: string): Promise<OutputPutState | null> {
    const r = await this.pool.query<{ status: OutputPutState['status']; http_status: number | null; attempts: number; error: string | null }>(
      'SELECT status, http_status, attempts, error FROM output_puts WHERE job_id = $1', [jobId])
    const x = r.rows[0]
    return x ? { status: x.status, httpStatus: x.http_status, attempts: x.attempts, error: x.error } : null
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.pool.end()
  }
}
