/**
 * LUCENT_HTTP_PROCESSES=2: a spawned `lucent serve` with two HTTP children (node:cluster) and the primary as the
 * engine host. Both children answer; a photo job submitted to a child runs on the primary and completes; coins
 * stay exact under parallel submissions spread over both children (SQLite shared across processes); a key's
 * rate limit holds across the children (tokens leased from the primary); a killed child is replaced; SIGTERM
 * stops everything. Needs the native addon.
 */
import t from 'tap'
import path from 'node:path'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { tempDir, modelDir, inputServer, addonBuilt, waitFor, png } from '../helper.js'
import { lucentServer, createKeyCli } from '../support/serve.js'

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

t.test('two HTTP processes in front of one engine host', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const env = {
    ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1',
    LUCENT_LOG_LEVEL: 'warn', LUCENT_HTTP_PROCESSES: '2', LUCENT_RATE_BURST: '5', LUCENT_KEY_CACHE_MS: '0',
    LUCENT_METRICS_PUBLIC: '1', // /metrics on PORT (docs/observability.md)
  }
  const newKey = (...args: string[]) => createKeyCli(env, ...args).key
  const rich = newKey('--coins', '100000', '--rate', '1000')
  const srv = await inputServer(t)
  const img = srv.put('small.png', png(16, 12), 'image/png')

  const server = lucentServer(t, { env })
  await server.start()
  const primary = server.child
  const base = server.base
  // a fresh connection per call, so that the cluster's round robin spreads them over the children
  const get = async (url: string) => {
    const r = await request(`${base}${url}`, { reset: true, headersTimeout: 20_000 })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  const post = async (url: string, key: string, body: unknown) => {
    const r = await request(`${base}${url}`, { method: 'POST', reset: true, headersTimeout: 60_000, headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: r.statusCode, headers: r.headers, body: (await r.body.json()) as any }
  }
  const pids = async (n = 12) => {
    const seen = new Set<number>()
    for (let i = 0; i < n; i++) {
      const h = await get('/healthz')
      if (h.status === 200) seen.add(h.body.data.pid)
    }
    return seen
  }

  // the first child may answer before the second listens
  const children = await waitFor(async () => {
    const seen = await pids()
    return seen.size === 2 && seen
  }, 60_000, 200)
  t.equal(children.size, 2, 'two HTTP processes answer on one port')
  t.notOk(children.has(primary.pid!), 'the primary does not serve HTTP')
  const h = await get('/healthz')
  t.ok(h.body.data.models.includes('general_4x'), 'a child reports the engine host\'s models')

  // a job submitted to a child runs on the primary
  const sub = await post('/api/photo-enhancer', rich, { model_name: 'general_4x', img_url: img, extension: '.png' })
  t.equal(sub.body.code, 200, 'accepted')
  const price = sub.body.data.consume_coins as number
  const done = await waitFor(async () => {
    const d = (await post('/api/task-status', rich, { job_id: sub.body.data.job_id })).body.data
    return d.status !== 'CONVERTING' && d
  }, 120_000, 100)
  t.equal(done.status, 'COMPLETED')
  // both children kept the converting answer while polled; the completion reached both
  const after = await Promise.all(Array.from({ length: 6 }, () => post('/api/task-status', rich, { job_id: sub.body.data.job_id })))
  t.same(after.map((r) => r.body.data.status), Array(6).fill('COMPLETED'), 'every child answers COMPLETED at once')
  const res = await request(done.res_url)
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'image/png')
  await res.body.dump()

  // coins for 6 jobs, 16 parallel submissions over both children: exactly 6 accepted
  const poor = newKey('--coins', String(6 * price), '--rate', '1000')
  const subs = await Promise.all(Array.from({ length: 16 }, () => post('/api/photo-enhancer', poor, { model_name: 'general_4x', img_url: img, extension: '.png' })))
  const accepted = subs.filter((r) => r.body.code === 200)
  t.equal(accepted.length, 6, 'exactly the affordable submissions accepted')
  t.ok(subs.filter((r) => r.body.code !== 200).every((r) => r.body.error_code === 110402000), 'the rest: insufficient balance')
  for (const a of accepted) {
    await waitFor(async () => (await post('/api/task-status', poor, { job_id: a.body.data.job_id })).body.data.status === 'COMPLETED', 120_000, 100)
  }

  // job metrics are recorded where jobs run (the primary) and shown by the children, once per family
  const text = await waitFor(async () => {
    const m = await request(`${base}/metrics`, { reset: true })
    const body = await m.body.text()
    return /lucent_jobs_total\{model="general_4x",status="COMPLETED"\} 7\b/.test(body) && body
  }, 30_000, 100)
  t.pass("the primary's job counter (7 completed), through a child")
  t.equal(text.match(/^# TYPE lucent_jobs_total /gm)?.length, 1, 'one lucent_jobs_total family')
  t.equal(text.match(/^# TYPE lucent_process_cpu_seconds_total /gm)?.length, 1, "the child's own process metrics")

  // rate 1/s, burst 5 (LUCENT_RATE_BURST): 30 parallel requests over both children -> 5 admitted (+1 per second)
  const slow = newKey('--coins', '0', '--rate', '1')
  const t0 = Date.now()
  const burst = await Promise.all(Array.from({ length: 30 }, () => post('/api/task-status', slow, { job_id: 'f'.repeat(32) })))
  const elapsed = (Date.now() - t0) / 1000
  const admitted = burst.filter((r) => r.status !== 429).length
  t.ok(admitted >= 5 && admitted <= 5 + Math.ceil(elapsed), `admitted ${admitted} of 30 in ${elapsed.toFixed(2)} s (bucket 5, 1/s)`)
  t.ok(burst.filter((r) => r.status !== 429).every((r) => r.body.error_code === 110400002), 'admitted ones reach the route (unknown job)')
  const limited = burst.find((r) => r.status === 429)!
  t.equal(limited.body.error_code, 100429000)
  t.match(limited.headers['retry-after'], /^\d+$/, 'Retry-After on 429')

  // a child killed -9 is replaced; the service keeps answering
  const victim = [...children][0]
  process.kill(victim, 'SIGKILL')
  // until the primary has reaped it (a zombie still answers kill 0), its round robin may hand it a connection
  await waitFor(async () => !alive(victim), 30_000, 20)
  const replaced = await waitFor(async () => {
    const now = await pids(8)
    return now.size === 2 && !now.has(victim) && now
  }, 180_000, 200) // a new child boots like the first ones (180 s on a loaded machine)
  t.equal(replaced.size, 2, 'two HTTP processes again, the killed one replaced')

  // SIGTERM: every process stops, exit code 0
  t.equal(await server.kill('SIGTERM'), 0, 'primary exits 0')
  await waitFor(async () => [...replaced].every((p) => !alive(p)), 30_000, 100)
  t.pass('children stopped with the primary')

  const db = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const key = db.prepare("SELECT k.id, k.coins FROM keys k WHERE k.coins = 0 AND k.rate = 1000").get() as { id: string; coins: number }
  const sum = (db.prepare('SELECT SUM(delta) s FROM ledger WHERE key_id = ?').get(key.id) as { s: number }).s
  const jobs = (db.prepare("SELECT COUNT(*) n FROM jobs WHERE key_id = ? AND status = 'COMPLETED'").get(key.id) as { n: number }).n
  db.close()
  t.equal(sum, 0, 'balance 0 equals the ledger')
  t.equal(jobs, 6, 'six jobs completed')
})
