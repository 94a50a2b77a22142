/**
 * Abuse, property: random sequences of submit / cancel / output_put_url receivers that fail, hold or never
 * answer / worker kills (SIGKILL, then a restart) over many jobs, on real `lucent serve` processes: SQLite (one
 * process, role all, two engine threads, so kills cut runs in company) and PostgreSQL + Redis + S3 (a gateway and
 * a worker). Issue 29 adds failures of every cause: videos broken at their last frames (a late decode error, the
 * input's), photos whose priced work passes the job timeout on purpose (the input's when the box ran at normal
 * speed), and the crashes above (the service's). Afterwards, read straight from the database, for the key:
 *   - no job is left CONVERTING; the balance is the sum of the ledger (no coin created);
 *   - a COMPLETED job has no refund; an ERROR job has exactly one refund row (refunded at most once), with its
 *     reason, of at most its coins, and the reason explains the amount (server/jobs/refund.ts):
 *       `canceled at P%` / `input failed C at P%`: at most floor(coins x (100 - P) / 100), P its progress, C one
 *       the policy charges to the input (FAILURE_CAUSE) and the job's error_code;
 *       `failed C`: all of its coins, C the job's error_code and not one charged to the input (but the timeout,
 *       which a slow box makes the service's);
 *   - every result a receiver got whole belongs to a COMPLETED job (no one holds a result and its coins);
 *   - coins charged (debits - refunds) >= the price of the work delivered (the COMPLETED jobs' coins).
 * The seed is printed (LUCENT_PROPERTY_SEED reruns one sequence).
 */
import t, { type Test } from 'tap'
import http from 'node:http'
import path from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { request } from 'undici'
import { modelDir, inputServer, png, addonBuilt, waitFor, tempDir } from '../helper.js'
import { lucentServer, createKeyCli, type LucentServer } from '../support/serve.js'
import { requireServices, isolatedDeployment, inCI } from '../scaleout/services.js'
import fs from 'node:fs'
import { execFileSync, spawnSync } from 'node:child_process'
import { FAILURE_CAUSE } from '../../server/jobs/refund.js'
import type { ErrorCode } from '../../server/errors.js'

const hasFfmpeg = spawnSync('ffmpeg', ['-version']).status === 0 && spawnSync('ffprobe', ['-version']).status === 0

/** The job timeout of the servers here: a slow photo (general_4x, 640 px: ~50 s on one CPU thread) passes it on purpose. */
const TIMEOUT_MS = '10000'

/** A 48 x 48 MJPEG video of 24 frames whose last 3 frames do not decode (-xerror): the job fails late, 100400002. */
async function brokenVideo(t: { teardown(fn: () => unknown): void }): Promise<Buffer | null> {
  if (!hasFfmpeg) return null
  const dir = await tempDir(t, 'lucent-money-video-')
  const src = path.join(dir, 'src.mkv')
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc=size=48x48:rate=10', '-frames:v', '24', '-c:v', 'mjpeg', '-q:v', '3', src])
  const d = fs.readFileSync(src)
  const soi = Buffer.from([0xff, 0xd8, 0xff])
  const at: number[] = []
  for (let i = d.indexOf(soi); i >= 0; i = d.indexOf(soi, i + 1)) at.push(i)
  for (const s of at.slice(-3)) for (let i = s + 2; i < s + 200; i++) d[i] = i % 2 ? 0xff : 0xd9
  return d
}

interface T { teardown(fn: () => unknown): void }

function prng(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

type Mode = 'ok' | 'fail' | 'hold' | 'tarpit'

/** Receives PUTs at /put/MODE/TOKEN: ok 200; fail 500; hold 0.2-1.5 s then 200; tarpit never answers. Records
 *  the tokens whose body arrived whole. */
async function receivers(t: T) {
  const got = new Set<string>()
  const server = http.createServer((req, res) => {
    const [, , mode, token] = (req.url ?? '').split('?')[0].split('/')
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      if (body.length > 8 && body.subarray(1, 4).toString('latin1') === 'PNG') got.add(token)
      if (mode === 'ok') res.writeHead(200).end()
      else if (mode === 'fail') res.writeHead(500).end()
      else if (mode === 'hold') setTimeout(() => res.writeHead(200).end(), 200 + Math.random() * 1300)
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }))
  const port = (server.address() as { port: number }).port
  return { got, url: (mode: Mode, token: string) => `http://127.0.0.1:${port}/put/${mode}/${token}?X-Amz-Signature=x` }
}

