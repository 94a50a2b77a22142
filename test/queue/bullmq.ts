/**
 * BullMQ queue on a real Redis (scripts/services.sh) with a real store: job-id dedupe, retries with exponential
 * backoff, a job that keeps failing ends in ERROR with a refund (once), a stalled job (consumer gone without
 * finishing) is recovered by another consumer, the bound is enforced from the shared counts, and a waiting job
 * can be removed (cancel).
 */
import t from 'tap'
import crypto from 'node:crypto'
import path from 'node:path'
import { Redis } from 'ioredis'
import { Worker } from 'bullmq'
import { BullQueue, redisConnection } from '../../server/queue/bullmq.js'
import { SqliteStore } from '../../server/store/sqlite.js'
import { tempDir, waitFor } from '../helper.js'
import { requireServices } from '../scaleout/services.js'

async function setup(t: { teardown(fn: () => unknown): void }) {
  const svc = await requireServices(t)
  if ('skip' in svc) return svc
  // isolation: a BullMQ prefix of this test's own in db 0 (never leased to a deployment, test/support/redis-db.ts);
  // only its keys are deleted at the end
  const prefix = `lucent-t-${process.pid}-${crypto.randomBytes(4).toString('hex')}`
  const redis = new Redis(svc.LUCENT_REDIS_URL)
  t.teardown(async () => {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 })) if ((keys as string[]).length) await redis.del(...(keys as string[]))
    redis.disconnect()
  })
  const store = new SqliteStore(path.join(await tempDir(t), 'lucent.db'))
  t.teardown(() => store.close())
  const key = { id: 'k_q', hash: 'h'.repeat(64), coins: 100, trial: 0, expiresAt: null, rate: null }
  await store.createKey(key)
  const job = async () => {
    const r = await store.debitAndCreateJob({ id: crypto.randomBytes(8).toString('hex'), keyId: key.id, kind: 'photo', model: 'general_2x', params: {}, coins: 10, originalKey: 'o/x.png' })
    if (!r.ok) throw new Error('debit refused')
    return r.job.id
  }
  return { url: svc.LUCENT_REDIS_URL, prefix, store, job, keyId: key.id }
}

t.test('dedupe, retries with backoff, final failure -> ERROR + one refund', async (t) => {
  const s = await setup(t)
  if ('skip' in s) {
    t.plan(0, s.skip)
    return
  }
  const failedSeen: string[] = []
  const q = new BullQueue({
    redisUrl: s.url, prefix: s.prefix, max: 100, concurrency: 2, attempts: 3, backoffMs: 200,
    onFailed: async (jobId, reason) => {
      failedSeen.push(jobId)
      await s.store.failJob(jobId, 100500000, reason)
    },
  })
  t.teardown(() => q.close())
  const good = await s.job()
  const bad = await s.job()
  const runs = new Map<string, number[]>()
  q.process(async (id) => {
    runs.set(id, [...(runs.get(id) ?? []), Date.now()])
    if (id === bad) throw new Error('storage hiccup')
    await s.store.completeJob(id, `r/${id}.png`)
  })
  await q.enqueue(good, { keyId: s.keyId })
  await q.enqueue(good, { keyId: s.keyId, force: true }) // dedupe: same id
  await q.enqueue(bad, { keyId: s.keyId })
  await waitFor(async () => (await s.store.getJob(bad))?.status === 'ERROR', 30_000, 50)
  await waitFor(async () => (await s.store.getJob(good))?.status === 'COMPLETED', 30_000, 50)
  t.equal(runs.get(good)!.length, 1, 'a job id queued twice runs once')
  const times = runs.get(bad)!
  t.equal(times.length, 3, 'three attempts')
  t.ok(times[1] - times[0] >= 190 && times[2] - times[1] >= 390, `exponential backoff (${times[1] - times[0]} ms, ${times[2] - times[1]} ms)`)
  t.match(await s.store.getJob(bad), { status: 'ERROR', errorCode: 100500000, errorMessage: /storage hiccup/ })
  t.same(failedSeen, [bad])
  const ledger = await s.store.ledger(s.keyId)
  t.same(ledger.map((e) => e.kind), ['grant', 'debit', 'debit', 'refund'], 'the failed job refunded once, nothing charged twice')
  t.equal((await s.store.findKey(s.keyId))!.coins, 90)
  // the handler has returned; BullMQ moves the job out of `active` right after
  const c = await waitFor(async () => { const x = await q.counts(); return x.active === 0 && x }, 10_000, 20)
  t.match(c, { waiting: 0, active: 0, failed: 1 })
})

