/**
 * The shared Store suite: the same assertions against SQLite (embedded default) and PostgreSQL (scale-out).
 * PostgreSQL runs on a fresh database per test (scripts/services.sh starts the server; in CI its absence fails).
 * "Many gateways" = several PgStore instances (separate connection pools) debiting the same key at once.
 */
import t from 'tap'
import path from 'node:path'
import crypto from 'node:crypto'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import type { NewJob, Store } from '../../server/store/types.js'
import { tempDir } from '../helper.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'

interface Test { teardown(fn: () => unknown): void; fail(msg: string): void; plan(n: number, why?: string): void }

interface Backend {
  name: string
  /** `n` store handles on one database (n > 1: like n gateway processes). */
  open(t: Test, n?: number): Promise<Store[] | { skip: string }>
}

const sqlite: Backend = {
  name: 'sqlite',
  async open(t, n = 1) {
    const file = path.join(await tempDir(t), 'lucent.db')
    const stores = Array.from({ length: n }, () => new SqliteStore(file))
    t.teardown(() => Promise.all(stores.map((s) => s.close())))
    return stores
  },
}

const postgres: Backend = {
  name: 'postgres',
  async open(t, n = 1) {
    const env = await requireServices(t)
    if ('skip' in env) return env
    const url = await freshDatabase(t, env.LUCENT_DATABASE_URL)
    // opened concurrently: the migrations must serialise themselves
    const stores = await Promise.all(Array.from({ length: n }, () => PgStore.open(url, { max: 8 })))
    t.teardown(() => Promise.all(stores.map((s) => s.close())))
    return stores
  },
}

let seq = 0
const newKey = (s: Store, coins: number, trial = 0, extra: { expiresAt?: number | null; rate?: number | null } = {}) => {
  const id = `k_${crypto.randomBytes(6).toString('hex')}`
  return s.createKey({ id, hash: crypto.createHash('sha256').update(id).digest('hex'), coins, trial, expiresAt: extra.expiresAt ?? null, rate: extra.rate ?? null })
}
const newJob = (keyId: string, coins: number, o: Partial<NewJob> = {}): NewJob => ({
  id: `j${++seq}_${crypto.randomBytes(4).toString('hex')}`, keyId, kind: 'photo', model: 'general_2x', coins, originalKey: 'o/x.png',
  params: { format: 'png', nested: { a: [1, 2] }, dpi: null }, ...o,
})

