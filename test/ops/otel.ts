/**
 * OpenTelemetry traces (docs/observability.md): off by default; with OTEL_EXPORTER_OTLP_ENDPOINT one photo job
 * yields, in one trace, the gateway's request span, the job's queue and run spans (the trace context crossed the
 * queue in the job) and the engine call's span under the run. The collector is a local OTLP/HTTP JSON receiver.
 */
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { build, createKey, png, inputServer, addonBuilt, waitFor, post } from '../helper.js'
import { tracing } from '../../server/observability/tracing.js'

interface OtlpSpan { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes: Array<{ key: string; value: Record<string, unknown> }> }

async function collector(t: { teardown(fn: () => unknown): void }) {
  const spans: OtlpSpan[] = []
  const posts: Array<{ url: string; type: string | undefined }> = []
  const srv = http.createServer((req, res) => {
    let body = ''
    req.on('data', (d) => { body += d })
    req.on('end', () => {
      posts.push({ url: req.url ?? '', type: req.headers['content-type'] })
      const doc = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> }
      for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans)
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise((r) => srv.close(r)))
  return { base: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, spans, posts }
}

t.test('off by default', async (t) => {
  await build(t)
  t.equal(tracing(), null, 'no tracer')
})

t.test('one photo job: request -> queue -> run -> engine call, one trace', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const rx = await collector(t)
  const app = await build(t, { OTEL_EXPORTER_OTLP_ENDPOINT: rx.base })
  t.ok(tracing(), 'tracing on')
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 100)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const parentTrace = '4bf92f3577b34da6a3ce929d0e0e4736'
  const r = await app.inject({
    method: 'POST', url: '/api/photo-enhancer', headers: { apikey: key, traceparent: `00-${parentTrace}-00f067aa0ba902b7-01` },
    payload: { model_name: 'general_2x', img_url: srv.put('o.png', png(16, 16)), extension: '.png' },
  })
  t.equal(r.statusCode, 200)
  const jobId = r.json().data.job_id
  await waitFor(async () => (await post(app, '/api/task-status', key, { job_id: jobId })).json().data.status === 'COMPLETED', 120_000, 50)
  await app.close() // flushes the batch
  t.ok(rx.posts.every((p) => p.url === '/v1/traces' && /json/.test(p.type ?? '')), 'OTLP/HTTP JSON to /v1/traces')
  const req = rx.spans.find((s) => s.name === 'POST /api/photo-enhancer')
  const queued = rx.spans.find((s) => s.name === 'job.queue')
  const run = rx.spans.find((s) => s.name === 'job.run')
  const engine = rx.spans.find((s) => s.name === 'engine.enhance')
  t.ok(req && queued && run && engine, `spans: ${rx.spans.map((s) => s.name).join(', ')}`)
  if (!req || !queued || !run || !engine) return
  t.equal(req.traceId, parentTrace, 'the request span continues the caller\'s traceparent')
  t.equal(req.parentSpanId, '00f067aa0ba902b7')
  t.same([queued.traceId, run.traceId, engine.traceId], [parentTrace, parentTrace, parentTrace], 'one trace')
  t.equal(run.parentSpanId, req.spanId, 'the run is a child of the request (context carried by the job)')
  t.equal(queued.parentSpanId, req.spanId)
  t.equal(engine.parentSpanId, run.spanId, 'the engine call is a child of the run')
  const attr = (s: OtlpSpan, k: string) => s.attributes.find((a) => a.key === k)?.value
  t.same(attr(run, 'lucent.job_id'), { stringValue: jobId })
  t.same(attr(engine, 'lucent.model'), { stringValue: 'general_2x' })
  t.notOk(rx.spans.some((s) => s.name.includes('/healthz')), 'probes make no spans')
})