t.test('a consumer that disappears mid-job: the job is recovered by another consumer', async (t) => {
  const s = await setup(t)
  if ('skip' in s) {
    t.plan(0, s.skip)
    return
  }
  const producer = new BullQueue({ redisUrl: s.url, prefix: s.prefix, max: 100, concurrency: 1, attempts: 3 })
  t.teardown(() => producer.close())
  const id = await s.job()
  // a raw BullMQ worker that takes the job and never finishes (like a process frozen / killed: lock not renewed)
  let taken = false
  const dead = new Worker('jobs', async () => {
    taken = true
    await new Promise(() => {})
  }, { connection: redisConnection(s.url), prefix: s.prefix, lockDuration: 1000, skipLockRenewal: true, skipStalledCheck: true })
  t.teardown(() => dead.close(true))
  await producer.enqueue(id, { keyId: s.keyId })
  await waitFor(async () => taken, 10_000, 20)
  await dead.pause(true)
  const healthy = new BullQueue({ redisUrl: s.url, prefix: s.prefix, max: 100, concurrency: 1, attempts: 3, lockDurationMs: 1000, stalledIntervalMs: 300 })
  t.teardown(() => healthy.close())
  healthy.process(async (jobId) => {
    await s.store.startAttempt(jobId)
    await s.store.completeJob(jobId, 'r/x.png')
  })
  await waitFor(async () => (await s.store.getJob(id))?.status === 'COMPLETED', 20_000, 50)
  t.pass('recovered after the lock expired')
  t.same((await s.store.ledger(s.keyId)).map((e) => e.kind), ['grant', 'debit'])
})

t.test('the bound uses the shared waiting count', async (t) => {
  const s = await setup(t)
  if ('skip' in s) {
    t.plan(0, s.skip)
    return
  }
  const a = new BullQueue({ redisUrl: s.url, prefix: s.prefix, max: 3, concurrency: 1, attempts: 1, countsMs: 50 })
  const b = new BullQueue({ redisUrl: s.url, prefix: s.prefix, max: 3, concurrency: 1, attempts: 1, countsMs: 50 })
  t.teardown(() => Promise.all([a.close(), b.close()]))
  for (let i = 0; i < 3; i++) await a.enqueue(`job${i}`, { keyId: `k${i}` })
  await waitFor(async () => b.stats().waiting === 3, 5000, 20)
  t.equal(b.reserve('k9'), 'full', 'the other gateway sees the queue full')
  await t.rejects(b.enqueue('job9', { keyId: 'k9' }), /queue full/)
  await b.enqueue('job9', { keyId: 'k9', force: true })
  t.equal((await b.counts()).waiting, 4, 'force (recovery) ignores the bound')
})

t.test('remove (cancel): a waiting job leaves the shared queue; a running one cannot be removed', async (t) => {
  const s = await setup(t)
  if ('skip' in s) {
    t.plan(0, s.skip)
    return
  }
  const q = new BullQueue({ redisUrl: s.url, prefix: s.prefix, max: 100, concurrency: 1, attempts: 1 })
  t.teardown(() => q.close())
  await q.enqueue('w1', { keyId: 'k' })
  await q.enqueue('w2', { keyId: 'k' })
  t.ok(await q.remove('w1'))
  t.notOk(await q.remove('w1'), 'gone already')
  t.notOk(await q.remove('never'), 'unknown id')
  t.equal((await q.counts()).waiting, 1)
  let release!: () => void
  const hold = new Promise<void>((r) => { release = r })
  const ran: string[] = []
  q.process(async (id) => {
    ran.push(id)
    await hold
  })
  await waitFor(async () => ran.length === 1, 10_000, 20)
  t.same(ran, ['w2'], 'the removed job never runs')
  t.notOk(await q.remove('w2'), 'a running (locked) job is not removed')
  release()
})
