/** kill -9 of `lucent serve` mid-job, restart: the job finishes, charged once. Needs the native addon. */
import t from 'tap'
import path from 'node:path'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { tempDir, modelDir, inputServer, addonBuilt, waitFor } from '../helper.js'
import { lucentServer, createKeyCli } from '../support/serve.js'

t.test('kill -9 while CONVERTING, restart, job completes, charged once', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const env = { ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn' }
  const { key } = createKeyCli(env, '--coins', '100')
  const srv = await inputServer(t)
  const server = lucentServer(t, { env })
  const start = () => server.start()
  const api = async (url: string, body: unknown) => {
    const r = await request(`${server.base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return (await r.body.json()) as any
  }
  await start()
  const sub = await api('/api/photo-enhancer', { model_name: 'general_4x', img_url: srv.shared('photos/OST_009.png'), extension: '.png' })
  t.equal(sub.code, 200)
  const jobId = sub.data.job_id
  const coins = sub.data.consume_coins
  // let the worker start on it, then kill -9
  await waitFor(async () => (await api('/api/task-status', { job_id: jobId })).data.progress > 0 || null, 60_000, 50).catch(() => {})
  await server.kill('SIGKILL')
  const db = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const row = db.prepare('SELECT status FROM jobs WHERE id = ?').get(jobId) as { status: string }
  db.close()
  t.equal(row.status, 'CONVERTING', 'killed mid-job')

  await start()
  const done = await waitFor(async () => {
    const d = (await api('/api/task-status', { job_id: jobId })).data
    return d.status !== 'CONVERTING' && d
  }, 600_000, 250)
  t.equal(done.status, 'COMPLETED')
  const res = await request(done.res_url)
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'image/png')
  await res.body.dump()
  await server.kill('SIGTERM')
  const db2 = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const ledger = db2.prepare('SELECT kind, delta FROM ledger WHERE job_id = ?').all(jobId) as Array<{ kind: string; delta: number }>
  const bal = (db2.prepare('SELECT coins FROM keys').get() as { coins: number }).coins
  const sum = (db2.prepare('SELECT SUM(delta) s FROM ledger').get() as { s: number }).s
  db2.close()
  t.same(ledger, [{ kind: 'debit', delta: -coins }], 'one debit, no refund')
  t.equal(bal, 100 - coins)
  t.equal(sum, bal, 'balance equals the ledger')
})
