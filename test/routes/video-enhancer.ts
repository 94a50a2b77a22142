/** Video submission: validation, probing with ffprobe, price; real jobs complete (charged once) or end in ERROR
 *  with a refund. */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { build, createKey, balance, post, png, inputServer, sharedData, tempDir, waitFor } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const demo = path.join(sharedData, 'video', 'onepiece_demo.mp4')

t.test('video validation codes', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 10_000 })
  const url = srv.put('v.mp4', fs.readFileSync(demo))
  const good = { video_url: url, model_name: 'general_restore_2x', resolution: [1280, 960] }
  const cases: Array<[string, unknown, number, number]> = [
    ['missing resolution', { video_url: url, model_name: 'general_restore_2x' }, 403, 100403000],
    ['resolution of 3', { ...good, resolution: [1, 2, 3] }, 403, 100403000],
    ['resolution strings', { ...good, resolution: ['a', 'b'] }, 403, 100403000],
    ['photo model on video', { ...good, model_name: 'general_4x' }, 400, 110400005],
    ['unknown model', { ...good, model_name: 'nope' }, 400, 110400005],
    ['bad extension', { ...good, extension: '.png' }, 400, 110400007],
    ['output over 36 MP', { ...good, resolution: [8000, 5000] }, 400, 110400010],
    ['malformed url', { ...good, video_url: 'nope' }, 400, 110400008],
    ['unreachable url', { ...good, video_url: 'http://127.0.0.1:1/v.mp4' }, 400, 110400008],
    ['not a video', { ...good, video_url: srv.put('p.mp4', png(8, 8)) }, 400, 110400007],
  ]
  for (const [name, body, status, code] of cases) {
    const r = await post(app, '/api/video-enhancer', key, body)
    t.same({ status: r.statusCode, code: r.json().error_code }, { status, code }, name)
  }
  t.equal(await balance(app, id), 10_000)
})

t.test('ffprobe missing -> 100500005', async (t) => {
  const app = await build(t, { LUCENT_FFPROBE: '/nonexistent/ffprobe' })
  const srv = await inputServer(t)
  const { key } = await createKey(app)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('v.mp4', fs.readFileSync(demo)), model_name: 'general_restore_1x', resolution: [640, 480] })
  t.same({ status: r.statusCode, code: r.json().error_code }, { status: 500, code: 100500005 })
})

t.test('duration limits, price, real jobs, refunds', { skip: !hasFfmpeg && 'ffmpeg/ffprobe not installed' }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const dir = await tempDir(t)
  const short = path.join(dir, 'short.mp4')
  execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=0.2:size=64x64:rate=25', '-pix_fmt', 'yuv420p', short])
  const { key, id } = await createKey(app, { coins: 1000 })
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('short.mp4', fs.readFileSync(short)), model_name: 'general_restore_2x', resolution: [128, 128] })
  t.same({ status: r.statusCode, code: r.json().error_code }, { status: 400, code: 110400011 }, '0.2 s is under the 0.5 s minimum')

  // A 1 s cut, downscaled, so the jobs really run to the end on the CPU backend within the test.
  const cut = path.join(dir, 'cut.mp4')
  execFileSync('ffmpeg', ['-v', 'error', '-i', demo, '-t', '1', '-vf', 'scale=64:48', '-c:a', 'copy', cut])
  const duration = Number(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', cut]).toString())
  const ok = await post(app, '/api/video-enhancer', key, { video_url: srv.put('cut.mp4', fs.readFileSync(cut)), model_name: 'general_restore_2x', resolution: [1280, 960], fps: 24, keep_audio: true })
  t.equal(ok.statusCode, 200)
  // 960p target at 23.98 fps: the 1080p tier, 15 coins per second (compat.md)
  t.equal(ok.json().data.consume_coins, Math.ceil(15 * duration))
  const premium = await post(app, '/api/video-enhancer', key, { video_url: srv.put('cut2.mp4', fs.readFileSync(cut)), model_name: 'ultrahd_restore_2x', resolution: [1280, 720], extension: '.mkv' })
  t.equal(premium.json().data.consume_coins, Math.ceil(2 * 10 * duration), '720p tier doubled for Ultra HD')
  const ended = async (job: string) => waitFor(async () => {
    const s = (await post(app, '/api/task-status', key, { job_id: job })).json().data
    return s.status !== 'CONVERTING' && s
  }, 180_000)
  const a = await ended(ok.json().data.job_id)
  const b = await ended(premium.json().data.job_id)
  t.equal(a.status, 'COMPLETED', 'general_restore_2x runs the real pipeline')
  t.ok(b.status === 'COMPLETED' || (b.status === 'ERROR' && typeof b.error_code === 'number'))
  const charged = [a, b].filter((s) => s.status === 'COMPLETED').reduce((n, s) => n + s.consume_coins, 0)
  t.equal(await balance(app, id), 1000 - charged, 'ERROR jobs refunded, completed ones charged once')
  const ledger = await app.lucent.store.ledger(id)
  t.equal(ledger.reduce((s, e) => s + e.delta, 0), 1000 - charged, 'the balance equals the ledger')
})
