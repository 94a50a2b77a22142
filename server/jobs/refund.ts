/**
 * The money policy: what a job that ends without a result gives back. The ONE place that decides a refund;
 * both stores (server/store/sqlite.ts, postgres.ts) call refundFor() inside the transaction that ends the job,
 * so the decision and the write see the same row.
 *
 *   ended by                         refund                                  ledger reason
 *   failure (engine, timeout, ...)   all of it (the service did not deliver)  `failed <error_code>`
 *   cancel, never started            all of it                                `canceled while waiting`
 *   cancel, running (or ran before)  the unprocessed share at most:           `canceled at <progress>%`
 *                                    floor(coins x (100 - progress) / 100);
 *                                    a trial job gets its trial back only at 0 %
 *   anything, once the result exists nothing: the job cannot fail or be canceled any more (the store refuses
 *   (stored, or being delivered to    the transition), it completes; task-cancel answers 409 110409000
 *   output_put_url)
 *
 * Every refund writes one ledger row (kind `refund` or `trial_refund`, at most one per job) with its reason,
 * also when the amount is 0, so the ledger explains every job that did not complete.
 */

/** Why a job ended without a result. */
export type EndCause = 'failed' | 'canceled'

/** What the store knows of the job when it ends it. */
export interface RefundBasis {
  coins: number
  trial: boolean
  /** 0..100, the last progress written. */
  progress: number
  /** Runs started (0: never ran). */
  attempts: number
  /** Set once the result is stored: then nothing is refunded. */
  resultKey: string | null
}

export interface Refund {
  /** Coins given back (0 for a trial job). */
  coins: number
  /** A trial job's allowance given back. */
  trial: boolean
  reason: string
}

export function refundFor(job: RefundBasis, cause: EndCause, errorCode: number): Refund | null {
  if (job.resultKey !== null) return null
  if (cause === 'failed') return { coins: job.trial ? 0 : job.coins, trial: job.trial, reason: `failed ${errorCode}` }
  if (job.attempts === 0) return { coins: job.trial ? 0 : job.coins, trial: job.trial, reason: 'canceled while waiting' }
  const progress = Math.max(0, Math.min(100, Math.floor(job.progress)))
  const trial = job.trial && progress === 0
  return {
    coins: job.trial ? 0 : Math.floor((job.coins * (100 - progress)) / 100),
    trial,
    reason: `canceled at ${progress}%${job.trial && !trial ? ' (the trial is not given back)' : ''}`,
  }
}
