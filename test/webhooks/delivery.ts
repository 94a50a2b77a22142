/**
 * Webhooks end to end on the embedded default (SQLite, in-process queue, real engine): signed deliveries checked
 * by a real receiver with the `standardwebhooks` package; 500 retried with the same webhook-id; 410 stops; a
 * private callback_url refused at submission without a debit; a hanging receiver delays neither jobs nor another
 * key's deliveries; replay; the key's default URL; the deliveries listing and /docs.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, createKey, post, png, pngHeader, inputServer, waitFor, balance, addonBuilt } from '../helper.js'
import { newWebhookSecret, signature } from '../../server/webhooks/signing.js'
import { backoffMs, eventOf } from '../../server/webhooks/deliver.js'
import { receiver } from '../support/webhook-receiver.js'
import { Webhook } from 'standardwebhooks'

const FAST = { LUCENT_WEBHOOK_BACKOFF_MS: '100', LUCENT_WEBHOOK_BACKOFF_MAX_MS: '400', LUCENT_WEBHOOK_POLL_MS: '50', LUCENT_WEBHOOK_TIMEOUT_MS: '3000' }

async function hookKey(app: FastifyInstance, url: string | null = null) {
  const k = await createKey(app, { coins: 10_000, rate: 100_000 })
  const secret = newWebhookSecret()
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret, url })
  return { ...k, secret }
}

const status = async (app: FastifyInstance, key: string, jobId: string) => (await post(app, '/api/task-status', key, { job_id: jobId })).json().data

t.test('signing matches the standardwebhooks package; backoff grows with jitter inside its bounds', async (t) => {
  const secret = newWebhookSecret()
  t.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/)
  const ts = Math.floor(Date.now() / 1000)
  const body = '{"type":"job.completed"}'
  const sig = signature(secret, 'msg_1', ts, body)
  t.match(sig, /^v1,[A-Za-z0-9+/]+=*$/)
  t.same(new Webhook(secret).verify(body, { 'webhook-id': 'msg_1', 'webhook-timestamp': String(ts), 'webhook-signature': sig }), JSON.parse(body))
  t.throws(() => new Webhook(newWebhookSecret()).verify(body, { 'webhook-id': 'msg_1', 'webhook-timestamp': String(ts), 'webhook-signature': sig }), 'another secret fails')
  t.throws(() => new Webhook(secret).verify(body + ' ', { 'webhook-id': 'msg_1', 'webhook-timestamp': String(ts), 'webhook-signature': sig }), 'another body fails')
  t.equal(backoffMs(1, 5000, 3600_000, () => 0), 2500)
  t.equal(backoffMs(1, 5000, 3600_000, () => 1), 5000)
  t.equal(backoffMs(4, 5000, 3600_000, () => 1), 40_000)
  t.equal(backoffMs(40, 5000, 3600_000, () => 1), 3600_000, 'capped')
  const spread = new Set(Array.from({ length: 20 }, () => backoffMs(3, 5000, 3600_000)))
  t.ok(spread.size > 1, 'jittered')
  for (const v of spread) t.ok(v >= 10_000 && v <= 20_000)
})

t.test('submission: callback checks, no debit when refused, answers unchanged', async (t) => {
  const app = await build(t, FAST)
  const srv = await inputServer(t)
  const img = srv.put('a.png', png(16, 16))
  const k = await hookKey(app)
  const before = await balance(app, k.id)
  const sub = (extra: object) => post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: img, extension: '.png', ...extra })
  for (const [url, code] of [
    ['http://10.1.2.3/hook', 110400021], ['http://localhost:9/hook', 110400021], ['http://[::1]:9/hook', 110400021], ['http://169.254.169.254/latest', 110400021],
    ['ftp://example.com/hook', 110400020], ['not a url', 110400020], ['http://user:pw@example.com/', 110400020],
  ] as const) {
    const r = await sub({ callback_url: url })
    t.equal(r.statusCode, 400, url)
    t.equal(r.json().error_code, code, url)
    t.equal(r.json().code, code)
  }
  const badEvent = await sub({ callback_url: 'http://127.0.0.1:9/h', callback_events: ['job.done'] })
  t.equal(badEvent.json().error_code, 100403000, 'unknown event: invalid parameters')
  const noSecret = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/photo-enhancer', noSecret.key, { model_name: 'general_2x', img_url: img, extension: '.png', callback_url: 'http://127.0.0.1:9/h' })
  t.equal(r.json().error_code, 110400022, 'a key without a secret cannot ask for callbacks')
  const { VIDEO_MODEL_NAMES } = await import('../../server/catalog.js')
  const video = await post(app, '/api/video-enhancer', k.key, { video_url: `${srv.base}/mem/none.mp4`, model_name: VIDEO_MODEL_NAMES[0], resolution: [320, 240], callback_url: 'http://192.168.1.1/hook' })
  t.equal(video.json().error_code, 110400021, 'video submissions too')
  t.equal(await balance(app, k.id), before, 'nothing debited')
  t.equal(await balance(app, noSecret.id), 100)
  // without a callback, the answer is exactly the original one
  const plain = await sub({})
  t.same(Object.keys(plain.json().data).sort(), ['consume_coins', 'job_id'])
  const withHook = await sub({ callback_url: 'http://127.0.0.1:9/h' })
  t.same(Object.keys(withHook.json().data).sort(), ['consume_coins', 'job_id'])
  // the OpenAPI document lists the new routes and fields
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.ok(doc.paths['/api/webhooks/deliveries']?.get)
  t.ok(doc.paths['/api/webhooks/deliveries/{id}/replay']?.post)
  t.ok(doc.paths['/api/photo-enhancer'].post.requestBody.content['application/json'].schema.properties.callback_url)
  t.ok(doc.paths['/api/video-enhancer'].post.requestBody.content['application/json'].schema.properties.callback_events)
})

t.test('delivered, signed, the task-status payload; failed jobs; 500 retried; 410 stops; replay; default URL', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, FAST)
  const srv = await inputServer(t)
  const secrets = new Map<string, string>()
  const rx = await receiver(t, (p) => secrets.get(p.split('/')[1]))
  const a = await hookKey(app)
  const b = await hookKey(app, `${rx.base}/b/default`)
  secrets.set('a', a.secret)
  secrets.set('b', b.secret)
  const submit = async (key: string, extra: object, image = png(16, 16)) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put(`${Math.random()}.png`, image), extension: '.png', ...extra })
    t.equal(r.statusCode, 200, r.body)
    return r.json().data.job_id as string
  }
  const ok = await submit(a.key, { callback_url: rx.url('/a/ok') })
  const retried = await submit(a.key, { callback_url: rx.url('/a/flaky', [500, 503, 200]) })
  const gone = await submit(a.key, { callback_url: rx.url('/a/gone', [410]) })
  const failed = await submit(a.key, { callback_url: rx.url('/a/failed') }, pngHeader(16, 16)) // no image data: the engine fails it
  const onlyFailed = await submit(a.key, { callback_url: rx.url('/a/only-failed'), callback_events: ['job.failed'] })
  const byDefault = await submit(b.key, {})

  await waitFor(async () => rx.on('/a/ok').length >= 1 && rx.on('/a/flaky').length >= 3 && rx.on('/a/gone').length >= 1 && rx.on('/a/failed').length >= 1 && rx.on('/b/default').length >= 1, 60_000)
  const [d] = rx.on('/a/ok')
  t.ok(d.verified, 'signature verified by standardwebhooks')
  t.equal(d.id, `msg_${ok}_end`)
  t.equal(d.body.type, 'job.completed')
  const st = await status(app, a.key, ok)
  t.same(d.body.data, st, 'payload = the task-status answer')
  t.equal(st.status, 'COMPLETED')
  t.ok(Math.abs(d.timestamp * 1000 - Date.parse(d.body.timestamp)) < 2000)

  const flaky = rx.on('/a/flaky')
  t.equal(flaky.length, 3, '500, 503, then 200')
  t.same(new Set(flaky.map((x) => x.id)), new Set([`msg_${retried}_end`]), 'the same webhook-id on every attempt')
  t.ok(flaky.every((x) => x.verified))
  t.ok(flaky[1].at - flaky[0].at >= 40, 'backed off')

  const f = rx.on('/a/failed')[0]
  t.equal(f.body.type, 'job.failed')
  t.equal(f.body.data.status, 'ERROR')
  t.equal(f.body.data.job_id, failed)
  t.ok(f.verified)
  t.equal(rx.on('/b/default')[0].body.data.job_id, byDefault, "the key's default URL")
  t.ok(rx.on('/b/default')[0].verified, "signed with b's secret")

  await new Promise((r) => setTimeout(r, 1500))
  t.equal(rx.on('/a/gone').length, 1, '410: no more attempts')
  t.equal(rx.on('/a/only-failed').length, 0, 'a completed job is not sent to a job.failed-only subscription')
  t.equal((await status(app, a.key, onlyFailed)).status, 'COMPLETED')

  const list = async (key: string, q = '') => {
    const r = await app.inject({ method: 'GET', url: `/api/webhooks/deliveries${q}`, headers: { apikey: key } })
    t.equal(r.statusCode, 200)
    return r.json().data.deliveries as Array<Record<string, any>>
  }
  const all = await list(a.key)
  t.equal(all.length, 4, "a's four deliveries (none for the job.failed-only subscription)")
  t.notOk(all.some((x) => x.job_id === byDefault), "never another key's")
  const byJob = (id: string) => all.find((x) => x.job_id === id)!
  t.match(byJob(ok), { id: `msg_${ok}_end`, event: 'job.completed', status: 'delivered', attempts: 1, last_status: 200, next_attempt_at: null })
  t.match(byJob(retried), { status: 'delivered', attempts: 3, last_status: 200 })
  t.match(byJob(gone), { status: 'failed', attempts: 1, last_status: 410 })
  t.match(byJob(failed), { event: 'job.failed', status: 'delivered' })
  t.ok(Date.parse(byJob(ok).delivered_at) > 0)
  t.same((await list(a.key, `?job_id=${gone}`)).map((x) => x.job_id), [gone])
  t.same((await list(a.key, '?status=failed')).map((x) => x.job_id), [gone])

  // replay: the same id again; another key cannot
  const other = await app.inject({ method: 'POST', url: `/api/webhooks/deliveries/msg_${ok}_end/replay`, headers: { apikey: b.key } })
  t.equal(other.json().error_code, 110400023)
  const rp = await app.inject({ method: 'POST', url: `/api/webhooks/deliveries/msg_${ok}_end/replay`, headers: { apikey: a.key } })
  t.equal(rp.statusCode, 200)
  t.match(rp.json().data, { id: `msg_${ok}_end`, status: 'pending' })
  await waitFor(async () => rx.on('/a/ok').length >= 2, 10_000)
  t.equal(rx.on('/a/ok')[1].id, `msg_${ok}_end`)
  t.ok(rx.on('/a/ok')[1].verified)
  await waitFor(async () => (await list(a.key, `?job_id=${ok}`))[0].status === 'delivered', 5000)
  t.equal((await list(a.key, `?job_id=${ok}`))[0].attempts, 2)
})

t.test('a hanging receiver delays neither jobs nor another key', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { ...FAST, LUCENT_WEBHOOK_TIMEOUT_MS: '20000', LUCENT_WEBHOOK_KEY_CONCURRENCY: '1', LUCENT_WEBHOOK_CONCURRENCY: '4' })
  const srv = await inputServer(t)
  const secrets = new Map<string, string>()
  const rx = await receiver(t, (p) => secrets.get(p.split('/')[1]))
  const slow = await hookKey(app)
  const fast = await hookKey(app)
  secrets.set('slow', slow.secret)
  secrets.set('fast', fast.secret)
  rx.url('/slow/hang', [0])
  const submit = async (key: string, url: string) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put(`${Math.random()}.png`, png(16, 16)), extension: '.png', callback_url: url })
    return r.json().data.job_id as string
  }
  const slowJobs = await Promise.all([1, 2, 3, 4].map(() => submit(slow.key, `${rx.base}/slow/hang`)))
  await waitFor(async () => rx.on('/slow/hang').length >= 1, 30_000)
  const t0 = Date.now()
  const fastJob = await submit(fast.key, `${rx.base}/fast/ok`)
  await waitFor(async () => rx.on('/fast/ok').length >= 1, 15_000)
  const took = Date.now() - t0
  t.ok(took < 10_000, `the other key's event arrived in ${took} ms while the slow receiver hangs (timeout 20 s)`)
  t.equal(rx.on('/fast/ok')[0].body.data.job_id, fastJob)
  // the slow key's jobs are not held by its hanging receiver (they may run after the other key's job: the queue
  // serves keys in turn, server/queue/memory.ts)
  for (const id of slowJobs) {
    await waitFor(async () => (await status(app, slow.key, id)).status !== 'CONVERTING', 30_000)
    t.equal((await status(app, slow.key, id)).status, 'COMPLETED', 'jobs of the slow key completed')
  }
  t.equal(rx.on('/slow/hang').length, 1, 'one POST in flight for the slow key (LUCENT_WEBHOOK_KEY_CONCURRENCY=1)')
})

t.test('job.progress when asked for: one event per further tenth, then the final event', async (t) => {
  const app = await build(t, FAST)
  app.lucent.queue.pause() // the test drives the job's run through the lifecycle itself
  const srv = await inputServer(t)
  const k = await hookKey(app)
  const rx = await receiver(t, () => k.secret)
  const r = await post(app, '/api/photo-enhancer', k.key, {
    model_name: 'general_2x', img_url: srv.put('p.png', png(16, 16)), extension: '.png', callback_url: rx.url('/p'), callback_events: ['job.progress', 'job.completed'],
  })
  const jobId = r.json().data.job_id
  const run = (await app.lucent.jobs.start(jobId))!
  t.ok(run)
  const step = async (pct: number) => {
    await run.progress(pct)
    await new Promise((res) => setTimeout(res, 250)) // progress is written at most every 200 ms
  }
  await step(5) // below a tenth: nothing
  await step(12)
  await step(18) // the same tenth: nothing more
  await step(47)
  await waitFor(async () => rx.on('/p').length >= 2, 10_000)
  await app.lucent.storage.put(`r/${jobId}.png`, png(32, 32), 'image/png')
  t.ok(await run.complete(`r/${jobId}.png`))
  await waitFor(async () => rx.on('/p').some((g) => g.body.type === 'job.completed'), 10_000)
  const got = rx.on('/p')
  t.same(got.map((g) => [g.id, g.body.type]), [[`msg_${jobId}_p1`, 'job.progress'], [`msg_${jobId}_p4`, 'job.progress'], [`msg_${jobId}_end`, 'job.completed']])
  t.ok(got.every((g) => g.verified))
  t.equal(got[0].body.data.status, 'CONVERTING')
  t.ok((got[0].body.data.progress as number) >= 12)
})

t.test('a final ERROR event is sent as job.canceled when the answer says canceled', async (t) => {
  t.equal(eventOf({ event: 'job.failed' }, { reason: 'canceled' } as never), 'job.canceled')
  t.equal(eventOf({ event: 'job.failed' }, {} as never), 'job.failed')
  t.equal(eventOf({ event: 'job.completed' }, { reason: 'canceled' } as never), 'job.completed')
})
