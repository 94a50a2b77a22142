/**
 * Where /metrics and the detailed /readyz answer (docs/observability.md): not on the public port by default (a
 * hostile client learns nothing there but "ready"), on LUCENT_METRICS_PORT's own listener, behind
 * LUCENT_METRICS_TOKEN, or to anyone with LUCENT_METRICS_PUBLIC=1. And the series operators alert on, after real
 * jobs: HTTP by route template (never the raw URL), queue wait, engine calls, engine info and load time, refunds.
 */
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor } from '../helper.js'

const get = (app: Awaited<ReturnType<typeof build>>, url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers })

t.test('default: no /metrics and no readiness details on the public port', async (t) => {
  const app = await build(t)
  const unknown = await get(app, '/no-such-route')
  const m = await get(app, '/metrics')
  t.equal(m.statusCode, unknown.statusCode, '/metrics is an unknown route')
  t.same(m.json(), unknown.json())
  const r = await get(app, '/readyz')
  t.ok(r.statusCode === 200 || r.statusCode === 503)
  t.same(Object.keys(r.json().data).sort(), ['role', 'status'], 'status and role only: no checks, workers, queue')
  t.equal(app.metricsServer, null, 'no metrics listener')
})

t.test('LUCENT_METRICS_PORT: a listener of its own with /metrics and the detailed /readyz', async (t) => {
  const app = await build(t, { LUCENT_METRICS_PORT: '0', LUCENT_METRICS_HOST: '127.0.0.1' })
  t.equal((await get(app, '/metrics')).statusCode, (await get(app, '/no-such-route')).statusCode, 'still not on the public port')
  const port = (app.metricsServer!.server.address() as AddressInfo).port
  const m = await request(`http://127.0.0.1:${port}/metrics`)
  t.equal(m.statusCode, 200)
  t.match(await m.body.text(), /^lucent_queue_depth\{state="waiting"\} \d+$/m)
  const r = await request(`http://127.0.0.1:${port}/readyz`)
  const d = (await r.body.json() as any).data
  t.match(d, { role: 'all', checks: { store: true } }, 'the detailed readiness')
  const api = await request(`http://127.0.0.1:${port}/api/task-status`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
  const body = await api.body.json() as any
  t.not(api.statusCode, 200, 'the metrics listener serves nothing else')
  const unknown = await request(`http://127.0.0.1:${port}/no-such-route`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
  t.same([api.statusCode, body], [unknown.statusCode, await unknown.body.json()], 'the unknown-route answer')
})

t.test('LUCENT_METRICS_TOKEN: the public port answers the token holder only', async (t) => {
  const app = await build(t, { LUCENT_METRICS_TOKEN: 's3cret-metrics-token' })
  const none = await get(app, '/metrics')
  t.equal(none.statusCode, 401)
  t.match(none.headers['www-authenticate'], /Bearer/)
  t.equal((await get(app, '/metrics', { authorization: 'Bearer wrong' })).statusCode, 401, 'a wrong token')
  const { key } = await createKey(app)
  t.equal((await get(app, '/metrics', { apikey: key })).statusCode, 401, 'an API key opens nothing here')
  const ok = await get(app, '/metrics', { authorization: 'Bearer s3cret-metrics-token' })
  t.equal(ok.statusCode, 200)
  t.match(ok.body, /^lucent_process_cpu_seconds_total /m)
  t.same(Object.keys((await get(app, '/readyz')).json().data).sort(), ['role', 'status'], 'readiness without the token: short')
  t.ok('checks' in (await get(app, '/readyz', { authorization: 'Bearer s3cret-metrics-token' })).json().data, 'with it: detailed')
})

t.test('LUCENT_METRICS_PUBLIC=1: the previous behaviour', async (t) => {
  const app = await build(t, { LUCENT_METRICS_PUBLIC: '1' })
  t.equal((await get(app, '/metrics')).statusCode, 200)
  t.ok('checks' in (await get(app, '/readyz')).json().data)
})

const value = (text: string, series: string) => {
  const esc = series.replace(/[{}"=,.[\]()+*?^$|\\/]/g, (c) => `\\${c}`)
  const m = new RegExp(`^${esc} ([0-9.e+-]+)$`, 'm').exec(text)
  return m ? Number(m[1]) : null
}

t.test('the new series after real jobs', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { LUCENT_METRICS_PUBLIC: '1' })
  await waitFor(async () => (await get(app, '/healthz')).statusCode === 200, 180_000, 100)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const s = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('m.png', png(16, 16)), extension: '.png' })
  t.equal(s.statusCode, 200)
  const jobId = s.json().data.job_id
  await waitFor(async () => (await post(app, '/api/task-status', key, { job_id: jobId })).json().data.status === 'COMPLETED', 120_000, 50)
  // a job canceled while waiting: the queue paused so that it waits
  app.lucent.queue.pause()
  const w = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('w.png', png(16, 16)), extension: '.png' })
  t.equal((await post(app, '/api/task-cancel', key, { job_id: w.json().data.job_id })).statusCode, 200)
  await get(app, `/no/such/route/${'x'.repeat(20)}${Math.random()}`)

  const m = (await get(app, '/metrics')).body
  t.equal(value(m, 'lucent_http_requests_total{method="POST",route="/api/photo-enhancer",status="200"}'), 2, 'requests by route template and status')
  t.ok((value(m, 'lucent_http_requests_total{method="POST",route="/api/task-status",status="200"}') ?? 0) >= 1)
  t.equal(value(m, 'lucent_http_requests_total{method="GET",route="unmatched",status="400"}'), 1, 'an unknown URL is "unmatched"')
  t.notMatch(m, /no\/such\/route/, 'no raw URL in any label (bounded cardinality)')
  t.equal(value(m, 'lucent_http_request_duration_seconds_count{method="POST",route="/api/photo-enhancer",code="2xx"}'), 2, 'latency by route and status class')
  t.equal(value(m, 'lucent_queue_wait_seconds_count{kind="photo"}'), 1, 'queue wait of the job that ran')
  t.equal(value(m, 'lucent_engine_call_seconds_count{op="enhance",model="general_2x",outcome="ok"}'), 1, 'the engine call')
  t.match(m, /^lucent_engine_info\{backend="(cpu|gpu)",adapter="[^"]*",f16="(true|false)",cpu_isa="[^"]*"\} 1$/m, 'backend and adapter')
  t.ok((value(m, 'lucent_engine_init_seconds') ?? 0) > 0, 'engine load time')
  t.equal(value(m, 'lucent_refunds_total{reason="canceled"}'), 1, 'the cancel refund, by reason')
})

t.test('an embedded cluster (LUCENT_HTTP_PROCESSES=2): the children share the metrics port', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const { lucentServer } = await import('../support/serve.js')
  const { tempDir, freePort, modelDir } = await import('../helper.js')
  const mport = await freePort()
  const server = lucentServer(t, {
    env: {
      ...process.env, DATA_DIR: await tempDir(t), HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_LOG_LEVEL: 'warn',
      LUCENT_HTTP_PROCESSES: '2', LUCENT_METRICS_PORT: String(mport), LUCENT_METRICS_HOST: '127.0.0.1',
    },
  })
  await server.start()
  const m = await request(`http://127.0.0.1:${mport}/metrics`)
  t.equal(m.statusCode, 200)
  t.match(await m.body.text(), /^# TYPE lucent_jobs_total /m, 'a child answers, with the primary\'s job families')
  const pub = await request(`${server.base}/metrics`)
  await pub.body.dump()
  t.not(pub.statusCode, 200, 'not on PORT')
  t.equal(await server.kill('SIGTERM'), 0, 'clean exit')
})
