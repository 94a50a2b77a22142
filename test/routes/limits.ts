/** Rate limit (429 + Retry-After) and the queue bound (503 + Retry-After). */
import t from 'tap'
import { build, createKey, balance, post, png, inputServer } from '../helper.js'

t.test('token bucket per key: burst then 429 with Retry-After', async (t) => {
  const app = await build(t, { LUCENT_RATE_BURST: '3', LUCENT_RATE_PER_SEC: '0.5' })
  const a = await createKey(app)
  const b = await createKey(app)
  const codes = []
  for (let i = 0; i < 4; i++) codes.push((await post(app, '/api/task-status', a.key, { job_id: 'x' })).statusCode)
  t.same(codes, [400, 400, 400, 429])
  const r = await post(app, '/api/task-status', a.key, { job_id: 'x' })
  t.equal(r.statusCode, 429)
  t.same(r.json(), { error_code: 100429000, message: 'Too many requests, try again later', code: 100429000, msg: 'Too many requests, try again later' })
  t.equal(r.headers['retry-after'], '2')
  t.equal((await post(app, '/api/task-status', b.key, { job_id: 'x' })).statusCode, 400, 'other keys have their own bucket')
  // a per-key rate (lucent keys create --rate) overrides the default
  const fast = await createKey(app, { rate: 1000 })
  let limited = 0
  for (let i = 0; i < 50; i++) if ((await post(app, '/api/task-status', fast.key, { job_id: 'x' })).statusCode === 429) limited++
  t.equal(limited, 0)
})

t.test('queue at its bound: 503 + Retry-After, nothing charged', async (t) => {
  const app = await build(t, { LUCENT_QUEUE_MAX: '2', LUCENT_QUEUE_MAX_PER_KEY: '2' }) // one key may fill it here (the per-key share: test/queue/fairness.ts)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const url = srv.put('q.png', png(16, 16))
  const { key, id } = await createKey(app, { coins: 100 })
  const body = { model_name: 'general_2x', img_url: url, extension: '.png' }
  t.equal((await post(app, '/api/photo-enhancer', key, body)).statusCode, 200)
  t.equal((await post(app, '/api/photo-enhancer', key, body)).statusCode, 200)
  const r = await post(app, '/api/photo-enhancer', key, body)
  t.equal(r.statusCode, 503)
  t.equal(r.json().error_code, 100500007)
  t.equal(r.json().code, 100500007)
  t.ok(Number(r.headers['retry-after']) > 0)
  t.equal(await balance(app, id), 80)
  t.same(app.lucent.queue.stats(), { waiting: 2, running: 0, reserved: 0, max: 2 })
})
