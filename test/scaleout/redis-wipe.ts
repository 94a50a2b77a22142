/**
 * A Redis that loses its data loses no job (issue 30; server/queue/reconcile.ts). Real processes over a private
 * redis-server (no persistence, as a cache-style Redis or a failover that drops recent writes), PostgreSQL and
 * S3: a gateway takes 12 photo jobs while no worker runs; Redis is killed and started again EMPTY on the same
 * port; then a worker starts. Before the reconciler, the jobs stayed CONVERTING for ever (coins debited, never
 * run, never refunded). Checks: all 12 COMPLETED within a bound, each run exactly once (attempts 1, one result
 * object each), one debit per job and no refund, the fair-share bookkeeping in the new Redis back to empty
 * (nothing counted as waiting), a job submitted after the wipe runs. (The reconciler's own rules, the wipe
 * notice and the Redis settings check: test/queue/reconcile.ts.)
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { request } from 'undici'
import pg from 'pg'
import { Redis } from 'ioredis'
import { ListObjectsV2Command } from '@aws-sdk/client-s3'
import { modelDir, inputServer, png, waitFor, freePort, tempDir } from '../helper.js'
import { lucentCli } from '../support/serve.js'
import { processServices, isolatedDeployment } from './services.js'

const JOBS = 12
const RECONCILE_MS = 1000

/** A private redis-server without persistence on `port` (started again on the same port after a kill). */
function privateRedis(t: { teardown(fn: () => unknown): void }, port: number, dir: string) {
  let child: ChildProcess | null = null
  t.teardown(() => { if (child && child.exitCode === null) child.kill('SIGKILL') })
  return {
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
      await waitFor(async () => {
        const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
        r.on('error', () => {})
        try {
          await r.connect()
          return (await r.ping()) === 'PONG'
        } catch {
          return false
        } finally {
          r.disconnect()
        }
      }, 10_000, 50)
    },
    async kill() {
      const c = child!
      c.kill('SIGKILL')
      if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once('exit', r))
    },
  }
}

t.test('Redis killed and restarted empty: every queued job still runs once, or is refunded', async (t) => {
  const svc = await processServices(t)
  if (!svc) return
  const port = await freePort()
  const redis = privateRedis(t, port, await tempDir(t, 'lucent-redis-'))
  await redis.start()
  const redisUrl = `redis://127.0.0.1:${port}`
  const dep = await isolatedDeployment(t, svc, modelDir)
  const extra = { LUCENT_REDIS_URL: redisUrl, LUCENT_RECONCILE_MS: String(RECONCILE_MS), LUCENT_QUEUE_BACKOFF_MS: '200' }
  const cli = (...args: string[]) => lucentCli({ ...dep.env, DATA_DIR: '/nonexistent-not-used' }, 'keys', ...args)
  const key = cli('create', '--coins', '1000', '--rate', '1000').trimEnd().split('\n').pop()!

  // the gateway's log (stdout: JSON lines) is read for the wipe notice and the settings warning
  const gateway = await dep.serve('gateway', extra)
  const api = async (url: string, body: unknown) => {
    const r = await request(`${gateway.base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  const srv = await inputServer(t)
  const img = srv.put('in.png', png(32, 32), 'image/png')
  const subs: string[] = []
  for (let i = 0; i < JOBS; i++) {
    const r = await api('/api/photo-enhancer', { model_name: 'general_2x', img_url: img, extension: '.png' })
    if (r.status !== 200) throw new Error(`submit ${i}: ${JSON.stringify(r.body)}`)
    subs.push(r.body.data.job_id)
  }
  const probe = new Redis(redisUrl)
  t.teardown(() => probe.disconnect())
  t.equal(await probe.zcard('lucent:jobs:prioritized'), JOBS, `${JOBS} jobs waiting in BullMQ, no worker yet`)

  // Redis dies and comes back empty, on the same port
  probe.disconnect()
  await redis.kill()
  await redis.start()
  const empty = new Redis(redisUrl)
  t.teardown(() => empty.disconnect())
  t.equal(await empty.dbsize(), 0, 'Redis came back empty')
  const t0 = Date.now()

  // a worker now: the jobs come back from the job store (the reconciler), each runs once
  await dep.serve('worker', extra)
  const db = new pg.Client({ connectionString: dep.databaseUrl })
  await db.connect()
  t.teardown(() => db.end())
  const settled = await waitFor(async () => {
    const rows = (await db.query('SELECT id, status, attempts, refunded FROM jobs')).rows
    return rows.length === JOBS && rows.every((r) => r.status !== 'CONVERTING') && rows
  }, 60_000, 200).catch(() => null)
  t.ok(settled, `every job settled within 60 s of the wipe (${((Date.now() - t0) / 1000).toFixed(1)} s)`)
  const rows = settled ?? (await db.query('SELECT id, status, attempts, refunded FROM jobs')).rows
  t.same(rows.map((r) => r.status).sort(), Array(JOBS).fill('COMPLETED'), 'every job COMPLETED')
  t.same(rows.map((r) => Number(r.attempts)), Array(JOBS).fill(1), 'each job ran exactly once')
  const listed = await dep.s3.send(new ListObjectsV2Command({ Bucket: dep.bucket, Prefix: 'r/' }))
  t.equal(listed.KeyCount, JOBS, 'one result object per job')
  const ledger = (await db.query("SELECT job_id, kind, count(*)::int AS n, sum(delta)::int AS s FROM ledger WHERE job_id IS NOT NULL GROUP BY job_id, kind")).rows
  t.ok(ledger.length === JOBS && ledger.every((r) => r.kind === 'debit' && r.n === 1 && r.s === -10), 'one debit of 10 per job, no refund')
  const coins = (await db.query('SELECT coins FROM keys WHERE coins > 0')).rows.map((r) => Number(r.coins))
  t.same(coins, [1000 - JOBS * 10], 'balance = grant - 12 x 10')
  t.ok(await empty.get('lucent:jobs:epoch'), 'the queue\'s epoch marker is written again in the new Redis')

  // the fair-share bookkeeping of the new Redis is consistent: nothing counted as waiting, the queue empty
  const fair = await waitFor(async () => {
    const h = await empty.hgetall('lucent:jobs:fair')
    const jobs = await empty.hlen('lucent:jobs:fair:jobs')
    return Object.keys(h).every((f) => !f.startsWith('n:')) && jobs === 0 && { h, jobs }
  }, 10_000, 100).catch(() => null)
  t.ok(fair, 'fair-share counts back to empty after the wipe')
  t.equal(await empty.zcard('lucent:jobs:prioritized') + await empty.llen('lucent:jobs:wait'), 0, 'nothing left waiting')

  // a job submitted now is queued and run as usual (the fair-share scripts work on the new Redis)
  const again = await api('/api/photo-enhancer', { model_name: 'general_2x', img_url: img, extension: '.png' })
  t.equal(again.status, 200)
  await waitFor(async () => (await db.query("SELECT status FROM jobs WHERE id = $1", [again.body.data.job_id])).rows[0]?.status === 'COMPLETED', 30_000, 100)
  t.pass('a job submitted after the wipe completes')
})
