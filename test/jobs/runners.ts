/**
 * Unit tests of the job runners (server/jobs/runner.ts, photo.ts, video.ts) against a fake engine pool: the
 * seam `Pick<EnginePool, 'enhance' | 'enhanceFrames'>`. Everything else is real: SQLite store, disk storage,
 * the in-process queue, the job lifecycle, ffmpeg for video. The end-to-end runs with the real engine are
 * test/jobs/photo-e2e.ts and test/video/pipeline-e2e.ts.
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { SqliteStore } from '../../server/store/sqlite.js'
import { LocalStorage, loadSecret } from '../../server/storage/local.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle } from '../../server/jobs/lifecycle.js'
import { makeRunner, type RunnerDeps } from '../../server/jobs/runner.js'
import type { PhotoParams, VideoParams } from '../../server/jobs/params.js'
import type { EnginePool } from '../../server/engine/pool.js'
import { videoSettings } from '../../server/config.js'
import { newApiKey } from '../../server/auth.js'
import { png } from '../helper.js'
import { inspect } from '../support/inspect.js'

type FakePool = Pick<EnginePool, 'enhance' | 'enhanceFrames' | 'interpolateFrames'>
const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, fatal() {}, child() { return silent }, level: 'silent', silent() {} }
const photoParams = (format = 'png'): PhotoParams => ({ format, ext: format, exif: false, dpi: null, input: { format: 'png', width: 4, height: 4 }, output: { width: 8, height: 8 } })

/** Waits for the signal, then answers as the engine does when aborted. */
const untilAborted = (signal?: AbortSignal) => new Promise<{ ok: false; error_code: 'aborted'; message: string }>((resolve) => {
  const done = () => resolve({ ok: false, error_code: 'aborted', message: 'aborted' })
  if (signal?.aborted) done()
  else signal?.addEventListener('abort', done, { once: true })
})

async function setup(t: Test, pool: Partial<FakePool>, o: { jobTimeoutMs?: number; retry?: RunnerDeps['retry']; video?: Record<string, string> } = {}) {
  const dir = t.testdir()
  const store = new SqliteStore(path.join(dir, 'r.db'))
  const storage = new LocalStorage(dir, loadSecret(dir), () => 'http://lucent.invalid')
  const queue = new MemoryQueue(100, 1)
  const jobs = new JobLifecycle({ store, queue, log: silent, jobTimeoutMs: o.jobTimeoutMs ?? 60_000, maxAttempts: 3 })
  t.teardown(() => store.close())
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 1000, trial: 0, expiresAt: null, rate: null })
  const tmp = path.join(dir, 'vtmp')
  const run = makeRunner({
    jobs, storage, log: silent as unknown as RunnerDeps['log'], retry: o.retry,
    video: videoSettings({ LUCENT_VIDEO_TMP: tmp, ...o.video }),
    pool: { enhance: () => { throw new Error('no enhance in this test') }, enhanceFrames: () => { throw new Error('no frames in this test') },
      interpolateFrames: () => { throw new Error('no interpolation in this test') }, ...pool },
  })
  const photo = async (id: string, params = photoParams(), original: Buffer | null = png(4, 4)) => {
    if (original) await storage.put(`o/${id}.png`, original, 'image/png')
    await jobs.submit({ id, keyId: k.id, kind: 'photo', model: 'general_2x', params, coins: 10, originalKey: `o/${id}.png` })
  }
  const video = async (id: string, file: string, params: VideoParams, model = 'general_restore_2x') => {
    await storage.put(`o/${id}.mp4`, fs.readFileSync(file), 'video/mp4')
    await jobs.submit({ id, keyId: k.id, kind: 'video', model, params, coins: 10, originalKey: `o/${id}.mp4` })
  }
  const balance = async () => (await store.findKey(k.id))!.coins
  return { store, storage, jobs, run, photo, video, balance, tmp, dir }
}

