/**
 * Abuse (issue 29, holes 1-4 and 10b): a video's work is bounded by its price, through the one video plan
 * (server/video/plan.ts). Crafted files are made here (ffmpeg, mkvmerge / mkvpropedit, byte patches):
 * 1. dense packets under a 1 fps declaration with `fps: 8` on ultrahd_restore_2x: priced like an honest file, and
 *    only the source frames the output shows go through SR (the real engine, the pool's calls recorded);
 * 2. a 4x model at the input's own resolution: compat.md's price, the network runs on frames pre-scaled so its
 *    output stays within the priced tier; a panorama is priced by the megapixel rule; a decoded frame over the
 *    per-frame limit is refused (110400009) before any debit;
 * 3. cover art (an attached picture) first: the probed stream is the one decoded (the output has the movie's
 *    frames, not the cover cut into frame-sized pieces);
 * 4. a packet listing that fails or passes its time limit refuses the job (110400008, nothing debited); packets
 *    without a timestamp are counted (an AVI declaring 10 frames holding 300); a source above 60 fps pays the
 *    per-frame floor; the worker stops a job that decodes more frames than its plan (+ the margin);
 * 10b. a playlist (HLS) naming another local file is not read: refused as not a video (110400007).
 * The engine parts skip until the addon is built.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import type { FastifyInstance } from 'fastify'
import { build, createKey, balance, post, inputServer, addonBuilt, modelDir, waitFor } from '../helper.js'
import { inspect } from '../support/inspect.js'
import { videoPrice, videoTable } from '../../server/pricing.js'
import { frameFloorCoins, videoRate, videoNetworkSize } from '../../server/price-rules.js'
import { probeVideo } from '../../server/video/probe.js'
import { BUDGET_CODE } from '../../server/jobs/video.js'
import type { VideoParams } from '../../server/jobs/params.js'
import { videoQuote } from '../../playground/src/price.js'
import type { CatalogModel } from '../../playground/src/api.js'

const works = (bin: string, arg: string) => spawnSync(bin, [arg]).status === 0
const hasTools = works('ffmpeg', '-version') && works('ffprobe', '-version') && works('mkvmerge', '--version') && works('mkvpropedit', '--version')
const noTools = !hasTools && 'ffmpeg, ffprobe, mkvmerge and mkvpropedit are needed'
const hasSr = fs.existsSync(path.join(modelDir, 'sr'))
const noEngine = noTools || (!addonBuilt ? 'native addon not built' : !hasSr ? `no sr models in ${modelDir}` : false)
const ff = (...a: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...a])

type Status = { status: string; error_code?: number; res_url?: string; message?: string }
const finish = (app: FastifyInstance, key: string, job: string) => waitFor(async () => {
  const d = (await post(app, '/api/task-status', key, { job_id: job })).json().data as Status
  return d.status !== 'CONVERTING' && d
}, 180_000, 100)

async function download(app: FastifyInstance, url: string, file: string): Promise<string> {
  const u = new URL(url)
  const res = await app.inject({ method: 'GET', url: u.pathname + u.search })
  if (res.statusCode !== 200) throw new Error(`download ${res.statusCode}`)
  fs.writeFileSync(file, res.rawPayload)
  return file
}

/** The real pool's video calls, recorded (the engine still does the work). */
function record(app: FastifyInstance) {
  const pool = app.lucent.pool!
  const sr: Array<{ count: number; width: number; height: number }> = []
  const rife: number[] = []
  const enhanceFrames = pool.enhanceFrames.bind(pool)
  const interpolateFrames = pool.interpolateFrames.bind(pool)
  pool.enhanceFrames = (frames, o, call) => {
    sr.push({ count: o.count, width: o.width, height: o.height })
    return enhanceFrames(frames, o, call)
  }
  pool.interpolateFrames = (frames, o, call) => {
    rife.push(o.positions.length)
    return interpolateFrames(frames, o, call)
  }
  return { sr, rife, srFrames: () => sr.reduce((a, c) => a + c.count, 0) }
}

