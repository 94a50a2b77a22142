/** End to end with the real engine (native addon): submit -> worker -> result link. Skips until the addon is built. */
import t from 'tap'
import { build, createKey, balance, post, png, inputServer, addonBuilt, waitFor } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'

t.test('photo job completes with a 4x result', { skip: !addonBuilt && 'native/node/index.js not built yet (npm run build:native)' }, async (t) => {
  const app = await build(t)
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.shared('sr/Set5/LR_bicubic/X4/babyx4.png'), extension: '.png', DPI: 150 })
  t.equal(r.statusCode, 200)
  const { job_id: jobId, consume_coins: coins } = r.json().data
  t.equal(coins, 10)
  const seen = new Set<number>()
  const done = await waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: jobId })).json().data
    seen.add(d.progress)
    return d.status !== 'CONVERTING' && d
  }, 300_000, 100)
  t.equal(done.status, 'COMPLETED', `job finished: ${JSON.stringify(done)}`)
  t.equal(done.progress, 100)
  t.match(done.res_url, /^http:\/\/lucent\.invalid\/files\/r\//)
  const u = new URL(done.res_url)
  const res = await app.inject({ method: 'GET', url: u.pathname + u.search })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'image/png')
  t.match(sniff(res.rawPayload), { kind: 'image', format: 'png', width: 512, height: 512 })
  t.equal(await balance(app, id), 90, 'charged once')
  const ledger = await app.lucent.store.ledger(id)
  t.same(ledger.map((e) => e.kind), ['grant', 'debit'])
})

t.test('an input the engine cannot decode ends in ERROR and is refunded', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const good = png(64, 64)
  const truncated = good.subarray(0, good.length - 40) // header intact (sniff passes), data cut
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('cut.png', truncated), extension: '.png' })
  t.equal(r.statusCode, 200)
  const done = await waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000)
  t.equal(done.status, 'ERROR')
  t.equal(typeof done.error_code, 'number')
  t.type(done.message, 'string')
  t.notOk('res_url' in done)
  t.equal(await balance(app, id), 100)
})
