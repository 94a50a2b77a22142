/**
 * Fair share between API keys (issue 29, hole 9): a key with a thousand jobs queued delays another key's single
 * job by at most about one job per worker slot; one key may hold at most its share of the queue.
 *  - MemoryQueue (unit): per-key FIFOs served round-robin; a key's own order kept; a key that re-queues a job
 *    the moment its last one starts gets no more than its turn; the per-key bound (reserve -> 'key_full').
 *  - IpcQueue (a cluster's HTTP child): the per-key bound from the primary's broadcast.
 *  - BullQueue on a real Redis (unit): start-time fair priorities, dedupe not counted twice, per-key counts.
 *  - End to end through the API on SQLite + the in-process queue, one worker: key A submits 24 photo jobs,
 *    then key B one; B's job runs after at most one of A's that had not started (on the old global FIFO: after
 *    all of them). The figures (B's wait in jobs and seconds, with and without the flood) are printed.
 *  - Through the API: a key over its share gets 429 + Retry-After (100429000), nothing debited, while another
 *    key still submits.
 * The same end to end over PostgreSQL + Redis (BullMQ), gateway and worker processes: test/scaleout/fairness.ts.
 */
import t from 'tap'
import crypto from 'node:crypto'
import { Redis } from 'ioredis'
import { MemoryQueue } from '../../server/queue/memory.js'
import { BullQueue } from '../../server/queue/bullmq.js'
import { IpcQueue, type ClusterLink } from '../../server/cluster.js'
import { build, createKey, balance, post, png, inputServer, addonBuilt, waitFor } from '../helper.js'
import { requireServices } from '../scaleout/services.js'

/** A MemoryQueue whose handler holds every job until `finish()` ends the oldest running one. */
function heldQueue(max: number, concurrency: number, maxPerKey?: number) {
  const q = new MemoryQueue(max, concurrency, maxPerKey)
  const started: string[] = []
  const running: Array<() => void> = []
  q.process((id) => new Promise<void>((resolve) => {
    started.push(id)
    running.push(resolve)
  }))
  const finish = async () => {
    running.shift()?.()
    await new Promise((r) => setImmediate(r))
  }
  return { q, started, finish }
}

for (const concurrency of [1, 3]) {
  t.test(`MemoryQueue, ${concurrency} slot(s): a flooding key delays another key's job by at most one job per slot`, async (t) => {
    const { q, started, finish } = heldQueue(5000, concurrency, 5000)
    for (let i = 0; i < 1000; i++) await q.enqueue(`a${i}`, { keyId: 'A' })
    await q.enqueue('b0', { keyId: 'B' })
    const before = started.length
    let aAfterB = 0
    for (let n = 0; n < 1000 && !started.includes('b0'); n++) {
      await finish()
      if (!started.includes('b0')) aAfterB = started.length - before
    }
    t.ok(started.includes('b0'), 'B started')
    const aStartedAfterB = started.slice(before, started.indexOf('b0')).length
    t.equal(aStartedAfterB, aAfterB)
    t.ok(aStartedAfterB <= concurrency, `A's jobs started after B was queued and before B: ${aStartedAfterB} (<= ${concurrency})`)
    // A's own jobs keep their order
    const as = started.filter((id) => id.startsWith('a')).map((id) => Number(id.slice(1)))
    t.same(as, as.slice().sort((x, y) => x - y), "a key's jobs start in the order it queued them")
  })
}

t.test('MemoryQueue: a key that queues a job each time its last one starts gets one turn in each round, no more', async (t) => {
  const { q, started, finish } = heldQueue(5000, 1, 5000)
  for (let i = 0; i < 100; i++) await q.enqueue(`a${i}`, { keyId: 'A' })
  for (let i = 0; i < 100; i++) await q.enqueue(`b${i}`, { keyId: 'B' })
  // hostile C: always exactly one job waiting, a fresh one queued the moment the previous one starts
  let c = 0
  await q.enqueue(`c${c++}`, { keyId: 'C' })
  for (let n = 0; n < 60; n++) {
    if (started.at(-1)?.startsWith('c')) await q.enqueue(`c${c++}`, { keyId: 'C' })
    await finish()
  }
  const window = started.slice(0, 60)
  const count = (p: string) => window.filter((id) => id.startsWith(p)).length
  t.comment(`of 60 starts: A ${count('a')}, B ${count('b')}, C ${count('c')}`)
  t.ok(count('c') <= 21, `C got ${count('c')} of 60 starts (its share is a third)`)
  t.ok(count('a') >= 19 && count('b') >= 19, 'A and B each got about a third')
})