const params = async (app: FastifyInstance, job: string) => (await app.lucent.store.getJob(job))!.params as VideoParams

/** A Matroska file of `n` 32x32 frames 2 ms apart (0.6 s for 300) whose track declares 1 fps (DefaultDuration). */
function dense(dir: string, n: number): string {
  const src = path.join(dir, 'dense.src.mkv')
  const out = path.join(dir, 'dense.mkv')
  const ts = path.join(dir, 'dense.ts.txt')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', String(n), '-c:v', 'libx264', '-pix_fmt', 'yuv420p', src)
  fs.writeFileSync(ts, ['# timestamp format v2', ...Array.from({ length: n + 1 }, (_, i) => String(i * 2))].join('\n') + '\n')
  const r = spawnSync('mkvmerge', ['-q', '-o', out, '--timestamps', `0:${ts}`, src])
  if (r.status !== 0 && r.status !== 1) throw new Error(`mkvmerge: ${r.stderr}`)
  execFileSync('mkvpropedit', ['-q', out, '--edit', 'track:v1', '--set', 'default-duration=1000000000'])
  return out
}

t.test('hole 1: interpolation on a 2x model runs SR only on the source frames the output shows, priced', { skip: noEngine }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 10_000 })
  const file = dense(dir, 300)
  const pr = await probeVideo(file)
  t.equal(pr.fps, 1, 'the file declares 1 fps')
  t.ok(Math.abs(pr.duration - 0.6) < 0.01, `and ${pr.duration} s`)
  const calls = record(app)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('dense.mkv', fs.readFileSync(file)), model_name: 'ultrahd_restore_2x', resolution: [64, 64], fps: 8 })
  t.equal(r.statusCode, 200, r.body)
  const job = r.json().data.job_id as string
  const d = await finish(app, key, job)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  // 0.6 s at 8 fps = 5 output frames, each on or between two source frames: at most 10 through SR
  t.ok(calls.srFrames() <= 10, `the worker ran SR on ${calls.srFrames()} frames, at most two per output frame (not the 300 decoded)`)
  t.ok(calls.sr.every((c) => c.width === 32 && c.height === 32))
  if (d.res_url) t.equal(inspect(await download(app, d.res_url, path.join(dir, 'out.mp4'))).frames, 5, 'five output frames')
  t.equal(await balance(app, id), 10_000 - r.json().data.consume_coins)
  // the plan stored with the job says the same, and priced it
  const plan = (await params(app, job)).plan
  t.equal(plan?.frames, 300, 'the plan counts the 300 packets (the flood check runs with interpolation too)')
  t.equal(plan?.outFrames, 5, '0.6 s at 8 fps')
  t.equal(plan?.srFrames, calls.srFrames(), 'the plan\'s SR frames are the ones the worker ran')
  // priced: the output's seconds at the output's rate, and never below the per-frame floor of the SR frames
  const table = videoTable(app.lucent.prices, 'premium')
  t.equal(r.json().data.consume_coins, Math.max(videoPrice(app.lucent.prices, 'premium', 64, 64, 8, 0.6, true), frameFloorCoins(videoRate(table, 64, 64).perSecond, calls.srFrames())))
})

