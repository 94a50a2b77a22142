/**
 * Abuse (issue 22, hole 2): frame interpolation is bounded by what was priced. The price and the limits use
 * the container's declared duration; the worker places frames by the packets' timestamps. Crafted files are
 * made here (ffmpeg + mkvmerge with a v2 timestamp file, then the Matroska Duration rewritten):
 * - the issue's file (32x32, 3 frames at 10 fps, declaring 2 s, its last packet at 3600 s), one whose last
 *   packet lasts an hour, one with a 30 s timestamp gap in the middle: refused at submission (400, 110400008
 *   with a `detail` naming the disagreement) before any debit;
 * - the issue's file handed to the runner anyway (as if it had slipped through), and an honest file with a
 *   gap inside its declared duration: the real engine (RIFE, CPU) makes at most the priced count of frames
 *   (declared duration x fps), in calls of at most twice the engine batch; the last frame's
 *   repeats come out in pieces of the same bound;
 * - a crafted frame count (nb_frames) does not move the ETA model's moving average (server/jobs/eta.ts).
 * Skips the engine parts until the addon is built.
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { build, createKey, balance, post, inputServer, addonBuilt, modelDir } from '../helper.js'
import { inspect } from '../support/inspect.js'
import { SqliteStore } from '../../server/store/sqlite.js'
import { LocalStorage, loadSecret } from '../../server/storage/local.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle } from '../../server/jobs/lifecycle.js'
import { makeRunner, type RunnerDeps } from '../../server/jobs/runner.js'
import { batchFor } from '../../server/jobs/video.js'
import { interpProcessor } from '../../server/jobs/video-interp.js'
import { EtaModel, workUnits } from '../../server/jobs/eta.js'
import { EnginePool } from '../../server/engine/pool.js'
import { FrameSchedule } from '../../server/video/interp.js'
import { videoPrice } from '../../server/pricing.js'
import type { ProcessedFrames } from '../../server/video/transcode.js'
import type { TypedJob, VideoParams } from '../../server/jobs/params.js'
import { videoSettings } from '../../server/config.js'
import { newApiKey } from '../../server/auth.js'

const works = (bin: string, arg: string) => spawnSync(bin, [arg]).status === 0
const hasTools = works('ffmpeg', '-version') && works('ffprobe', '-version') && works('mkvmerge', '--version')
const hasRife = fs.existsSync(path.join(modelDir, 'interp/rife-v4.6/flownet.bin'))
const noTools = !hasTools && 'ffmpeg, ffprobe and mkvmerge are needed'
const noEngine = noTools || (!addonBuilt ? 'native addon not built' : !hasRife ? `no interp/rife-v4.6 in ${modelDir}` : false)
const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, fatal() {}, child() { return silent }, level: 'silent', silent() {} }

/**
 * A 32x32 Matroska file: `frames` frames of a moving test pattern whose packets are placed at `timesMs`
 * (mkvmerge v2 timestamp file; one time more than frames: the end of the last frame), then, when
 * `declaredMs` is given, its Segment Info Duration (and mkvmerge's DURATION tag) rewritten to declare that.
 */
function crafted(dir: string, name: string, frames: number, timesMs: number[], declaredMs?: number): string {
  const src = path.join(dir, `${name}.src.mkv`)
  const out = path.join(dir, `${name}.mkv`)
  const ts = path.join(dir, `${name}.ts.txt`)
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', String(frames), '-c:v', 'libx264', '-pix_fmt', 'yuv420p', src])
  fs.writeFileSync(ts, ['# timestamp format v2', ...timesMs.map(String)].join('\n') + '\n')
  const r = spawnSync('mkvmerge', ['-q', '-o', out, '--timestamps', `0:${ts}`, src])
  if (r.status !== 0 && r.status !== 1) throw new Error(`mkvmerge: ${r.stderr}`)
  if (declaredMs === undefined) return out
  const b = fs.readFileSync(out)
  // Segment Info Duration: EBML ID 0x4489, a 4- or 8-byte float in TimestampScale units (1 ms); the first
  // one is the segment's (Info precedes the clusters).
  let at = -1
  for (let i = 0; i < b.length - 11 && at < 0; i++) if (b[i] === 0x44 && b[i + 1] === 0x89 && (b[i + 2] === 0x84 || b[i + 2] === 0x88)) at = i
  if (at < 0) throw new Error('no Duration element')
  if (b[at + 2] === 0x84) b.writeFloatBE(declaredMs, at + 3)
  else b.writeDoubleBE(declaredMs, at + 3)
  // mkvmerge's statistics tag DURATION=HH:MM:SS.nnnnnnnnn (same length, so every size stays valid)
  const s = b.toString('latin1')
  const tag = /\d\d:\d\d:\d\d\.\d{9}/.exec(s.slice(s.indexOf('DURATION')))
  if (tag) {
    const sec = declaredMs / 1000
    const v = `00:00:${String(Math.floor(sec)).padStart(2, '0')}.${String(Math.round((sec % 1) * 1e9)).padStart(9, '0')}`
    b.write(v, s.indexOf('DURATION') + tag.index, 'latin1')
  }
  fs.writeFileSync(out, b)
  return out
}

