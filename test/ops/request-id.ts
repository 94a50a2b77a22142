/**
 * X-Request-Id (docs/observability.md): a bounded token from the client is kept, anything else replaced by a new
 * id; echoed on every answer (errors too); stored with the job (params.obs, never in an answer); sent with the
 * job's webhook deliveries; in the access log line (with the key id, never the key) and in the worker's log
 * lines of that job (a real `lucent serve`, its stdout read).
 */
import t from 'tap'
import http from 'node:http'
import { spawn } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor, tempDir, freePort, modelDir } from '../helper.js'
import { lucentBin, createKeyCli } from '../support/serve.js'
import { newWebhookSecret } from '../../server/webhooks/signing.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('accepted when a bounded token, else generated; echoed on every answer', async (t) => {
  const app = await build(t)
  const h = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/healthz', headers })
  t.equal((await h({ 'x-request-id': 'abc-123.XY:z_9' })).headers['x-request-id'], 'abc-123.XY:z_9', 'kept')
  t.match((await h({})).headers['x-request-id'], UUID, 'generated when absent')
  for (const bad of ['has space', 'a'.repeat(129), 'new\\nline', '<script>', '']) {
    const got = (await h({ 'x-request-id': bad })).headers['x-request-id']
    t.match(got, UUID, `replaced: ${JSON.stringify(bad.slice(0, 20))}`)
  }
  const a = (await h({})).headers['x-request-id']
  t.not(a, (await h({})).headers['x-request-id'], 'a new id per request')
  // error answers carry it too
  const denied = await post(app, '/api/task-status', 'not-a-key', { job_id: 'x' })
  t.not(denied.statusCode, 200)
  t.match(denied.headers['x-request-id'], UUID)
  const unknown = await app.inject({ method: 'GET', url: '/no-such', headers: { 'x-request-id': 'rid-404' } })
  t.equal(unknown.headers['x-request-id'], 'rid-404')
})

t.test('carried into the job and its webhook deliveries; not in the answers', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { LUCENT_WEBHOOK_POLL_MS: '50', LUCENT_WEBHOOK_BACKOFF_MS: '100' })
  const srv = await inputServer(t)
  const got: Array<{ headers: http.IncomingHttpHeaders }> = []
  const rx = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => { got.push({ headers: req.headers }); res.end('ok') })
  })
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise((r) => rx.close(r)))
  const k = await createKey(app, { coins: 1000 })
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret: newWebhookSecret(), url: null })
  const r = await app.inject({
    method: 'POST', url: '/api/photo-enhancer', headers: { apikey: k.key, 'x-request-id': 'rid-job-1' },
    payload: { model_name: 'general_2x', img_url: srv.put('a.png', png(16, 16)), extension: '.png', callback_url: `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook` },
  })
  t.equal(r.statusCode, 200, r.body)
  t.equal(r.headers['x-request-id'], 'rid-job-1')
  const jobId = r.json().data.job_id
  t.same((await app.lucent.store.getJob(jobId))!.params.obs, { request_id: 'rid-job-1' }, 'stored with the job')
  const done = await waitFor(async () => {
    const s = await post(app, '/api/task-status', k.key, { job_id: jobId })
    return s.json().data.status === 'COMPLETED' && s
  }, 120_000, 50)
  t.notMatch(done.body, /rid-job-1|obs/, 'the task-status answer is unchanged')
  await waitFor(async () => got.length > 0, 30_000, 20)
  t.equal(got[0].headers['x-request-id'], 'rid-job-1', 'the webhook delivery names the request')
})

t.test('the access log line and the worker log lines of the job (a real lucent serve)', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const port = await freePort()
  const env = {
    ...process.env, DATA_DIR: await tempDir(t), HOST: '127.0.0.1', PORT: String(port), LUCENT_MODEL_DIR: modelDir,
    LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'info', LUCENT_PLAYGROUND: '0',
  }
  const { key } = createKeyCli(env, '--coins', '100', '--rate', '1000')
  const child = spawn(process.execPath, [lucentBin, 'serve'], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => { child.kill('SIGKILL') })
  let out = ''
  child.stdout!.on('data', (d: Buffer) => { out += d.toString() })
  const base = `http://127.0.0.1:${port}`
  await waitFor(async () => (await request(`${base}/healthz`).then(async (r) => { await r.body.dump(); return r.statusCode }, () => 0)) === 200, 180_000, 100)
  const srv = await inputServer(t)
  const call = async (url: string, body: object) => {
    const r = await request(`${base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json', 'x-request-id': 'rid-log-7' }, body: JSON.stringify(body) })
    return { headers: r.headers, body: (await r.body.json()) as any }
  }
  const s = await call('/api/photo-enhancer', { model_name: 'general_2x', img_url: srv.put('l.png', png(16, 16)), extension: '.png' })
  t.equal(s.headers['x-request-id'], 'rid-log-7')
  const jobId = s.body.data.job_id
  await waitFor(async () => (await call('/api/task-status', { job_id: jobId })).body.data.status === 'COMPLETED', 120_000, 50)
  const lines = await waitFor(async () => {
    const ls = out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    return ls.some((l) => l.msg === 'job run ended') && ls
  }, 10_000, 50)
  const access = lines.find((l: any) => l.msg === 'request' && l.route === '/api/photo-enhancer')
  t.match(access, { level: 30, reqId: 'rid-log-7', method: 'POST', route: '/api/photo-enhancer', status: 200, ms: Number, keyId: String }, 'one JSON access line at info')
  t.ok(lines.filter((l: any) => l.msg === 'request').length >= 3, 'one per request (task-status polls too)')
  const run = lines.filter((l: any) => l.job === jobId)
  t.ok(run.some((l: any) => l.msg === 'job run started' && l.reqId === 'rid-log-7'), 'the worker\'s start line names the request')
  t.ok(run.some((l: any) => l.msg === 'job run ended' && l.reqId === 'rid-log-7'), 'and its end line')
  t.notOk(out.includes(key), 'the API key itself is never logged')
  t.notOk(out.includes(key.slice(-16)), 'nor its secret part')
})
