/** Persistence interface (keys, jobs, ledger): SQLite (sqlite.ts) or PostgreSQL (postgres.ts). Job state is
 *  written only through the job lifecycle (server/jobs/lifecycle.ts), which tells its subscribers. */
import type { WebhookStore } from './webhooks.js'
import type { OwnModelStore } from './own-models.js'
import type { AuditStore } from './audit.js'
import type { QuotaStore } from './quotas.js'
import type { EndCause } from '../jobs/refund.js'
import type { RunLog } from './job-runs.js'
import type { ApiKey, JobStatus, LedgerEntry } from './rows.js'

// the rows that the store's own modules also read (./rows.ts: no import cycle with ./audit.ts)
export type { ApiKey, JobStatus, LedgerEntry }

export type JobKind = 'photo' | 'video' | 'segment'

export interface Job {
  id: string
  keyId: string
  kind: JobKind
  model: string
  /** As the submission stored it (JSON); read back typed through server/jobs/params.ts decodeJob(). */
  params: Record<string, unknown>
  status: JobStatus
  progress: number
  coins: number
  trial: boolean
  originalKey: string
  resultKey: string | null
  errorCode: number | null
  errorMessage: string | null
  attempts: number
  createdAt: number
  updatedAt: number
  completedAt: number | null
}

export interface JobStatusRow {
  id: string; keyId: string; status: JobStatus; progress: number; coins: number; originalKey: string; resultKey: string | null
  errorCode: number | null; errorMessage: string | null; createdAt: number; completedAt: number | null
  /** Runs started (0 = still waiting for its first run). */
  attempts: number
  /** When the running job is expected to finish (ms epoch; server/jobs/eta.ts), null when unknown. */
  etaAt: number | null
}


/** Extension: the PUT of a job's result to its output_put_url (server/jobs/output-put.ts). */
export interface OutputPutState {
  status: 'pending' | 'delivered' | 'failed'
  /** The last HTTP answer, null when none came. */
  httpStatus: number | null
  attempts: number
  error: string | null
}

export interface NewJob {
  id: string
  keyId: string
  kind: JobKind
  model: string
  /** As the submission stored it (JSON); read back typed through server/jobs/params.ts decodeJob(). */
  params: Record<string, unknown>
  coins: number
  originalKey: string
  /** An Idempotency-Key submission: recorded with the job in the same transaction (unique per API key). */
  idempotency?: Idempotency
}

/** An Idempotency-Key of a submission: the client's key and a hash of the request (route + body). */
export interface Idempotency { key: string; hash: string }

/** A submission remembered under its Idempotency-Key (for IDEMPOTENCY_MS). */
export interface IdempotentJob { hash: string; jobId: string; coins: number }

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_MS = 24 * 3600 * 1000

export type DebitResult =
  | { ok: true; job: Job; charged: number; trial: boolean }
  | { ok: false; reason: 'insufficient' | 'trial_exhausted' | 'no_key' }
  /** The key already has `limit` jobs in flight (its jobs-in-flight quota, server/store/quotas.ts), counted inside
   *  the debit's transaction: parallel submissions of one key cannot pass it together (nothing debited). */
  | { ok: false; reason: 'jobs_in_flight'; limit: number; used: number }
  /** The Idempotency-Key already made a job (nothing debited): with the same request -> that job (`replay`),
   *  another request -> `idempotency_conflict`. */
  | { ok: false; reason: 'replay'; job: IdempotentJob }
  | { ok: false; reason: 'idempotency_conflict' }

/** Measured engine throughput of one model on one backend (server/jobs/eta.ts): ms per unit of work. */
export interface Throughput { msPerUnit: number; samples: number }