const probeDuration = (file: string) => Number(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file]).toString())
const lastPacket = (file: string) => execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time,duration_time', '-of', 'csv=p=0', file])
  .toString().trim().split('\n').map((l) => l.split(',').map(Number)).at(-1)!

t.test('submission: timestamps that disagree with the declared duration are refused before any debit', { skip: noTools }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause() // an accepted job waits (today's code would run the crafted job for hours)
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 10_000 })

  const issue = crafted(dir, 'issue', 3, [0, 100, 3_600_000], 2000)
  t.equal(probeDuration(issue), 2, 'the issue\'s file declares 2 s')
  t.equal(lastPacket(issue)[0], 3600, 'its last packet is at 3600 s')
  const longLast = crafted(dir, 'longlast', 3, [0, 100, 200, 3_600_000], 2000)
  t.same(lastPacket(longLast), [0.2, 3599.8], 'a last packet at 0.2 s lasting an hour')
  const gap = crafted(dir, 'gap', 6, [0, 100, 200, 30_000, 30_100, 30_200, 30_300], 1000)
  t.equal(probeDuration(gap), 1, 'a 30 s gap in the middle of a file that declares 1 s')

  const cases: Array<[string, string, object]> = [
    ['the issue\'s case: last packet at 3600 s, fps 60', issue, { model_name: 'frame_interpolation', fps: 60 }],
    ['the issue\'s case with slowmo 2', issue, { model_name: 'frame_interpolation', slowmo: 2 }],
    ['a last packet lasting an hour', longLast, { model_name: 'frame_interpolation', fps: 60 }],
    ['a timestamp gap in the middle, combined with a 2x model', gap, { model_name: 'general_restore_2x', resolution: [64, 64], fps: 30 }],
  ]
  for (const [name, file, body] of cases) {
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put(path.basename(file), fs.readFileSync(file)), ...body })
    t.equal(r.statusCode, 400, `${name}: ${r.body}`)
    t.match(r.json(), { error_code: 110400008, code: 110400008, message: 'The video URL is not valid', detail: /timestamps.*declare/ }, `${name}: ${r.json().detail}`)
  }
  t.equal(await balance(app, id), 10_000, 'nothing debited')

  // Without interpolation the frames are processed as decoded (one output frame per packet): not refused.
  const plain = await post(app, '/api/video-enhancer', key, { video_url: srv.put('issue-plain.mkv', fs.readFileSync(issue)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(plain.statusCode, 200, `no interpolation asked: the old path (${plain.body})`)

  // An honest variable-frame-rate file with a gap inside its declared duration: accepted, priced by it.
  const honest = crafted(dir, 'honest', 6, [0, 100, 200, 1500, 1600, 1700, 1800])
  const dur = probeDuration(honest)
  t.ok(Math.abs(dur - 1.8) < 0.01, `declares ${dur} s, as its timestamps say`)
  const ok = await post(app, '/api/video-enhancer', key, { video_url: srv.put('honest.mkv', fs.readFileSync(honest)), model_name: 'frame_interpolation', fps: 60 })
  t.equal(ok.statusCode, 200, ok.body)
  t.match((await app.lucent.store.getJob(ok.json().data.job_id))?.params, { interp: { fps: '60', slowmo: 1 } })
})

t.test('submission without interpolation: a packet flood under a short declared duration is priced by its frames, refused past the bound', { skip: noTools }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 100_000 })
  const every100ms = (n: number) => Array.from({ length: n + 1 }, (_, i) => i * 100)
  const submit = (file: string) => post(app, '/api/video-enhancer', key, { video_url: srv.put(path.basename(file), fs.readFileSync(file)), model_name: 'general_restore_1x', resolution: [32, 32] })
  // 300 frames (30 s at 10 fps) in a file that declares 1 s: one network run per packet, so 30 s of work
  const flood = crafted(dir, 'flood', 300, every100ms(300), 1000)
  t.equal(probeDuration(flood), 1, 'declares 1 s')
  const r = await submit(flood)
  t.equal(r.statusCode, 200, r.body)
  t.equal(r.json().data.consume_coins, videoPrice(app.lucent.prices, 'standard', 32, 32, 10, 30), 'priced by its 300 frames (30 s at 10 fps), not by the 1 s it declares')
  t.ok(r.json().data.consume_coins > videoPrice(app.lucent.prices, 'standard', 32, 32, 10, 1))
  // past the packet bound (4 x 1 s x 10 fps + 1000): refused before any debit
  const before = await balance(app, id)
  const huge = crafted(dir, 'huge', 1100, every100ms(1100), 1000)
  const h = await submit(huge)
  t.equal(h.statusCode, 400, h.body)
  t.match(h.json(), { error_code: 110400008, detail: /more packets than/ })
  t.equal(await balance(app, id), before, 'nothing debited')
  // an honest file: priced by its declared duration, as before
  const honest = crafted(dir, 'honest-cfr', 20, every100ms(20))
  const o = await submit(honest)
  t.equal(o.json().data.consume_coins, videoPrice(app.lucent.prices, 'standard', 32, 32, 10, probeDuration(honest)))
})