t.test('photo: engine result stored under r/<id>.<ext>, job completed, progress through the lifecycle', async (t) => {
  const out = png(8, 8)
  const calls: unknown[] = []
  const s = await setup(t, {
    enhance: async (input, options, call) => {
      calls.push({ bytes: input.length, options })
      for (const p of [10, 50, 90]) {
        call?.onProgress?.(p)
        await new Promise((r) => setTimeout(r, 210))
      }
      return { ok: true, data: new Uint8Array(out), width: 8, height: 8, format: 'png', ms: 5 }
    },
  })
  const progress: number[] = []
  s.jobs.on('progress', (e) => progress.push(e.progress))
  await s.photo('p1', { ...photoParams(), exif: true, dpi: 300 })
  t.equal(await s.run('p1'), 'ended')
  t.same(calls, [{ bytes: png(4, 4).length, options: { model: 'general_2x', format: 'png', exif: true, dpi: 300, budget: (8 * 8 / 1e6) * 1.1 } }], 'typed parameters reach the engine, with the work budget of its priced 8x8 output (+10 %)')
  t.same(progress, [10, 50, 90])
  t.match(await s.store.getJob('p1'), { status: 'COMPLETED', resultKey: 'r/p1.png' })
  const stored = await s.storage.get('r/p1.png')
  t.ok(stored!.data.equals(out))
  t.equal(stored!.meta.contentType, 'image/png')
  t.equal(await s.run('p1'), 'none', 'a finished job is not run again')
})

t.test('photo: jpeg results are stored as .jpg', async (t) => {
  const s = await setup(t, { enhance: async () => ({ ok: true, data: new Uint8Array([0xff, 0xd8, 0xff]), width: 1, height: 1, format: 'jpeg', ms: 1 }) })
  await s.photo('j', photoParams('jpeg'))
  await s.run('j')
  t.match(await s.store.getJob('j'), { status: 'COMPLETED', resultKey: 'r/j.jpg' })
  t.equal((await s.storage.get('r/j.jpg'))!.meta.contentType, 'image/jpeg')
})

t.test('photo: engine failure -> ERROR with the mapped code, refunded', async (t) => {
  const s = await setup(t, { enhance: async () => ({ ok: false, error_code: 'decode_failed', message: 'truncated PNG' }) })
  await s.photo('bad')
  t.equal(await s.run('bad'), 'ended')
  t.match(await s.store.getJob('bad'), { status: 'ERROR', errorCode: 100400002, errorMessage: 'truncated PNG' })
  t.equal(await s.balance(), 1000)
})

t.test('photo: missing original -> ERROR 100500003', async (t) => {
  const s = await setup(t, {})
  await s.photo('gone', photoParams(), null)
  await s.run('gone')
  t.match(await s.store.getJob('gone'), { status: 'ERROR', errorCode: 100500003, errorMessage: 'original file is missing' })
})

t.test('photo: the job timeout aborts the engine call -> ERROR 100500007', async (t) => {
  let aborted = false
  const s = await setup(t, { enhance: async (_i, _o, call) => { const r = await untilAborted(call?.signal); aborted = true; return r } }, { jobTimeoutMs: 100 })
  await s.photo('slow')
  await s.run('slow')
  t.ok(aborted, 'the signal reached the engine call')
  t.match(await s.store.getJob('slow'), { status: 'ERROR', errorCode: 100500007, errorMessage: 'job exceeded 100 ms' })
  t.equal(await s.balance(), 1000)
})

t.test('photo: shutdown mid-run -> released, job left CONVERTING for the next start', async (t) => {
  let started!: () => void
  const running = new Promise<void>((r) => { started = r })
  const s = await setup(t, { enhance: async (_i, _o, call) => { started(); return untilAborted(call?.signal) } })
  await s.photo('s')
  const outcome = s.run('s')
  await running
  s.jobs.shutdown()
  t.equal(await outcome, 'released')
  t.equal((await s.store.getJob('s'))!.status, 'CONVERTING')
  t.equal(await s.balance(), 990, 'still charged: it runs again after the restart')
})

t.test('photo: cancel mid-run -> the engine call is aborted, no result written', async (t) => {
  let started!: () => void
  const running = new Promise<void>((r) => { started = r })
  const s = await setup(t, { enhance: async (_i, _o, call) => { started(); await untilAborted(call?.signal); return { ok: true, data: new Uint8Array([1]), width: 1, height: 1, format: 'png', ms: 1 } } })
  await s.photo('c')
  const outcome = s.run('c')
  await running
  t.ok(await s.jobs.cancel('c', { errorCode: 100500000, message: 'canceled' }))
  t.equal(await outcome, 'ended')
  t.equal(await s.storage.get('r/c.png'), null, 'a result that came too late is not stored')
  t.match(await s.store.getJob('c'), { status: 'ERROR', errorMessage: 'canceled' })
})

