/**
 * The outbox survives kill -9: `lucent serve` (SQLite file) completes a job whose receiver answers 503, is killed
 * with SIGKILL before any delivery succeeded, and once restarted delivers the event, with the same webhook-id, to
 * the receiver now answering 200, signed with the secret `lucent keys create` printed (on the line before the key).
 */
import t from 'tap'
import path from 'node:path'
import Database from 'better-sqlite3'
import { request } from 'undici'
import { tempDir, modelDir, inputServer, addonBuilt, waitFor, png } from '../helper.js'
import { receiver } from '../support/webhook-receiver.js'
import { lucentServer, createKeyCli } from '../support/serve.js'

t.test('kill -9 between completion and delivery: delivered after restart, same webhook-id', { skip: !addonBuilt && 'native/node/index.js not built yet' }, async (t) => {
  const dataDir = await tempDir(t)
  const env = {
    ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn',
    LUCENT_WEBHOOK_BACKOFF_MS: '300', LUCENT_WEBHOOK_BACKOFF_MAX_MS: '600', LUCENT_WEBHOOK_POLL_MS: '100', LUCENT_WEBHOOK_TIMEOUT_MS: '1000',
  }
  const out = createKeyCli(env, '--coins', '100', '--rate', '1000').lines
  const key = out[out.length - 1]
  const secret = out[out.length - 2]
  t.match(key, /^lk_/, 'the key stays on the last line')
  t.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/, 'the webhook secret on the line before it')
  const rx = await receiver(t, () => secret)
  const hook = rx.url('/hook', [503])
  const srv = await inputServer(t)
  const server = lucentServer(t, { env, readyTimeoutMs: 90_000 })
  const start = () => server.start()
  const api = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const r = await request(`${server.base}${url}`, { method, headers: { apikey: key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    return (await r.body.json()) as any
  }
  await start()
  const sub = await api('POST', '/api/photo-enhancer', { model_name: 'general_2x', img_url: srv.put('c.png', png(16, 16)), extension: '.png', callback_url: hook })
  t.equal(sub.code, 200)
  const jobId = sub.data.job_id
  await waitFor(async () => rx.on('/hook').length >= 1, 60_000, 20)
  await server.kill('SIGKILL')
  const failedIds = new Set(rx.on('/hook').map((g) => g.id))
  t.same([...failedIds], [`msg_${jobId}_end`])
  const db = new Database(path.join(dataDir, 'lucent.db'), { readonly: true })
  const job = db.prepare('SELECT status FROM jobs WHERE id = ?').get(jobId) as { status: string }
  const row = db.prepare('SELECT status, last_status FROM webhook_deliveries WHERE job_id = ?').get(jobId) as { status: string; last_status: number | null }
  db.close()
  t.equal(job.status, 'COMPLETED', 'the job completed before the kill')
  t.equal(row.status, 'pending', 'its event not delivered yet')

  const seenBefore = rx.on('/hook').length
  rx.answers.set('/hook', [200])
  await start()
  await waitFor(async () => rx.on('/hook').slice(seenBefore).length >= 1, 30_000, 50)
  const after = rx.on('/hook').slice(seenBefore)
  t.equal(after[0].id, `msg_${jobId}_end`, 'the same webhook-id after the restart')
  t.ok(after[0].verified, 'signed with the secret printed by keys create')
  t.equal(after[0].body.type, 'job.completed')
  t.equal(after[0].body.data.status, 'COMPLETED')
  const list = await waitFor(async () => {
    const l = await api('GET', '/api/webhooks/deliveries')
    return l.data.deliveries[0]?.status === 'delivered' && l
  }, 10_000)
  t.match(list.data.deliveries[0], { id: `msg_${jobId}_end`, status: 'delivered', last_status: 200 })
  // >= 1: the kill may come before the 503 attempt is recorded (its lease then runs out and it is claimed again)
  t.ok(list.data.deliveries[0].attempts >= 1)
  await new Promise((r) => setTimeout(r, 1000))
  t.equal(rx.on('/hook').filter((g) => g.at >= after[0].at).length, 1, 'delivered once; no attempt after the 200')
  await server.kill('SIGTERM')
})
