/**
 * Cancel and Idempotency-Key with LUCENT_HTTP_PROCESSES=2 (two HTTP children, the primary runs the jobs; SQLite
 * shared): a cancel arriving at a child stops the run on the primary at once (cluster IPC), refunded once;
 * parallel identical submissions spread over both children make one job, one debit. Needs the native addon.
 */
import t from 'tap'
import path from 'node:path'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { tempDir, modelDir, inputServer, addonBuilt, waitFor, png } from '../helper.js'
import { lucentServer, createKeyCli } from '../support/serve.js'

t.test('cluster: cancel through a child stops the primary\'s run; idempotency across children', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const env = {
    ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1',
    LUCENT_LOG_LEVEL: 'warn', LUCENT_HTTP_PROCESSES: '2', LUCENT_WORKERS: '1', LUCENT_ENGINE_THREADS: '1', LUCENT_BACKEND: 'cpu',
  }
  const { key } = createKeyCli(env, '--coins', '100000', '--rate', '1000')
  const srv = await inputServer(t)
  const server = lucentServer(t, { env })
  await server.start()
  const base = server.base
  const get = async (url: string) => {
    const r = await request(`${base}${url}`, { reset: true })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
    const r = await request(`${base}${url}`, { method: 'POST', reset: true, headers: { apikey: key, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }

  // idempotency: 8 identical submissions, new connections (spread over both children)
  const body = { model_name: 'general_2x', img_url: srv.put('s.png', png(16, 12), 'image/png'), extension: '.png' }
  const subs = await Promise.all(Array.from({ length: 8 }, () => post('/api/photo-enhancer', body, { 'idempotency-key': 'k-1' })))
  t.same(subs.map((s) => s.status), Array(8).fill(200))
  t.equal(new Set(subs.map((s) => s.body.data.job_id)).size, 1, 'one job')

  // cancel of a running job: the primary's engine stops (its running count, broadcast to the children, drops)
  const long = (await post('/api/photo-enhancer', { model_name: 'general_4x', img_url: srv.put('b.png', png(512, 512), 'image/png'), extension: '.png' })).body.data
  await waitFor(async () => {
    const d = (await post('/api/task-status', { job_id: long.job_id })).body.data
    return d.status === 'CONVERTING' && !('queue_position' in d)
  }, 120_000, 50)
  await new Promise((r) => setTimeout(r, 1000))
  const t0 = Date.now()
  const c = await post('/api/task-cancel', { job_id: long.job_id })
  t.match(c.body.data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' })
  await waitFor(async () => (await get('/healthz')).body.data.queue.running === 0, 20_000, 20)
  const ms = Date.now() - t0
  t.ok(ms < 5000, `the primary's run stopped ${ms} ms after the cancel (the broadcast comes every 250 ms)`)
  const next = (await post('/api/photo-enhancer', body)).body.data
  await waitFor(async () => (await post('/api/task-status', { job_id: next.job_id })).body.data.status === 'COMPLETED', 120_000, 100)
  t.pass('the next job completed')

  await server.kill('SIGTERM')
  const db = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const kinds = db.prepare('SELECT job_id, kind FROM ledger WHERE job_id IS NOT NULL ORDER BY id').all() as Array<{ job_id: string; kind: string }>
  const jobs = (db.prepare('SELECT COUNT(*) AS n FROM jobs').get() as { n: number }).n
  db.close()
  t.equal(jobs, 3, 'three jobs: the idempotent one, the canceled one, the next one')
  t.same(kinds.filter((k) => k.job_id === long.job_id).map((k) => k.kind), ['debit', 'refund'], 'the canceled job refunded once')
  t.equal(kinds.filter((k) => k.kind === 'debit').length, 3, 'one debit per job')
})
