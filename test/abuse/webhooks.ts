/**
 * Webhook abuse and money items of issue 22, on SQLite and PostgreSQL (the scale-out services: scripts/services.sh;
 * skipped when absent, as test/webhooks/outbox.ts):
 * - replay is bounded (LUCENT_WEBHOOK_MAX_REPLAYS): no row is kept alive for ever by replaying it;
 * - a replay asked for while an attempt is in flight is not lost (sent again once that attempt is settled);
 * - a submission whose job_id the client never received (debited, then the queue refused it) sends no job.failed;
 * - the SQLite claim walks the (status, next_at) index: no sort of every due row under the write lock.
 */
import t from 'tap'
import http from 'node:http'
import path from 'node:path'
import crypto from 'node:crypto'
import { once } from 'node:events'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import type { Store } from '../../server/store/types.js'
import { build, tempDir, createKey, post, png, inputServer, waitFor, balance, addonBuilt } from '../helper.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'
import { newWebhookSecret } from '../../server/webhooks/signing.js'
import { receiver } from '../support/webhook-receiver.js'

interface Test { teardown(fn: () => unknown): void; plan(n: number, why?: string): void }

const backends: Array<{ name: string; open(t: Test): Promise<Store | null> }> = [
  {
    name: 'sqlite',
    async open(t) {
      const s = new SqliteStore(path.join(await tempDir(t), 'lucent.db'))
      t.teardown(() => s.close())
      return s
    },
  },
  {
    name: 'postgres',
    async open(t) {
      const env = await requireServices(t)
      if ('skip' in env) {
        t.plan(0, env.skip)
        return null
      }
      const s = await PgStore.open(await freshDatabase(t, env.LUCENT_DATABASE_URL), { max: 4 })
      t.teardown(() => s.close())
      return s
    },
  },
]

const rnd = () => crypto.randomBytes(5).toString('hex')

/** A job of `keyId` with a subscription, ended (ERROR): its final delivery id. */
async function endedJob(s: Store, keyId: string, o: { held?: boolean; url?: string } = {}) {
  const id = `j_${rnd()}`
  await s.webhooks.subscribe(id, keyId, { url: o.url ?? `http://example.com/${id}`, events: ['job.completed', 'job.failed'] }, { held: o.held })
  const r = await s.debitAndCreateJob({ id, keyId, kind: 'photo', model: 'general_2x', coins: 1, originalKey: 'o/x.png', params: {} })
  if (!r.ok) throw new Error('debit failed')
  await s.failJob(id, 100500000, 'test')
  return { jobId: id, delivery: `msg_${id}_end` }
}

