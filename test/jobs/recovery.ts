/** kill -9 of `lucent serve` mid-job, restart: the job finishes, charged once. Needs the native addon. */
import t from 'tap'
import path from 'node:path'
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { repoRoot, tempDir, modelDir, inputServer, addonBuilt, waitFor, freePort } from '../helper.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

t.test('kill -9 while CONVERTING, restart, job completes, charged once', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn' }
  const key = execFileSync(process.execPath, [bin, 'keys', 'create', '--coins', '100'], { env }).toString().trimEnd().split('\n').pop()!
  const srv = await inputServer(t)
  let child: ChildProcess | null = null
  const start = async () => {
    child = spawn(process.execPath, [bin, 'serve'], { env, stdio: ['ignore', 'inherit', 'inherit'] })
    await waitFor(async () => {
      try {
        const r = await request(`${base}/healthz`)
        await r.body.dump()
        return r.statusCode === 200
      } catch {
        return false
      }
    }, 180_000, 200)
  }
  t.teardown(() => { child?.kill('SIGKILL') })
  const api = async (url: string, body: unknown) => {
    const r = await request(`${base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return (await r.body.json()) as any
  }
  await start()
  const sub = await api('/api/photo-enhancer', { model_name: 'general_4x', img_url: srv.shared('photos/OST_009.png'), extension: '.png' })
  t.equal(sub.code, 200)
  const jobId = sub.data.job_id
  const coins = sub.data.consume_coins
  // let the worker start on it, then kill -9
  await waitFor(async () => (await api('/api/task-status', { job_id: jobId })).data.progress > 0 || null, 60_000, 50).catch(() => {})
  child!.kill('SIGKILL')
  await new Promise((r) => child!.once('exit', r))
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
  child!.kill('SIGTERM')
  await new Promise((r) => child!.once('exit', r))
  child = null
  const db2 = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const ledger = db2.prepare('SELECT kind, delta FROM ledger WHERE job_id = ?').all(jobId) as Array<{ kind: string; delta: number }>
  const bal = (db2.prepare('SELECT coins FROM keys').get() as { coins: number }).coins
  const sum = (db2.prepare('SELECT SUM(delta) s FROM ledger').get() as { s: number }).s
  db2.close()
  t.same(ledger, [{ kind: 'debit', delta: -coins }], 'one debit, no refund')
  t.equal(bal, 100 - coins)
  t.equal(sum, bal, 'balance equals the ledger')
})
