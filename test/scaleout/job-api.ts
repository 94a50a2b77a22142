/**
 * Cancel and Idempotency-Key in the scale-out deployment (scripts/services.sh: PostgreSQL, Redis, S3): two
 * gateways and one worker as separate `lucent serve --role ...` processes. Parallel identical submissions over
 * both gateways make one job and one debit; a waiting job canceled leaves BullMQ and never runs; a running
 * job canceled at a gateway stops on the worker at once (Redis pub/sub), refunded once, and the worker takes
 * the next job. Needs the native addon (CPU backend). In CI a missing service or addon FAILS.
 */
import t from 'tap'
import { request } from 'undici'
import pg from 'pg'
import { modelDir, inputServer, png, addonBuilt, waitFor } from '../helper.js'
import { createKeyCli } from '../support/serve.js'
import { requireServices, isolatedDeployment, inCI } from './services.js'

t.test('cancel + idempotency over PostgreSQL and Redis: 2 gateways, 1 worker', async (t) => {
  if (!addonBuilt) {
    if (inCI) throw new Error('native/node is not built (npm run build:native)')
    t.plan(0, 'native addon not built (npm run build:native)')
    return
  }
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const dep = await isolatedDeployment(t, svc, modelDir)
  const { redis, databaseUrl, env: common } = dep
  const start = async (role: 'gateway' | 'worker') => (await dep.serve(role)).base
  const { key } = createKeyCli({ ...common, DATA_DIR: '/nonexistent-not-used' }, '--coins', '100000', '--rate', '1000')
  // the worker first (gateways are ready once a live worker registered), both gateways side by side
  const worker = await start('worker')
  const gateways = await Promise.all([start('gateway'), start('gateway')])
  const getJson = async (url: string) => {
    const r = await request(url)
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  for (const g of gateways) await waitFor(async () => (await getJson(`${g}/readyz`).catch(() => ({ status: 0 }))).status === 200, 60_000, 200)
  const api = async (g: number, url: string, body: unknown, headers: Record<string, string> = {}) => {
    const r = await request(`${gateways[g % 2]}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  const workerRunning = async () => (await getJson(`${worker}/healthz`)).body.data.queue.running as number
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  t.teardown(() => db.end())
  const ledger = async (jobId: string) => (await db.query('SELECT kind FROM ledger WHERE job_id = $1 ORDER BY id', [jobId])).rows.map((r) => r.kind)

  const srv = await inputServer(t)
  const small = srv.put('s.png', png(16, 12), 'image/png')
  const big = srv.put('b.png', png(512, 512), 'image/png')

  // idempotency: 8 parallel identical submissions over both gateways
  const body = { model_name: 'general_2x', img_url: small, extension: '.png' }
  const subs = await Promise.all(Array.from({ length: 8 }, (_, i) => api(i, '/api/photo-enhancer', body, { 'idempotency-key': 'same-order' })))
  t.same(subs.map((s) => s.status), Array(8).fill(200))
  const jobIds = new Set(subs.map((s) => s.body.data.job_id))
  t.equal(jobIds.size, 1, 'one job for 8 submissions over 2 gateways')
  const [idemJob] = jobIds
  t.same(await ledger(idemJob), ['debit'], 'one debit')
  t.equal((await db.query('SELECT count(*)::int AS n FROM jobs')).rows[0].n, 1, 'one job row')
  const conflict = await api(1, '/api/photo-enhancer', { ...body, model_name: 'general_4x' }, { 'idempotency-key': 'same-order' })
  t.equal(conflict.status, 409)
  t.equal(conflict.body.error_code, 110409001, 'another body under the key: 409')
  await waitFor(async () => (await api(0, '/api/task-status', { job_id: idemJob })).body.data.status === 'COMPLETED', 120_000, 200)

  // cancel: a long job running on the worker, a second one waiting behind it
  const long = (await api(0, '/api/photo-enhancer', { model_name: 'general_4x', img_url: big, extension: '.png' })).body.data
  await waitFor(async () => (await workerRunning()) === 1, 60_000, 50)
  const waiting = (await api(1, '/api/photo-enhancer', { model_name: 'general_4x', img_url: big, extension: '.png' })).body.data
  const pos = (await api(0, '/api/task-status', { job_id: waiting.job_id })).body.data
  t.equal(pos.queue_position, 1, 'the waiting job is next')
  t.equal(await redis.exists(`lucent:jobs:${waiting.job_id}`), 1, 'waiting in BullMQ')
  const cw = await api(0, '/api/task-cancel', { job_id: waiting.job_id })
  t.match(cw.body.data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' }, 'waiting job canceled')
  t.equal(await redis.exists(`lucent:jobs:${waiting.job_id}`), 0, 'removed from BullMQ')
  await new Promise((r) => setTimeout(r, 1000))
  const t0 = Date.now()
  const cr = await api(1, '/api/task-cancel', { job_id: long.job_id })
  t.match(cr.body.data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' }, 'running job canceled at the other gateway')
  await waitFor(async () => (await workerRunning()) === 0, 20_000, 20)
  const ms = Date.now() - t0
  t.ok(ms < 5000, `the worker's run stopped ${ms} ms after the cancel`)
  t.same(await ledger(long.job_id), ['debit', 'refund'], 'refunded once')
  t.same(await ledger(waiting.job_id), ['debit', 'refund'], 'refunded once')
  const again = await api(0, '/api/task-cancel', { job_id: long.job_id })
  t.equal(again.body.error_code, 110409000, 'canceling again: 409')

  // the worker takes the next job; the canceled waiting one never ran
  const next = (await api(0, '/api/photo-enhancer', body)).body.data
  await waitFor(async () => (await api(1, '/api/task-status', { job_id: next.job_id })).body.data.status === 'COMPLETED', 120_000, 200)
  t.pass('the next job completed')
  const rows = (await db.query('SELECT id, status, attempts FROM jobs WHERE id = ANY($1)', [[long.job_id, waiting.job_id]])).rows
  t.same(Object.fromEntries(rows.map((r) => [r.id, [r.status, r.attempts]])), { [long.job_id]: ['ERROR', 1], [waiting.job_id]: ['ERROR', 0] }, 'the waiting job never started')
  const k = (await db.query('SELECT coins, (SELECT sum(delta)::int FROM ledger) AS sum FROM keys')).rows[0]
  t.equal(Number(k.coins), k.sum, 'balance = ledger sum')
})
