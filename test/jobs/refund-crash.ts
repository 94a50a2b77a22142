/**
 * Crash attempts (issue 29 hole 6: one job's crash used up the attempts of every co-tenant job in its process;
 * server/store/job-runs.ts, the start() of server/jobs/lifecycle.ts):
 *  - on the real SQLite store, a "process" is a JobLifecycle with its runner id; a crash is a lifecycle whose runs
 *    never end (nothing more is written, as when the process dies): jobs that ran together get their attempt back
 *    (up to maxAttempts times), a job that ran alone is charged; a run that ended normally is not an interruption;
 *    a run released by a shutdown (SIGTERM, a deploy) is not counted (on main at 0f0453c every one was);
 *  - an engine thread that dies under one of two running jobs (piscina worker exit): only that job is charged an
 *    attempt and runs again (on main at 0f0453c it failed at once, 100500000); the other job is untouched;
 *  - the same against a real `lucent serve` (SQLite, 2 workers, LUCENT_JOB_MAX_ATTEMPTS=1) killed with SIGKILL while
 *    two jobs run: on main at 0f0453c both jobs failed 100500006 on the restart (each charged the crash); now both
 *    complete, charged once; a job killed while alone still ends 100500006, refunded in full.
 */
import t, { type Test } from 'tap'
import path from 'node:path'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import type { Store } from '../../server/store/types.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle, settleAborted } from '../../server/jobs/lifecycle.js'
import type { PhotoParams } from '../../server/jobs/params.js'
import { newApiKey } from '../../server/auth.js'
import type { Piscina } from 'piscina'
import { build, createKey, post, tempDir, modelDir, inputServer, addonBuilt, waitFor, png } from '../helper.js'
import { lucentServer, createKeyCli } from '../support/serve.js'

const params: PhotoParams = { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 16, height: 16 } }
const silent = { info() {}, warn() {}, error() {} }

type Open = (t: Test) => Promise<Store | null>
const openSqlite: Open = async (t) => new SqliteStore(path.join(t.testdir(), 'l.db'))
const openPg: Open = async (t) => {
  const env = await requireServices(t)
  if ('skip' in env) {
    t.comment(env.skip)
    return null
  }
  return PgStore.open(await freshDatabase(t, env.LUCENT_DATABASE_URL))
}

async function setup(t: Test, maxAttempts: number, open: Open) {
  const store = await open(t)
  if (!store) return null
  t.teardown(() => store.close())
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 1000, trial: 0, expiresAt: null, rate: null })
  /** A new process: its own lifecycle (runner id) on the same store. */
  const proc = () => new JobLifecycle({ store, queue: new MemoryQueue(100, 1), log: silent, jobTimeoutMs: 60_000, maxAttempts })
  const submit = async (jobs: JobLifecycle, id: string) => {
    const r = await jobs.submit({ id, keyId: k.id, kind: 'photo', model: 'general_2x', params, coins: 10, originalKey: `o/${id}.png` })
    t.ok(r.ok, `${id} submitted`)
  }
  return { store, proc, submit, keyId: k.id }
}

