/**
 * Video jobs end to end with the real engine (native addon through the engine pool), on a ~1 s cut of the
 * demo clip downscaled to 128x96: every video model is submitted. The general_restore_* models have a real
 * pipeline in the engine's catalog and must COMPLETE with the requested size, the same frame count and
 * duration (within one frame) and bit-exact audio; a model the engine cannot run yet must end in ERROR
 * (110400005, "not available") with its coins refunded, never in a fake success. Also: a corrupt stream
 * mid-file (ERROR, refund, no temp files), and a VFR + rotated clip through the API.
 * Skips until the addon is built (npm run build:native).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import type { FastifyInstance } from 'fastify'
import { inspect, audioHash } from '../support/inspect.js'
import { probeTimestamps } from '../../server/video/probe.js'
import { VIDEO_MODELS } from '../../server/catalog.js'
import { build, createKey, balance, post, inputServer, addonBuilt, sharedData, tempDir, waitFor } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const hasMkvmerge = spawnSync('mkvmerge', ['--version']).status === 0
const demo = path.join(sharedData, 'video', 'onepiece_demo.mp4')
const ff = (...a: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...a])
const skip = !addonBuilt ? 'native/node/index.js not built yet (npm run build:native)' : !hasFfmpeg ? 'ffmpeg/ffprobe not installed' : false
/** Names the engine implements must complete: general_restore_* always (native/engine/src/catalog.rs), and
 *  every video entry the built addon's catalog marks available. */
const MUST_COMPLETE = new Set(['general_restore_1x', 'general_restore_2x', 'general_restore_4x'])
if (addonBuilt) {
  const addon = createRequire(import.meta.url)('@lucent/native') as typeof import('@lucent/native')
  for (const c of addon.catalog()) if (c.kind === 'video' && c.available) MUST_COMPLETE.add(c.name)
}

type Status = { status: string; progress: number; res_url?: string; error_code?: number; message?: string }

async function finish(app: FastifyInstance, key: string, job: string, seen?: number[]): Promise<Status> {
  return waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: job })).json().data as Status
    seen?.push(d.progress)
    return d.status !== 'CONVERTING' && d
  }, 900_000, 200)
}

async function download(app: FastifyInstance, url: string, file: string): Promise<void> {
  const u = new URL(url)
  const res = await app.inject({ method: 'GET', url: u.pathname + u.search })
  if (res.statusCode !== 200) throw new Error(`download ${res.statusCode}`)
  fs.writeFileSync(file, res.rawPayload)
}

t.test('shutdown mid-job: batch cancelled, temp files removed, job left CONVERTING for the next start', { skip }, async (t) => {
  const tmp = await tempDir(t, 'lucent-vtmp-')
  const app = await build(t, { LUCENT_VIDEO_TMP: tmp })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const dir = await tempDir(t)
  const small = path.join(dir, 'small.mp4') // the whole demo (7.5 s) at 128x96: minutes of work on the CPU
  ff('-i', demo, '-vf', 'scale=128:96', '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'copy', small)
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('d.mp4', fs.readFileSync(small)), model_name: 'general_restore_2x', resolution: [256, 192] })
  const job = r.json().data.job_id
  await waitFor(async () => fs.readdirSync(tmp).length > 0, 120_000, 50) // first batch done, the output is being written
  const t0 = Date.now()
  await app.close()
  t.ok(Date.now() - t0 < 15_000, `closed in ${Date.now() - t0} ms (the running batch was cancelled)`)
  await waitFor(async () => fs.readdirSync(tmp).length === 0, 10_000, 50).catch(() => {})
  t.same(fs.readdirSync(tmp), [], 'no temporary files left')
  const { SqliteStore } = await import('../../server/store/sqlite.js')
  const store = new SqliteStore(path.join(app.lucent.config.dataDir, 'lucent.db'))
  t.equal((await store.getJob(job))?.status, 'CONVERTING')
  await store.close()
})

