/**
 * lucent_queue_backlog_seconds (server/jobs/backlog.ts), the workers' autoscaling signal: the engine seconds the
 * queued jobs need at the speed the ETA model measured for their model, rising as work is queued and back to 0
 * when it drains; a job whose model has no measured speed is counted in lucent_queue_backlog_unestimated_jobs,
 * never guessed. The same for the in-process queue and BullMQ (real Redis of scripts/services.sh; skipped
 * locally when it cannot start, a failure in CI).
 */
import t, { type Test } from 'tap'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor } from '../helper.js'
import { requireServices } from '../scaleout/services.js'
import { leaseRedisDb } from '../support/redis-db.js'
import { BullQueue } from '../../server/queue/bullmq.js'

type App = Awaited<ReturnType<typeof build>>

const value = (text: string, series: string) => {
  const m = new RegExp(`^${series} ([0-9.e+-]+)$`, 'm').exec(text)
  return m ? Number(m[1]) : null
}

async function scenario(t: Test, env: Record<string, string>) {
  const app: App = await build(t, { LUCENT_METRICS_PUBLIC: '1', LUCENT_WORKERS: '1', ...env })
  await waitFor(async () => (await app.inject({ url: '/healthz' })).statusCode === 200, 180_000, 100)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 100_000 })
  const backlog = async () => {
    const m = (await app.inject({ url: '/metrics' })).body
    return { seconds: value(m, 'lucent_queue_backlog_seconds'), unestimated: value(m, 'lucent_queue_backlog_unestimated_jobs') }
  }
  const submit = async (model: string, side: number) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: model, img_url: srv.put(`${model}-${side}-${Math.random()}.png`, png(side, side)), extension: '.png' })
    t.equal(r.statusCode, 200, r.body)
    return r.json().data.job_id as string
  }
  const status = async (id: string) => (await post(app, '/api/task-status', key, { job_id: id })).json().data.status
  const near = (a: number | null, b: number) => a !== null && Math.abs(a - b) <= 1e-9 + b * 1e-6

  t.same(await backlog(), { seconds: 0, unestimated: 0 }, 'nothing queued: 0')

  // one run measures general_2x's speed: the ETA model's figure (ms per megapixel on this backend)
  const first = await submit('general_2x', 32)
  await waitFor(async () => (await status(first)) === 'COMPLETED', 120_000, 50)
  const e = app.lucent.engine
  const backendName = e.info && 'backend' in e.info ? e.info.backend : ''
  const tp = await app.lucent.store.throughput('general_2x', backendName)
  t.ok(tp && tp.msPerUnit > 0, `measured on ${backendName}: ${tp?.msPerUnit} ms/MP`)
  const perJob = (tp!.msPerUnit * 64 * 64 / 1e6) / 1000 // one 64x64 job, seconds
  await waitFor(async () => (await backlog()).seconds === 0, 10_000, 100)

  // queued work raises it, job by job: the queue held (BullMQ: paused in Redis, so that no worker's fetch already
  // under way takes the next job; in-process: the queue stops handing out jobs)
  const q = app.lucent.queue
  if (q instanceof BullQueue) await q.queue.pause()
  else q.pause()
  const ids = [await submit('general_2x', 64)]
  const one = await waitFor(async () => { const b = await backlog(); return near(b.seconds, perJob) && b }, 10_000, 100)
  t.ok(one.seconds! > 0, `one queued job: ${one.seconds} s`)
  ids.push(await submit('general_2x', 64), await submit('general_2x', 64))
  const three = await waitFor(async () => { const b = await backlog(); return near(b.seconds, 3 * perJob) && b }, 10_000, 100)
  t.ok(three.seconds! > one.seconds!, `three: ${three.seconds} s (3 x the measured speed x 64x64)`)
  t.equal(three.unestimated, 0)

  // a model never measured: counted apart, the seconds unchanged
  ids.push(await submit('general_4x', 16))
  const unmeasured = await waitFor(async () => { const b = await backlog(); return b.unestimated === 1 && b }, 10_000, 100)
  t.ok(near(unmeasured.seconds, 3 * perJob), 'no guessed seconds for it')

  // draining brings it back to 0
  if (q instanceof BullQueue) await q.queue.resume()
  else q.resume()
  for (const id of ids) await waitFor(async () => (await status(id)) === 'COMPLETED', 180_000, 50)
  const drained = await waitFor(async () => { const b = await backlog(); return b.seconds === 0 && b.unestimated === 0 && b }, 10_000, 100)
  t.same(drained, { seconds: 0, unestimated: 0 }, 'drained: 0')
}

t.test('in-process queue: the backlog rises with queued work and falls to 0 when it drains', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  await scenario(t, {})
})

t.test('BullMQ: the same gauge from the same store', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const lease = await leaseRedisDb(t, svc.LUCENT_REDIS_URL)
  await scenario(t, { LUCENT_REDIS_URL: lease.url })
})
