/**
 * Fair share between API keys over the shared queue (issue 29, hole 9), end to end on real servers
 * (scripts/services.sh: Redis, PostgreSQL, S3): one gateway and one worker (`lucent serve --role ...`, one job at a
 * time) over BullMQ. Key A submits 24 photo jobs, then key B one: B's job runs after at most one or two of A's
 * that had not started (one, plus the one being handed to the worker as B is queued); on the old global FIFO it
 * ran after all of them. The figures (B's wait in jobs and seconds, with and without the flood) are printed.
 * The in-process queue's counterpart: test/queue/fairness.ts. Needs the native addon; in CI a missing service or
 * addon FAILS.
 */
import t from 'tap'
import { request } from 'undici'
import pg from 'pg'
import { modelDir, inputServer, png, waitFor } from '../helper.js'
import { createKeyCli } from '../support/serve.js'
import { processServices, isolatedDeployment } from './services.js'

const FLOOD = 24

t.test('BullMQ + PostgreSQL, one worker: a key\'s single job waits for at most ~1 of another key\'s 24', async (t) => {
  const svc = await processServices(t)
  if (!svc) return
  const dep = await isolatedDeployment(t, svc, modelDir)
  const cliEnv = { ...dep.env, DATA_DIR: '/nonexistent-not-used' }
  const [A, B, W] = [0, 1, 2].map(() => createKeyCli(cliEnv, '--coins', '100000', '--rate', '100000').key)
  const [, gateway] = await Promise.all([dep.serve('worker'), dep.serve('gateway')])
  await waitFor(async () => {
    const r = await request(`${gateway.base}/readyz`).catch(() => null)
    await r?.body.dump()
    // a gateway is ready with a live worker (the detailed answer is on the metrics listener only)
    return r?.statusCode === 200
  }, 60_000, 200)

  const db = new pg.Client({ connectionString: dep.databaseUrl })
  await db.connect()
  t.teardown(() => db.end())
  const srv = await inputServer(t)
  const url = srv.put('in.png', png(64, 64), 'image/png')
  const submit = async (key: string) => {
    const r = await request(`${gateway.base}/api/photo-enhancer`, {
      method: 'POST', headers: { apikey: key, 'content-type': 'application/json' },
      body: JSON.stringify({ model_name: 'general_2x', img_url: url, extension: '.png' }),
    })
    const body = await r.body.json() as any
    if (r.statusCode !== 200) throw new Error(`submit: ${r.statusCode} ${JSON.stringify(body)}`)
    return body.data.job_id as string
  }
  const row = async (id: string) => (await db.query('SELECT status, attempts, completed_at FROM jobs WHERE id = $1', [id])).rows[0]
  const completed = async (id: string) => (await row(id))?.status === 'COMPLETED'

  // warm-up (the worker loads the model), then B alone
  const warm = await submit(W)
  await waitFor(() => completed(warm), 120_000, 20)
  let t0 = Date.now()
  const alone = await submit(B)
  await waitFor(() => completed(alone), 60_000, 10)
  const aloneSeconds = (Date.now() - t0) / 1000

  // the flood: A's 24 (as fast as the gateway takes them), then B's one
  const aIds: string[] = []
  for (let i = 0; i < FLOOD; i += 8) aIds.push(...await Promise.all(Array.from({ length: Math.min(8, FLOOD - i) }, () => submit(A))))
  const notStarted = (await db.query('SELECT id FROM jobs WHERE id = ANY($1) AND attempts = 0', [aIds])).rows.map((r) => r.id as string)
  t0 = Date.now()
  const bId = await submit(B)
  await waitFor(() => completed(bId), 120_000, 10)
  const bSeconds = (Date.now() - t0) / 1000
  await waitFor(async () => (await db.query("SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'", [aIds])).rows[0].n === FLOOD, 300_000, 20)
  const aSeconds = (Date.now() - t0) / 1000
  // one worker, one job at a time: completion order = start order
  const bDone = Number((await row(bId)).completed_at)
  const aBeforeB = (await db.query('SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1) AND completed_at < $2', [notStarted, bDone])).rows[0].n as number
  t.comment(`fairness figure (BullMQ + PostgreSQL, 1 worker, general_2x 64x64): B alone waits ${aloneSeconds.toFixed(2)} s; ` +
    `after A's ${FLOOD} jobs (${notStarted.length} not started yet), B waits ${aBeforeB} of them, ${bSeconds.toFixed(2)} s ` +
    `(A's last job done ${aSeconds.toFixed(2)} s after B's submission: what B waited on the global FIFO)`)
  t.ok(notStarted.length >= 10, `A had ${notStarted.length} jobs waiting when B submitted (a real flood)`)
  t.ok(aBeforeB <= 2, `B's job ran after ${aBeforeB} of A's waiting jobs (one, plus the one being handed over as B was queued)`)
  // the fair-share bookkeeping is empty once everything ran (nothing counted twice, nothing left behind)
  const fair = await dep.redis.hgetall('lucent:jobs:fair')
  t.same(Object.keys(fair).filter((k) => k.startsWith('n:')), [], 'no key counted as waiting')
  t.equal(await dep.redis.hlen('lucent:jobs:fair:jobs'), 0)
})