interface Row { id: string; status: string; coins: number; progress: number; error_code: number | null }
interface LedgerRow { job_id: string | null; kind: string; delta: number; reason: string | null }
interface Db { key(): Promise<{ coins: number; id: string }>; jobs(): Promise<Row[]>; ledger(): Promise<LedgerRow[]> }

interface Deployment {
  /** Where the API is. */
  api(): string
  /** SIGKILLs the process that runs jobs. */
  kill(): Promise<void>
  /** Starts it again (recovery). */
  restart(): Promise<void>
  running(): boolean
  key: string
  db: Db
}

async function api(base: string, key: string, route: string, body: unknown) {
  const r = await request(`${base}${route}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: r.statusCode, json: (await r.body.json()) as { code: number; data: { job_id: string; status: string; consume_coins: number } } }
}

async function exercise(t: Test, dep: Deployment, seed: number, steps: number, kills: number) {
  t.comment(`seed ${seed}`)
  const rnd = prng(seed)
  const pick = <X>(xs: X[]) => xs[Math.floor(rnd() * xs.length)]!
  const inputs = await inputServer(t)
  const video = await brokenVideo(t)
  const rx = await receivers(t)
  const jobs: Array<{ id: string; token: string | null; what: string }> = []
  let killsLeft = kills
  for (let step = 0; step < steps; step++) {
    const r = rnd()
    if (!dep.running()) {
      if (r < 0.3) await dep.restart()
    } else if (r < 0.55) {
      const size = 16 + Math.floor(rnd() * 24)
      const token = rnd() < 0.6 ? `t${step}` : null
      const kind = rnd()
      let route = '/api/photo-enhancer'
      let what = 'photo'
      let body: Record<string, unknown> = { model_name: 'general_2x', img_url: inputs.put(`s${step}.png`, png(size, size)), extension: '.png' }
      if (kind < 0.15 && video) {
        // input-caused, late: broken at its last frames
        route = '/api/video-enhancer'
        what = 'broken video'
        body = { video_url: inputs.put(`v${step}.mkv`, video), model_name: 'general_restore_1x', resolution: [48, 48] }
      } else if (kind < 0.27) {
        // input-caused on purpose: priced work longer than the job timeout
        body = { model_name: 'general_4x', img_url: inputs.put(`slow${step}.png`, png(640, 640)), extension: '.png' }
        what = 'slow photo'
      }
      if (token) body.output_put_url = rx.url(pick<Mode>(['ok', 'fail', 'hold', 'tarpit']), token)
      const a = await api(dep.api(), dep.key, route, body)
      if (a.status === 200) jobs.push({ id: a.json.data.job_id, token, what })
      else t.fail(`submission refused: ${a.status} ${JSON.stringify(a.json)}`)
    } else if (r < 0.8 && jobs.length) {
      const c = await api(dep.api(), dep.key, '/api/task-cancel', { job_id: pick(jobs).id })
      if (c.status !== 200 && c.status !== 409) t.fail(`cancel: ${c.status} ${JSON.stringify(c.json)}`)
    } else if (r < 0.86 && killsLeft > 0) {
      killsLeft--
      await dep.kill()
    } else {
      await new Promise((res) => setTimeout(res, rnd() * 400))
    }
  }
  if (!dep.running()) await dep.restart()
  // every job ends (a tarpit delivery at its deadline; a killed run by recovery)
  await waitFor(async () => (await dep.db.jobs()).every((j) => j.status !== 'CONVERTING'), 240_000, 250)

  const [key, rows, ledger] = [await dep.db.key(), await dep.db.jobs(), await dep.db.ledger()]
  t.equal(rows.length, jobs.length, `${jobs.length} jobs`)
  t.equal(ledger.reduce((s, e) => s + Number(e.delta), 0), key.coins, 'balance = sum of the ledger')
  const byJob = new Map<string, LedgerRow[]>()
  for (const e of ledger) if (e.job_id) byJob.set(e.job_id, [...(byJob.get(e.job_id) ?? []), e])
  let charged = 0
  let delivered = 0
  const bad: string[] = []
  const causes = new Map<string, number>()
  for (const j of rows) {
    const es = byJob.get(j.id) ?? []
    const refunds = es.filter((e) => e.kind === 'refund')
    const debit = es.find((e) => e.kind === 'debit')
    if (!debit || Number(debit.delta) !== -Number(j.coins)) bad.push(`${j.id}: no debit of its coins`)
    charged += -Number(debit?.delta ?? 0) - refunds.reduce((s, e) => s + Number(e.delta), 0)
    if (j.status === 'COMPLETED') {
      delivered += Number(j.coins)
      if (refunds.length) bad.push(`${j.id}: COMPLETED and refunded`)
    } else {
      if (refunds.length !== 1) bad.push(`${j.id}: ${refunds.length} refund rows`)
      for (const e of refunds) {
        if (!e.reason) bad.push(`${j.id}: a refund without its reason`)
        if (Number(e.delta) < 0 || Number(e.delta) > Number(j.coins)) bad.push(`${j.id}: refund ${e.delta} of ${j.coins}`)
        const why = explain(j, e)
        if (why) bad.push(`${j.id}: ${e.reason} gave ${e.delta} of ${j.coins} (error ${j.error_code}, progress ${j.progress}): ${why}`)
        causes.set(e.reason!.replace(/\d+%$/, 'P%'), (causes.get(e.reason!.replace(/\d+%$/, 'P%')) ?? 0) + 1)
      }
    }
  }
  for (const j of jobs) {
    if (j.token && rx.got.has(j.token) && rows.find((r) => r.id === j.id)?.status !== 'COMPLETED') bad.push(`${j.id}: its result was delivered but it did not complete`)
  }
  t.same(bad, [], 'every job paid for what it delivered')
  t.ok(charged >= delivered, `charged ${charged} >= delivered work ${delivered}`)
  const ended = rows.filter((r) => r.status === 'ERROR').length
  t.comment(`${rows.length} jobs: ${rows.length - ended} completed, ${ended} ended without a result; ${rx.got.size} results received; charged ${charged}, delivered ${delivered}`)
  const outcomes = new Map<string, number>()
  for (const j of jobs) {
    const r = rows.find((x) => x.id === j.id)
    const k = `${j.what} ${r?.status}${r?.error_code ? ` ${r.error_code}` : ''}`
    outcomes.set(k, (outcomes.get(k) ?? 0) + 1)
  }
  t.comment(`outcomes: ${[...outcomes].map(([k, n]) => `${k} x${n}`).join(', ')}`)
  t.comment(`refund reasons: ${[...causes].map(([k, n]) => `${k} x${n}`).join(', ')}`)
}

/** Why a refund row does not follow the money policy (null when it does). */
function explain(j: Row, e: LedgerRow): string | null {
  const coins = Number(j.coins)
  const delta = Number(e.delta)
  const reason = e.reason ?? ''
  const share = (p: number) => Math.floor((coins * (100 - p)) / 100)
  if (reason === 'canceled while waiting') return delta === coins ? null : 'not all back'
  let m = /^canceled at (\d+)%/.exec(reason)
  if (m) return delta <= share(Number(m[1])) ? null : 'more than the unprocessed share'
  m = /^input failed (\d+) at (\d+)%$/.exec(reason)
  if (m) {
    const code = Number(m[1])
    if (FAILURE_CAUSE[code as ErrorCode] !== 'input') return 'a code the policy does not charge to the input'
    if (code !== Number(j.error_code)) return 'not the job\'s error_code'
    if (Number(m[2]) !== Number(j.progress)) return 'not the job\'s progress'
    return delta === share(Number(m[2])) ? null : 'not the unprocessed share'
  }
  m = /^failed (\d+)$/.exec(reason)
  if (m) {
    const code = Number(m[1])
    if (code !== Number(j.error_code)) return 'not the job\'s error_code'
    if (FAILURE_CAUSE[code as ErrorCode] === 'input' && code !== 100500007) return 'an input-caused code refunded in full'
    return delta === coins ? null : 'a service failure not refunded in full'
  }
  return 'an unknown reason'
}

const seeds = process.env.LUCENT_PROPERTY_SEED ? [Number(process.env.LUCENT_PROPERTY_SEED)] : [1, 2]

t.test('SQLite, one process (role all)', { skip: !addonBuilt && !inCI && 'addon not built' }, async (t) => {
  for (const seed of seeds) {
    await t.test(`seed ${seed}`, async (t) => {
      const dataDir = await tempDir(t, 'lucent-money-')
      const env = {
        ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn',
        LUCENT_WORKERS: '2', LUCENT_ENGINE_THREADS: '1', LUCENT_BACKEND: 'cpu', LUCENT_OUTPUT_PUT_DEADLINE_MS: '2500', LUCENT_JOB_TIMEOUT_MS: TIMEOUT_MS,
        LUCENT_OUTPUT_PUT_BACKOFF_MS: '100', LUCENT_OUTPUT_PUT_TIMEOUT_MS: '60000',
      }
      delete (env as Record<string, unknown>).LUCENT_REDIS_URL
      delete (env as Record<string, unknown>).LUCENT_DATABASE_URL
      const { key } = createKeyCli(env, '--coins', '100000', '--rate', '1000')
      const srv: LucentServer = lucentServer(t, { env, label: 'lucent (sqlite)' })
      await srv.start()
      const db = new Database(path.join(dataDir, 'lucent.db'), { readonly: true, fileMustExist: true })
      t.teardown(() => db.close())
      const keyId = (db.prepare('SELECT id FROM keys').get() as { id: string }).id
      await exercise(t, {
        api: () => srv.base,
        kill: async () => { await srv.kill('SIGKILL') },
        restart: () => srv.start(),
        running: () => srv.running(),
        key,
        db: {
          key: async () => db.prepare('SELECT id, coins FROM keys WHERE id = ?').get(keyId) as { id: string; coins: number },
          jobs: async () => db.prepare('SELECT id, status, coins, progress, error_code FROM jobs WHERE key_id = ?').all(keyId) as Row[],
          ledger: async () => db.prepare('SELECT job_id, kind, delta, reason FROM ledger WHERE key_id = ? ORDER BY id').all(keyId) as LedgerRow[],
        },
      }, seed, 40, 2)
    })
  }
})

t.test('PostgreSQL + Redis + S3: a gateway and a worker', async (t) => {
  if (!addonBuilt) {
    if (inCI) throw new Error('native/node is not built (npm run build:native)')
    return t.plan(0, 'native addon not built')
  }
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const dep = await isolatedDeployment(t, svc, modelDir)
  const extra = { LUCENT_OUTPUT_PUT_DEADLINE_MS: '2500', LUCENT_OUTPUT_PUT_BACKOFF_MS: '100', LUCENT_OUTPUT_PUT_TIMEOUT_MS: '60000', LUCENT_JOB_TIMEOUT_MS: TIMEOUT_MS }
  const worker = await dep.serve('worker', extra)
  const gateway = await dep.serve('gateway', extra)
  const { key } = createKeyCli({ ...dep.env, DATA_DIR: '/nonexistent-not-used' }, '--coins', '100000', '--rate', '1000')
  const client = new pg.Client({ connectionString: dep.databaseUrl })
  await client.connect()
  t.teardown(() => client.end())
  const keyId = (await client.query<{ id: string }>('SELECT id FROM keys')).rows[0]!.id
  await exercise(t, {
    api: () => gateway.base,
    kill: async () => { await worker.kill('SIGKILL') },
    restart: () => worker.start(),
    running: () => worker.running(),
    key,
    db: {
      key: async () => (await client.query<{ id: string; coins: string }>('SELECT id, coins FROM keys WHERE id = $1', [keyId])).rows.map((r) => ({ id: r.id, coins: Number(r.coins) }))[0]!,
      jobs: async () => (await client.query<Row>('SELECT id, status, coins, progress, error_code FROM jobs WHERE key_id = $1', [keyId])).rows,
      ledger: async () => (await client.query<LedgerRow>('SELECT job_id, kind, delta, reason FROM ledger WHERE key_id = $1 ORDER BY id', [keyId])).rows,
    },
  }, seeds[0]! + 100, 30, 1)
})
