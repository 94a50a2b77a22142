/**
 * Time estimates in task-status (extension): `queue_position` while a job waits, `eta_seconds` while it runs,
 * from the throughput measured on completed runs per (model, backend) in the store: not a constant. The
 * estimator's arithmetic (eta.ts) on its own, then through the job lifecycle and the API on SQLite; this test is
 * the worker (it starts and completes the runs), so no engine is needed.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor } from '../helper.js'
import { EtaModel, ETA_ALPHA, remainingMs, workUnits } from '../../server/jobs/eta.js'
import { JobLifecycle } from '../../server/jobs/lifecycle.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import type { TypedJob } from '../../server/jobs/params.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('remainingMs and workUnits', async (t) => {
  t.equal(remainingMs(null, 1000, 0), null, 'no history, no progress: unknown')
  t.equal(remainingMs(null, 1000, 2), null, 'no history, under 5 %: unknown')
  t.equal(remainingMs(null, 1000, 20), 4000, 'no history: the run\'s own speed')
  t.equal(remainingMs(10_000, 3000, 0), 7000, 'history only: expected - elapsed')
  t.equal(remainingMs(10_000, 20_000, 0), 0, 'never negative')
  // half done after 2 s, history says 10 s: (1 - .5) x 5000 + .5 x 2000
  t.equal(remainingMs(10_000, 2000, 50), 3500, 'blended by progress')
  const photo = { kind: 'photo', model: 'general_2x', params: { input: { width: 2000, height: 500 } } } as unknown as TypedJob
  t.equal(workUnits(photo), 1, 'photo: input megapixels')
  const video = { kind: 'video', model: 'x', params: { input: { width: 1000, height: 100, frames: 0, duration: 2, fps: 25 } } } as unknown as TypedJob
  t.equal(workUnits(video), 5, 'video: megapixels x frames (frames from duration x fps when unknown)')
})

t.test('queue_position while waiting; eta_seconds from measured throughput while running', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const store = app.lucent.store
  const eta = new EtaModel(store, () => 'cpu')
  const log = { info() {}, warn() {}, error() {} }
  // the worker of this test: a lifecycle on the same store, telling the app's kept answers of its writes
  const jobs = new JobLifecycle({ store, queue: new MemoryQueue(10, 1), log, jobTimeoutMs: 60_000, maxAttempts: 3, eta })
  jobs.onChange((id) => app.lucent.status.changed(id))
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 10_000 })
  const img = srv.put('mp.png', png(1000, 500), 'image/png') // 0.5 MP of input
  const ids: string[] = []
  for (let i = 0; i < 3; i++) ids.push((await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).json().data.job_id)
  const st = async (id: string) => (await post(app, '/api/task-status', key, { job_id: id })).json().data as { status: string; queue_position?: number; eta_seconds?: number }

  const waiting = await Promise.all(ids.map(st))
  t.same(waiting.map((d) => d.queue_position), [1, 2, 3], 'queue positions in submission order')
  t.ok(waiting.every((d) => !('eta_seconds' in d)), 'no eta while waiting')

  // first run: no history for (general_2x, cpu): eta unknown until the run's own speed shows
  const r1 = (await jobs.start(ids[0]))!
  const s1 = await st(ids[0])
  t.notOk('queue_position' in s1, 'running: no queue position')
  t.notOk('eta_seconds' in s1, 'no history, no progress: no eta')
  t.equal((await st(ids[1])).queue_position, 1, 'the next job moved up')
  await sleep(400)
  await r1.progress(20)
  const own = (await st(ids[0])).eta_seconds!
  t.ok(own >= 1 && own <= 4, `own speed: 20 % after ~0.4 s -> ${own} s left`)
  await sleep(200)
  t.ok(await r1.complete('r/x.png'))
  await sleep(50) // the throughput write follows the completion
  const tp1 = (await store.throughput('general_2x', 'cpu'))!
  t.equal(tp1.samples, 1, 'the completed run was measured')
  const measured = tp1.msPerUnit * 0.5
  t.ok(measured >= 550 && measured < 5000, `measured run: ${measured.toFixed(0)} ms for 0.5 MP`)

  // a slower run is folded in: the figure moves by ETA_ALPHA
  await eta.record({ ...r1.job }, 20_000)
  const tp2 = (await store.throughput('general_2x', 'cpu'))!
  t.equal(tp2.samples, 2)
  t.ok(Math.abs(tp2.msPerUnit - ((1 - ETA_ALPHA) * tp1.msPerUnit + ETA_ALPHA * 40_000)) < 1e-6, 'exponential moving average')
  const expected = tp2.msPerUnit * 0.5

  const r2 = (await jobs.start(ids[1]))!
  const e0 = (await st(ids[1])).eta_seconds!
  t.ok(Math.abs(e0 - expected / 1000) <= 1, `at start: ${e0} s, expected ${(expected / 1000).toFixed(1)} s from the measured figure`)
  await sleep(1100)
  const e1 = (await st(ids[1])).eta_seconds!
  t.ok(e1 < e0 && e1 >= e0 - 2, `counts down between progress writes: ${e0} -> ${e1}`)
  await r2.progress(50)
  const e2 = (await st(ids[1])).eta_seconds!
  const want = remainingMs(expected, 1100, 50)! / 1000
  t.ok(Math.abs(e2 - want) <= 1.5, `at 50 %: ${e2} s (blend ${want.toFixed(1)} s)`)
  t.equal((await st(ids[2])).queue_position, 1)
  await r2.fail(100500000, 'test')
  const ended = await st(ids[1])
  t.notOk('eta_seconds' in ended, 'no eta once ended')
  t.equal((await store.throughput('general_2x', 'cpu'))!.samples, 2, 'a failed run is not measured')
  // a run released (shutdown) goes back to the queue: its expected finish is dropped, its progress kept
  const r3 = (await jobs.start(ids[2]))!
  await r3.progress(30)
  t.ok((await st(ids[2])).eta_seconds !== undefined)
  r3.release('shutdown')
  await sleep(50)
  const back = await st(ids[2]) as { status: string; progress?: number; eta_seconds?: number }
  t.match(back, { status: 'CONVERTING', progress: 30 })
  t.notOk('eta_seconds' in back, 'released: no eta until it runs again')
})

t.test('with the real engine: a completed job is measured, the next one gets an eta_seconds', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_BACKEND: 'cpu', LUCENT_ENGINE_THREADS: '1' })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 10_000 })
  const st = async (id: string) => (await post(app, '/api/task-status', key, { job_id: id })).json().data as { status: string; eta_seconds?: number; queue_position?: number }
  const first = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.put('a.png', png(64, 64), 'image/png'), extension: '.png' })).json().data
  await waitFor(async () => (await st(first.job_id)).status === 'COMPLETED', 120_000, 100)
  const tp = await waitFor(() => app.lucent.store.throughput('general_4x', 'cpu'), 5000, 20)
  t.equal(tp.samples, 1, 'measured on the engine backend this process runs (cpu)')
  const big = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.put('b.png', png(256, 256), 'image/png'), extension: '.png' })).json().data
  const running = await waitFor(async () => { const d = await st(big.job_id); return d.status === 'CONVERTING' && d.eta_seconds !== undefined && d }, 60_000, 20)
  const t0 = Date.now()
  // 16 times the first job's pixels at its measured speed
  t.ok(running.eta_seconds! >= 1, `eta_seconds ${running.eta_seconds} at start for 16x the measured job (${(tp.msPerUnit * 0.065536 / 1000).toFixed(1)} s expected)`)
  const seen: number[] = []
  await waitFor(async () => { const d = await st(big.job_id); if (d.eta_seconds !== undefined) seen.push(d.eta_seconds); return d.status !== 'CONVERTING' }, 120_000, 250)
  t.comment(`eta_seconds while it ran: ${[...new Set(seen)].join(' ')}; it took ${((Date.now() - t0) / 1000).toFixed(1)} s from the first answer`)
  t.equal((await app.lucent.store.throughput('general_4x', 'cpu'))!.samples, 2, 'measured again')
})
