/**
 * The queue reconciler (server/queue/reconcile.ts) on real Redis and a SQLite store: after the queue's keys are
 * wiped, the CONVERTING jobs no queue holds are queued again exactly once, even with two reconcilers at once (one
 * holds the lease); a job running somewhere (its row fresh) and a job whose result is stored are left alone; a
 * job the queue still holds is not added twice; the wipe is noticed (epoch marker). checkRedis(): warns about a
 * Redis without persistence and an evicting maxmemory-policy, and tolerates a Redis whose CONFIG is disabled.
 * The restart-empty case with real processes: test/scaleout/redis-wipe.ts.
 */
import t from 'tap'
import crypto from 'node:crypto'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { BullQueue } from '../../server/queue/bullmq.js'
import { QueueReconciler, checkRedis } from '../../server/queue/reconcile.js'
import { SqliteStore } from '../../server/store/sqlite.js'
import { JobLifecycle } from '../../server/jobs/lifecycle.js'
import { tempDir, waitFor, freePort } from '../helper.js'
import { requireServices } from '../scaleout/services.js'

const logs = () => {
  const lines: string[] = []
  const at = (level: string) => (_o: object, msg: string) => { lines.push(`${level}: ${msg}`) }
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } }
}

t.test('a wiped queue: CONVERTING jobs queued again once; running ones and stored results left alone', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const prefix = `lucent-t-${process.pid}-${crypto.randomBytes(4).toString('hex')}`
  const redis = new Redis(svc.LUCENT_REDIS_URL)
  const wipe = async () => {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 })) if ((keys as string[]).length) await redis.del(...(keys as string[]))
  }
  t.teardown(async () => { await wipe(); redis.disconnect() })
  const store = new SqliteStore(path.join(await tempDir(t), 'lucent.db'))
  t.teardown(() => store.close())
  await store.createKey({ id: 'k_r', hash: 'h'.repeat(64), coins: 1000, trial: 0, expiresAt: null, rate: null })
  const queue = new BullQueue({ redisUrl: svc.LUCENT_REDIS_URL, prefix, max: 100, concurrency: 1, attempts: 4 })
  t.teardown(() => queue.close())
  const { lines, log } = logs()
  const jobs = new JobLifecycle({ store, queue, log, jobTimeoutMs: 60_000, maxAttempts: 3 })
  const ids: string[] = []
  for (let i = 0; i < 7; i++) {
    const id = `job${i}-${crypto.randomBytes(4).toString('hex')}`
    const r = await jobs.submit({ id, keyId: 'k_r', kind: 'photo', model: 'general_2x', params: { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 16, height: 16 } }, coins: 10, originalKey: `o/${id}.png` })
    t.ok(r.ok)
    ids.push(id)
  }
  const everyMs = 1000
  const r1 = new QueueReconciler({ store, queue, jobs, log, everyMs })
  const r2 = new QueueReconciler({ store, queue, jobs, log, everyMs })
  await r1.start()
  await r2.start()
  t.teardown(() => { r1.stop(); r2.stop() })
  t.equal(await redis.get(`${prefix}:jobs:epoch`) !== null, true, 'the epoch marker is written at start')

  // Redis loses the queue's keys
  await wipe()
  // ids[0..3]: queued long ago, now held by no queue; ids[4]: running somewhere (its row fresh);
  // ids[5]: its result is stored (a delivery: the redelivery check's); ids[6]: queued again meanwhile (held)
  const old = Date.now() - 60_000
  for (const id of ids) store.db.prepare('UPDATE jobs SET updated_at = ? WHERE id = ?').run(old, id)
  await store.setProgress(ids[4], 40)
  t.ok(await store.storeResult(ids[5], `r/${ids[5]}.png`))
  store.db.prepare('UPDATE jobs SET updated_at = ? WHERE id = ?').run(old, ids[5])
  await queue.enqueue(ids[6], { keyId: 'k_r', force: true })

  // two reconcilers at once: one holds the lease
  const [a, b] = await Promise.all([r1.tick(), r2.tick()])
  const done = [a, b].filter((x) => x !== null)
  t.equal(done.length, 1, 'one reconciler ran (the lease)')
  t.match(done[0], { checked: 7, requeued: 4, failed: 0, wiped: true })
  t.ok(lines.some((l) => /^error: .*lost its data \(epoch marker gone\)/.test(l)), 'the wipe is logged as an error')
  const held = async (id: string) => (await queue.queue.getJob(id)) ? await (await queue.queue.getJob(id))!.getState() : 'none'
  t.same(await Promise.all(ids.map(held)), ['prioritized', 'prioritized', 'prioritized', 'prioritized', 'none', 'none', 'prioritized'],
    'the 4 lost jobs queued again; the running one and the stored result not; the held one once')
  t.equal(await redis.zcard(`${prefix}:jobs:prioritized`), 5, 'five entries, none twice')
  t.same([...(await queue.keyCounts()).entries()], [['k_r', 5]], 'the fair-share count in the new Redis: 5 waiting')

  // the next period: nothing more (held now); the running job still fresh is still left alone
  await store.setProgress(ids[4], 41)
  const again = await waitFor(async () => await r2.tick() ?? await r1.tick(), 5000, 100)
  t.match(again, { requeued: 0, failed: 0, wiped: false }, 'the next check queues nothing again')
  t.equal(await redis.zcard(`${prefix}:jobs:prioritized`), 5)

  // the running job's process died: its row goes stale, then it is queued again
  store.db.prepare('UPDATE jobs SET updated_at = ? WHERE id = ?').run(old, ids[4])
  const late = await waitFor(async () => await r1.tick() ?? await r2.tick(), 5000, 100)
  t.match(late, { requeued: 1 }, 'a running job whose row went stale is queued again')
  t.equal(await held(ids[4]), 'prioritized')
  t.equal((await store.getJob(ids[5]))!.status, 'CONVERTING', 'the stored result is left to the redelivery check')
})

t.test('checkRedis: warns about no persistence and eviction; tolerates CONFIG disabled', async (t) => {
  const { spawnSync } = await import('node:child_process')
  if (spawnSync('redis-server', ['--version']).status !== 0) return t.plan(0, 'redis-server not installed')
  const start = async (args: string[]) => {
    const port = await freePort()
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', await tempDir(t, 'lucent-redis-'), ...args], { stdio: 'ignore' })
    t.teardown(() => { c.kill('SIGKILL') })
    await waitFor(async () => {
      const r = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      r.on('error', () => {})
      try { await r.connect(); return (await r.ping()) === 'PONG' } catch { return false } finally { r.disconnect() }
    }, 10_000, 50)
    const q = new BullQueue({ redisUrl: `redis://127.0.0.1:${port}`, max: 10, concurrency: 1, attempts: 2 })
    t.teardown(() => q.close())
    return q
  }
  const bare = await start(['--save', '', '--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru'])
  const a = logs()
  const w = await checkRedis(bare, a.log)
  t.equal(w.length, 2)
  t.match(w[0], /maxmemory-policy is allkeys-lru/)
  t.match(w[1], /no persistence/)
  const good = await start(['--appendonly', 'yes', '--maxmemory-policy', 'noeviction'])
  t.same(await checkRedis(good, logs().log), [], 'AOF and noeviction: no warning')
  const managed = await start(['--save', '', '--rename-command', 'CONFIG', '""'])
  const m = logs()
  t.same(await checkRedis(managed, m.log), [], 'CONFIG disabled: no warning, no throw')
  t.match(m.lines.join('\n'), /CONFIG GET refused/, 'and said so at info')
})