for (const b of [sqlite, postgres]) {
  t.test(b.name, async (t) => {
    const openOne = async (t: Test) => {
      const r = await b.open(t)
      if ('skip' in r) {
        t.plan(0, r.skip)
        return null
      }
      return r[0]
    }

    t.test('keys: create, lookup by hash / id / prefix, list, revoke, topup', async (t) => {
      const s = await openOne(t)
      if (!s) return
      const k = await newKey(s, 500, 3, { expiresAt: 1_900_000_000_000, rate: 2.5 })
      t.match(k, { coins: 500, trialTotal: 3, trialLeft: 3, expiresAt: 1_900_000_000_000, rate: 2.5, revoked: false })
      t.type(k.createdAt, 'number')
      t.same(await s.keyByHash(k.hash), k)
      t.equal(await s.keyByHash('0'.repeat(64)), null)
      t.same(await s.findKey(k.id), k)
      t.same(await s.findKey(k.id.slice(0, 8)), k, 'unique id prefix')
      t.same(await s.findKey(k.hash.slice(0, 10)), k, 'unique hash prefix')
      t.equal(await s.findKey('k_'), null, 'too short a prefix')
      const k2 = await newKey(s, 0)
      t.equal(await s.findKey('k_%'), null, 'LIKE metacharacters are not wildcards')
      t.same((await s.listKeys()).map((x) => x.id).sort(), [k.id, k2.id].sort())
      t.ok(await s.revokeKey(k2.id))
      t.equal((await s.findKey(k2.id))!.revoked, true)
      t.notOk(await s.revokeKey('k_nope'))
      const up = await s.topup(k.id, 250)
      t.equal(up!.coins, 750)
      t.equal(await s.topup('k_nope', 1), null)
      t.same((await s.ledger(k.id)).map((e) => [e.kind, e.delta, e.balanceAfter]), [['grant', 500, 500], ['topup', 250, 750]])
    })

    t.test('debit + job lifecycle: progress, attempts, complete once', async (t) => {
      const s = await openOne(t)
      if (!s) return
      const k = await newKey(s, 100)
      const nj = newJob(k.id, 30)
      const r = await s.debitAndCreateJob(nj)
      if (!r.ok) return t.fail('debit refused')
      t.equal(r.charged, 30)
      t.equal(r.trial, false)
      t.match(r.job, { id: nj.id, keyId: k.id, status: 'CONVERTING', progress: 0, coins: 30, trial: false, attempts: 0, resultKey: null })
      t.same(r.job.params, nj.params, 'params round-trip')
      t.equal((await s.findKey(k.id))!.coins, 70)
      t.equal(await s.startAttempt(nj.id), 1)
      t.equal(await s.startAttempt(nj.id), 2)
      t.equal(await s.startAttempt('nope'), 0)
      await s.setProgress(nj.id, 41.6)
      t.match(await s.jobStatus(nj.id), { id: nj.id, keyId: k.id, status: 'CONVERTING', progress: 42, coins: 30, originalKey: 'o/x.png', resultKey: null, completedAt: null })
      t.same((await s.jobsByStatus('CONVERTING')).map((j) => j.id), [nj.id])
      t.ok(await s.completeJob(nj.id, 'r/x.png'))
      t.notOk(await s.completeJob(nj.id, 'r/y.png'), 'second completion refused')
      t.notOk(await s.failJob(nj.id, 100500000, 'late'), 'a COMPLETED job cannot fail')
      await s.setProgress(nj.id, 5)
      const j = await s.getJob(nj.id)
      t.match(j, { status: 'COMPLETED', progress: 100, resultKey: 'r/x.png', attempts: 2, errorCode: null })
      t.type(j!.completedAt, 'number')
      t.same(await s.jobsByStatus('CONVERTING'), [])
      t.equal(await s.getJob('nope'), null)
      t.equal(await s.jobStatus('nope'), null)
      t.equal((await s.findKey(k.id))!.coins, 70, 'no refund for a completed job')
    })

    t.test('extensions: recent ledger rows newest first; output PUT state per job', async (t) => {
      const s = await openOne(t)
      if (!s) return
      const k = await newKey(s, 100)
      const a = newJob(k.id, 10)
      const b = newJob(k.id, 20)
      t.ok((await s.debitAndCreateJob(a)).ok)
      t.ok((await s.debitAndCreateJob(b)).ok)
      await s.topup(k.id, 5)
      t.same((await s.recentLedger(k.id, 10)).map((e) => [e.kind, e.delta, e.balanceAfter, e.jobId]),
        [['topup', 5, 75, null], ['debit', -20, 70, b.id], ['debit', -10, 90, a.id], ['grant', 100, 100, null]])
      t.same((await s.recentLedger(k.id, 2)).map((e) => e.kind), ['topup', 'debit'])
      t.same(await s.recentLedger('k_nope', 5), [])
      t.equal(await s.outputPut(a.id), null)
      await s.setOutputPut(a.id, { status: 'pending', httpStatus: null, attempts: 0, error: null })
      t.same(await s.outputPut(a.id), { status: 'pending', httpStatus: null, attempts: 0, error: null })
      await s.setOutputPut(a.id, { status: 'failed', httpStatus: 503, attempts: 3, error: 'HTTP 503' })
      t.same(await s.outputPut(a.id), { status: 'failed', httpStatus: 503, attempts: 3, error: 'HTTP 503' }, 'replaced')
      t.equal(await s.outputPut(b.id), null, 'per job')
    })

    t.test('refusals: insufficient, no key, trial, trial exhausted', async (t) => {
      const s = await openOne(t)
      if (!s) return
      const poor = await newKey(s, 5)
      t.same(await s.debitAndCreateJob(newJob(poor.id, 10)), { ok: false, reason: 'insufficient' })
      t.same(await s.debitAndCreateJob(newJob('k_missing', 10)), { ok: false, reason: 'no_key' })
      t.equal((await s.findKey(poor.id))!.coins, 5)
      const tr = await newKey(s, 0, 1)
      const a = await s.debitAndCreateJob(newJob(tr.id, 10))
      t.match(a, { ok: true, charged: 0, trial: true })
      t.same(await s.debitAndCreateJob(newJob(tr.id, 10)), { ok: false, reason: 'trial_exhausted' })
      if (!a.ok) return
      t.ok(await s.failJob(a.job.id, 100500000, 'x'))
      t.equal((await s.findKey(tr.id))!.trialLeft, 1, 'trial given back')
      t.same((await s.ledger(tr.id)).map((e) => [e.kind, e.delta]), [['grant', 0], ['trial', 0], ['trial_refund', 0]])
      t.same(await s.jobsByStatus('CONVERTING'), [], 'refused debits left no job rows')
    })

    t.test('failJob: ERROR once, refund exactly once under concurrency', async (t) => {
      const s = await openOne(t)
      if (!s) return
      const k = await newKey(s, 100)
      const r = await s.debitAndCreateJob(newJob(k.id, 40))
      if (!r.ok) return t.fail('debit refused')
      const fails = await Promise.all(Array.from({ length: 8 }, () => s.failJob(r.job.id, 110400003, 'boom')))
      t.equal(fails.filter(Boolean).length, 1, 'one transition to ERROR')
      const again = await Promise.all(Array.from({ length: 8 }, () => s.failJob(r.job.id, 110400014, 'again', 'canceled')))
      t.equal(again.filter(Boolean).length, 0, 'already ended: no second refund')
      t.match(await s.getJob(r.job.id), { status: 'ERROR', errorCode: 110400003, errorMessage: 'boom' })
      t.notOk(await s.completeJob(r.job.id, 'r/x.png'))
      t.equal((await s.findKey(k.id))!.coins, 100)
      const l = await s.ledger(k.id)
      t.same(l.map((e) => [e.kind, e.delta, e.balanceAfter]), [['grant', 100, 100], ['debit', -40, 60], ['refund', 40, 100]])
      t.equal(l[2].reason, 'failed 110400003', 'the refund says why')
      t.equal(await s.failJob('nope', 100500000, 'x'), false)
    })

    t.test('many handles debiting one key at once: never negative, ledger = balance', async (t) => {
      const r = await b.open(t, 4)
      if ('skip' in r) {
        t.plan(0, r.skip)
        return
      }
      const [s0] = r
      // the coins bound alone (the jobs-in-flight quota, counted in the same transaction, is tested in test/abuse/quotas.ts)
      for (const s of r) s.quotas.defaults = { ...s.quotas.defaults, maxJobsInFlight: null }
      const k = await newKey(s0, 1000)
      // 200 submissions of 10 coins spread over 4 handles; coins for exactly 100
      const results = await Promise.all(Array.from({ length: 200 }, (_, i) => r[i % r.length].debitAndCreateJob(newJob(k.id, 10))))
      const ok = results.filter((x) => x.ok)
      t.equal(ok.length, 100, 'exactly 100 debits accepted')
      t.ok(results.filter((x) => !x.ok).every((x) => !x.ok && x.reason === 'insufficient'))
      t.equal((await s0.findKey(k.id))!.coins, 0)
      const l = await s0.ledger(k.id)
      t.equal(l.reduce((a, e) => a + e.delta, 0), 0, 'ledger sums to the balance')
      t.equal(l.filter((e) => e.kind === 'debit').length, 100)
      t.same(l.map((e) => e.balanceAfter).slice(1), Array.from({ length: 100 }, (_, i) => 990 - i * 10), 'balance_after strictly sequential')
      // fail half of them from all handles at once, twice each: 50 refunds, no more
      const ids = ok.map((x) => (x.ok ? x.job.id : '')).slice(0, 50)
      const fails = await Promise.all([...ids, ...ids].map((id, i) => r[i % r.length].failJob(id, 100500000, 'x')))
      t.equal(fails.filter(Boolean).length, 50)
      t.equal((await s0.findKey(k.id))!.coins, 500)
      const l2 = await s0.ledger(k.id)
      t.equal(l2.filter((e) => e.kind === 'refund').length, 50)
      t.equal(l2.reduce((a, e) => a + e.delta, 0), 500)
      t.equal((await s0.jobsByStatus('CONVERTING')).length, 50)
      t.equal((await s0.jobsByStatus('ERROR')).length, 50)
    })

    t.test('job API: idempotency records under concurrency, queue positions, eta, throughput average', async (t) => {
      const r = await b.open(t, 4)
      if ('skip' in r) {
        t.plan(0, r.skip)
        return
      }
      const [s0] = r
      const k = await newKey(s0, 1000)
      const idem = { key: 'order-7', hash: 'h1' }
      // 20 submissions with one Idempotency-Key over 4 handles: one job, one debit, the rest replays
      const res = await Promise.all(Array.from({ length: 20 }, (_, i) => r[i % r.length].debitAndCreateJob(newJob(k.id, 10, { idempotency: idem }))))
      const made = res.filter((x) => x.ok)
      t.equal(made.length, 1, 'one job')
      const jobId = made[0].ok ? made[0].job.id : ''
      t.ok(res.every((x) => x.ok || (x.reason === 'replay' && x.job.jobId === jobId && x.job.coins === 10)), 'the others replay it')
      t.equal((await s0.findKey(k.id))!.coins, 990, 'one debit')
      t.same(await s0.idempotentJob(k.id, 'order-7', 0), { hash: 'h1', jobId, coins: 10 })
      t.match(await s0.debitAndCreateJob(newJob(k.id, 10, { idempotency: { key: 'order-7', hash: 'h2' } })), { ok: false, reason: 'idempotency_conflict' })
      t.equal(await s0.idempotentJob(k.id, 'order-7', Date.now() + 1000), null, 'older than `since`: none')
      await s0.forgetIdempotency(k.id, 'order-7', 'other-job')
      t.ok(await s0.idempotentJob(k.id, 'order-7', 0), 'forget names the job: another job\'s record stays')
      await s0.forgetIdempotency(k.id, 'order-7', jobId)
      t.equal(await s0.idempotentJob(k.id, 'order-7', 0), null)
      // queue positions: waiting = CONVERTING, never started, submitted earlier
      const more = [newJob(k.id, 1), newJob(k.id, 1), newJob(k.id, 1)]
      for (const j of more) { await s0.debitAndCreateJob(j); await new Promise((res) => setTimeout(res, 2)) }
      t.same(await Promise.all(more.map((j) => s0.jobsAhead(j.id))), [1, 2, 3], 'the idempotent job is first in line')
      await s0.startAttempt(jobId)
      t.same(await Promise.all(more.map((j) => s0.jobsAhead(j.id))), [0, 1, 2], 'a started job is no longer waiting')
      await s0.setProgress(jobId, 30, 1_900_000_000_000)
      t.match(await s0.jobStatus(jobId), { progress: 30, attempts: 1, etaAt: 1_900_000_000_000 })
      await s0.setProgress(jobId, 40)
      t.match(await s0.jobStatus(jobId), { progress: 40, etaAt: 1_900_000_000_000 }, 'progress alone keeps the eta')
      await s0.setProgress(jobId, 50, null)
      t.match(await s0.jobStatus(jobId), { progress: 50, etaAt: null })
      // throughput: the first measurement is taken, then an exponential moving average
      t.equal(await s0.throughput('m', 'cpu'), null)
      await s0.recordThroughput('m', 'cpu', 100, 0.3)
      await Promise.all([r[1].recordThroughput('m', 'cpu', 200, 0.5), r[2].recordThroughput('m', 'gpu', 7, 0.3)])
      t.same(await s0.throughput('m', 'cpu'), { msPerUnit: 150, samples: 2 })
      t.same(await s0.throughput('m', 'gpu'), { msPerUnit: 7, samples: 1 }, 'per backend')
    })
  })
}