for (const [name, open] of [['SQLite', openSqlite], ['PostgreSQL', openPg]] as const) t.test(name, async (t) => {

t.test('a process that dies with several runs gives their attempts back; one that ran alone is charged', async (t) => {
  const s = await setup(t, 2, open)
  if (!s) return
  const p1 = s.proc()
  for (const id of ['a', 'b', 'c']) await s.submit(p1, id)
  t.ok(await p1.start('a'))
  t.ok(await p1.start('b'))
  // p1 dies: a and b were running in it. The next process starts them again.
  const p2 = s.proc()
  const a2 = await p2.start('a')
  t.equal(a2?.attempt, 1, 'a: the crash in company is not counted')
  t.equal((await s.store.getJob('a'))!.attempts, 1)
  // p2 dies with a alone in it (b has not started here yet; c never ran)
  const p3 = s.proc()
  const b3 = await p3.start('b')
  t.equal(b3?.attempt, 1, 'b: still counted as 1 (it died in company with a in p1)')
  const a3 = await p3.start('a')
  t.equal(a3?.attempt, 2, 'a: its run in p2 was alone: the crash is its own')
  t.ok(await b3!.complete('r/b.png'), 'b completes')
  // p3 dies with a alone again: over its 2 attempts, a fails 100500006, every coin back (the service's failure)
  const p4 = s.proc()
  t.equal(await p4.start('a'), null, 'a is not run again')
  t.match(await s.store.getJob('a'), { status: 'ERROR', errorCode: 100500006 })
  const refund = (await s.store.ledger(s.keyId)).find((e) => e.jobId === 'a' && e.kind === 'refund')
  t.equal(refund?.delta, 10)
  t.equal(refund?.reason, 'failed 100500006')
  // c: first run, nothing to settle
  t.equal((await p4.start('c'))?.attempt, 1)
  t.match(await s.store.getJob('b'), { status: 'COMPLETED', attempts: 1 })
})

t.test('a job that keeps dying in company is forgiven at most maxAttempts times, then charged', async (t) => {
  const s = await setup(t, 2, open)
  if (!s) return
  const first = s.proc()
  for (const id of ['poison', 'x0', 'x1', 'x2', 'x3', 'x4', 'x5']) await s.submit(first, id)
  let p = first
  const attempts: number[] = []
  for (let i = 0; ; i++) {
    const run = await p.start('poison')
    if (!run) break
    attempts.push(run.attempt)
    t.ok(await p.start(`x${i}`), `x${i} runs beside it`)
    p = s.proc() // the process dies
    if (i > 10) throw new Error('no bound')
  }
  t.same(attempts, [1, 1, 1, 2], 'forgiven twice, then charged until its attempts are spent')
  t.match(await s.store.getJob('poison'), { status: 'ERROR', errorCode: 100500006 })
  // each companion died once in company: none of them lost an attempt
  for (const id of ['x0', 'x1', 'x2', 'x3']) t.equal((await p.start(id))?.attempt, 1, `${id}: attempt given back`)
})

t.test('runs that ended normally, and a release, are not interruptions', async (t) => {
  const s = await setup(t, 3, open)
  if (!s) return
  const p1 = s.proc()
  await s.submit(p1, 'a')
  await s.submit(p1, 'b')
  const a = await p1.start('a')
  const b = await p1.start('b')
  b!.release('retry')
  t.ok(await a!.fail(100500000, 'engine internal'))
  const p2 = s.proc()
  t.equal((await p2.start('b'))?.attempt, 2, 'a released run counts as before (no crash to settle)')
})

t.test('a run released by its process\'s shutdown does not count: a deploy uses no attempt', async (t) => {
  const s = await setup(t, 1, open)
  if (!s) return
  const p1 = s.proc()
  await s.submit(p1, 'a')
  await s.submit(p1, 'b')
  let p = p1
  for (let i = 0; i < 3; i++) {
    const run = await p.start('a')
    t.equal(run?.attempt, 1, `start ${i + 1}: attempt 1`)
    p.shutdown()
    await settleAborted(run!)
    t.equal(run!.state, 'released')
    await p.drain()   // as the process's close does: its run log writes are done before it exits
    p = s.proc()
  }
  t.ok(await (await p.start('a'))!.complete('r/a.png'), 'it completes, never over its one attempt')
  // a run ended by a crash in between is still settled as one
  const b = await p.start('b')
  t.equal(b?.attempt, 1)
  t.equal(await s.proc().start('b'), null, 'b ran alone when its process died: over its one attempt')
  t.match(await s.store.getJob('b'), { status: 'ERROR', errorCode: 100500006 })
})

t.test('two processes settling one dead process at once count it once', async (t) => {
  const s = await setup(t, 3, open)
  if (!s) return
  const p1 = s.proc()
  const ids = ['a', 'b', 'c', 'd']
  for (const id of ids) await s.submit(p1, id)
  for (const id of ids) t.ok(await p1.start(id))
  const [p2, p3] = [s.proc(), s.proc()]
  const runs = await Promise.all(ids.map((id, i) => (i % 2 ? p2 : p3).start(id)))
  t.same(runs.map((r) => r?.attempt), [1, 1, 1, 1], 'every one forgiven (4 suspects)')
})

})

