/**
 * The embedded cluster's wiring (server/cluster.ts), a no-op outside one. Primary: answers the children's
 * requests (enqueue, remove, token leases, job metrics) and broadcasts its state and every job change.
 * Child: tells the primary of the job changes it makes and of the jobs it cancels (the primary stops their runs), drops kept answers of the changes it hears of, and
 * (role all) takes the engine state from the primary's broadcast.
 */
import fp from 'fastify-plugin'
import { ClusterHub } from '../cluster.js'

export default fp(async (app) => {
  const l = app.lucent
  const { primary, childLink, viaPrimary } = l.role
  if (primary) {
    const { queue, localRate } = l.backends
    const hub = new ClusterHub({
      state: () => {
        const q = queue.stats()
        const heavy = queue.heavyKeys?.()
        return { engine: l.engine, queue: { waiting: q.waiting, running: q.running, max: q.max, ...(heavy && { heavy }) }, worker: l.pool ? l.localWorker() : null }
      },
      enqueue: (jobId, keyId) => queue.enqueue(jobId, { keyId, force: true }),
      remove: (jobId) => queue.remove(jobId),
      rate: localRate ?? { grant: () => { throw new Error('rate limits are in Redis') } },
      metrics: () => l.metrics.jobsText(),
      ended: (jobId) => { l.jobs.endedElsewhere(jobId).catch((err) => app.log.warn({ err, job: jobId }, 'stopping a canceled run failed')) },
    })
    l.jobs.onChange((jobId) => hub.jobChanged(jobId))
    app.addHook('onReady', async () => hub.start())
    app.addHook('onClose', async () => hub.stop())
  }
  if (childLink) {
    l.jobs.onChange((jobId) => childLink.jobChanged(jobId))
    // a cancel made here of a job not running here: the primary (role all) runs it and stops it
    if (viaPrimary) l.jobs.on('canceled', (e) => { if (!e.run) childLink.jobEnded(e.job.id) })
    childLink.onJobChanged((jobId) => l.status.changed(jobId))
    if (viaPrimary) app.addHook('onReady', async () => childLink.onState((st) => { l.engine = st.engine }))
  }
}, { name: 'lucent-cluster' })
