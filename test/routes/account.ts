/** Extension: GET /api/account (balance, trial, rate limit, recent ledger rows), and both it and /api/models in /docs. */
import t from 'tap'
import { build, createKey, post, png, inputServer } from '../helper.js'

t.test('GET /api/account: balance, trial, rate, ledger newest first', async (t) => {
  const app = await build(t, { LUCENT_RATE_BURST: '50', LUCENT_RATE_PER_SEC: '7' })
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const get = (key: string | null, query = '') => app.inject({ method: 'GET', url: `/api/account${query}`, headers: key ? { apikey: key } : {} })

  t.equal((await get(null)).json().error_code, 110400000, 'a key is needed')
  t.equal((await get('nope')).json().error_code, 110400000)

  const { key, id } = await createKey(app, { coins: 500 })
  const a = await get(key)
  t.equal(a.statusCode, 200)
  const d = a.json().data
  t.match(a.json(), { code: 200, message: 'OK' })
  t.match(d, { key_id: id, balance: 500, trial: { total: 0, left: 0 }, rate_limit: { per_second: 7, burst: 50 }, expires_at: null })
  t.ok(Date.parse(d.created_at) > 0)
  t.match(d.ledger, [{ kind: 'grant', delta: 500, balance_after: 500, job_id: null }])

  // Two jobs and a top-up: the newest rows first, the balance as of now.
  const img = srv.put('a.png', png(16, 16))
  const j1 = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).json().data
  const j2 = (await post(app, '/api/photo-enhancer', key, { model_name: 'generative_1x', img_url: img, extension: '.png' })).json().data
  await app.lucent.store.topup(id, 25)
  const b = (await get(key)).json().data
  t.equal(b.balance, 500 - j1.consume_coins - j2.consume_coins + 25)
  t.same(b.ledger.map((r: { kind: string }) => r.kind), ['topup', 'debit', 'debit', 'grant'])
  t.same(b.ledger.map((r: { job_id: string | null }) => r.job_id), [null, j2.job_id, j1.job_id, null])
  t.equal(b.ledger[1].delta, -j2.consume_coins)
  t.equal(b.ledger[0].balance_after, b.balance)
  t.same((await get(key, '?ledger=2')).json().data.ledger.map((r: { kind: string }) => r.kind), ['topup', 'debit'])
  t.same((await get(key, '?ledger=0')).json().data.ledger, [])
  t.equal((await get(key, '?ledger=999')).json().error_code, 100403000, 'over the maximum')

  // A trial key with its own rate.
  const trial = await createKey(app, { coins: 0, trial: 3, rate: 2.5 })
  await post(app, '/api/photo-enhancer', trial.key, { model_name: 'general_2x', img_url: img, extension: '.png' })
  t.match((await get(trial.key)).json().data, { balance: 0, trial: { total: 3, left: 2 }, rate_limit: { per_second: 2.5, burst: 50 } })
  // Another key sees only its own account.
  t.notMatch((await get(trial.key)).json().data.ledger, [{ job_id: j1.job_id }])
})

t.test('/docs lists the account and models routes and the new submission fields', async (t) => {
  const app = await build(t)
  const r = await app.inject({ method: 'GET', url: '/docs/json' })
  t.equal(r.statusCode, 200)
  const spec = r.json()
  t.ok(spec.paths['/api/account']?.get, 'GET /api/account')
  t.ok(spec.paths['/api/models']?.get, 'GET /api/models')
  const acct = JSON.stringify(spec.paths['/api/account'].get)
  for (const f of ['balance', 'trial', 'rate_limit', 'ledger']) t.match(acct, f)
  const photo = JSON.stringify(spec.paths['/api/photo-enhancer'].post)
  for (const f of ['target_width', 'target_height', 'scale', 'output_put_url']) t.match(photo, f)
  t.match(JSON.stringify(spec.paths['/api/task-status'].post), 'output_put')
})
