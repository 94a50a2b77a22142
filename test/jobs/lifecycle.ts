/**
 * The job lifecycle (server/jobs/lifecycle.ts) on a real SQLite store and the in-process queue: one typed
 * event per transition, the change notices caches rely on (also when a write throws), progress throttling,
 * the job timeout, shutdown, the attempt limit, an enqueue failure, and cancel (queue removal, refund, run
 * aborted).
 */
import t, { type Test } from 'tap'
import path from 'node:path'
import { SqliteStore } from '../../server/store/sqlite.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle, RunAborted, settleAborted, type JobEvents, type LifecycleDeps } from '../../server/jobs/lifecycle.js'
import type { PhotoParams } from '../../server/jobs/params.js'
import { newApiKey } from '../../server/auth.js'

const params: PhotoParams = { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 16, height: 16 } }
const silent = { info() {}, warn() {}, error() {} }

async function setup(t: Test, o: Partial<LifecycleDeps> & { queueMax?: number } = {}) {
  const store = new SqliteStore(path.join(t.testdir(), 'l.db'))
  const queue = new MemoryQueue(o.queueMax ?? 100, 1) // never processed here: jobs wait until started by hand
  const jobs = new JobLifecycle({ store, queue, log: silent, jobTimeoutMs: 60_000, maxAttempts: 3, ...o })
  t.teardown(() => store.close())
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 100, trial: 0, expiresAt: null, rate: null })
  const events: Array<{ type: keyof JobEvents; e: JobEvents[keyof JobEvents] }> = []
  for (const type of ['queued', 'running', 'progress', 'completed', 'failed', 'canceled', 'released'] as const) {
    jobs.on(type, (e) => events.push({ type, e }))
  }
  const changes: string[] = []
  jobs.onChange((id) => changes.push(id))
  const submit = async (id: string, coins = 10) => {
    const r = await jobs.submit({ id, keyId: k.id, kind: 'photo', model: 'general_2x', params, coins, originalKey: `o/${id}.png` })
    t.ok(r.ok, `${id} submitted`)
    return r
  }
  const balance = async () => (await store.findKey(k.id))!.coins
  return { store, queue, jobs, events, changes, submit, balance, keyId: k.id }
}

t.test('one event per transition, in order, with what subscribers need', async (t) => {
  const s = await setup(t)
  await s.submit('j1')
  t.same(s.queue.stats().waiting, 1, 'queued')
  const run = await s.jobs.start('j1')
  t.ok(run)
  t.equal(run!.attempt, 1)
  t.equal(run!.job.kind, 'photo')
  t.same(run!.job.params, params, 'typed parameters, as submitted')
  await run!.progress(30)
  await run!.progress(60) // within 200 ms of the last write: skipped
  await run!.progress(10) // backwards: skipped
  t.equal((await s.store.getJob('j1'))!.progress, 30, 'one progress write')
  t.ok(await run!.complete('r/j1.png'))
  t.equal(run!.state, 'completed')
  t.notOk(await run!.complete('r/j1.png'), 'a run ends once')
  t.same(s.events.map((x) => x.type), ['queued', 'running', 'progress', 'completed'])
  t.match(s.events[0].e, { job: { id: 'j1', keyId: s.keyId, kind: 'photo', model: 'general_2x' }, coins: 10, trial: false })
  t.match(s.events[1].e, { job: { id: 'j1' }, attempt: 1 })
  t.match(s.events[2].e, { progress: 30 })
  const done = s.events[3].e as JobEvents['completed']
  t.equal(done.resultKey, 'r/j1.png')
  t.equal(done.run.attempt, 1)
  t.ok(done.run.ms >= 0 && done.latencyMs >= 0)
  t.match(await s.store.getJob('j1'), { status: 'COMPLETED', progress: 100, resultKey: 'r/j1.png' })
  t.same(s.changes, ['j1', 'j1', 'j1', 'j1'], 'a change notice per state write (start: waiting -> running, progress, result recorded, completion)')
  t.equal(s.jobs.running, 0)
})