t.test('hole 2: the network never outputs more per frame than the priced tier holds', { skip: noTools }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 10_000 })
  const prices = app.lucent.prices
  const table = videoTable(prices, 'standard')

  // the megapixel rule: ordinary aspects keep their short side's tier, a panorama does not
  t.equal(videoRate(table, 1280, 720).tier, '720p')
  t.equal(videoRate(table, 720, 1280).tier, '720p')
  t.equal(videoRate(table, 1680, 720).tier, '720p', '21:9 at 720: the 720p tier')
  t.equal(videoRate(table, 1920, 1080).tier, '1080p')
  t.equal(videoRate(table, 7680, 720).tier, '4k', 'a 7680x720 panorama (5.5 MP) is priced at the 4K tier')
  // the network's sizes: a 4096x2160 input on a 4x model asking 4096x2160 stays within the 4K tier
  const big = videoNetworkSize(table, 4, { width: 4096, height: 2160 }, [4096, 2160], 36)
  t.ok(Math.min(big.output.width, big.output.height) <= 2160 && big.output.width * big.output.height <= 2160 * 2160 * 21 / 9,
    `4096x2160 x4 at the 4K tier: the network outputs ${big.output.width}x${big.output.height}, not 16384x8640`)

  // a 640x360 clip on general_restore_4x asking 640x360: compat.md's price, the network at 320x180 -> 1280x720
  const clip = path.join(dir, 'clip.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=640x360:rate=4', '-frames:v', '2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', clip)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('clip.mp4', fs.readFileSync(clip)), model_name: 'general_restore_4x', resolution: [640, 360] })
  t.equal(r.statusCode, 200, r.body)
  t.equal(r.json().data.consume_coins, videoPrice(prices, 'standard', 640, 360, 4, 0.5), 'compat.md\'s price for the request')
  const plan = (await params(app, r.json().data.job_id)).plan
  t.same([plan?.netIn, plan?.netOut], [{ width: 320, height: 180 }, { width: 1280, height: 720 }], 'pre-scaled: the network outputs 1280x720, the 720p tier, not 2560x1440')
  t.equal(plan?.work, 2 * 1280 * 720 / 1e6, 'the work the price covers: 2 frames of 0.92 MP')

  // a 7680x720 panorama on a 1x model asking its own size: priced at the 4K tier, not 720p
  const pano = path.join(dir, 'pano.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=7680x720:rate=4', '-frames:v', '2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', pano)
  const pr = await post(app, '/api/video-enhancer', key, { video_url: srv.put('pano.mp4', fs.readFileSync(pano)), model_name: 'general_restore_1x', resolution: [7680, 720] })
  t.equal(pr.statusCode, 200, pr.body)
  t.equal(pr.json().data.consume_coins, videoPrice(prices, 'standard', 3840, 2160, 4, 0.5), 'the 4K tier\'s price')
  t.ok(pr.json().data.consume_coins > videoPrice(prices, 'standard', 1280, 720, 4, 0.5), 'more than the 720p tier')
  // the playground quotes the same (its page computes with server/price-rules.ts over GET /api/models' tables)
  const models = (await app.inject({ method: 'GET', url: '/api/models' })).json().data.models as CatalogModel[]
  const m1 = models.find((m) => m.name === 'general_restore_1x')!
  t.equal(videoQuote(m1, 7680, 720, 0.5).coins, pr.json().data.consume_coins, 'the playground\'s quote for the panorama')
  t.match(videoQuote(m1, 7680, 720, 0.5).text, /at 4k/)

  // decoded frames over the per-frame limit (36 MP): refused before any debit
  const before = await balance(app, id)
  const huge = path.join(dir, 'huge.mkv')
  ff('-f', 'lavfi', '-i', 'color=c=gray:size=8192x4608:rate=4', '-frames:v', '2', '-c:v', 'ffv1', huge)
  const h = await post(app, '/api/video-enhancer', key, { video_url: srv.put('huge.mkv', fs.readFileSync(huge)), model_name: 'general_restore_1x', resolution: [1920, 1080] })
  t.equal(h.statusCode, 400, h.body)
  t.match(h.json(), { error_code: 110400009, detail: /over 36 MP/ })
  t.equal(await balance(app, id), before, 'nothing debited')
})

