/**
 * Frame interpolation, no engine needed: the output frame schedule (server/video/interp.ts FrameSchedule:
 * constant-rate output over constant or variable source timing, streamed in batches), the request rules
 * (`fps` read leniently as compat.md's clients send it, `slowmo` strict), the price by output frames, and the
 * submission answers of /api/video-enhancer: bad values -> 100403000 with a `detail`, nothing charged; values
 * old clients send -> the same answer as without them. The engine path: interp-e2e.ts.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { FrameSchedule, decideInterp, interpOrder, slowmoError } from '../../server/video/interp.js'
import { loadPrices, videoPrice } from '../../server/pricing.js'
import { probeVideo } from '../../server/video/probe.js'
import { build, createKey, balance, post, inputServer, tempDir } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const ff = (...a: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...a])

const all = (s: FrameSchedule, have: number) => [...s.take(have), ...s.finish(have)]

t.test('schedule: constant rate doubled, tripled, slowed', async (t) => {
  const cfr = (n: number, fps: number) => Array.from({ length: n }, (_, i) => 10 + i / fps) // any origin
  const s = new FrameSchedule(cfr(12, 12), 12, 12, 24, 1)
  t.equal(s.total, 24, '1 s at 24 fps')
  const p2 = all(s, 12)
  const want = [...Array.from({ length: 23 }, (_, k) => k / 2), 11]
  t.ok(p2.length === 24 && p2.every((p, k) => Math.abs(p - want[k]) < 1e-9), `k/2, the last frame held to fill the duration: ${p2.join(' ')}`)
  const s3 = new FrameSchedule(cfr(10, 10), 10, 10, 30, 1)
  const p3 = all(s3, 10)
  t.equal(p3.length, 30)
  t.ok(p3.every((p, k) => Math.abs(p - Math.min(k / 3, 9)) < 1e-9), 'k/3')
  const slow = new FrameSchedule(cfr(12, 12), 12, 12, 12, 4)
  t.equal(slow.total, 48, 'slowmo 4: 4 s at the source rate')
  t.ok(all(slow, 12).every((p, k) => Math.abs(p - Math.min(k / 4, 11)) < 1e-9))
  const ntsc = new FrameSchedule(cfr(30, 30000 / 1001), 30000 / 1001, 30, 60, 1)
  t.equal(ntsc.total, Math.round((30 * 1001) / 30000 * 60), 'NTSC to 60: duration kept')
})

t.test('schedule: variable frame rate and odd timestamps -> constant-rate output over the real times', async (t) => {
  // Frames at 0, 0.1, 0.15, 0.4, 0.5 (median interval 0.1): 0.6 s at 20 fps = 12 frames.
  const s = new FrameSchedule([0, 0.1, 0.15, 0.4, 0.5], 10, 5, 20, 1)
  t.equal(s.total, 12)
  const p = all(s, 5)
  t.same(p.slice(0, 4), [0, 0.5, 1, 2], 'T=0.05 halfway 0..1; T=0.1 on frame 1; T=0.15 on frame 2')
  t.ok(Math.abs(p[4] - (2 + 0.05 / 0.25)) < 1e-9, 'T=0.2 is 1/5 of the way from 0.15 to 0.4')
  t.same(p.slice(-3), [3.5, 4, 4], 'T=0.45 halfway 0.4..0.5; held after the last frame')
  // The last frame lasts as long as its packet says (else the median interval).
  t.equal(new FrameSchedule([0, 0.1, 0.2], 10, 3, 20, 1).total, 6)
  t.equal(new FrameSchedule([0, 0.1, 0.2], 10, 3, 20, 1, 0.3).total, 10)
  // A frame 0.3 ms off the grid snaps (a copy, not a network run).
  const j = all(new FrameSchedule([0, 0.0833, 0.1667, 0.25], 12, 4, 24, 1), 4)
  t.same(j.filter((x) => Number.isInteger(x)), [0, 1, 2, 3, 3])
})

t.test('schedule: batches see the same positions as one pass, each once, none past the frames they have', async (t) => {
  const times = Array.from({ length: 40 }, (_, i) => i * 0.04 + (i % 3) * 0.007)
  const whole = all(new FrameSchedule(times, 25, 40, 60, 1), 40)
  const s = new FrameSchedule(times, 25, 40, 60, 1)
  const got: number[] = []
  for (let have = 3; have <= 40; have += 3) {
    const ps = s.take(Math.min(have, 40))
    t.ok(ps.every((p) => Math.ceil(p) <= Math.min(have, 40) - 1), `batch up to ${have}`)
    got.push(...ps)
  }
  got.push(...s.finish(40))
  t.same(got, whole)
  // Fewer frames decoded than stamped: the rest clamps to the last decoded frame.
  const short = new FrameSchedule(times, 25, 40, 50, 1)
  const ps = [...short.take(30), ...short.finish(30)]
  t.equal(ps.length, short.total)
  t.ok(ps.every((p) => p <= 29))
})

t.test('request rules', async (t) => {
  const src = { model: 'general_restore_2x', scale: 2, fps: 12, fpsRational: '12/1', duration: 1, ext: 'mp4', maxSeconds: 3600 }
  const ntsc = { ...src, fps: 30000 / 1001, fpsRational: '30000/1001' }
  for (const fps of [undefined, null, '60', true, [60], { v: 60 }, 12, 12.1, 5, 0, -1, NaN]) {
    t.match(decideInterp({ fps }, src), { ok: true, plan: null }, `fps ${JSON.stringify(fps)} ignored`)
  }
  t.match(decideInterp({ fps: 30 }, ntsc), { ok: true, plan: null }, '30 for a 29.97 source is its rate')
  t.match(decideInterp({ fps: 24 }, src), { ok: true, plan: { fps: '24', slowmo: 1, order: 'after' }, outFps: 24, outSeconds: 1, outFrames: 24 })
  t.match(decideInterp({ fps: 24 }, { ...src, model: 'general_restore_4x', scale: 4 }), { plan: { order: 'before' } })
  t.match(decideInterp({ fps: 24 }, { ...src, model: 'general_restore_1x', scale: 1 }), { plan: { order: 'after' } })
  t.match(decideInterp({ fps: 24 }, { ...src, model: 'frame_interpolation', scale: 1 }), { plan: { order: 'after' } })
  t.match(decideInterp({ slowmo: 4 }, ntsc), { ok: true, plan: { fps: '30000/1001', slowmo: 4 }, outSeconds: 4 })
  t.match(decideInterp({ slowmo: 2, fps: 24 }, src), { ok: true, plan: { fps: '24', slowmo: 2 }, outFrames: 48 }, '24 fps, 2x slower: 4x the frames')
  t.match(decideInterp({ fps: 96 }, src), { ok: true }, '8x is allowed')
  const bad: Array<[string, object, object?]> = [
    ['fps 121', { fps: 121 }, { ...src, fps: 30, fpsRational: '30/1' }],
    ['fps 97 (over 8x a 12 fps source)', { fps: 97 }],
    ['slowmo 3', { slowmo: 3 }],
    ['slowmo "2"', { slowmo: '2' }],
    ['slowmo 1', { slowmo: 1 }],
    ['slowmo 8 at 24 fps (16x)', { slowmo: 8, fps: 24 }],
    ['frame_interpolation without fps or slowmo', {}, { ...src, model: 'frame_interpolation', scale: 1 }],
    ['frame_interpolation with an ignored fps', { fps: 12 }, { ...src, model: 'frame_interpolation', scale: 1 }],
    ['GIF at 60 fps', { fps: 60 }, { ...src, fps: 30, fpsRational: '30/1', ext: 'gif' }],
  ]
  for (const [name, body, s] of bad) {
    const d = decideInterp(body, (s ?? src) as typeof src)
    t.match(d, { ok: false, code: 100403000, detail: /\w/ }, name)
  }
  t.match(decideInterp({ slowmo: 8 }, { ...src, duration: 500 }), { ok: false, code: 110400011 }, 'stretched past 1 h')
  t.equal(slowmoError(undefined), null)
  t.equal(slowmoError(null), null)
  t.equal(interpOrder(4), 'before')
  t.equal(interpOrder(2), 'after')
  t.equal(interpOrder(1), 'after')
})

t.test('price by output frames', async (t) => {
  const p = loadPrices()
  t.equal(videoPrice(p, 'standard', 1280, 720, 24, 10), 100, '720p <= 30 fps')
  t.equal(videoPrice(p, 'standard', 1280, 720, 60, 10, true), 200, '60 fps: x2')
  t.equal(videoPrice(p, 'standard', 1280, 720, 120, 10, true), 400, '120 fps interpolated: x4')
  t.equal(videoPrice(p, 'standard', 1280, 720, 120, 10), 200, 'a 120 fps source, not interpolated: as before (x2)')
  t.equal(videoPrice(p, 'premium', 1280, 720, 120, 10, true), 800)
  t.equal(videoPrice(p, 'interp', 1280, 720, 24, 40, true), 400, 'interp class: the standard table, x4 seconds (slowmo 4)')
})

t.test('submission: bad values are clear errors, nothing charged; old clients\' values change nothing', { skip: !hasFfmpeg && 'ffmpeg/ffprobe not installed' }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = await tempDir(t)
  const { key, id } = await createKey(app, { coins: 10_000 })
  const clip = path.join(dir, 'c.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=12:duration=1', '-f', 'lavfi', '-i', 'sine=duration=1', '-c:v', 'libx264', '-c:a', 'aac', '-shortest', clip)
  const url = srv.put('c.mp4', fs.readFileSync(clip))
  const base = { video_url: url, model_name: 'general_restore_2x', resolution: [128, 96] }
  const cases: Array<[string, object, number]> = [
    ['fps 121', { fps: 121 }, 100403000],
    ['fps 100 (over 8x of 12 fps)', { fps: 100 }, 100403000],
    ['slowmo 3', { slowmo: 3 }, 100403000],
    ['slowmo "4"', { slowmo: '4' }, 100403000],
    ['slowmo 8 with fps 24', { slowmo: 8, fps: 24 }, 100403000],
    ['GIF at 60 fps', { fps: 60, extension: '.gif' }, 100403000],
    ['frame_interpolation without fps', { model_name: 'frame_interpolation' }, 100403000],
    ['frame_interpolation, fps at the source rate', { model_name: 'frame_interpolation', fps: 12 }, 100403000],
  ]
  for (const [name, extra, code] of cases) {
    const r = await post(app, '/api/video-enhancer', key, { ...base, ...extra })
    t.equal(r.statusCode, 403, name)
    t.same(Object.keys(r.json()), ['error_code', 'message', 'code', 'msg', 'detail'], `${name}: the four fields + detail`)
    t.match(r.json(), { error_code: code, code, message: 'Invalid request parameters', detail: /fps|slowmo|frame_interpolation|GIF/ }, `${name}: ${r.json().detail}`)
  }
  t.equal(await balance(app, id), 10_000, 'nothing charged')
  const dur = (await probeVideo(clip)).duration
  // What old clients send (compat.md lists `fps` among their extra fields): the same answer as without it.
  const plain = await post(app, '/api/video-enhancer', key, base)
  for (const extra of [{ fps: 12 }, { fps: '60' }, { fps: 5 }, { fps: null }, { fps: 12.05, keep_audio: true, pid: 3 }]) {
    const r = await post(app, '/api/video-enhancer', key, { ...base, ...extra })
    t.equal(r.statusCode, 200, JSON.stringify(extra))
    t.same(Object.keys(r.json().data), ['job_id', 'consume_coins'])
    t.equal(r.json().data.consume_coins, plain.json().data.consume_coins, `${JSON.stringify(extra)}: same price`)
    const job = await app.lucent.store.getJob(r.json().data.job_id)
    t.notOk('interp' in (job!.params as object), 'no interpolation stored')
  }
  t.equal(plain.json().data.consume_coins, Math.ceil(10 * dur))
  // Accepted with interpolation: priced by the output (24 fps, the same 192p tier; slowmo 4: 4x the seconds).
  const fps24 = await post(app, '/api/video-enhancer', key, { ...base, fps: 24 })
  t.equal(fps24.json().data.consume_coins, Math.ceil(10 * dur))
  t.match((await app.lucent.store.getJob(fps24.json().data.job_id))?.params, { interp: { fps: '24', slowmo: 1, order: 'after' } })
  const fps48 = await post(app, '/api/video-enhancer', key, { ...base, fps: 48 })
  t.equal(fps48.json().data.consume_coins, Math.ceil(20 * dur), '48 fps: the 30-60 band')
  const slow = await post(app, '/api/video-enhancer', key, { ...base, slowmo: 4 })
  t.equal(slow.json().data.consume_coins, Math.ceil(10 * dur * 4))
  const only = await post(app, '/api/video-enhancer', key, { video_url: url, model_name: 'frame_interpolation', fps: 96 })
  t.equal(only.statusCode, 200, 'frame_interpolation: resolution may be left out')
  t.match((await app.lucent.store.getJob(only.json().data.job_id))?.params, { resolution: [64, 48], interp: { fps: '96', order: 'after' } })
  t.equal(only.json().data.consume_coins, Math.ceil(10 * 4 * dur), '96 fps interpolated: x4')
})
