/**
 * The drain of a process (server/jobs/lifecycle.ts finish(); server/plugins/lifecycle.ts drainForStop), on a real
 * SQLite store and the in-process queue: no new run starts once draining, a run that ends within the grace is
 * not cut (it completes here), a run still going at the deadline is released ('shutdown') and its next start uses
 * no attempt; the HTTP side: /readyz 503 and submissions 503 + Retry-After while draining (build(t)).
 * Real processes over Redis / PostgreSQL / S3: test/scaleout/drain.ts.
 */
import t, { type Test } from 'tap'
import path from 'node:path'
import { SqliteStore } from '../../server/store/sqlite.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle, settleAborted, type Run } from '../../server/jobs/lifecycle.js'
import type { PhotoParams } from '../../server/jobs/params.js'
import { newApiKey } from '../../server/auth.js'
import { build, createKey, post, waitFor } from '../helper.js'

const params: PhotoParams = { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 16, height: 16 } }
const silent = { info() {}, warn() {}, error() {} }

async function setup(t: Test) {
  const store = new SqliteStore(path.join(t.testdir(), 'd.db'))
  const queue = new MemoryQueue(100, 1) // never processed here: runs are started by hand
  const jobs = new JobLifecycle({ store, queue, log: silent, jobTimeoutMs: 60_000, maxAttempts: 3 })
  t.teardown(() => store.close())
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 100, trial: 0, expiresAt: null, rate: null })
  const submit = async (id: string) => {
    const r = await jobs.submit({ id, keyId: k.id, kind: 'photo', model: 'general_2x', params, coins: 10, originalKey: `o/${id}.png` })
    t.ok(r.ok, `${id} submitted`)
  }
  /** A runner: completes after `ms`, or settles its aborted run (a shutdown releases it). */
  const runFor = (run: Run, ms: number) => new Promise<void>((resolve) => {
    const timer = setTimeout(() => { void run.complete(`r/${run.job.id}.png`).then(() => resolve()) }, ms)
    run.signal.addEventListener('abort', () => { clearTimeout(timer); void settleAborted(run).then(() => resolve()) })
  })
  return { store, queue, jobs, submit, runFor, balance: async () => (await store.findKey(k.id))!.coins }
}

t.test('a run that ends within the grace completes; no new run starts while draining', async (t) => {
  const s = await setup(t)
  await s.submit('a')
  await s.submit('b')
  const run = (await s.jobs.start('a'))!
  const done = s.runFor(run, 300)
  const t0 = Date.now()
  const cut = await s.jobs.finish(10_000)
  await done
  t.equal(cut, 0, 'nothing cut')
  t.ok(Date.now() - t0 >= 250 && Date.now() - t0 < 5000, 'finish() waited for the run, not the whole grace')
  t.equal(run.state, 'completed')
  t.match(await s.store.getJob('a'), { status: 'COMPLETED', attempts: 1 })
  t.ok(s.jobs.draining)
  t.equal(await s.jobs.start('b'), null, 'no run starts while draining')
  t.match(await s.store.getJob('b'), { status: 'CONVERTING', attempts: 0 }, 'the waiting job is untouched')
  t.equal(await s.balance(), 80, 'two debits, no refund')
})

t.test('a run still going at the deadline is released: its next start uses no attempt', async (t) => {
  const s = await setup(t)
  await s.submit('long')
  const run = (await s.jobs.start('long'))!
  const done = s.runFor(run, 60_000)
  const t0 = Date.now()
  t.equal(await s.jobs.finish(200), 1, 'one run cut at the deadline')
  await done
  t.ok(Date.now() - t0 < 5000, 'finish() ended at the deadline')
  t.equal(run.state, 'released')
  t.match(await s.store.getJob('long'), { status: 'CONVERTING', attempts: 1 })
  // the next process (a new lifecycle on the same store) starts it: the attempt is not counted
  const next = new JobLifecycle({ store: s.store, queue: s.queue, log: silent, jobTimeoutMs: 60_000, maxAttempts: 3 })
  const again = (await next.start('long'))!
  t.equal(again.attempt, 1, 'the released run used no attempt')
  t.ok(await again.complete('r/long.png'))
  t.match(await s.store.getJob('long'), { status: 'COMPLETED', attempts: 1 })
  t.equal(await s.balance(), 90, 'one debit, no refund')
})