t.test('hole 2 in the worker: a 4x model at the input\'s own resolution runs on pre-scaled frames', { skip: noEngine }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key } = await createKey(app, { coins: 10_000 })
  const clip = path.join(dir, 'clip.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=640x360:rate=4', '-frames:v', '2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', clip)
  const calls = record(app)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('clip.mp4', fs.readFileSync(clip)), model_name: 'general_restore_4x', resolution: [640, 360] })
  t.equal(r.statusCode, 200, r.body)
  const d = await finish(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  t.ok(calls.sr.length > 0 && calls.sr.every((c) => c.width === 320 && c.height === 180), `the network got 320x180 frames: ${JSON.stringify(calls.sr)}`)
  t.equal(calls.srFrames(), 2)
  if (d.res_url) {
    const o = inspect(await download(app, d.res_url, path.join(dir, 'out.mp4')))
    t.same([o.width, o.height, o.frames], [640, 360, 2], 'the output asked for')
  }
})

/** Moves an MP4's `udta` box (where the cover art lives) before its tracks, so demuxers list the cover first (the
 *  media data precedes `moov`: no offset changes). */
function coverFirst(file: string): void {
  const b = fs.readFileSync(file)
  const boxes = (s: number, e: number) => {
    const out: Array<{ type: string; at: number; size: number }> = []
    for (let i = s; i < e; i += b.readUInt32BE(i)) out.push({ type: b.toString('latin1', i + 4, i + 8), at: i, size: b.readUInt32BE(i) })
    return out
  }
  const moov = boxes(0, b.length).find((x) => x.type === 'moov')!
  const kids = boxes(moov.at + 8, moov.at + moov.size)
  const rank = (x: { type: string }) => (x.type === 'mvhd' ? 0 : x.type === 'udta' ? 1 : 2)
  const body = [...kids].sort((x, y) => rank(x) - rank(y)).map((x) => b.subarray(x.at, x.at + x.size))
  fs.writeFileSync(file, Buffer.concat([b.subarray(0, moov.at + 8), ...body, b.subarray(moov.at + moov.size)]))
}

