/**
 * Cancels across hosts (LUCENT_REDIS_URL): a job canceled by a gateway (POST /api/task-cancel ends it in the
 * shared store and takes it out of BullMQ if it waits) may be running on a worker elsewhere. The gateway
 * publishes the job id on the Redis channel `<prefix>:job-ended`; every process that runs jobs subscribes and
 * stops the run at once (JobLifecycle.endedElsewhere: the engine aborted, ffmpeg killed, temp files removed;
 * nothing more is written). A worker that misses the message (disconnected) still stops at its next write:
 * the store refuses to complete or fail an ended job. Embedded processes need none of this (same process), an
 * embedded cluster uses its IPC channel (plugins/cluster.ts).
 */
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'

export const CHANNEL = 'lucent:job-ended'

export default fp(async (app) => {
  const l = app.lucent
  const url = l.config.redisUrl
  if (!url) return
  let pub: Redis | null = null
  let sub: Redis | null = null

  if (l.role.servesApi) {
    pub = new Redis(url, { maxRetriesPerRequest: 2, lazyConnect: true })
    pub.on('error', () => {})
    // only cancels of jobs not running in this process (run: null) need telling
    l.jobs.on('canceled', (e) => {
      if (e.run) return
      pub!.publish(CHANNEL, e.job.id).catch((err) => app.log.warn({ err, job: e.job.id }, 'cancel not published'))
    })
  }
  if (l.role.runsJobs) {
    sub = new Redis(url, { maxRetriesPerRequest: null })
    sub.on('error', () => {})
    sub.on('message', (channel: string, jobId: string) => {
      if (channel !== CHANNEL) return
      l.jobs.endedElsewhere(jobId).catch((err) => app.log.warn({ err, job: jobId }, 'stopping a canceled run failed'))
    })
    app.addHook('onReady', async () => { await sub!.subscribe(CHANNEL) })
  }
  app.addHook('onClose', async () => {
    pub?.disconnect()
    sub?.disconnect()
  })
}, { name: 'lucent-cancel-relay' })