t.test('a second signal (shutdown) during finish() ends it at once', async (t) => {
  const s = await setup(t)
  await s.submit('x')
  const run = (await s.jobs.start('x'))!
  const done = s.runFor(run, 60_000)
  const t0 = Date.now()
  const finishing = s.jobs.finish(60_000)
  setTimeout(() => s.jobs.shutdown(), 100)
  await finishing
  await done
  t.ok(Date.now() - t0 < 5000, `ended at once (${Date.now() - t0} ms)`)
  t.equal(run.state, 'released')
})

t.test('HTTP while draining: /readyz 503 at once, submissions 503 + Retry-After, /healthz still 200', async (t) => {
  const app = await build(t)
  // ready first (the engine loaded)
  await waitFor(async () => (await app.inject({ url: '/readyz' })).statusCode === 200, 120_000, 50)
  const { drainForStop } = await import('../../server/plugins/lifecycle.js')
  const draining = drainForStop(app, 60_000)
  const r = await app.inject({ url: '/readyz' })
  t.equal(r.statusCode, 503, 'not ready once draining')
  const key = await createKey(app, { coins: 100 })
  const sub = await post(app, '/api/photo-enhancer', key.key, { model_name: 'general_2x', img_url: 'http://127.0.0.1:1/x.png' })
  t.equal(sub.statusCode, 503, 'a submission is refused')
  t.equal(sub.headers['retry-after'], '5')
  t.equal(sub.json().code, 100500007)
  const h = await app.inject({ url: '/healthz' })
  t.equal(h.statusCode, 200, 'liveness is not affected by the drain')
  await draining
})

t.test('readiness and a Redis blip: ready through a blip shorter than LUCENT_READY_GRACE_MS, not ready after it, ready again', async (t) => {
  const { spawn, spawnSync } = await import('node:child_process')
  if (spawnSync('redis-server', ['--version']).status !== 0) return t.plan(0, 'redis-server not installed')
  const { Redis } = await import('ioredis')
  const { freePort, tempDir } = await import('../helper.js')
  const port = await freePort()
  const dir = await tempDir(t, 'lucent-redis-')
  let child: ReturnType<typeof spawn> | null = null
  const up = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
    child.unref() // never what keeps this test's process alive (the teardown kills it)
    await waitFor(async () => {
      const r = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      r.on('error', () => {})
      try { await r.connect(); return (await r.ping()) === 'PONG' } catch { return false } finally { r.disconnect() }
    }, 10_000, 50)
  }
  const down = async () => {
    const c = child!
    c.kill('SIGKILL')
    if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once('exit', r))
  }
  t.teardown(() => { if (child && child.exitCode === null) child.kill('SIGKILL') })
  await up()
  const GRACE = 5000
  const app = await build(t, { LUCENT_REDIS_URL: `redis://127.0.0.1:${port}`, LUCENT_READY_GRACE_MS: String(GRACE) })
  const ready = async () => (await app.inject({ url: '/readyz' })).statusCode
  await waitFor(async () => (await ready()) === 200, 120_000, 50)
  await down()
  const t0 = Date.now()
  t.equal(await ready(), 200, 'Redis just went away: still ready (a blip)')
  const flipped = await waitFor(async () => (await ready()) === 503 && Date.now() - t0, 20_000, 100)
  t.ok(flipped >= GRACE - 2500, `not ready once the failure outlasted the grace (${flipped} ms after it began)`)
  await up()
  const back = Date.now()
  await waitFor(async () => (await ready()) === 200, 20_000, 100)
  t.pass(`ready again ${Date.now() - back} ms after Redis came back`)
  // a blip starting now: the grace counts from this failure, not from the earlier one
  await down()
  t.equal(await ready(), 200, 'a new blip: ready again at first')
  await up()
  // back to a steady state before the app closes (its teardown): a close in the instant Redis came back is bounded
  // (test/queue/close.ts) but takes seconds of this suite's time
  await waitFor(async () => (await ready()) === 200, 20_000, 100)
  await new Promise((r) => setTimeout(r, 1000))
})