t.test('hole 3: cover art first: the probed stream is the one decoded', { skip: noEngine }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key } = await createKey(app, { coins: 10_000 })
  const movie = path.join(dir, 'movie.mp4')
  const cover = path.join(dir, 'cover.png')
  const file = path.join(dir, 'covered.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', '10', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', movie)
  // a tall cover: 32x3200, as raw frames of the movie's size that is 100 frames
  ff('-f', 'lavfi', '-i', 'color=c=red:size=32x3200', '-frames:v', '1', cover)
  ff('-i', movie, '-i', cover, '-map', '0', '-map', '1', '-c', 'copy', '-disposition:v:1', 'attached_pic', file)
  coverFirst(file)
  const streams = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=index,codec_name:stream_disposition=attached_pic', '-of', 'csv=p=0', file]).toString().trim().split('\n')
  t.match(streams[0], /^0,png,1/, `the cover is stream 0: ${streams.join(' | ')}`)
  const calls = record(app)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('covered.mp4', fs.readFileSync(file)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(r.statusCode, 200, r.body)
  const d = await finish(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  t.equal(calls.srFrames(), 10, 'the network saw the movie\'s 10 frames, not the cover cut into 100')
  if (d.res_url) t.equal(inspect(await download(app, d.res_url, path.join(dir, 'out.mp4'))).frames, 10)
  const plan = (await params(app, r.json().data.job_id)).plan
  t.same([plan?.stream, plan?.frames], [1, 10], 'the plan: stream 1, its 10 frames')
})

/** An ffprobe that behaves like the real one, except for packet listings (`mode`: fail, or hang). */
function fakeFfprobe(dir: string, mode: 'fail' | 'hang'): string {
  const real = execFileSync('sh', ['-c', 'command -v ffprobe']).toString().trim()
  const f = path.join(dir, `ffprobe-${mode}`)
  const act = mode === 'fail' ? 'echo "listing failed" >&2; exit 1' : 'exec sleep 30'
  fs.writeFileSync(f, `#!/bin/sh\ncase "$*" in *packet=*) ${act};; esac\nexec ${real} "$@"\n`, { mode: 0o755 })
  return f
}

t.test('hole 4: the frame count fails closed', { skip: noTools }, async (t) => {
  const dir = t.testdir()
  const srv = await inputServer(t)
  const clip = path.join(dir, 'clip.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', '10', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', clip)
  const body = () => ({ video_url: srv.put('clip.mp4', fs.readFileSync(clip)), model_name: 'general_restore_1x', resolution: [32, 32] })
  for (const mode of ['fail', 'hang'] as const) {
    const app = await build(t, { LUCENT_FFPROBE: fakeFfprobe(dir, mode), LUCENT_VIDEO_PROBE_TIMEOUT_MS: '500' })
    app.lucent.queue.pause()
    const { key, id } = await createKey(app, { coins: 1000 })
    const t0 = Date.now()
    const r = await post(app, '/api/video-enhancer', key, body())
    t.equal(r.statusCode, 400, `a listing that ${mode}s: ${r.body}`)
    t.match(r.json(), { error_code: 110400008, detail: mode === 'fail' ? /listing failed/ : /no answer within 500 ms/ })
    t.ok(Date.now() - t0 < 10_000, 'answered within the listing\'s time limit')
    t.equal(await balance(app, id), 1000, 'nothing debited')
  }
})

t.test('hole 4: packets without a timestamp are counted; above 60 fps the frames are paid for', { skip: noTools }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key } = await createKey(app, { coins: 100_000 })
  const prices = app.lucent.prices
  // An AVI of 300 H.264 frames with B-frames (no packet has a pts) whose headers declare 10 frames (1 s at 10 fps).
  const avi = path.join(dir, 'flood.avi')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', '300', '-c:v', 'libx264', '-bf', '2', avi)
  const b = fs.readFileSync(avi)
  const avih = b.indexOf('avih')
  const strh = b.indexOf('strh')
  t.equal(b.readUInt32LE(avih + 24), 300)
  b.writeUInt32LE(10, avih + 24) // dwTotalFrames
  b.writeUInt32LE(10, strh + 40) // the stream's dwLength
  fs.writeFileSync(avi, b)
  const pr = await probeVideo(avi)
  t.same([pr.duration, pr.frames], [1, 10], 'declares 1 s, 10 frames')
  const pts = execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', avi]).toString().trim().split('\n')
  t.ok(pts.length === 300 && pts.every((x) => x === 'N/A'), '300 packets, none with a pts')
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('flood.avi', fs.readFileSync(avi)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(r.statusCode, 200, r.body)
  t.equal(r.json().data.consume_coins, videoPrice(prices, 'standard', 32, 32, 10, 30), 'priced by its 300 frames (30 s at 10 fps)')
  t.equal((await params(app, r.json().data.job_id)).plan?.frames, 300)

  // 240 fps for 2 s: 480 frames through the network; compat.md's 30-60 band price (x2) would cover 120
  const fast = path.join(dir, 'fast.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=240', '-frames:v', '480', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', fast)
  const f = await post(app, '/api/video-enhancer', key, { video_url: srv.put('fast.mp4', fs.readFileSync(fast)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(f.statusCode, 200, f.body)
  const floor = frameFloorCoins(videoRate(videoTable(prices, 'standard'), 32, 32).perSecond, 480)
  t.equal(f.json().data.consume_coins, floor, `the per-frame floor: ${floor} coins for 480 frames`)
  t.ok(floor > videoPrice(prices, 'standard', 32, 32, 240, 2), 'more than the x2 band price')
  // an honest 60 fps file keeps compat.md's price
  const sixty = path.join(dir, 'sixty.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=60', '-frames:v', '60', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', sixty)
  const s = await post(app, '/api/video-enhancer', key, { video_url: srv.put('sixty.mp4', fs.readFileSync(sixty)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(s.json().data.consume_coins, videoPrice(prices, 'standard', 32, 32, 60, 1), 'an honest 60 fps second: compat.md\'s price')
})

t.test('hole 4 in the worker: a job that decodes more frames than its plan stops', { skip: noEngine }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 10_000 })
  const clip = path.join(dir, 'clip.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', '40', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', clip)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('clip.mp4', fs.readFileSync(clip)), model_name: 'general_restore_1x', resolution: [32, 32] })
  t.equal(r.statusCode, 200, r.body)
  const job = (await app.lucent.store.getJob(r.json().data.job_id))!
  const p = job.params as VideoParams
  t.equal(p.plan?.frames, 40)
  // the same file under a plan that counted 10 frames (as if the count had been fooled): a second job
  const calls = record(app)
  const c = await post(app, '/api/task-cancel', key, { job_id: r.json().data.job_id })
  t.equal(c.statusCode, 200, 'the first job canceled (it never runs)')
  const id2 = 'f'.repeat(32)
  await app.lucent.storage.put(`o/${id2}.mp4`, fs.readFileSync(clip), 'video/mp4')
  const plan = { ...p.plan!, frames: 10, srFrames: 10, outFrames: 10, work: 10 * 32 * 32 / 1e6 }
  const s = await app.lucent.jobs.submit({ id: id2, keyId: id, kind: 'video', model: 'general_restore_1x', coins: 1, originalKey: `o/${id2}.mp4`, params: { ...p, plan } })
  t.ok(s.ok)
  app.lucent.queue.resume()
  const d = await finish(app, key, id2)
  t.match(d, { status: 'ERROR', error_code: BUDGET_CODE }, `stopped: ${JSON.stringify(d)}`)
  t.ok(calls.srFrames() <= 10 + 1 + 8, `at most the plan's frames + the margin (+ one batch decoded ahead) went through the network: ${calls.srFrames()}`)

  // the frames counted right but the work priced for 10 of them (as if a price rule had been wrong): the work
  // meter stops the job before the network makes more than the priced work + 2 % + one frame
  calls.sr.length = 0
  const id3 = 'e'.repeat(32)
  await app.lucent.storage.put(`o/${id3}.mp4`, fs.readFileSync(clip), 'video/mp4')
  const s3 = await app.lucent.jobs.submit({ id: id3, keyId: id, kind: 'video', model: 'general_restore_1x', coins: 1, originalKey: `o/${id3}.mp4`, params: { ...p, plan: { ...p.plan!, work: 10 * 32 * 32 / 1e6 } } })
  t.ok(s3.ok)
  const d3 = await finish(app, key, id3)
  t.match(d3, { status: 'ERROR', error_code: BUDGET_CODE, message: /exceeded the work its price covers/ }, `stopped: ${JSON.stringify(d3)}`)
  t.ok(calls.srFrames() <= 11, `the network made at most the priced 10 frames + one: ${calls.srFrames()}`)
})

t.test('10b: a playlist naming another local file is not read', { skip: noTools }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = t.testdir()
  const { key, id } = await createKey(app, { coins: 1000 })
  const secret = path.join(dir, 'secret.ts')
  ff('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=10', '-frames:v', '10', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-f', 'mpegts', secret)
  const playlist = Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n${secret}\n#EXT-X-ENDLIST\n`)
  // what ffprobe alone does with it: it opens the other file, a video
  fs.writeFileSync(path.join(dir, 'pl.m3u8'), playlist)
  t.match(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=format_name:stream=codec_type', '-of', 'csv=p=0', path.join(dir, 'pl.m3u8')]).toString(), /video[\s\S]*hls/)
  await t.rejects(probeVideo(path.join(dir, 'pl.m3u8')), 'probeVideo refuses the playlist')
  for (const name of ['pl.m3u8', 'pl.mp4']) {
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put(name, playlist), model_name: 'general_restore_1x', resolution: [32, 32] })
    t.equal(r.statusCode, 400, `${name}: ${r.body}`)
    t.equal(r.json().error_code, 110400007)
  }
  t.equal(await balance(app, id), 1000, 'nothing debited')
})