t.test('video jobs with the real engine', { skip }, async (t) => {
  const tmp = await tempDir(t, 'lucent-vtmp-')
  const app = await build(t, { LUCENT_VIDEO_TMP: tmp })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const dir = await tempDir(t)
  const cut = path.join(dir, 'cut.mp4')
  ff('-i', demo, '-t', '1', '-vf', 'scale=128:96', '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'copy', cut)
  const src = inspect(cut)
  const srcAudio = audioHash(cut)
  const frameTime = 50 / 1199
  const url = srv.put('cut.mp4', fs.readFileSync(cut))

  t.test('all seven video models', async (t) => {
    const { key, id } = await createKey(app, { coins: 10_000 })
    const jobs: Array<{ model: string; job: string; coins: number; target: [number, number] }> = []
    for (const m of VIDEO_MODELS.values()) {
      if (m.name === 'frame_interpolation') continue // needs fps or slowmo: interp-e2e.ts
      const target: [number, number] = [128 * m.scale, 96 * m.scale]
      const r = await post(app, '/api/video-enhancer', key, { video_url: url, model_name: m.name, resolution: target })
      t.equal(r.statusCode, 200, `${m.name} accepted`)
      jobs.push({ model: m.name, job: r.json().data.job_id, coins: r.json().data.consume_coins, target })
    }
    const missing: string[] = []
    let charged = 0
    for (const j of jobs) {
      const seen: number[] = []
      const started = Date.now()
      const st = await finish(app, key, j.job, seen)
      const secs = (Date.now() - started) / 1000
      if (st.status === 'ERROR' && !MUST_COMPLETE.has(j.model)) {
        t.equal(st.error_code, 110400005, `${j.model}: not in the engine yet -> ERROR 110400005`)
        t.match(st.message, /not available|unknown/, `${j.model}: says why (${st.message})`)
        missing.push(j.model)
        continue
      }
      t.equal(st.status, 'COMPLETED', `${j.model}: ${JSON.stringify(st)}`)
      if (st.status !== 'COMPLETED') continue
      charged += j.coins
      t.equal(st.progress, 100)
      t.ok(seen.every((p, i) => i === 0 || p >= seen[i - 1]), `${j.model}: progress never goes back`)
      const out = path.join(dir, `${j.model}.mp4`)
      await download(app, st.res_url!, out)
      const o = inspect(out)
      t.same([o.width, o.height], j.target, `${j.model}: requested resolution`)
      t.equal(o.frames, src.frames, `${j.model}: same frame count (${o.frames})`)
      t.ok(Math.abs(o.duration - src.duration) <= frameTime + 0.002, `${j.model}: duration ${o.duration} vs ${src.duration}`)
      t.equal(audioHash(out), srcAudio, `${j.model}: audio packets hash equal`)
      t.comment(`${j.model}: ${src.frames} frames in ${secs.toFixed(1)} s (progress seen: ${[...new Set(seen)].join(',')})`)
    }
    if (missing.length) t.comment(`video models the engine does not implement yet: ${missing.join(', ')}`)
    await waitFor(async () => (await balance(app, id)) === 10_000 - charged, 10_000)
    t.equal(await balance(app, id), 10_000 - charged, 'failed models refunded, completed ones charged once')
    t.same(fs.readdirSync(tmp), [], 'no temporary files left')
  })

  t.test('corrupt stream mid-file: ERROR, refunded, temp files gone', async (t) => {
    const { key, id } = await createKey(app, { coins: 1000 })
    const good = path.join(dir, 'good.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=25:duration=2', '-f', 'lavfi', '-i', 'sine=duration=2', '-c:v', 'libx264', '-g', '10', '-c:a', 'aac', '-movflags', '+faststart', good)
    const b = fs.readFileSync(good)
    let x = 777
    for (let i = b.length >> 1; i < (b.length >> 1) + 2000; i++) { x = (x * 1103515245 + 12345) >>> 0; b[i] = x >>> 24 }
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('bad.mp4', b), model_name: 'general_restore_1x', resolution: [64, 48] })
    t.equal(r.statusCode, 200, 'probe passes (the damage is mid-file)')
    const st = await finish(app, key, r.json().data.job_id)
    t.equal(st.status, 'ERROR')
    t.match(st.message, /decod/i)
    // a decode error the input causes: the unprocessed share comes back (docs/api.md "Money policy")
    const coins = r.json().data.consume_coins as number
    const back = Math.floor((coins * (100 - st.progress)) / 100)
    await waitFor(async () => (await balance(app, id)) === 1000 - coins + back, 10_000)
    t.equal(await balance(app, id), 1000 - coins + back, `refunded the unprocessed share: ${back} of ${coins} at ${st.progress} %`)
    t.same(fs.readdirSync(tmp), [], 'no temporary files left')
    const dataTmp = path.join(app.lucent.config.dataDir, 'tmp')
    t.same(fs.existsSync(dataTmp) ? fs.readdirSync(dataTmp) : [], [], 'no fetched input left')
  })

  t.test('VFR + rotated clip through the API', { skip: !hasMkvmerge && 'mkvmerge not installed' }, async (t) => {
    const { key } = await createKey(app, { coins: 1000 })
    const vfr = path.join(dir, 'vfr.mp4')
    const rot = path.join(dir, 'vfr-rot.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=30:duration=1', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=2',
      '-vf', "setpts='if(lt(N,15),N/30,0.5+(N-15)/10)/TB'", '-fps_mode', 'vfr', '-c:v', 'libx264', '-c:a', 'aac', vfr)
    ff('-i', vfr, '-c', 'copy', '-metadata:s:v:0', 'rotate=90', rot)
    const ts = await probeTimestamps(rot)
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('vfr.mp4', fs.readFileSync(rot)), model_name: 'general_restore_2x', resolution: [96, 128] })
    const st = await finish(app, key, r.json().data.job_id)
    t.equal(st.status, 'COMPLETED', JSON.stringify(st))
    const out = path.join(dir, 'vfr-out.mp4')
    await download(app, st.res_url!, out)
    const o = inspect(out)
    t.same([o.width, o.height, o.rotation, o.rotateTag], [96, 128, null, null], 'upright portrait, no rotation')
    t.equal(o.frames, 30)
    const worst = Math.max(...o.pts.map((p, i) => Math.abs(p - ts.pts[i])))
    t.ok(worst <= 0.0015, `original frame times kept (worst ${worst.toFixed(4)} s)`)
    t.equal(audioHash(out), audioHash(rot))
  })
})