/** The runner of test/jobs/runners.ts on a real engine pool, every interpolateFrames call recorded. */
async function runner(t: Test) {
  const dir = t.testdir()
  const store = new SqliteStore(path.join(dir, 'r.db'))
  const storage = new LocalStorage(dir, loadSecret(dir), () => 'http://lucent.invalid')
  const jobs = new JobLifecycle({ store, queue: new MemoryQueue(100, 1), log: silent, jobTimeoutMs: 300_000, maxAttempts: 1 })
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 2 })
  t.teardown(async () => { await pool.close(); store.close() })
  const init = await pool.init()
  if (!init.ok) throw new Error(`engine: ${JSON.stringify(init)}`)
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 1000, trial: 0, expiresAt: null, rate: null })
  /** positions per interpolateFrames call */
  const calls: number[] = []
  const bound = 2 * batchFor(32, 32, 1, 64)
  const run = makeRunner({
    jobs, storage, log: silent as unknown as RunnerDeps['log'], video: videoSettings({ LUCENT_VIDEO_TMP: path.join(dir, 'vtmp') }),
    pool: {
      enhance: (...a) => pool.enhance(...a),
      enhanceFrames: (...a) => pool.enhanceFrames(...a),
      interpolateFrames: async (frames, options, call) => {
        calls.push(options.positions.length)
        // Over the bound: not given to the engine (one call with every position of an hour would run for
        // hours and allocate one output frame per position); the job fails, the test sees the call.
        if (options.positions.length > bound) return { ok: false, error_code: 'invalid_argument', message: `${options.positions.length} positions in one call` }
        return pool.interpolateFrames(frames, options, call)
      },
    },
  })
  const video = async (jobId: string, file: string, params: VideoParams) => {
    await storage.put(`o/${jobId}.mkv`, fs.readFileSync(file), 'video/x-matroska')
    await jobs.submit({ id: jobId, keyId: k.id, kind: 'video', model: 'frame_interpolation', params, coins: 10, originalKey: `o/${jobId}.mkv` })
    await run(jobId)
    return store.getJob(jobId)
  }
  return { video, calls, bound, pool, storage, dir }
}

