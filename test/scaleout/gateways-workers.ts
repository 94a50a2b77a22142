/**
 * Scale-out, end to end, on real servers (scripts/services.sh: Redis, PostgreSQL, moto's S3 on loopback):
 * two gateways and two workers as separate `lucent serve --role ...` processes, no shared disk.
 * 50 jobs across both gateways (half fetched from a URL, half uploaded through S3 pre-signed PUTs), one worker
 * SIGKILLed mid-job. Checks: every job COMPLETED exactly once, one debit per job and no refund, the ledger
 * balances, results fetched through pre-signed S3 GET URLs, nothing left in the queue, shared rate limits,
 * /readyz and /metrics. Needs the native addon (CPU backend). In CI a missing service or addon FAILS.
 */
import t from 'tap'
import { request } from 'undici'
import pg from 'pg'
import { ListObjectsV2Command } from '@aws-sdk/client-s3'
import { modelDir, inputServer, png, addonBuilt, waitFor } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { lucentCli } from '../support/serve.js'
import { requireServices, isolatedDeployment, inCI } from './services.js'

const JOBS = 50

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const r = await request(url)
  const text = await r.body.text()
  try {
    return { status: r.statusCode, body: JSON.parse(text) }
  } catch {
    return { status: r.statusCode, body: text }
  }
}