t.test('onChange: every job-state write reports its job, also when it throws', async (t) => {
  const s = await setup(t)
  await s.submit('j1')
  await s.submit('j2')
  await s.submit('j3')
  const r1 = await s.jobs.start('j1')
  await r1!.progress(10)
  await r1!.complete('r/j1.png')
  t.ok(await s.jobs.fail('j2', 100500000, 'x'))
  t.same(s.changes, ['j1', 'j1', 'j1', 'j1', 'j2'])
  const r3 = await s.jobs.start('j3')
  await s.store.close()
  await r3!.progress(20)
  t.same(s.changes, ['j1', 'j1', 'j1', 'j1', 'j2', 'j3', 'j3'], 'a progress write that threw is reported (and never rejects)')
  await t.rejects(r3!.complete('r/j3.png'), 'a closed store throws')
  t.same(s.changes, ['j1', 'j1', 'j1', 'j1', 'j2', 'j3', 'j3', 'j3'], 'reported anyway')
  t.notOk(s.events.some((x) => x.type === 'completed' && (x.e as JobEvents['completed']).job.id === 'j3'), 'no completed event for a write that failed')
})

t.test('failed: engine failure of a run; fail() of a waiting job; both refunded once', async (t) => {
  const s = await setup(t)
  await s.submit('a')
  await s.submit('b')
  t.equal(await s.balance(), 80)
  const run = await s.jobs.start('a')
  t.ok(await run!.fail(100400002, 'cannot decode'))
  t.ok(await s.jobs.fail('b', 100500000, 'job failed after retries: stalled'))
  t.notOk(await s.jobs.fail('b', 100500000, 'again'), 'an ended job stays as it is')
  t.equal(await s.balance(), 100, 'both refunded')
  const failed = s.events.filter((x) => x.type === 'failed').map((x) => x.e as JobEvents['failed'])
  t.match(failed, [{ job: { id: 'a' }, errorCode: 100400002, run: { attempt: 1 } }, { job: { id: 'b' }, errorCode: 100500000, run: null }])
  t.match(await s.store.getJob('a'), { status: 'ERROR', errorCode: 100400002, errorMessage: 'cannot decode' })
})

t.test('a listener that throws never breaks a transition', async (t) => {
  const errors: string[] = []
  const s = await setup(t, { log: { ...silent, error: (_o: object, msg: string) => { errors.push(msg) } } })
  s.jobs.on('queued', () => { throw new Error('boom') })
  await s.submit('j')
  const run = await s.jobs.start('j')
  t.ok(await run!.complete('r/j.png'))
  t.same(errors, ['job event listener threw'])
})

t.test('timeout: the run signal aborts with RunAborted(timeout); settleAborted fails 100500007, refunded', async (t) => {
  const s = await setup(t, { jobTimeoutMs: 50 })
  await s.submit('slow')
  const run = await s.jobs.start('slow')
  await new Promise((r) => run!.signal.addEventListener('abort', r, { once: true }))
  t.type(run!.signal.reason, RunAborted)
  t.equal(run!.signal.reason.why, 'timeout')
  t.notOk(run!.stopped, 'a timeout still lets a result that is there complete')
  await settleAborted(run!)
  t.match(await s.store.getJob('slow'), { status: 'ERROR', errorCode: 100500007, errorMessage: 'job exceeded 50 ms' })
  t.equal(await s.balance(), 100)
})

t.test('shutdown: runs released (job stays CONVERTING), no new runs', async (t) => {
  const s = await setup(t)
  await s.submit('a')
  await s.submit('b')
  const run = await s.jobs.start('a')
  s.jobs.shutdown()
  t.ok(run!.signal.aborted)
  t.ok(run!.stopped)
  await settleAborted(run!)
  t.equal(run!.state, 'released')
  t.match(s.events.find((x) => x.type === 'released')?.e, { job: { id: 'a' }, reason: 'shutdown', run: { attempt: 1 } })
  t.equal((await s.store.getJob('a'))!.status, 'CONVERTING')
  t.equal(await s.jobs.start('b'), null, 'stopping: nothing starts')
  t.equal(await s.balance(), 80, 'nothing refunded')
})

t.test('attempt limit: a job started more often than allowed fails (crashed, 100500006)', async (t) => {
  const s = await setup(t, { maxAttempts: 1 })
  await s.submit('c')
  const first = await s.jobs.start('c')
  first!.release('retry')
  t.equal(await s.jobs.start('c'), null)
  t.match(await s.store.getJob('c'), { status: 'ERROR', errorCode: 100500006, errorMessage: 'job did not finish after 1 attempts' })
  t.equal(await s.balance(), 100)
  t.match(s.events.filter((x) => x.type === 'failed').map((x) => x.e), [{ job: { id: 'c' }, errorCode: 100500006, run: { attempt: 2, ms: 0 } }],
    'counted as a run of this process (metrics)')
})

