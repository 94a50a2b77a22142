/**
 * Idempotency-Key on submissions (extension), embedded (SQLite; the scale-out test repeats the core on
 * PostgreSQL + Redis): parallel identical submissions make one job and one debit and all get its answer; a
 * retry gets the same answer without fetching again; the same key with another body is 409 (110409001); keys
 * are per API key; a malformed key is refused; a submission refused for lack of coins leaves no record; a record
 * older than 24 h no longer counts. The queue is paused: no engine needed.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { build, createKey, balance, png, inputServer } from '../helper.js'
import { canonicalJson } from '../../server/routes/idempotency.js'
import type { SqliteStore } from '../../server/store/sqlite.js'

const submit = (app: FastifyInstance, key: string, idem: string | null, body: object, url = '/api/photo-enhancer') =>
  app.inject({ method: 'POST', url, headers: { Apikey: key, ...(idem === null ? {} : { 'Idempotency-Key': idem }) }, payload: body })

t.test('canonicalJson: key order and whitespace do not matter, values do', async (t) => {
  t.equal(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } }), '{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}')
  t.not(canonicalJson({ a: 1 }), canonicalJson({ a: '1' }))
  t.equal(canonicalJson({ a: 1, u: undefined }), canonicalJson({ a: 1 }))
})

t.test('Idempotency-Key: one job, one debit; replays; conflicts', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id: keyId } = await createKey(app, { coins: 10_000 })
  const img = srv.put('a.png', png(16, 12), 'image/png')
  const body = { model_name: 'general_2x', img_url: img, extension: '.png' }

  // 8 identical submissions at once
  const rs = await Promise.all(Array.from({ length: 8 }, () => submit(app, key, 'order-1', body)))
  t.same(rs.map((r) => r.statusCode), Array(8).fill(200), 'all answered 200')
  const answers = rs.map((r) => r.json().data)
  const first = answers[0]
  t.ok(answers.every((a) => a.job_id === first.job_id && a.consume_coins === first.consume_coins), 'all got the same job and price')
  const jobs = (app.lucent.store as SqliteStore).db.prepare('SELECT id FROM jobs WHERE key_id = ?').all(keyId)
  t.equal(jobs.length, 1, 'one job')
  const debits = (await app.lucent.store.ledger(keyId)).filter((r) => r.kind === 'debit')
  t.equal(debits.length, 1, 'one debit')
  t.equal(await balance(app, keyId), 10_000 - first.consume_coins)
  t.equal(app.lucent.queue.stats().waiting, 1, 'queued once')
  const kept = app.lucent.storage.localPath(`o/${first.job_id}.png`)!
  t.same(fs.readdirSync(path.dirname(kept)).filter((f) => !f.endsWith('.meta.json')), [path.basename(kept)], "only the job's input is stored (the others' were deleted)")

  // a later retry: same answer, nothing fetched
  const hits = srv.hits.get('/mem/a.png')
  const retry = await submit(app, key, 'order-1', { extension: '.png', img_url: img, model_name: 'general_2x' })
  t.equal(retry.statusCode, 200)
  t.same(retry.json(), rs[0].json(), 'the same answer (key order of the body does not matter)')
  t.equal(srv.hits.get('/mem/a.png'), hits, 'the input was not fetched again')

  // another body under the same key
  const other = await submit(app, key, 'order-1', { ...body, model_name: 'general_4x' })
  t.equal(other.statusCode, 409)
  t.equal(other.json().error_code, 110409001)
  const otherRoute = await submit(app, key, 'order-1', { video_url: img, model_name: 'general_restore_2x', resolution: [32, 24] }, '/api/video-enhancer')
  t.equal(otherRoute.statusCode, 409, 'the same key on the other route is another request')
  t.equal(await balance(app, keyId), 10_000 - first.consume_coins, 'nothing more debited')

  // parallel: same key, different bodies: exactly one wins, the others are 409
  const mixed = await Promise.all(['general_2x', 'general_4x', 'general_2x', 'general_4x'].map((m) => submit(app, key, 'order-2', { ...body, model_name: m })))
  const won = mixed.filter((r) => r.statusCode === 200).map((r) => r.json().data.job_id)
  t.equal(new Set(won).size, 1, 'one job for order-2')
  t.ok(mixed.every((r) => r.statusCode === 200 || r.json().error_code === 110409001), 'the others: 409 / 110409001')

  // keys are per API key; no key: a new job each time
  const b = await createKey(app, { coins: 1000 })
  const theirs = await submit(app, b.key, 'order-1', body)
  t.not(theirs.json().data.job_id, first.job_id, 'another API key with the same Idempotency-Key gets its own job')
  const n1 = (await submit(app, key, null, body)).json().data.job_id
  const n2 = (await submit(app, key, null, body)).json().data.job_id
  t.not(n1, n2, 'without the header, two jobs')

  // malformed keys
  t.equal((await submit(app, key, '', body)).json().error_code, 100403000, 'empty key refused')
  t.equal((await submit(app, key, 'x'.repeat(256), body)).json().error_code, 100403000, 'over 255 characters refused')
  t.equal((await submit(app, key, 'has space', body)).json().error_code, 100403000, 'non-printable / space refused')

  // refused for lack of coins: no record, a later retry (after a top-up) submits
  const poor = await createKey(app, { coins: 0 })
  t.equal((await submit(app, poor.key, 'p-1', body)).json().error_code, 110402000)
  await app.lucent.store.topup(poor.id, 100)
  const paid = await submit(app, poor.key, 'p-1', body)
  t.equal(paid.statusCode, 200, 'after a top-up the same key submits')

  // older than 24 h: the key is free again
  ;(app.lucent.store as SqliteStore).db.prepare('UPDATE idempotency SET created_at = created_at - ? WHERE key_id = ? AND idem_key = ?').run(24 * 3600 * 1000 + 1, keyId, 'order-1')
  const fresh = await submit(app, key, 'order-1', { ...body, model_name: 'general_4x' })
  t.equal(fresh.statusCode, 200, 'an expired key is reused for a new request')
  t.not(fresh.json().data.job_id, first.job_id)
  t.equal(await app.lucent.store.purgeIdempotency(Date.now() - 24 * 3600 * 1000), 0, 'the record was replaced, nothing old left')

  // documented in /docs
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  const params = doc.paths['/api/photo-enhancer'].post.parameters as Array<{ name: string; in: string }>
  t.ok(params.some((p) => p.in === 'header' && p.name === 'idempotency-key'), 'Idempotency-Key in /docs')
  t.ok(doc.paths['/api/photo-enhancer'].post.responses['409'], '409 documented')
  t.ok(doc.paths['/api/task-cancel']?.post, 'task-cancel in /docs')
})
