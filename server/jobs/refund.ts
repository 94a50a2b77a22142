/**
 * The money policy: what a job that ends without a result gives back. The ONE place that decides a refund;
 * both stores (server/store/sqlite.ts, postgres.ts) call refundFor() inside the transaction that ends the job,
 * so the decision and the write see the same row. docs/api.md "Money policy" says the same to customers.
 *
 *   ended by                         refund                                  ledger reason
 *   a failure of the service         all of it (the service did not deliver)  `failed <error_code>`
 *     (FAILURE_CAUSE says 'service')
 *   a failure the input causes       the unprocessed share at most:           `input failed <error_code> at <p>%`
 *     (FAILURE_CAUSE says 'input')   floor(coins x (100 - progress) / 100);
 *                                    a trial job gets its trial back only at 0 %
 *   cancel, never started            all of it                                `canceled while waiting`
 *   cancel, running (or ran before)  the unprocessed share at most (as above) `canceled at <progress>%`
 *   anything, once the result exists nothing: the job cannot fail or be canceled any more (the store refuses
 *   (stored, or being delivered to    the transition), it completes; task-cancel answers 409 110409000
 *   output_put_url)
 *
 * Who caused a failure is decided by its error_code, in FAILURE_CAUSE below (the one table), with one rule for
 * timeouts that the code alone cannot settle:
 * - input: the bytes could not be decoded (also late: a video whose frame 900 is broken), a limit found while
 *   running (resolution, duration), an argument the engine refuses, the work budget exceeded (110400015,
 *   server/jobs/budget.ts), and the job timeout (100500007) when the run went at the service's normal speed.
 *   The customer pays for the share that was processed (progress), as with a cancel: asking on purpose for work
 *   that cannot finish (a timeout reached on purpose, a broken last frame, more work than priced) is never free.
 *   A failure before any progress (a file that does not decode at all) still gets everything back.
 * - service: everything else (crash, lost worker, crash limit, queue refused / not queued, BullMQ giving up,
 *   storage, encoder, engine internal / device lost / model missing or invalid, configuration, a model removed
 *   while the job waited, shutdown-related aborts), and any code not in the table (fails safe for the customer).
 * - timeouts (timeoutCause()): the job timeout is charged to the input only when the run progressed at no less
 *   than half the speed the service measured for this model on this backend (server/jobs/eta.ts: the expected
 *   run time of the job's priced work; read at the run's start, or at the timeout when the engine was still loading
 *   then), i.e. progress/100 >= (elapsed / expected) / SLOW_FACTOR. A box that ran
 *   the job slower than that (overloaded, throttled) caused the timeout: everything back (the lifecycle passes
 *   cause 'service'). Without a measured speed (no run of the model has completed on this backend) the timeout
 *   is the input's: a key that only ever times out on a model nobody else runs would otherwise keep it unmeasured
 *   and every one of its runs free. Why not trust the progress alone: a priced job that needs more than the
 *   timeout at normal speed is exactly the "timeout on purpose"; a slow box shows as low speed for all its jobs.
 *   Residual: slowness in work the meter and the price do not count (decoding a crafted file) looks like a slow
 *   box and is refunded in full; the work meter and the video plan bound that work.
 *
 * Every refund writes one ledger row (kind `refund` or `trial_refund`, at most one per job) with its reason,
 * also when the amount is 0, so the ledger explains every job that did not complete.
 */
import type { ErrorCode } from '../errors.js'

/** Why a job ended without a result. `failed`: classified by its error_code (FAILURE_CAUSE); `service`: a
 *  failure the lifecycle knows the service caused whatever its code (a timeout on a slowed box: timeoutCause). */
export type EndCause = 'failed' | 'canceled' | 'service'

/** Who caused a failure with this error_code. Codes not here are the service's. */
export const FAILURE_CAUSE: Partial<Record<ErrorCode, 'input' | 'service'>> = {
  // the input's: what its bytes or its request hold, found while running
  100400002: 'input',   // decode failed (photo, or a video frame / packet the decoder refuses, at any frame)
  100403000: 'input',   // an argument the engine refuses (invalid_argument)
  110400007: 'input',   // not a supported image format
  110400008: 'input',   // not a usable video
  110400009: 'input',   // input resolution over the limit (found by the engine)
  110400010: 'input',   // target resolution over the limit
  110400011: 'input',   // duration over the limit
  110400015: 'input',   // the work budget exceeded (server/jobs/budget.ts)
  100500007: 'input',   // the job timeout, when the run went at normal speed (else cause 'service': timeoutCause)
  // the service's (listed for the reader; the default is the same)
  100500000: 'service', // internal, device lost, a crashed engine thread, not queued, BullMQ gave up, aborted
  100500001: 'service', // database
  100500003: 'service', // storage (original missing), encoder
  100500005: 'service', // configuration, model missing / invalid, GPU unavailable, ffmpeg missing
  100500006: 'service', // crash limit (the job's process died LUCENT_JOB_MAX_ATTEMPTS times), unknown
  110400005: 'service', // the model was removed while the job waited
}

/** A run is "slow" (the service's fault) below 1 / SLOW_FACTOR of its measured speed. */
export const SLOW_FACTOR = 2

/** What the lifecycle knows of a run that reached the job timeout. */
export interface TimedOutRun {
  /** 0..100, the progress written. */
  progress: number
  elapsedMs: number
  /** The expected run time of the job's priced work at the measured speed (eta.ts), null when unmeasured. */
  expectedMs: number | null
}

/** Whose fault a job timeout is (see the header): 'failed' (classified by FAILURE_CAUSE: the input's) or
 *  'service' (the box ran it at under half its measured speed). */
export function timeoutCause(run: TimedOutRun): 'failed' | 'service' {
  if (run.expectedMs === null || !(run.expectedMs > 0) || !(run.elapsedMs > 0)) return 'failed'
  const speed = (Math.max(0, Math.min(100, run.progress)) / 100) / (run.elapsedMs / run.expectedMs)
  return speed * SLOW_FACTOR >= 1 ? 'failed' : 'service'
}

/** Who caused a failure ending with `errorCode` under `cause`. */
export function failureCause(cause: Exclude<EndCause, 'canceled'>, errorCode: number): 'input' | 'service' {
  if (cause === 'service') return 'service'
  return FAILURE_CAUSE[errorCode as ErrorCode] ?? 'service'
}

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

/** The unprocessed share of a job at `progress`, and whether its trial comes back (only at 0 %). */
function share(job: RefundBasis): { coins: number; trial: boolean; progress: number } {
  const progress = Math.max(0, Math.min(100, Math.floor(job.progress)))
  return { coins: job.trial ? 0 : Math.floor((job.coins * (100 - progress)) / 100), trial: job.trial && progress === 0, progress }
}

export function refundFor(job: RefundBasis, cause: EndCause, errorCode: number): Refund | null {
  if (job.resultKey !== null) return null
  if (cause !== 'canceled') {
    if (failureCause(cause, errorCode) === 'service') return { coins: job.trial ? 0 : job.coins, trial: job.trial, reason: `failed ${errorCode}` }
    const s = share(job)
    return { coins: s.coins, trial: s.trial, reason: `input failed ${errorCode} at ${s.progress}%${job.trial && !s.trial ? ' (the trial is not given back)' : ''}` }
  }
  if (job.attempts === 0) return { coins: job.trial ? 0 : job.coins, trial: job.trial, reason: 'canceled while waiting' }
  const s = share(job)
  return { coins: s.coins, trial: s.trial, reason: `canceled at ${s.progress}%${job.trial && !s.trial ? ' (the trial is not given back)' : ''}` }
}