t.test('a stored job whose parameters do not match its schema fails at start (100403000)', async (t) => {
  const s = await setup(t)
  await s.store.debitAndCreateJob({ id: 'bad', keyId: s.keyId, kind: 'photo', model: 'general_2x', params: { format: 'png' }, coins: 5, originalKey: 'o/bad.png' })
  t.equal(await s.jobs.start('bad'), null)
  const job = await s.store.getJob('bad')
  t.equal(job!.status, 'ERROR')
  t.equal(job!.errorCode, 100403000)
  t.match(job!.errorMessage, /parameters do not match the photo schema: \/ must have required properties/)
})

t.test('submit: a queue that refuses the job ends it at once, refunded', async (t) => {
  const s = await setup(t, { queueMax: 0 })
  const r = await s.jobs.submit({ id: 'q', keyId: s.keyId, kind: 'photo', model: 'general_2x', params, coins: 10, originalKey: 'o/q.png' })
  t.match(r, { ok: false, reason: 'not_queued' })
  t.match(await s.store.getJob('q'), { status: 'ERROR', errorCode: 100500000, errorMessage: 'the job could not be queued' })
  t.equal(await s.balance(), 100)
  t.same(s.events.map((x) => x.type), ['queued', 'failed'])
  const debit = await s.jobs.submit({ id: 'x', keyId: s.keyId, kind: 'photo', model: 'general_2x', params, coins: 1000, originalKey: 'o/x.png' })
  t.same(debit, { ok: false, reason: 'insufficient' }, 'debit refusals come back as they are')
})

t.test('cancel: a waiting job leaves the queue; a running one has its run aborted; both refunded', async (t) => {
  const s = await setup(t)
  await s.submit('w')
  await s.submit('r')
  await s.submit('keep')
  t.equal(s.queue.stats().waiting, 3)
  t.ok(await s.jobs.cancel('w', { errorCode: 100500000, message: 'canceled by the client' }))
  t.equal(s.queue.stats().waiting, 2, 'removed from the queue')
  t.match(await s.store.getJob('w'), { status: 'ERROR', errorCode: 100500000, errorMessage: 'canceled by the client' })

  const run = await s.jobs.start('r')
  t.ok(await s.jobs.cancel('r', { errorCode: 100500000, message: 'canceled' }))
  t.ok(run!.signal.aborted, 'the running job is aborted')
  t.equal(run!.state, 'canceled')
  t.ok(run!.stopped)
  t.notOk(await run!.complete('r/r.png'), 'a late result does not complete a canceled job')
  t.equal((await s.store.getJob('r'))!.status, 'ERROR')
  t.notOk(await s.jobs.cancel('r', { errorCode: 100500000, message: 'again' }), 'an ended job cannot be canceled')
  t.notOk(await s.jobs.cancel('nope', { errorCode: 100500000, message: 'x' }))
  t.equal(await s.balance(), 90, 'both refunded, the third still charged')
  const canceled = s.events.filter((x) => x.type === 'canceled').map((x) => x.e as JobEvents['canceled'])
  t.match(canceled, [{ job: { id: 'w' }, run: null }, { job: { id: 'r' }, run: { attempt: 1 } }])
  t.equal(s.queue.stats().waiting, 1, "'keep' still waits")
})

t.test('recover: every CONVERTING job back into the queue', async (t) => {
  const s = await setup(t)
  await s.submit('a')
  await s.submit('b')
  const run = await s.jobs.start('a')
  await run!.complete('r/a.png')
  const q2 = new MemoryQueue(100, 1)
  const again = new JobLifecycle({ store: s.store, queue: q2, log: silent, jobTimeoutMs: 60_000, maxAttempts: 3 })
  t.equal(await again.recover(), 1)
  t.equal(q2.stats().waiting, 1)
})

