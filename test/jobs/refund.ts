/**
 * The money policy's table (server/jobs/refund.ts): who caused a failure, by error_code, and what comes back. The
 * stores call refundFor() inside the transaction that ends a job; the API-level proofs are test/abuse/refunds.ts
 * and test/abuse/money-property.ts. Here every row of the table and the timeout rule's edges.
 */
import t from 'tap'
import { ERRORS, type ErrorCode } from '../../server/errors.js'
import { FAILURE_CAUSE, SLOW_FACTOR, failureCause, refundFor, timeoutCause, type RefundBasis } from '../../server/jobs/refund.js'

const job = (o: Partial<RefundBasis> = {}): RefundBasis => ({ coins: 40, trial: false, progress: 83, attempts: 1, resultKey: null, ...o })

t.test('every code in the table is an API code; the input\'s are the 4xx ones and the timeout', async (t) => {
  for (const [code, cause] of Object.entries(FAILURE_CAUSE)) {
    t.ok(Object.hasOwn(ERRORS, code), `${code} is in server/errors.ts`)
    const status = ERRORS[Number(code) as ErrorCode].status
    if (cause === 'input') t.ok(status < 500 || Number(code) === 100500007, `${code}: input-caused, HTTP ${status}`)
  }
  t.equal(failureCause('failed', 110400015), 'input', 'the work budget exceeded')
  t.equal(failureCause('failed', 100400002), 'input', 'a decode error')
  t.equal(failureCause('failed', 100500003), 'service', 'storage')
  t.equal(failureCause('failed', 123456789), 'service', 'an unknown code: the service\'s (fails safe)')
  t.equal(failureCause('service', 100500007), 'service', 'a timeout the lifecycle found on a slow box')
})

t.test('a failure the input causes refunds the unprocessed share; the service\'s refunds all', async (t) => {
  t.same(refundFor(job(), 'failed', 100400002), { coins: 6, trial: false, reason: 'input failed 100400002 at 83%' })
  t.same(refundFor(job(), 'failed', 110400015), { coins: 6, trial: false, reason: 'input failed 110400015 at 83%' })
  t.same(refundFor(job(), 'failed', 100500007), { coins: 6, trial: false, reason: 'input failed 100500007 at 83%' })
  t.same(refundFor(job({ progress: 0 }), 'failed', 100400002), { coins: 40, trial: false, reason: 'input failed 100400002 at 0%' }, 'bad from the start: all back')
  t.same(refundFor(job(), 'service', 100500007), { coins: 40, trial: false, reason: 'failed 100500007' })
  for (const code of [100500000, 100500003, 100500005, 100500006, 110400005]) {
    t.same(refundFor(job(), 'failed', code), { coins: 40, trial: false, reason: `failed ${code}` }, `${code}: all back`)
  }
  t.same(refundFor(job({ trial: true }), 'failed', 100400002), { coins: 0, trial: false, reason: 'input failed 100400002 at 83% (the trial is not given back)' })
  t.same(refundFor(job({ trial: true, progress: 0 }), 'failed', 100400002), { coins: 0, trial: true, reason: 'input failed 100400002 at 0%' })
  t.same(refundFor(job({ trial: true }), 'failed', 100500000), { coins: 0, trial: true, reason: 'failed 100500000' })
  t.equal(refundFor(job({ resultKey: 'r/x.png' }), 'failed', 100500000), null, 'a stored result: nothing')
  t.same(refundFor(job(), 'canceled', 110400014), { coins: 6, trial: false, reason: 'canceled at 83%' }, 'cancel as before')
  t.same(refundFor(job({ attempts: 0, progress: 0 }), 'canceled', 110400014), { coins: 40, trial: false, reason: 'canceled while waiting' })
})

t.test('the timeout is the input\'s at normal speed, the service\'s below 1 / SLOW_FACTOR of it', async (t) => {
  t.equal(SLOW_FACTOR, 2)
  // expected 10 s of priced work, timed out at 30 s: normal speed would have reached 100 %
  t.equal(timeoutCause({ progress: 90, elapsedMs: 30_000, expectedMs: 10_000 }), 'service', '90 % in 3x the expected time: slow box')
  // expected 100 s, timed out at 30 s: normal speed reaches 30 %
  t.equal(timeoutCause({ progress: 30, elapsedMs: 30_000, expectedMs: 100_000 }), 'failed', 'normal speed: the input asked for more than the timeout')
  t.equal(timeoutCause({ progress: 15, elapsedMs: 30_000, expectedMs: 100_000 }), 'failed', 'exactly half the speed: still the input\'s')
  t.equal(timeoutCause({ progress: 14, elapsedMs: 30_000, expectedMs: 100_000 }), 'service', 'under half: the box')
  t.equal(timeoutCause({ progress: 0, elapsedMs: 30_000, expectedMs: 100_000 }), 'service', 'no progress at all')
  t.equal(timeoutCause({ progress: 5, elapsedMs: 30_000, expectedMs: null }), 'failed', 'unmeasured: the input\'s (else a model nobody completes stays free)')
})
