/**
 * job.canceled: a job canceled through POST /api/task-cancel (issue 12's cancel, branch `cancel`) ends ERROR with
 * `reason: "canceled"` in its task-status answer, and its final webhook event is sent as job.canceled. Skipped
 * while this build has no task-cancel route.
 */
import t from 'tap'
import { build, createKey, post, png, inputServer, waitFor } from '../helper.js'
import { newWebhookSecret } from '../../server/webhooks/signing.js'
import { receiver } from '../support/webhook-receiver.js'

t.test('task-cancel of a waiting job sends job.canceled', async (t) => {
  const app = await build(t, { LUCENT_WEBHOOK_POLL_MS: '50' })
  if (!app.hasRoute({ method: 'POST', url: '/api/task-cancel' })) {
    t.plan(0, 'no POST /api/task-cancel in this build')
    return
  }
  app.lucent.queue.pause() // the job waits: it is canceled before it runs
  const srv = await inputServer(t)
  const k = await createKey(app, { coins: 100, rate: 100_000 })
  const secret = newWebhookSecret()
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret, url: null })
  const rx = await receiver(t, () => secret)
  const r = await post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: srv.put('c.png', png(16, 16)), extension: '.png', callback_url: rx.url('/c') })
  const jobId = r.json().data.job_id
  const c = await post(app, '/api/task-cancel', k.key, { job_id: jobId })
  t.equal(c.statusCode, 200, c.body)
  await waitFor(async () => rx.on('/c').length >= 1, 10_000)
  const g = rx.on('/c')[0]
  t.equal(g.body.type, 'job.canceled')
  t.equal(g.body.data.status, 'ERROR')
  t.equal(g.body.data.reason, 'canceled')
  t.ok(g.verified)
  // the attempt is recorded once the receiver's answer is back: a moment after the receiver saw it
  const list = await waitFor(async () => {
    const l = (await app.inject({ method: 'GET', url: '/api/webhooks/deliveries', headers: { apikey: k.key } })).json().data.deliveries
    return l[0]?.status !== 'pending' && l
  }, 10_000, 20)
  t.match(list[0], { id: `msg_${jobId}_end`, event: 'job.canceled', status: 'delivered' })
})
