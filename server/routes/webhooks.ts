/** GET /api/webhooks/deliveries and POST /api/webhooks/deliveries/{id}/replay: the key's webhook deliveries
 *  (server/webhooks/). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError } from '../errors.js'
import { ok } from '../context.js'
import { ReplayLimitError, type Delivery } from '../store/webhooks.js'
import { DeliveriesQuery, DeliveryList, DeliveryOne, DeliveryParams, errorResponses } from './schemas.js'

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

export const deliveryJson = (d: Delivery) => ({
  id: d.id, event: d.event, job_id: d.jobId, url: d.url, status: d.status, attempts: d.attempts, last_status: d.lastStatus,
  last_error: d.lastError, last_attempt_at: iso(d.lastAt), next_attempt_at: iso(d.nextAt), created_at: iso(d.createdAt)!, delivered_at: iso(d.deliveredAt),
})

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent

  app.get('/api/webhooks/deliveries', {
    schema: {
      summary: 'Webhook deliveries of the key, newest first', tags: ['webhooks'], security: [{ apikey: [] }], querystring: DeliveriesQuery,
      response: { 200: DeliveryList, ...errorResponses },
    },
  }, async (req) => {
    const q = req.query
    const rows = await l.store.webhooks.list(req.apiKey!.id, { limit: q.limit ?? 50, jobId: q.job_id, status: q.status as Delivery['status'] | undefined })
    return ok({ deliveries: rows.map(deliveryJson) })
  })

  app.post('/api/webhooks/deliveries/:id/replay', {
    schema: {
      summary: 'Send a webhook delivery again (same webhook-id, retried for the full window again; at most LUCENT_WEBHOOK_MAX_REPLAYS times)',
      tags: ['webhooks'], security: [{ apikey: [] }],
      params: DeliveryParams, response: { 200: DeliveryOne, ...errorResponses },
    },
  }, async (req) => {
    let d: Delivery | null
    try {
      d = await l.store.webhooks.replay(req.params.id, req.apiKey!.id, Date.now(), l.config.webhooks.maxReplays)
    } catch (e) {
      if (!(e instanceof ReplayLimitError)) throw e
      const why = `replayed ${e.replays} times: the limit (${l.config.webhooks.maxReplays})`
      throw new ApiError(100429000, { status: 429, detail: why, hint: why })
    }
    if (!d) throw new ApiError(110400023)
    return ok(deliveryJson(d))
  })
}

export default routes