t.test('2 gateways + 2 workers over Redis, PostgreSQL and S3; a worker SIGKILLed mid-job', async (t) => {
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
  const t0 = Date.now()
  // isolation: a fresh database, a Redis db number leased for this test alone, a fresh bucket
  const dep = await isolatedDeployment(t, svc, modelDir)
  const { bucket, s3, databaseUrl, env: common } = dep
  const start = (role: 'gateway' | 'worker') => dep.serve(role, {
    // a dead worker's job is retried after ~lock + stalled interval
    LUCENT_QUEUE_LOCK_MS: '4000', LUCENT_QUEUE_STALLED_MS: '1500', LUCENT_QUEUE_BACKOFF_MS: '200',
    LUCENT_RATE_BURST: '5', LUCENT_RATE_PER_SEC: '1000',
    LUCENT_METRICS_PUBLIC: '1', // /metrics and the detailed /readyz on PORT (docs/observability.md)
  })

  // keys through the CLI, against PostgreSQL (the CLI migrates a fresh database itself)
  const cli = (...args: string[]) => lucentCli({ ...common, DATA_DIR: '/nonexistent-not-used' }, 'keys', ...args)
  const key = cli('create', '--coins', '10000', '--rate', '1000').trimEnd().split('\n').pop()!
  const slowKey = cli('create', '--coins', '0', '--rate', '0.001').trimEnd().split('\n').pop()!
  t.match(cli('list'), /coins/, 'keys list works on PostgreSQL')

  // started side by side, each waited for until its /healthz answers (workers: engine loaded)
  const [workers, gateways] = await Promise.all([Promise.all([start('worker'), start('worker')]), Promise.all([start('gateway'), start('gateway')])])
  // gateways: ready (store, queue, storage, both workers live)
  for (const g of gateways) {
    await waitFor(async () => {
      const r = await getJson(`${g.base}/readyz`).catch(() => ({ status: 0, body: null }))
      return r.status === 200 && r.body.data.workers.filter((w: any) => w.backend === 'cpu').length === 2
    }, 60_000, 200)
  }
  const ready = await getJson(`${gateways[0].base}/readyz`)
  t.match(ready.body.data, { status: 'ready', role: 'gateway', checks: { store: true, queue: true, storage: true } })
  t.equal(ready.body.data.workers.length, 2, 'both workers registered')
  t.ok(ready.body.data.workers.every((w: any) => w.backend === 'cpu' && w.concurrency === 1), 'workers advertise backend and concurrency')
  t.notOk('engine' in ready.body.data.checks, 'a gateway loads no engine')
  // a worker serves no API
  const wApi = await request(`${workers[0].base}/api/task-status`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: '{"job_id":"x"}' })
  await wApi.body.dump()
  t.not(wApi.statusCode, 200, 'workers do not serve the API')
  t.comment(`services + 4 processes up in ${((Date.now() - t0) / 1000).toFixed(1)} s`)

  const api = async (g: number, url: string, body: unknown, k = key) => {
    const r = await request(`${gateways[g % 2].base}${url}`, { method: 'POST', headers: { apikey: k, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }

  // shared rate limit: burst 5 for slowKey over BOTH gateways (separate buckets would allow 10)
  const rl = []
  for (let i = 0; i < 7; i++) rl.push((await api(i, '/api/task-status', { job_id: 'nope' }, slowKey)).status)
  t.same(rl, [400, 400, 400, 400, 400, 429, 429], 'one token bucket across gateways')

  // inputs: half by URL, half uploaded with S3 pre-signed PUTs
  const srv = await inputServer(t)
  const img = png(32, 32)
  const urlInput = srv.put('in.png', img, 'image/png')
  const submit = async (i: number) => {
    let imgUrl = urlInput
    if (i % 2 === 1) {
      const ps = await api(i, '/api/oss/presign-put', { filename: `in${i}.png`, content_type: 'image/png' })
      if (ps.status !== 200) throw new Error(`presign-put: ${JSON.stringify(ps.body)}`)
      const up = ps.body.data
      if (!up.upload_url.startsWith(`${svc.LUCENT_S3_ENDPOINT}/${bucket}/u/`) || !up.upload_url.includes('X-Amz-Signature=')) throw new Error(`not an S3 pre-signed URL: ${up.upload_url}`)
      const put = await request(up.upload_url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: img })
      await put.body.dump()
      if (put.statusCode !== 200) throw new Error(`S3 PUT ${put.statusCode}`)
      imgUrl = up.access_url
    }
    const r = await api(i, '/api/photo-enhancer', { model_name: 'general_2x', img_url: imgUrl, extension: '.png' })
    if (r.status !== 200) throw new Error(`submit ${i}: ${JSON.stringify(r.body)}`)
    return r.body.data as { job_id: string; consume_coins: number }
  }
  const subs = await Promise.all(Array.from({ length: JOBS }, (_, i) => submit(i)))
  t.equal(subs.length, JOBS)
  t.ok(subs.every((s) => s.consume_coins === 10), 'price of general_2x on 32x32')
  t.equal(new Set(subs.map((s) => s.job_id)).size, JOBS)

  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  t.teardown(() => db.end())

  // SIGKILL worker 0 while it is running a job. Its running count also covers the moments before the attempt is
  // recorded and after the result is (32x32 jobs are short): it is frozen (SIGSTOP) first, and killed once a job
  // stays CONVERTING with an attempt recorded while the other worker goes on; else it goes on (SIGCONT), again.
  const victim = workers[0]
  const converting = async () => new Set((await db.query("SELECT id FROM jobs WHERE status = 'CONVERTING' AND attempts >= 1")).rows.map((r) => r.id as string))
  let held: string | undefined
  for (let i = 0; i < 10 && !held; i++) {
    await waitFor(async () => {
      const h = await getJson(`${victim.base}/healthz`).catch(() => null)
      return !!h && h.body?.data?.queue?.running > 0
    }, 60_000, 2)
    victim.child.kill('SIGSTOP')
    const before = await converting()
    await new Promise((r) => setTimeout(r, 800))
    const after = await converting()
    held = [...before].find((id) => after.has(id))
    if (!held) victim.child.kill('SIGCONT')
  }
  await victim.kill('SIGKILL')
  t.comment(`worker ${victim.child.pid} SIGKILLed mid-job${held ? ` (holding ${held})` : ''}`)

  const finished = await waitFor(async () => {
    const all = await Promise.all(subs.map((s, i) => api(i, '/api/task-status', { job_id: s.job_id })))
    const d = all.map((x) => x.body.data)
    return d.every((x) => x && x.status !== 'CONVERTING') && d
  }, 150_000, 500)
  t.comment(`all ${JOBS} jobs settled ${((Date.now() - t0) / 1000).toFixed(1)} s after start`)
  const statuses = finished.map((d: any) => d.status)
  t.same([...new Set(statuses)], ['COMPLETED'], 'every job COMPLETED')

  // results through pre-signed S3 GET URLs (straight from S3, not through a gateway)
  let fetched = 0
  for (const d of finished) {
    if (!d.res_url?.startsWith(`${svc.LUCENT_S3_ENDPOINT}/${bucket}/r/`) || !d.res_url.includes('X-Amz-Signature=')) {
      t.fail(`res_url is not a pre-signed S3 URL: ${d.res_url}`)
      continue
    }
    const r = await request(d.res_url)
    const body = Buffer.from(await r.body.arrayBuffer())
    if (r.statusCode === 200 && r.headers['content-type'] === 'image/png' && sniff(body)?.width === 64 && sniff(body)?.height === 64) fetched++
  }
  t.equal(fetched, JOBS, 'all results fetched via pre-signed S3 GET: 64x64 PNGs')
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'r/' }))
  t.equal(listed.KeyCount, JOBS, 'one result object per job')

  // the database: exactly once, ledger balanced
  const jobs = (await db.query('SELECT id, status, attempts, refunded FROM jobs')).rows
  t.equal(jobs.length, JOBS)
  t.ok(jobs.every((j) => j.status === 'COMPLETED' && !j.refunded))
  // the job frozen mid-run is the one the kill cut; on a box so loaded that no job was caught running in 10 tries,
  // the kill may have cut none (said, not failed: every other check of the run still holds)
  if (held) t.ok(jobs.find((j) => j.id === held)!.attempts >= 2, 'the killed worker\'s job was retried on the other worker')
  else t.comment('no job caught running on the frozen worker in 10 tries: the retry is not checked this run')
  t.comment(`attempts: ${JSON.stringify(jobs.reduce((m: Record<number, number>, j) => ({ ...m, [j.attempts]: (m[j.attempts] ?? 0) + 1 }), {}))}`)
  const perJob = (await db.query("SELECT job_id, kind, count(*)::int AS n, sum(delta)::int AS s FROM ledger WHERE job_id IS NOT NULL GROUP BY job_id, kind")).rows
  t.equal(perJob.length, JOBS, 'one ledger kind per job')
  t.ok(perJob.every((r) => r.kind === 'debit' && r.n === 1 && r.s === -10), 'one debit of 10 per job, no refund')
  const k = (await db.query("SELECT k.id, k.coins, (SELECT sum(delta)::int FROM ledger l WHERE l.key_id = k.id) AS sum FROM keys k WHERE k.coins > 0")).rows
  t.same(k.map((r) => [Number(r.coins), r.sum]), [[10000 - JOBS * 10, 10000 - JOBS * 10]], 'balance = ledger sum = grant - 50 x 10')

  // the queue: nothing left behind
  const metric = (text: string, name: string) => [...text.matchAll(new RegExp(`^${name} ([0-9.e+-]+)$`, 'gm'))].reduce((s, m) => s + Number(m[1]), 0)
  // a job is COMPLETED in the store just before BullMQ moves it out of `active`
  const counts = await waitFor(async () => {
    const m = await getJson(`${gateways[1].base}/metrics`)
    return metric(m.body, 'lucent_queue_depth\\{state="active"\\}') === 0 && m
  }, 10_000, 100)
  t.equal(metric(counts.body, 'lucent_queue_depth\\{state="waiting"\\}'), 0, 'queue drained')
  t.equal(metric(counts.body, 'lucent_queue_depth\\{state="active"\\}'), 0)
  t.equal(metric(counts.body, 'lucent_queue_depth\\{state="failed"\\}'), 0)
  const m0 = await getJson(`${gateways[0].base}/metrics`)
  t.equal(metric(m0.body, 'lucent_coins_debited_total') + metric(counts.body, 'lucent_coins_debited_total'), JOBS * 10, 'coins debited, summed over gateways')
  t.match(m0.body, /lucent_worker_utilisation \d/)
  t.match(m0.body, /lucent_workers\{backend="cpu"\} [12]/)
  const wm = await getJson(`${workers[1].base}/metrics`)
  t.ok(metric(wm.body, 'lucent_job_duration_seconds_count\\{model="general_2x",status="COMPLETED"\\}') >= JOBS / 2, 'surviving worker ran at least half the jobs')
  t.ok(metric(wm.body, 'lucent_job_latency_seconds_count\\{model="general_2x"\\}') >= JOBS / 2, 'end-to-end latency by model')
  t.comment(`total ${((Date.now() - t0) / 1000).toFixed(1)} s`)

  // graceful stop
  const codes = await Promise.all([workers[1], ...gateways].map((s) => s.kill('SIGTERM')))
  t.same(codes, [0, 0, 0], 'SIGTERM: clean exits')
})