t.test('worker: the frames made never exceed the priced count, in bounded calls', { skip: noEngine }, async (t) => {
  const r = await runner(t)
  const dir = t.testdir()
  const out = async (jobId: string) => {
    const f = path.join(dir, `${jobId}.mkv`)
    fs.writeFileSync(f, (await r.storage.get(`r/${jobId}.mkv`))!.data)
    return inspect(f)
  }
  const params = (duration: number): VideoParams => ({
    ext: 'mkv', resolution: [32, 32], input: { format: 'matroska', width: 32, height: 32, rotation: 0, fps: 10, duration, frames: Math.round(duration * 10), codec: 'h264' },
    interp: { fps: '60', slowmo: 1, order: 'after' },
  })

  // The issue's file, as if it had slipped past the submission check: priced as 2 s at 60 fps = 120 frames.
  const issue = crafted(dir, 'issue', 3, [0, 100, 3_600_000], 2000)
  const j1 = await r.video('issue', issue, params(2))
  t.equal(j1?.status, 'COMPLETED', `${j1?.errorCode} ${j1?.errorMessage ?? ''}`)
  const made1 = r.calls.reduce((a, b) => a + b, 0)
  t.ok(made1 <= 120, `interpolated positions ${made1} <= the priced 120`)
  t.ok(r.calls.every((n) => n <= r.bound), `every call at most ${r.bound} positions: ${r.calls.join(' ')}`)
  if (j1?.status === 'COMPLETED') {
    const o = await out('issue')
    t.equal(o.frames, 120, 'output frames: the priced 120')
    t.ok(Math.abs(o.duration - 2) < 0.002, `output lasts ${o.duration} s, the priced 2 s`)
  }

  // An honest file with a gap inside its declared 1.8 s: all 108 frames (no more: Matroska has no frame count,
  // and the estimate, 1.8 s x 10 fps = 18 frames for 6 packets, stretched the schedule to 3 s), none in a call
  // over the bound.
  r.calls.length = 0
  const honest = crafted(dir, 'honest', 6, [0, 100, 200, 1500, 1600, 1700, 1800])
  const j2 = await r.video('honest', honest, params(probeDuration(honest)))
  t.equal(j2?.status, 'COMPLETED', `${j2?.errorCode} ${j2?.errorMessage ?? ''}`)
  t.ok(r.calls.length > 1 && r.calls.every((n) => n <= r.bound), `calls of at most ${r.bound}: ${r.calls.join(' ')}`)
  if (j2?.status === 'COMPLETED') t.equal((await out('honest')).frames, 108, '1.8 s at 60 fps')
})

t.test('processor: the last frame\'s repeats come out in bounded pieces', { skip: noEngine }, async (t) => {
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 2 })
  t.teardown(() => pool.close())
  t.ok((await pool.init()).ok)
  // 3 frames at 10 fps whose last lasts 2 s: 2.2 s at 60 fps = 132 frames, 120 of them repeats of the last.
  const s = new FrameSchedule([0, 0.1, 0.2], 10, 3, 60, 1, 2)
  t.equal(s.total, 132)
  const max = 16
  const sizes: number[] = []
  const p = interpProcessor(s, 'after', {
    enhance: null,
    interpolate: async (frames, width, height, count, positions) => {
      sizes.push(positions.length)
      const o = await pool.interpolateFrames(frames, { width, height, count, positions })
      if (!o.ok) throw new Error(o.message)
      return { data: Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength), cuts: o.cuts }
    },
  }, { maxFrames: max })
  const frames = Buffer.alloc(3 * 32 * 32 * 3)
  for (let i = 0; i < frames.length; i++) frames[i] = (i * 7 + Math.floor(i / 3072) * 40) & 0xff
  const pieces: number[] = []
  const drain = async (first: ProcessedFrames | null) => {
    let o: ProcessedFrames | null = first
    while (o) {
      pieces.push(o.count ?? 0)
      t.equal(o.data.length, (o.count ?? 0) * 32 * 32 * 3)
      const more = (o as ProcessedFrames & { more?: () => Promise<ProcessedFrames | null> }).more
      o = more ? await more() : null
    }
  }
  await drain(await p.process(frames, 32, 32, 3))
  await drain(await p.flush())
  t.equal(pieces.reduce((a, b) => a + b, 0), 132, 'every frame of the schedule, once')
  t.ok(pieces.every((n) => n <= max), `pieces of at most ${max}: ${pieces.join(' ')}`)
  t.ok(sizes.every((n) => n <= max), `interpolateFrames calls of at most ${max}: ${sizes.join(' ')}`)
})

t.test('eta: a crafted frame count does not poison the moving average', async (t) => {
  const store = new SqliteStore(path.join(t.testdir(), 'e.db'))
  t.teardown(() => store.close())
  const eta = new EtaModel(store, () => 'cpu')
  const job = (frames: number) => ({
    kind: 'video', model: 'frame_interpolation',
    params: { input: { format: 'matroska', width: 1000, height: 1000, rotation: 0, fps: 10, duration: 2, frames, codec: 'h264' } },
  }) as unknown as TypedJob
  t.equal(workUnits(job(20)), 20, '2 s at 10 fps of 1 MP: 20 units')
  t.equal(workUnits(job(1_000_000)), 20, 'a crafted nb_frames of 10^6 on a 2 s, 10 fps file: still the priced 20')
  t.equal(workUnits(job(1)), 20, 'a crafted nb_frames of 1: the priced 20')
  await eta.record(job(20), 2000)
  const before = (await store.throughput('frame_interpolation', 'cpu'))!.msPerUnit
  t.equal(before, 100)
  await eta.record(job(1_000_000), 2000)
  const after = (await store.throughput('frame_interpolation', 'cpu'))!.msPerUnit
  t.equal(after, 100, `ms per unit after the crafted job: ${after} (was ${before})`)
})
