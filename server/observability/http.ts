/**
 * Per request on the public port (docs/observability.md): the request id (`req.id`, from a valid X-Request-Id or
 * new: server/observability/context.ts) runs with the rest of the request (AsyncLocalStorage, so a job submitted
 * by it carries it) and is echoed as X-Request-Id on every answer; one JSON access log line at info (method,
 * route template, status, ms, reqId, key id: never the key); lucent_http_* series by route template; the
 * request's span when tracing is on (a valid incoming `traceparent` is its parent).
 * Registered before the auth plugin so that every later hook and the handler run inside the request's context.
 */
import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { currentObs, runRequest } from './context.js'
import { startTracing, tracing, type SpanHandle } from './tracing.js'

const OPS = new Set(['/healthz', '/readyz', '/metrics'])

export default fp(async (app) => {
  const l = app.lucent
  const tr = await startTracing(l.config.observability)
  if (tr) app.addHook('onClose', async () => { await tr.shutdown() })
  const spans = new WeakMap<FastifyRequest, SpanHandle>()

  app.addHook('onRequest', (req, _reply, done) => {
    runRequest(req.id, () => {
      const t = tracing()
      // probes and scrapes make no spans (they would drown the traces)
      if (t && !OPS.has(req.routeOptions.url ?? '')) {
        const tp = req.headers.traceparent
        const span = t.span(`${req.method} ${req.routeOptions.url ?? 'unmatched'}`, {
          kind: 'server', parent: typeof tp === 'string' ? tp : undefined,
          attrs: { 'http.request.method': req.method, 'http.route': req.routeOptions.url ?? 'unmatched', 'lucent.request_id': req.id },
        })
        spans.set(req, span)
        const obs = currentObs()
        if (obs) obs.traceparent = span.traceparent
      }
      done()
    })
  })

  app.addHook('onSend', (req, reply, _payload, done) => {
    reply.header('x-request-id', req.id)
    done()
  })

  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched'
    const ms = reply.elapsedTime
    l.metrics.http(req.method, route, reply.statusCode, ms / 1000)
    req.log.info({ method: req.method, route, status: reply.statusCode, ms: Math.round(ms * 10) / 10, keyId: req.apiKey?.id ?? null }, 'request')
    const span = spans.get(req)
    if (span) {
      span.set({ 'http.response.status_code': reply.statusCode, ...(req.apiKey ? { 'lucent.key_id': req.apiKey.id } : {}) })
      span.end(reply.statusCode >= 500 ? `status ${reply.statusCode}` : undefined)
    }
    done()
  })
}, { name: 'lucent-observability-http' })