t.test('MemoryQueue: per-key bound, remove, recovery duplicates', async (t) => {
  const q = new MemoryQueue(10, 1, 3)
  q.pause()
  for (let i = 0; i < 2; i++) await q.enqueue(`a${i}`, { keyId: 'A' })
  t.equal(q.reserve('A'), 'ok', 'a third place for A (reserved)')
  t.equal(q.reserve('A'), 'key_full', 'A holds its share: 2 waiting + 1 reserved')
  t.equal(q.reserve('B'), 'ok', 'another key still gets a place')
  await t.rejects(q.enqueue('a9', { keyId: 'A' }), /share/, 'unreserved, over the share: refused')
  await q.enqueue('a2', { keyId: 'A', reserved: true })
  q.release('B')
  t.equal(q.reserve('A'), 'key_full')
  await q.enqueue('a3', { keyId: 'A', force: true }) // crash recovery ignores both bounds
  await q.enqueue('a3', { keyId: 'A', force: true }) // and a job queued twice waits once
  t.equal(q.stats().waiting, 4)
  t.same(q.heavyKeys(), { A: 4 }, 'keys at half their share or more (the cluster broadcast)')
  t.ok(await q.remove('a1'))
  t.notOk(await q.remove('a1'))
  t.equal(q.waitingOf('A'), 3)
  const ran: string[] = []
  q.process(async (id) => { ran.push(id) })
  q.resume()
  await waitFor(async () => ran.length === 3, 5000, 5)
  t.same(ran, ['a0', 'a2', 'a3'])
  t.equal(q.waitingOf('A'), 0)
  t.equal(q.reserve('A'), 'ok', 'A has room again once its jobs started')
  // the global bound answers first
  const full = new MemoryQueue(1, 1, 1)
  full.pause()
  await full.enqueue('x', { keyId: 'X' })
  t.equal(full.reserve('Y'), 'full')
})

t.test('IpcQueue (cluster child): the per-key bound reads the heavy keys the primary broadcasts', async (t) => {
  const primary = new MemoryQueue(10, 1, 4)
  primary.pause()
  for (let i = 0; i < 4; i++) await primary.enqueue(`a${i}`, { keyId: 'A' })
  await primary.enqueue('b0', { keyId: 'B' })
  t.same(primary.heavyKeys(), { A: 4 }, 'B (1 of 4) is below half its share: not broadcast')
  const link = { state: { engine: { state: 'ready' }, worker: null, queue: { ...primary.stats(), heavy: primary.heavyKeys() } } }
  const child = new IpcQueue(link as unknown as ClusterLink, 10, 4)
  t.equal(child.reserve('A'), 'key_full')
  t.equal(child.reserve('B'), 'ok')
  t.equal(child.maxPerKey, 4)
})

t.test('BullQueue (Redis): fair priorities, own order kept, dedupe counted once, per-key counts', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const prefix = `lucent-t-${process.pid}-${crypto.randomBytes(4).toString('hex')}`
  const redis = new Redis(svc.LUCENT_REDIS_URL)
  t.teardown(async () => {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 })) if ((keys as string[]).length) await redis.del(...(keys as string[]))
    redis.disconnect()
  })
  const q = new BullQueue({ redisUrl: svc.LUCENT_REDIS_URL, prefix, max: 1000, maxPerKey: 40, concurrency: 1, attempts: 1, countsMs: 50 })
  t.teardown(() => q.close())
  for (let i = 0; i < 30; i++) await q.enqueue(`a${i}`, { keyId: 'A' })
  await q.enqueue('a3', { keyId: 'A', force: true }) // recovery of a job already queued: a no-op, not counted
  await q.enqueue('b0', { keyId: 'B' })
  await q.enqueue('c0', { keyId: 'C' })
  await q.enqueue('c1', { keyId: 'C' })
  t.same(Object.fromEntries(await q.keyCounts()), { A: 30, B: 1, C: 2 }, 'jobs waiting per key (in Redis)')
  await waitFor(async () => q.stats().waiting === 33, 5000, 20)
  await new Promise((r) => setTimeout(r, 200)) // a refresh of the shared counts, per key too
  // the per-key bound reads the refreshed counts: A at 30 of 40
  for (let i = 0; i < 10; i++) t.equal(q.reserve('A'), 'ok')
  t.equal(q.reserve('A'), 'key_full', 'A at its share (30 waiting + 10 reserved)')
  t.equal(q.reserve('B'), 'ok')
  for (let i = 0; i < 10; i++) q.release('A')
  q.release('B')
  const order: string[] = []
  q.process(async (id) => { order.push(id) })
  await waitFor(async () => order.length === 33, 20_000, 20)
  t.comment(`start order: ${order.join(' ')}`)
  t.same(order.slice(0, 5).sort(), ['a0', 'a1', 'b0', 'c0', 'c1'], 'every key has its first turns before A runs its third job')
  t.ok(order.indexOf('b0') <= 2, `B's job started ${order.indexOf('b0') + 1}th, after at most one job of each other key`)
  const as = order.filter((id) => id.startsWith('a')).map((id) => Number(id.slice(1)))
  t.same(as, Array.from({ length: 30 }, (_, i) => i), "A's jobs in A's order, each once")
  await waitFor(async () => (await q.keyCounts()).size === 0, 5000, 20)
  t.pass('the per-key counts are back to zero once every job was taken')
  // later submissions start on the clock where it is: a new key is not behind A's old priorities
  await q.enqueue('d0', { keyId: 'D' })
  await waitFor(async () => order.length === 34, 10_000, 20)
  t.equal(order[33], 'd0')
})