t.test('an engine thread that dies charges an attempt to the job it ran, and only to it', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '2', LUCENT_ENGINE_THREADS: '1' })
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 100_000 })
  const ids: string[] = []
  for (const name of ['a.png', 'b.png']) {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.put(name, png(256, 256)), extension: '.png' })
    t.equal(r.statusCode, 200, r.body)
    ids.push(r.json().data.job_id)
  }
  const store = app.lucent.store
  await waitFor(async () => (await Promise.all(ids.map((id) => store.getJob(id)))).every((j) => j!.progress > 0) || null, 120_000, 20)
  // the thread of one of them exits (what a thread-fatal engine error does); piscina rejects that task only
  const threads = (app.lucent.pool as unknown as { pool: Piscina }).pool.threads
  t.equal(threads.length, 2, 'two engine threads, one job on each')
  await threads[0]!.terminate()
  const done = await waitFor(async () => {
    const jobs = await Promise.all(ids.map((id) => store.getJob(id)))
    return jobs.every((j) => j!.status !== 'CONVERTING') && jobs
  }, 300_000, 100)
  t.same(done.map((j) => j!.status), ['COMPLETED', 'COMPLETED'], 'both complete')
  t.same(done.map((j) => j!.attempts).sort(), [1, 2], 'one attempt charged, to the job whose thread died')
})

t.test('SIGKILL of `lucent serve` running two jobs: both complete after the restart; one alone fails; SIGTERM counts nothing (LUCENT_JOB_MAX_ATTEMPTS=1)', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const env = {
    ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn',
    LUCENT_WORKERS: '2', LUCENT_ENGINE_THREADS: '1', LUCENT_BACKEND: 'cpu', LUCENT_JOB_MAX_ATTEMPTS: '1',
  }
  delete (env as Record<string, unknown>).LUCENT_REDIS_URL
  delete (env as Record<string, unknown>).LUCENT_DATABASE_URL
  const { key } = createKeyCli(env, '--coins', '100000', '--rate', '1000')
  const srv = await inputServer(t)
  const server = lucentServer(t, { env })
  const api = async (url: string, body: unknown) => {
    const r = await request(`${server.base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return (await r.body.json()) as { code: number; data: { job_id: string; consume_coins: number; status: string; progress: number; error_code?: number } }
  }
  const submit = async (name: string, side: number) => {
    const r = await api('/api/photo-enhancer', { model_name: 'general_4x', img_url: srv.put(name, png(side, side)), extension: '.png' })
    t.equal(r.code, 200, `${name} accepted`)
    return r.data
  }
  const db = () => new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const attemptsOf = (ids: string[]) => {
    const d = db()
    try { return ids.map((id) => (d.prepare('SELECT attempts FROM jobs WHERE id = ?').get(id) as { attempts: number }).attempts) } finally { d.close() }
  }
  const end = (id: string) => waitFor(async () => { const d = (await api('/api/task-status', { job_id: id })).data; return d.status !== 'CONVERTING' && d }, 300_000, 200)

  await server.start()
  const two = [await submit('a.png', 320), await submit('b.png', 320)]
  // both running (2 workers), then the process dies
  await waitFor(async () => attemptsOf(two.map((j) => j.job_id)).every((n) => n === 1) || null, 120_000, 50)
  await server.kill('SIGKILL')
  await server.start()
  for (const j of two) t.equal((await end(j.job_id)).status, 'COMPLETED', 'a job that died in company completes')
  t.same(attemptsOf(two.map((j) => j.job_id)), [1, 1], 'the crash used none of their attempts')

  const alone = await submit('c.png', 320)
  await waitFor(async () => attemptsOf([alone.job_id])[0] === 1 || null, 120_000, 50)
  await server.kill('SIGKILL')
  await server.start()
  const c = await end(alone.job_id)
  t.equal(c.status, 'ERROR', 'a job that died alone used its one attempt')
  t.equal(c.error_code, 100500006)
  const d = db()
  const rows = d.prepare('SELECT job_id, kind, delta, reason FROM ledger WHERE job_id IS NOT NULL ORDER BY id').all() as Array<{ job_id: string; kind: string; delta: number; reason: string | null }>
  d.close()
  t.same(rows.filter((r) => r.kind === 'refund'), [{ job_id: alone.job_id, kind: 'refund', delta: alone.consume_coins, reason: 'failed 100500006' }], 'only it refunded, in full')

  // a graceful stop (SIGTERM: a deploy) releases the run; the restart runs it again without counting it
  const deploy = await submit('d.png', 320)
  await waitFor(async () => attemptsOf([deploy.job_id])[0] === 1 || null, 120_000, 50)
  await server.kill('SIGTERM')
  await server.start()
  t.equal((await end(deploy.job_id)).status, 'COMPLETED', 'a job stopped by a deploy completes')
  t.same(attemptsOf([deploy.job_id]), [1], 'the deploy used none of its attempts')
  await server.kill('SIGTERM')
})