t.test('a result with a delivery: the run ends at once, the job completes after it; no cancel, no refund meanwhile', async (t) => {
  const s = await setup(t, { deliveryDeadlineMs: 60_000 })
  await s.submit('d')
  const run = await s.jobs.start('d')
  let release!: () => void
  let seen: AbortSignal | null = null
  const held = new Promise<void>((r) => { release = r })
  t.ok(await run!.complete('r/d.png', async (signal) => { seen = signal; await held }))
  t.equal(run!.state, 'completed', 'the run is over: its slot is free')
  t.equal(s.jobs.running, 0)
  t.equal(s.jobs.delivering, 1)
  t.match(await s.store.getJob('d'), { status: 'CONVERTING', resultKey: 'r/d.png' }, 'the result is recorded, the job not yet COMPLETED')
  t.notOk(await s.jobs.cancel('d', { errorCode: 110400014, message: 'canceled by the client' }), 'no cancel once the result exists')
  t.notOk(await s.store.failJob('d', 100500000, 'x'), 'nor a failure')
  t.equal(await s.balance(), 90, 'nothing refunded')
  release()
  await s.jobs.drain()
  t.match(await s.store.getJob('d'), { status: 'COMPLETED', resultKey: 'r/d.png' })
  t.notOk(seen!.aborted)
  t.ok(s.events.some((x) => x.type === 'completed'), 'completed once delivered')
})

t.test('a delivery ends at its deadline', async (t) => {
  const s = await setup(t, { deliveryDeadlineMs: 200 })
  await s.submit('late')
  const forever = (signal: AbortSignal) => new Promise<void>((r) => signal.addEventListener('abort', () => r()))
  const late = await s.jobs.start('late')
  const t0 = Date.now()
  await late!.complete('r/late.png', forever)
  await s.jobs.drain()
  t.ok(Date.now() - t0 < 5000, 'the deadline ended it')
  t.equal((await s.store.getJob('late'))!.status, 'COMPLETED', 'completed all the same (the result stays at res_url)')
})

t.test('shutdown during a delivery leaves the job with its result for the next start', async (t) => {
  const forever = (signal: AbortSignal) => new Promise<void>((r) => signal.addEventListener('abort', () => r()))
  const s2 = await setup(t, { deliveryDeadlineMs: 60_000 })
  await s2.submit('cut')
  const run = await s2.jobs.start('cut')
  await run!.complete('r/cut.png', forever)
  s2.jobs.shutdown()
  await s2.jobs.drain()
  t.match(await s2.store.getJob('cut'), { status: 'CONVERTING', resultKey: 'r/cut.png' }, 'cut by shutdown: not completed, not failed')
  t.equal(await s2.balance(), 90)
  // the next process: its start of the job sees the result (the runner then delivers without the engine)
  const next = new JobLifecycle({ store: s2.store, queue: new MemoryQueue(100, 1), log: silent, jobTimeoutMs: 60_000, maxAttempts: 3 })
  const again = await next.start('cut')
  t.equal(again!.job.resultKey, 'r/cut.png')
  t.ok(await again!.complete('r/cut.png'))
  t.equal((await s2.store.getJob('cut'))!.status, 'COMPLETED')
})

t.test('a late result of a job canceled elsewhere is neither recorded nor delivered', async (t) => {
  const s = await setup(t)
  await s.submit('x')
  const run = await s.jobs.start('x')
  await run!.progress(50)
  // another process canceled it in the shared store; this one did not hear
  t.ok(await s.store.failJob('x', 110400014, 'canceled by the client', 'canceled'))
  let delivered = false
  t.notOk(await run!.complete('r/x.png', async () => { delivered = true }))
  t.notOk(delivered, 'no delivery')
  t.equal(run!.state, 'canceled')
  t.match(await s.store.getJob('x'), { status: 'ERROR', resultKey: null })
  t.equal(await s.balance(), 95, 'the unprocessed half refunded')
})

t.test('redeliverStale: a result nobody completed goes back into the queue', async (t) => {
  const s = await setup(t)
  await s.submit('a')
  const run = await s.jobs.start('a')
  t.ok(await s.store.storeResult('a', 'r/a.png'))
  run!.release('shutdown')
  await s.queue.remove('a') // started by hand above, so still waiting here: a queue holds an id once (test/queue/fairness.ts)
  const waiting = s.queue.stats().waiting
  t.equal(await s.jobs.redeliverStale(60_000), 0, 'recent: left alone')
  await new Promise((r) => setTimeout(r, 30))
  t.equal(await s.jobs.redeliverStale(10), 1)
  t.equal(s.queue.stats().waiting, waiting + 1)
})
