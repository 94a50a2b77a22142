/** Atomic debits under 200 concurrent submissions; ledger = balance; refunds exactly once. */
import t from 'tap'
import { build, createKey, balance, post, png, inputServer } from '../helper.js'

t.test('200 parallel submissions with coins for 100', async (t) => {
  // only the coins bound under test: no jobs-in-flight quota (test/abuse/quotas.ts tests that one)
  const app = await build(t, { LUCENT_QUOTA_JOBS_IN_FLIGHT: '0' })
  app.lucent.queue.pause() // jobs stay CONVERTING: only the debits are under test
  const srv = await inputServer(t)
  const url = srv.put('c.png', png(40, 30))
  const { key, id } = await createKey(app, { coins: 1000 }) // general_2x on a small image costs 10
  const results = await Promise.all(Array.from({ length: 200 }, () =>
    post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })))
  const accepted = results.filter((r) => r.statusCode === 200)
  const refused = results.filter((r) => r.statusCode === 402)
  t.equal(accepted.length, 100, 'exactly 100 accepted')
  t.equal(refused.length, 100)
  t.ok(refused.every((r) => r.json().error_code === 110402000))
  t.ok(accepted.every((r) => r.json().data.consume_coins === 10))
  t.equal(new Set(accepted.map((r) => r.json().data.job_id)).size, 100, 'distinct job ids')
  t.equal(await balance(app, id), 0)
  const ledger = await app.lucent.store.ledger(id)
  t.equal(ledger.reduce((s, e) => s + e.delta, 0), 0, 'ledger sums to the balance')
  t.equal(ledger.filter((e) => e.kind === 'debit').length, 100)
  t.equal(ledger[ledger.length - 1].balanceAfter, 0)
  // refusals left no stored originals behind
  const fs = await import('node:fs')
  const path = await import('node:path')
  const objs = fs.readdirSync(path.join(app.lucent.config.dataDir, 'objects', 'o')).filter((f) => !f.endsWith('.meta.json'))
  t.equal(objs.length, 100)
})

t.test('a failed job is refunded exactly once; ledger consistent', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('r.png', png(16, 16)), extension: '.png' })
  const jobId = r.json().data.job_id
  t.equal(await balance(app, id), 90)
  const results = await Promise.all([1, 2, 3, 4].map(() => app.lucent.store.failJob(jobId, 100500000, 'boom')))
  t.same(results.filter(Boolean).length, 1, 'only one transition to ERROR')
  t.notOk(await app.lucent.store.failJob(jobId, 100500000, 'again'), 'refund is idempotent')
  t.equal(await balance(app, id), 100)
  const ledger = await app.lucent.store.ledger(id)
  t.same(ledger.map((e) => e.kind), ['grant', 'debit', 'refund'])
  t.equal(ledger.reduce((s, e) => s + e.delta, 0), 100)
  t.ok(ledger.filter((e) => e.jobId).every((e) => e.jobId === jobId))
  const s = await post(app, '/api/task-status', key, { job_id: jobId })
  t.match(s.json(), { code: 200, data: { status: 'ERROR', error_code: 100500000, message: 'boom' } })
  t.notOk('res_url' in s.json().data)
  // completing an ERROR job is refused
  t.notOk(await app.lucent.store.completeJob(jobId, 'r/x.png'))
})

t.test('a job that cannot be queued ends at once, refunded; the client gets 500', async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  // the queue backend failing (Redis or the cluster primary unreachable): the one fault injected here
  const q = app.lucent.queue
  const enqueue = q.enqueue
  q.enqueue = async () => { throw new Error('queue backend unreachable') }
  t.teardown(() => { q.enqueue = enqueue })
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('q.png', png(16, 16)), extension: '.png' })
  t.equal(r.statusCode, 500)
  t.match(r.json(), { error_code: 100500000, code: 100500000 })
  t.equal(await balance(app, id), 100, 'refunded')
  const ledger = await app.lucent.store.ledger(id)
  t.same(ledger.map((e) => e.kind), ['grant', 'debit', 'refund'])
  const job = (await app.lucent.store.jobsByStatus('ERROR'))[0]
  t.equal(job?.errorMessage, 'the job could not be queued', 'the job is recorded as ERROR')
})