export interface Store {
  // keys
  createKey(k: { id: string; hash: string; coins: number; trial: number; expiresAt: number | null; rate: number | null }): Promise<ApiKey>
  keyByHash(hash: string): Promise<ApiKey | null>
  /** Lookup by id or by id prefix / hash prefix, for the CLI. */
  findKey(ref: string): Promise<ApiKey | null>
  listKeys(): Promise<ApiKey[]>
  revokeKey(id: string): Promise<boolean>
  topup(id: string, coins: number): Promise<ApiKey | null>
  // jobs + ledger
  /** Atomically: check the balance / trial allowance, debit it, write the ledger row, create the job row. */
  debitAndCreateJob(job: NewJob): Promise<DebitResult>
  getJob(id: string): Promise<Job | null>
  /** Lean read for task-status (hot path): no params decoding. */
  jobStatus(id: string): Promise<JobStatusRow | null>
  jobsByStatus(status: JobStatus): Promise<Job[]>
  startAttempt(id: string): Promise<number>
  /** Progress of a CONVERTING job; with `etaAt` (ms epoch or null) also its expected finish. */
  setProgress(id: string, progress: number, etaAt?: number | null): Promise<void>
  /** Waiting jobs (CONVERTING, never started) submitted before this one: its queue position - 1. */
  jobsAhead(id: string): Promise<number>
  /** Records the stored result of a CONVERTING job that has none yet (or the same one): from then on the job can
   *  only complete (failJob refuses it, nothing is refunded). False when the job is not CONVERTING. */
  storeResult(id: string, resultKey: string): Promise<boolean>
  /** CONVERTING jobs with a stored result whose row was last written before `before` (ms epoch): ids. */
  staleResults(before: number): Promise<string[]>
  /** Marks the job COMPLETED with `resultKey` (if CONVERTING). */
  completeJob(id: string, resultKey: string): Promise<boolean>
  /** Marks the job ERROR (if CONVERTING and without a stored result) and refunds it as server/jobs/refund.ts
   *  says for `cause` (default 'failed'); at most one refund per job, its reason in the ledger. */
  failJob(id: string, errorCode: number, message: string, cause?: EndCause): Promise<boolean>
  ledger(keyId: string): Promise<LedgerEntry[]>
  // idempotency (unique per API key and Idempotency-Key; written by debitAndCreateJob)
  /** The submission made under this key since `since` (ms epoch), if any. */
  idempotentJob(keyId: string, key: string, since: number): Promise<IdempotentJob | null>
  /** Forgets a key's record of `jobId` (its submission failed after the debit: a retry may submit again). */
  forgetIdempotency(keyId: string, key: string, jobId: string): Promise<void>
  /** Drops records older than `before` (ms epoch); returns how many. */
  purgeIdempotency(before: number): Promise<number>
  // measured throughput (time estimates)
  throughput(model: string, backend: string): Promise<Throughput | null>
  /** Folds one measurement into the moving average (weight `alpha` for the new one; the first one is taken). */
  recordThroughput(model: string, backend: string, msPerUnit: number, alpha: number): Promise<void>
  /** Webhook secrets, subscriptions and the delivery outbox (./webhooks.ts). */
  readonly webhooks: WebhookStore
  /** The operator's own networks (bring your own model, ./own-models.ts). */
  readonly ownModels: OwnModelStore
  /** The admin's changes to keys, each with its audit row (./audit.ts; used through server/admin/keys.ts). */
  readonly audit: AuditStore
  /** Per-key quotas: stored bytes / files, jobs in flight (./quotas.ts). */
  readonly quotas: QuotaStore
  /** Which process runs which job now: a crash charges attempts only where it can be known (./job-runs.ts). */
  readonly runs: RunLog
  /** The key's newest `limit` ledger rows, newest first. */
  recentLedger(keyId: string, limit: number): Promise<LedgerEntry[]>
  /** Extension: record the state of a job's output PUT (insert or replace). */
  setOutputPut(jobId: string, state: OutputPutState): Promise<void>
  outputPut(jobId: string): Promise<OutputPutState | null>
  close(): Promise<void>
}