t.test('postgres: migrations are versioned and idempotent across processes', async (t) => {
  const env = await requireServices(t)
  if ('skip' in env) {
    t.plan(0, env.skip)
    return
  }
  const url = await freshDatabase(t, env.LUCENT_DATABASE_URL)
  const a = await PgStore.open(url)
  t.teardown(() => a.close())
  const v = await a.schemaVersion()
  t.ok(v >= 1)
  const k = await newKey(a, 10)
  const again = await PgStore.open(url)
  t.teardown(() => again.close())
  t.equal(await again.schemaVersion(), v, 'no re-run')
  t.equal((await again.findKey(k.id))!.coins, 10, 'data kept')
  // the CHECK constraint is the last line of defence against negative balances
  await t.rejects(a.pool.query('UPDATE keys SET coins = -1 WHERE id = $1', [k.id]), /check constraint/)
})

t.test('sqlite: a database made before the job API gains its tables and jobs.eta_at on open', async (t) => {
  const file = path.join(await tempDir(t), 'old.db')
  const a = new SqliteStore(file)
  const k = await newKey(a, 10)
  a.db.exec('DROP TABLE idempotency; DROP TABLE throughput; ALTER TABLE jobs DROP COLUMN eta_at')
  await a.close()
  const b = new SqliteStore(file)
  t.teardown(() => b.close())
  t.equal((await b.findKey(k.id))!.coins, 10, 'data kept')
  const r = await b.debitAndCreateJob(newJob(k.id, 1, { idempotency: { key: 'x', hash: 'h' } }))
  t.ok(r.ok, 'idempotency table back')
  if (r.ok) {
    await b.setProgress(r.job.id, 10, 123)
    t.equal((await b.jobStatus(r.job.id))!.etaAt, 123, 'eta_at column back')
  }
})
