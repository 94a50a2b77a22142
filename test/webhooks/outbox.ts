/**
 * The webhook outbox on SQLite and PostgreSQL: the final event enters it with the job's state change (trigger),
 * filtered by the subscription's events; claims from several store handles (processes, hosts) never overlap; a
 * lost lease is claimed again; settling needs the lease; replay; and, on PostgreSQL, a job through the whole app
 * to a real receiver (the scale-out services: scripts/services.sh; locally skipped when absent, CI fails).
 */
import t from 'tap'
import path from 'node:path'
import crypto from 'node:crypto'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import type { Store } from '../../server/store/types.js'
import { build, tempDir, createKey, post, png, inputServer, waitFor, addonBuilt } from '../helper.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'
import { newWebhookSecret } from '../../server/webhooks/signing.js'
import { receiver } from '../support/webhook-receiver.js'

interface Test { teardown(fn: () => unknown): void; plan(n: number, why?: string): void }

const backends: Array<{ name: string; open(t: Test): Promise<Store[] | null> }> = [
  {
    name: 'sqlite',
    async open(t) {
      const file = path.join(await tempDir(t), 'lucent.db')
      const stores = [new SqliteStore(file), new SqliteStore(file)]
      t.teardown(() => Promise.all(stores.map((s) => s.close())))
      return stores
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
      const url = await freshDatabase(t, env.LUCENT_DATABASE_URL)
      const stores = await Promise.all([PgStore.open(url, { max: 4 }), PgStore.open(url, { max: 4 })])
      t.teardown(() => Promise.all(stores.map((s) => s.close())))
      return stores
    },
  },
]

const rnd = () => crypto.randomBytes(5).toString('hex')

