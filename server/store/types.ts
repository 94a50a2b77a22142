/** Persistence interface (keys, jobs, ledger): SQLite (sqlite.ts) or PostgreSQL (postgres.ts). Job state is
 *  written only through the job lifecycle (server/jobs/lifecycle.ts), which tells its subscribers. */

export interface ApiKey {
  id: string
  hash: string            // sha256 hex of the key; the key itself is never stored
  coins: number
  trialTotal: number
  trialLeft: number
  expiresAt: number | null // ms epoch
  rate: number | null      // per-key refill rate (requests/s) overriding LUCENT_RATE_PER_SEC
  revoked: boolean
  createdAt: number
}

export type JobStatus = 'CONVERTING' | 'COMPLETED' | 'ERROR'
export type JobKind = 'photo' | 'video'

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
}

export interface LedgerEntry {
  id: number
  keyId: string
  jobId: string | null
  kind: 'grant' | 'topup' | 'debit' | 'refund' | 'trial' | 'trial_refund'
  delta: number
  balanceAfter: number
  at: number
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
}

export type DebitResult =
  | { ok: true; job: Job; charged: number; trial: boolean }
  | { ok: false; reason: 'insufficient' | 'trial_exhausted' | 'no_key' }

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
  setProgress(id: string, progress: number): Promise<void>
  completeJob(id: string, resultKey: string): Promise<boolean>
  /** Marks the job ERROR (if CONVERTING) and refunds it; idempotent: refunds at most once per job. */
  failJob(id: string, errorCode: number, message: string): Promise<boolean>
  /** Idempotent refund (exactly once per job). Returns true if it refunded now. */
  refund(jobId: string): Promise<boolean>
  ledger(keyId: string): Promise<LedgerEntry[]>
  /** The key's newest `limit` ledger rows, newest first. */
  recentLedger(keyId: string, limit: number): Promise<LedgerEntry[]>
  /** Extension: record the state of a job's output PUT (insert or replace). */
  setOutputPut(jobId: string, state: OutputPutState): Promise<void>
  outputPut(jobId: string): Promise<OutputPutState | null>
  close(): Promise<void>
}