/** Submits key A's `flood` photo jobs, then key B's one; one worker. Returns B's wait in jobs and seconds. */
async function floodThenOne(t: { teardown(fn: () => unknown): void }, flood: number) {
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_ENGINE_THREADS: '1', LUCENT_BACKEND: 'cpu' })
  const srv = await inputServer(t)
  const url = srv.put('in.png', png(64, 64), 'image/png')
  const A = await createKey(app, { coins: 100_000, rate: 100_000 })
  const B = await createKey(app, { coins: 1000, rate: 100_000 })
  const startedAt = new Map<string, number>()
  const startOrder: string[] = []
  app.lucent.jobs.on('running', (e) => {
    if (!startedAt.has(e.job.id)) startOrder.push(e.job.id)
    startedAt.set(e.job.id, Date.now())
  })
  const submit = async (key: string) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })
    if (r.statusCode !== 200) throw new Error(`submit: ${r.body}`)
    return r.json().data.job_id as string
  }
  // a warm-up job first (the engine loads the model), so the figures are job times only
  const W = await createKey(app, { coins: 1000, rate: 100_000 })
  const warm = await submit(W.key)
  await waitFor(async () => (await app.lucent.store.getJob(warm))?.status === 'COMPLETED', 120_000, 20)
  const aIds: string[] = []
  // A's jobs in parallel batches (as fast as the API takes them), then B's one
  for (let i = 0; i < flood; i += 8) aIds.push(...await Promise.all(Array.from({ length: Math.min(8, flood - i) }, () => submit(A.key))))
  const t0 = Date.now()
  const notStarted = aIds.filter((id) => !startedAt.has(id))
  const bId = await submit(B.key)
  const done = async (id: string) => (await app.lucent.store.getJob(id))?.status === 'COMPLETED'
  await waitFor(async () => await done(bId), 120_000, 20)
  const bSeconds = (Date.now() - t0) / 1000
  await waitFor(async () => (await Promise.all(aIds.map(done))).every(Boolean), 300_000, 20)
  const bStart = startOrder.indexOf(bId)
  const aBeforeB = notStarted.filter((id) => startOrder.indexOf(id) < bStart).length
  const aSeconds = aIds.length ? (Date.now() - t0) / 1000 : 0
  return { notStarted: notStarted.length, aBeforeB, bSeconds, aSeconds }
}

t.test('end to end (SQLite + in-process queue, one worker): B waits for at most one of A\'s 24 jobs', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const alone = await floodThenOne(t, 0)
  const flooded = await floodThenOne(t, 24)
  t.comment(`fairness figure (in-process, 1 worker, general_2x 64x64): B alone waits ${alone.bSeconds.toFixed(2)} s; ` +
    `after A's 24 jobs (${flooded.notStarted} not started yet), B waits ${flooded.aBeforeB} of them, ${flooded.bSeconds.toFixed(2)} s ` +
    `(A's last job done ${flooded.aSeconds.toFixed(2)} s after B's submission: what B waited on the global FIFO)`)
  t.ok(flooded.notStarted >= 10, `A had ${flooded.notStarted} jobs waiting when B submitted (a real flood)`)
  t.ok(flooded.aBeforeB <= 1, `B's job started after ${flooded.aBeforeB} of A's waiting jobs (<= 1 per worker slot)`)
})

t.test('a key over its share of the queue (default: half of it): 429 + Retry-After, nothing debited; another key still submits', async (t) => {
  const app = await build(t, { LUCENT_QUEUE_MAX: '6' })
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const url = srv.put('q.png', png(16, 16), 'image/png')
  const A = await createKey(app, { coins: 100 })
  const B = await createKey(app, { coins: 100 })
  const body = { model_name: 'general_2x', img_url: url, extension: '.png' }
  for (let i = 0; i < 3; i++) t.equal((await post(app, '/api/photo-enhancer', A.key, body)).statusCode, 200)
  const r = await post(app, '/api/photo-enhancer', A.key, body)
  t.equal(r.statusCode, 429)
  t.equal(r.json().error_code, 100429000)
  t.ok(Number(r.headers['retry-after']) > 0, 'Retry-After')
  t.equal(r.headers['ratelimit-policy'], '"queue_share";q=3;qu="concurrent-requests"')
  t.match(r.headers.ratelimit, /^"queue_share";r=0;t=\d+$/)
  t.equal(await balance(app, A.id), 70, 'the refused submission debited nothing')
  t.equal((await post(app, '/api/photo-enhancer', B.key, body)).statusCode, 200, 'another key is not refused')
  t.same(app.lucent.queue.stats(), { waiting: 4, running: 0, reserved: 0, max: 6 })
  // the flooding key could never make the others get 503: the queue still has room for them
  t.equal(app.lucent.queue.reserve('someone-else'), 'ok')
})