for (const b of backends) {
  t.test(`${b.name}: outbox`, async (t) => {
    const stores = await b.open(t)
    if (!stores) return
    const [s, s2] = stores
    const key = await s.createKey({ id: `k_${rnd()}`, hash: rnd().repeat(6), coins: 1000, trial: 0, expiresAt: null, rate: null })
    const job = async (events: Parameters<Store['webhooks']['subscribe']>[2]['events'] | null) => {
      const id = `j_${rnd()}`
      if (events) await s.webhooks.subscribe(id, key.id, { url: `http://example.com/${id}`, events })
      const r = await s.debitAndCreateJob({ id, keyId: key.id, kind: 'photo', model: 'general_2x', coins: 1, originalKey: 'o/x.png', params: {} })
      t.ok(r.ok)
      return id
    }
    const rows = async (jobId: string) => (await s.webhooks.list(key.id, { limit: 50, jobId }))

    // the trigger: final states only, filtered by the subscription
    const done = await job(['job.completed', 'job.failed'])
    await s.setProgress(done, 50)
    t.same(await rows(done), [], 'progress writes add nothing')
    t.ok(await s.completeJob(done, 'r/x.png'))
    t.match(await rows(done), [{ id: `msg_${done}_end`, event: 'job.completed', status: 'pending', attempts: 0, url: `http://example.com/${done}` }])
    t.notOk(await s.failJob(done, 100500000, 'late'), 'a second end is refused...')
    t.equal((await rows(done)).length, 1, '...and adds no event')
    const failed = await job(['job.canceled'])
    t.ok(await s.failJob(failed, 100500000, 'x'))
    t.match(await rows(failed), [{ event: 'job.failed', events: ['job.canceled'] }], 'an ERROR end is kept for a canceled-only subscription (resolved when sent)')
    const onlyFailed = await job(['job.failed'])
    await s.completeJob(onlyFailed, 'r/y.png')
    t.same(await rows(onlyFailed), [], 'not subscribed to job.completed')
    const none = await job(null)
    await s.completeJob(none, 'r/z.png')
    t.same(await rows(none), [], 'no subscription, no event')

    // claims from two handles never overlap; at most perKey of one key
    const ids: string[] = []
    for (let i = 0; i < 12; i++) {
      const j = await job(['job.completed'])
      await s.completeJob(j, 'r/q.png')
      ids.push(`msg_${j}_end`)
    }
    const now = Date.now() + 10
    const claim = (st: Store, owner: string, perKey = 100) => st.webhooks.claim({ owner, now, leaseMs: 60_000, limit: 5, perKey, excludeKeys: [] })
    const limited = await claim(s, 'p0', 2)
    t.equal(limited.length, 2, 'perKey bounds one key')
    for (const d of limited) await s.webhooks.release(d.id, 'p0')
    const got = (await Promise.all([claim(s, 'p1'), claim(s2, 'p2'), claim(s, 'p3'), claim(s2, 'p4')])).flat()
    const claimed = got.map((d) => d.id)
    t.equal(new Set(claimed).size, claimed.length, 'no delivery leased twice')
    t.equal(claimed.length, 14, 'all 14 due deliveries leased (12 + the two ends above)')
    t.same(await claim(s, 'p5'), [], 'nothing left while the leases hold')
    t.same(await s.webhooks.claim({ owner: 'p5', now, leaseMs: 1, limit: 50, perKey: 50, excludeKeys: [key.id] }), [], 'excluded key')

    // settling needs the lease; a lost lease is claimed again
    const first = got[0]
    t.notOk(await s.webhooks.settle(first.id, 'intruder', { status: 'delivered', event: first.event, lastStatus: 200, lastError: null, at: now, nextAt: null }))
    const later = await s2.webhooks.claim({ owner: 'p6', now: now + 61_000, leaseMs: 60_000, limit: 50, perKey: 50, excludeKeys: [] })
    t.equal(later.length, 14, 'expired leases are claimed again')
    t.ok(await s2.webhooks.settle(first.id, 'p6', { status: 'pending', event: first.event, lastStatus: 500, lastError: 'HTTP 500', at: now, nextAt: now + 5000 }))
    t.ok(await s2.webhooks.settle(later[1].id, 'p6', { status: 'delivered', event: later[1].event, lastStatus: 204, lastError: null, at: now, nextAt: null }))
    const d1 = (await s.webhooks.get(first.id))!
    t.match(d1, { status: 'pending', attempts: 1, lastStatus: 500, nextAt: now + 5000 })
    const d2 = (await s.webhooks.get(later[1].id))!
    t.match(d2, { status: 'delivered', attempts: 1, lastStatus: 204, deliveredAt: now, nextAt: null })
    t.notOk(await s2.webhooks.settle(later[1].id, 'p6', { status: 'failed', event: later[1].event, lastStatus: 500, lastError: null, at: now, nextAt: null }), 'settled once')

    // replay: due again, same id, attempts kept; only by its key
    t.equal(await s.webhooks.replay(later[1].id, 'k_other', now + 1), null)
    t.match(await s.webhooks.replay(later[1].id, key.id, now + 1), { id: later[1].id, status: 'pending', attempts: 1, nextAt: now + 1, retryFrom: now + 1 })

    // purge: finished deliveries and ended jobs' subscriptions before the horizon; pending ones stay
    t.ok(await s2.webhooks.settle(later[2].id, 'p6', { status: 'delivered', event: later[2].event, lastStatus: 200, lastError: null, at: now, nextAt: null }))
    t.equal((await s.webhooks.list(key.id, { limit: 50, status: 'delivered' })).length, 1)
    const pendingBefore = (await s.webhooks.list(key.id, { limit: 50, status: 'pending' })).length
    await s.webhooks.purge(now + 10)
    t.equal(await s.webhooks.get(later[2].id), null, 'a delivered one before the horizon goes')
    t.equal((await s.webhooks.get(later[1].id))?.status, 'pending', 'a replayed (pending) delivery stays')
    t.equal((await s.webhooks.list(key.id, { limit: 50, status: 'pending' })).length, pendingBefore)
    t.same(await s.webhooks.list(key.id, { limit: 50, status: 'delivered' }), [])
    const converting = await job(['job.completed'])
    await s.webhooks.purge(Date.now() + 10_000)
    t.ok(await s.webhooks.subscription(converting), "a converting job's subscription stays")
    t.equal(await s.webhooks.subscription(done), null, "an ended job's subscription goes")

    // unsubscribe removes a job's subscription and deliveries; key secrets
    await s.webhooks.unsubscribe(done)
    t.same(await rows(done), [])
    t.equal(await s.webhooks.subscription(done), null)
    t.same(await s.webhooks.keyWebhook(key.id), { url: null, secret: null })
    t.same(await s.webhooks.setKeyWebhook(key.id, { secret: 'whsec_AAAA' }), { url: null, secret: 'whsec_AAAA' })
    t.same(await s2.webhooks.setKeyWebhook(key.id, { url: 'https://example.com/h' }), { url: 'https://example.com/h', secret: 'whsec_AAAA' }, 'url set, secret kept')
    t.same(await s.webhooks.setKeyWebhook(key.id, { url: null }), { url: null, secret: 'whsec_AAAA' }, 'url cleared')
  })
}

t.test('postgres: a job through the app to a real receiver', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const env = await requireServices(t)
  if ('skip' in env) {
    t.plan(0, env.skip)
    return
  }
  const url = await freshDatabase(t, env.LUCENT_DATABASE_URL)
  const app = await build(t, { LUCENT_DATABASE_URL: url, LUCENT_WEBHOOK_POLL_MS: '50', LUCENT_WEBHOOK_BACKOFF_MS: '100' })
  const k = await createKey(app, { coins: 100, rate: 100_000 })
  const secret = newWebhookSecret()
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret, url: null })
  const rx = await receiver(t, () => secret)
  const srv = await inputServer(t)
  const r = await post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: srv.put('p.png', png(16, 16)), extension: '.png', callback_url: rx.url('/pg', [500, 200]) })
  t.equal(r.statusCode, 200)
  const jobId = r.json().data.job_id
  await waitFor(async () => rx.on('/pg').length >= 2, 60_000)
  const got = rx.on('/pg')
  t.same(got.map((g) => g.id), [`msg_${jobId}_end`, `msg_${jobId}_end`], '500 then 200, the same id')
  t.ok(got.every((g) => g.verified))
  t.equal(got[1].body.data.status, 'COMPLETED')
  const list = await waitFor(async () => {
    const l = (await app.inject({ method: 'GET', url: '/api/webhooks/deliveries', headers: { apikey: k.key } })).json().data.deliveries
    return l[0]?.status === 'delivered' && l
  }, 5000)
  t.match(list[0], { id: `msg_${jobId}_end`, attempts: 2, last_status: 200 })
})
