/**
 * Webhook delivery in this process (server/webhooks/deliver.ts), where it runs or owns jobs (not in an embedded
 * cluster's HTTP children): the loop starts on ready and stops before the store closes (leases of POSTs in
 * flight are given back). Subscribed to the job lifecycle: a job that ended here wakes the loop at once (its
 * final event entered the outbox with the state change), and `job.progress` events are added at every further
 * tenth of progress for subscriptions that asked for them (best effort: progress is not kept across a crash).
 * Hourly, finished deliveries and ended jobs' subscriptions older than the media retention (7 days) are dropped.
 */
import fp from 'fastify-plugin'
import { BoundedCache } from '../cache.js'
import { RETENTION_MS, taskStatusData } from '../jobs/status.js'
import { WebhookDeliverer } from '../webhooks/deliver.js'
import type { WebhookSub } from '../store/webhooks.js'

export default fp(async (app) => {
  const l = app.lucent
  if (!l.role.runsJobs && !l.role.recovers) return
  const deliverer = new WebhookDeliverer({
    // the payload is the job's task-status answer, built as POST /api/task-status builds it
    store: l.store, answer: (job) => taskStatusData(job, l.storage), settings: l.config.webhooks, fetchAllow: l.config.fetchAllow, outbound: l.config.outbound,
    log: app.log,
  })
  const subs = new BoundedCache<string, (WebhookSub & { keyId: string; held: boolean }) | null>(10_000)
  const deciles = new BoundedCache<string, number>(10_000)
  const offs = [
    l.jobs.on('completed', (e) => { deciles.delete(e.job.id); subs.delete(e.job.id); deliverer.nudge() }),
    l.jobs.on('failed', (e) => { deciles.delete(e.job.id); subs.delete(e.job.id); deliverer.nudge() }),
    l.jobs.on('canceled', (e) => { deciles.delete(e.job.id); subs.delete(e.job.id); deliverer.nudge() }),
    l.jobs.on('progress', (e) => {
      const decile = Math.floor(e.progress / 10)
      if (decile < 1 || decile <= (deciles.get(e.job.id) ?? 0)) return
      deciles.set(e.job.id, decile)
      void (async () => {
        let sub = subs.get(e.job.id)
        if (sub === undefined) {
          sub = await l.store.webhooks.subscription(e.job.id)
          if (!sub?.held) subs.set(e.job.id, sub) // held: its submission has not answered yet, asked again next time
        }
        if (!sub || sub.held || !sub.events.includes('job.progress')) return
        const added = await l.store.webhooks.addDelivery({
          id: `msg_${e.job.id}_p${decile}`, keyId: sub.keyId, jobId: e.job.id, event: 'job.progress', events: sub.events, url: sub.url, at: Date.now(),
        })
        if (added) deliverer.nudge()
      })().catch((err) => app.log.warn({ err, job: e.job.id }, 'webhook progress event not recorded'))
    }),
  ]
  const purge = () => l.store.webhooks.purge(Date.now() - RETENTION_MS).catch((err) => app.log.warn({ err }, 'webhook purge failed'))
  let purgeTimer: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    deliverer.start()
    purgeTimer = setInterval(purge, 3600_000).unref()
  })
  app.addHook('preClose', async () => {
    clearInterval(purgeTimer)
    for (const off of offs) off()
    await deliverer.stop()
  })
}, { name: 'lucent-webhooks' })
