/** The store's row types that its own modules (./audit.ts) read as well as ./types.ts: a leaf module, so that
 *  the Store interface (./types.ts) can name those modules without an import cycle. */

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

export interface LedgerEntry {
  id: number
  keyId: string
  jobId: string | null
  /** 'adjust': an operator's correction (admin API / `lucent keys adjust`), signed, with its reason. */
  kind: 'grant' | 'topup' | 'adjust' | 'debit' | 'refund' | 'trial' | 'trial_refund'
  delta: number
  balanceAfter: number
  at: number
  /** Why a refund was given (server/jobs/refund.ts), or an operator's reason for a topup / adjust; null for other rows. */
  reason: string | null
}