for (const b of backends) {
  t.test(`${b.name}: replay is bounded; a replay during an attempt is kept`, async (t) => {
    const s = await b.open(t)
    if (!s) return
    const key = await s.createKey({ id: `k_${rnd()}`, hash: rnd().repeat(6), coins: 1000, trial: 0, expiresAt: null, rate: null })
    const w = s.webhooks
    const now = Date.now() + 10_000 // the store's clock: after every event made below
    const claim = (owner: string, at = now) => w.claim({ owner, now: at, leaseMs: 60_000, limit: 50, perKey: 50, excludeKeys: [] })
    const { delivery } = await endedJob(s, key.id)
    const [d] = await claim('p1')
    t.equal(d?.id, delivery)
    t.ok(await w.settle(delivery, 'p1', { status: 'delivered', event: 'job.failed', lastStatus: 200, lastError: null, at: now, nextAt: null }))

    // bounded: two replays allowed here, the third refused (the row is not re-opened, its window not restarted)
    t.match(await w.replay(delivery, key.id, now + 10, 2), { status: 'pending', retryFrom: now + 10, replays: 1 })
    const [again] = await claim('p2', now + 10)
    t.equal(again?.id, delivery)
    t.ok(await w.settle(delivery, 'p2', { status: 'delivered', event: 'job.failed', lastStatus: 200, lastError: null, at: now + 20, nextAt: null }))
    t.match(await w.replay(delivery, key.id, now + 30, 2), { status: 'pending', retryFrom: now + 30, replays: 2 })
    const third = await w.replay(delivery, key.id, now + 40, 2).then(() => 'replayed', (e: Error) => e.name)
    t.equal(third, 'ReplayLimitError', 'the third replay is refused')
    t.match(await w.get(delivery), { retryFrom: now + 30, replays: 2 }, 'refused: the window was not restarted')
    t.equal(await w.replay(delivery, 'k_other', now + 40, 2), null, "another key's: unknown")

    // a replay while an attempt is in flight: remembered, and the row is due again once the attempt settles
    const { delivery: d2 } = await endedJob(s, key.id)
    const leased = await claim('p3', now + 50)
    t.ok(leased.some((x) => x.id === d2))
    t.match(await w.replay(d2, key.id, now + 60), { id: d2, replays: 1 })
    t.same((await claim('p4', now + 61)).map((x) => x.id).filter((id) => id === d2), [], 'still leased: not claimed twice')
    t.ok(await w.settle(d2, 'p3', { status: 'delivered', event: 'job.failed', lastStatus: 200, lastError: null, at: now + 70, nextAt: null }))
    t.match(await w.get(d2), { status: 'pending', nextAt: now + 70, deliveredAt: now + 70, attempts: 1 }, 'the replay was not lost')
    const resent = await claim('p5', now + 80)
    t.ok(resent.some((x) => x.id === d2), 'claimed again for the replay')
    t.ok(await w.settle(d2, 'p5', { status: 'delivered', event: 'job.failed', lastStatus: 200, lastError: null, at: now + 90, nextAt: null }))
    t.match(await w.get(d2), { status: 'delivered', attempts: 2 })
  })

  t.test(`${b.name}: a held subscription's events are never sent until armed`, async (t) => {
    const s = await b.open(t)
    if (!s) return
    const key = await s.createKey({ id: `k_${rnd()}`, hash: rnd().repeat(6), coins: 1000, trial: 0, expiresAt: null, rate: null })
    const w = s.webhooks
    const claim = () => w.claim({ owner: 'p', now: Date.now() + 1000, leaseMs: 60_000, limit: 50, perKey: 50, excludeKeys: [] })
    const held = await endedJob(s, key.id, { held: true })
    t.same(await claim(), [], 'a held delivery is not claimed')
    t.same(await w.list(key.id, { limit: 50 }), [], 'nor listed')
    t.equal(await w.replay(held.delivery, key.id, Date.now()), null, 'nor replayed')
    await w.unsubscribe(held.jobId) // the submission did not go through
    t.equal(await w.get(held.delivery), null, 'dropped with the subscription')

    const armed = await endedJob(s, key.id, { held: true })
    await w.arm(armed.jobId)
    t.same((await claim()).map((d) => d.id), [armed.delivery], 'armed: sent')
  })
}

t.test('sqlite: the claim walks the (status, next_at) index without a sort', async (t) => {
  const s = new SqliteStore(path.join(await tempDir(t), 'lucent.db'))
  t.teardown(() => s.close())
  const due = (s.webhooks as unknown as { s: { due: { source: string } } }).s.due.source
  const args = (due.match(/\?/g) ?? []).map(() => 0)
  const plan = s.db.prepare(`EXPLAIN QUERY PLAN ${due}`).all(...args).map((r) => (r as { detail: string }).detail)
  t.notOk(plan.some((d) => /TEMP B-TREE/.test(d)), `no sort: ${plan.join(' | ')}`)
  t.ok(plan.some((d) => /USING INDEX webhook_deliveries_due/.test(d)), 'the due index')
  t.notOk(plan.some((d) => /^SCAN webhook_deliveries$/.test(d)), 'no full scan')
})

const FAST = { LUCENT_WEBHOOK_BACKOFF_MS: '100', LUCENT_WEBHOOK_BACKOFF_MAX_MS: '400', LUCENT_WEBHOOK_POLL_MS: '50', LUCENT_WEBHOOK_TIMEOUT_MS: '5000' }