t.test('an unexpected throw: shared queue -> released and rethrown (retried); else ERROR 100500000', async (t) => {
  const crash = async (): Promise<never> => { throw new Error('worker thread exited') }
  const shared = await setup(t, { enhance: crash }, { retry: (_e, attempt) => attempt < 3 })
  await shared.photo('x')
  await t.rejects(shared.run('x'), /worker thread exited/)
  t.equal((await shared.store.getJob('x'))!.status, 'CONVERTING', 'left for the retry')
  const local = await setup(t, { enhance: crash })
  await local.photo('y')
  t.equal(await local.run('y'), 'ended')
  t.match(await local.store.getJob('y'), { status: 'ERROR', errorCode: 100500000, errorMessage: 'worker thread exited' })
})

t.test('video through a fake engine (pixel doubling): requested size, all frames, temp files removed', { skip: !hasFfmpeg && 'ffmpeg not installed' }, async (t) => {
  let frames = 0
  const s = await setup(t, {
    enhanceFrames: async (f, o) => {
      frames += o.count
      const out = Buffer.alloc(f.length * 4)
      for (let k = 0; k < o.count; k++) {
        for (let y = 0; y < o.height * 2; y++) {
          for (let x = 0; x < o.width * 2; x++) {
            const src = k * o.width * o.height * 3 + ((y >> 1) * o.width + (x >> 1)) * 3
            f.copy(out, k * o.width * o.height * 12 + (y * o.width * 2 + x) * 3, src, src + 3)
          }
        }
      }
      return { ok: true, data: new Uint8Array(out), width: o.width * 2, height: o.height * 2 }
    },
  })
  const clip = path.join(s.dir, 'clip.mp4')
  execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=0.6:size=32x24:rate=25', '-pix_fmt', 'yuv420p', clip])
  const params: VideoParams = { ext: 'mp4', resolution: [64, 48], input: { format: 'mp4', width: 32, height: 24, rotation: 0, fps: 25, duration: 0.6, frames: 15, codec: 'h264' } }
  await s.video('v', clip, params)
  t.equal(await s.run('v'), 'ended')
  const job = await s.store.getJob('v')
  t.match(job, { status: 'COMPLETED', resultKey: 'r/v.mp4' })
  t.equal(frames, 15, 'every frame went through the engine')
  const out = path.join(s.dir, 'out.mp4')
  fs.writeFileSync(out, (await s.storage.get('r/v.mp4'))!.data)
  const o = inspect(out)
  t.same([o.width, o.height, o.frames], [64, 48, 15])
  t.same(fs.readdirSync(s.tmp), [], 'no temporary files left')
})

t.test('video: an engine failure on a batch -> ERROR with the mapped code, refunded', { skip: !hasFfmpeg && 'ffmpeg not installed' }, async (t) => {
  const s = await setup(t, { enhanceFrames: async () => ({ ok: false, error_code: 'unknown_model', message: "video model 'x' is not available" }) })
  const clip = path.join(s.dir, 'clip.mp4')
  execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=0.6:size=32x24:rate=25', '-pix_fmt', 'yuv420p', clip])
  await s.video('e', clip, { ext: 'mkv', resolution: [64, 48], input: { format: 'mp4', width: 32, height: 24, rotation: 0, fps: 25, duration: 0.6, frames: 15, codec: 'h264' } })
  await s.run('e')
  t.match(await s.store.getJob('e'), { status: 'ERROR', errorCode: 110400005, errorMessage: /not available/ })
  t.equal(await s.balance(), 1000)
  t.same(fs.readdirSync(s.tmp), [])
})

t.test('video: the runner uses the configured tools (LUCENT_FFPROBE) -> 100500005 when they do not run', async (t) => {
  const s = await setup(t, {}, { video: { LUCENT_FFPROBE: '/nonexistent/ffprobe' } })
  const file = path.join(s.dir, 'any.mp4')
  fs.writeFileSync(file, Buffer.alloc(64))
  await s.video('f', file, { ext: 'mp4', resolution: [64, 48], input: { format: 'mp4', width: 32, height: 24, rotation: 0, fps: 25, duration: 1, frames: 25, codec: 'h264' } })
  await s.run('f')
  t.match(await s.store.getJob('f'), { status: 'ERROR', errorCode: 100500005, errorMessage: /ffprobe \(\/nonexistent\/ffprobe; LUCENT_FFPROBE\)/ })
})