t.test('no job.failed for a submission whose job_id the client never got (the queue refused it)', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, FAST)
  const srv = await inputServer(t)
  const k = await createKey(app, { coins: 1000 })
  const secret = newWebhookSecret()
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret })
  const rx = await receiver(t, () => secret)
  // the queue refuses (Redis or the cluster primary unreachable): debited, then ended and refunded at once
  const queue = app.lucent.queue as { enqueue: (...a: unknown[]) => Promise<unknown> }
  const enqueue = queue.enqueue
  queue.enqueue = async () => { throw new Error('queue unreachable') }
  t.teardown(() => { queue.enqueue = enqueue })
  for (let i = 0; i < 3; i++) {
    const r = await post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: srv.put(`${i}.png`, png(8, 8)), extension: '.png', callback_url: rx.url(`/lost/${i}`) })
    t.equal(r.json().error_code, 100500000, 'the submission failed: no job_id')
  }
  await new Promise((r) => setTimeout(r, 1500)) // many polls of the delivery loop
  t.same(rx.got.map((g) => `${g.path} ${g.body.type}`), [], 'no webhook for jobs the client never heard of')
  t.same((await app.inject({ method: 'GET', url: '/api/webhooks/deliveries', headers: { apikey: k.key } })).json().data.deliveries, [])
  t.equal(await balance(app, k.id), 1000, 'refunded')

  // the same submission once the queue works: its webhook comes
  queue.enqueue = enqueue
  const ok = await post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: srv.put('ok.png', png(16, 16)), extension: '.png', callback_url: rx.url('/ok') })
  t.equal(ok.statusCode, 200, ok.body)
  await waitFor(async () => rx.on('/ok').length > 0, 60_000)
  // (job.completed with the models in place; the point is that an answered submission's webhook is sent)
  t.match(rx.on('/ok')[0].body.type, /^job\.(completed|failed)$/)
  t.equal(rx.on('/ok')[0].body.data.job_id, ok.json().data.job_id)
})

t.test('the API: replay limit (429, 100429000); a replay during an attempt is sent after it', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { ...FAST, LUCENT_WEBHOOK_MAX_REPLAYS: '2' })
  const k = await createKey(app, { coins: 1000 })
  const secret = newWebhookSecret()
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret })
  // a receiver that takes 800 ms to say 200
  const got: string[] = []
  const slow = http.createServer((req, res) => {
    got.push(String(req.headers['webhook-id']))
    req.resume()
    setTimeout(() => res.writeHead(200).end('ok'), 800)
  })
  slow.listen(0, '127.0.0.1')
  await once(slow, 'listening')
  t.teardown(() => { slow.closeAllConnections(); slow.close() })
  const url = `http://127.0.0.1:${(slow.address() as { port: number }).port}/h`
  const replay = (id: string) => app.inject({ method: 'POST', url: `/api/webhooks/deliveries/${id}/replay`, headers: { apikey: k.key } })
  const row = (id: string) => app.lucent.store.webhooks.get(id)

  const { delivery } = await endedJob(app.lucent.store, k.id, { url })
  await waitFor(async () => got.length === 1, 10_000, 10) // the first attempt is in flight now
  t.equal((await replay(delivery)).statusCode, 200, 'replay during the attempt')
  await waitFor(async () => (await row(delivery))?.status === 'delivered' && got.length === 2 ? true : null, 10_000)
  t.same(got, [delivery, delivery], 'sent again after the attempt it arrived during')
  t.match(await row(delivery), { status: 'delivered', attempts: 2, replays: 1 })

  t.equal((await replay(delivery)).statusCode, 200, 'second replay')
  const over = await replay(delivery)
  t.equal(over.statusCode, 429)
  t.equal(over.json().error_code, 100429000, 'the third: over LUCENT_WEBHOOK_MAX_REPLAYS')

  // a stored URL on a refused port (e.g. a key's default URL set before the port rule): failed at once, never retried
  const refused = await endedJob(app.lucent.store, k.id, { url: 'http://93.184.215.14:6379/h' })
  const d = await waitFor(async () => { const x = await row(refused.delivery); return x?.status !== 'pending' && x }, 10_000)
  t.match(d, { status: 'failed', attempts: 1, lastError: /^blocked_port/ })
})
