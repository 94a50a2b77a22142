/**
 * Frame interpolation end to end with the real engine (addon through the engine pool, RIFE v4.6 on the CPU),
 * on tiny lavfi clips (64x48, 12 fps, 1 s): doubling the frame rate (frame count, constant-rate timestamps,
 * duration within a frame, audio packets bit-exact) for frame_interpolation alone and combined with a 2x
 * (interpolate before SR) and a 1x model (after SR); slow motion (4x the frames, 2x the duration, no audio);
 * a scene cut is not blended (the frames at the cut equal one side); a failure mid-way and a cancel leave no
 * temporary files and refund the coins. Skips until the addon is built (npm run build:native).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import type { FastifyInstance } from 'fastify'
import { inspect, audioHash } from '../support/inspect.js'
import { build, createKey, balance, post, inputServer, addonBuilt, modelDir, tempDir, waitFor } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const hasRife = fs.existsSync(path.join(modelDir, 'interp/rife-v4.6/flownet.bin'))
const ff = (...a: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...a])
const skip = !addonBuilt ? 'native/node/index.js not built yet (npm run build:native)' : !hasFfmpeg ? 'ffmpeg/ffprobe not installed'
  : !hasRife ? `no interp/rife-v4.6 in ${modelDir}` : false

type Status = { status: string; progress: number; res_url?: string; error_code?: number; message?: string }

const finish = (app: FastifyInstance, key: string, job: string) => waitFor(async () => {
  const d = (await post(app, '/api/task-status', key, { job_id: job })).json().data as Status
  return d.status !== 'CONVERTING' && d
}, 180_000, 100)

async function download(app: FastifyInstance, url: string, file: string): Promise<void> {
  const u = new URL(url)
  const res = await app.inject({ method: 'GET', url: u.pathname + u.search })
  if (res.statusCode !== 200) throw new Error(`download ${res.statusCode}`)
  fs.writeFileSync(file, res.rawPayload)
}

/** Decoded RGB24 frames of a file (w x h each). */
function frames(file: string, w: number, h: number): Buffer[] {
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-fps_mode', 'passthrough', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], { maxBuffer: 1 << 28 })
  const n = w * h * 3
  return Array.from({ length: raw.length / n }, (_, i) => raw.subarray(i * n, (i + 1) * n))
}
const mean = (f: Buffer) => [0, 1, 2].map((c) => { let s = 0; for (let i = c; i < f.length; i += 3) s += f[i]; return s / (f.length / 3) })

t.test('frame interpolation through the API', { skip }, async (t) => {
  const tmp = await tempDir(t, 'lucent-vtmp-')
  const app = await build(t, { LUCENT_VIDEO_TMP: tmp })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const dir = await tempDir(t)
  // 12 frames at 12 fps, moving test pattern, 1 s of AAC audio.
  const clip = path.join(dir, 'clip.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=12:duration=1', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=1',
    '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', clip)
  const src = inspect(clip)
  const srcAudio = audioHash(clip)
  const url = srv.put('clip.mp4', fs.readFileSync(clip))

  t.test('doubling 12 -> 24 fps: frames, timestamps, duration, audio', async (t) => {
    const { key, id } = await createKey(app, { coins: 10_000 })
    // frame_interpolation alone; 4x: RIFE before SR; 2x: after (server/video/interp.ts interpOrder).
    const runs: Array<[string, [number, number] | undefined]> = [['frame_interpolation', undefined], ['general_restore_4x', [256, 192]], ['general_restore_2x', [128, 96]]]
    let charged = 0
    for (const [model, resolution] of runs) {
      const r = await post(app, '/api/video-enhancer', key, { video_url: url, model_name: model, fps: 24, ...(resolution ? { resolution } : {}) })
      t.equal(r.statusCode, 200, `${model}: ${r.body}`)
      charged += r.json().data.consume_coins
      const st = await finish(app, key, r.json().data.job_id)
      t.equal(st.status, 'COMPLETED', `${model}: ${JSON.stringify(st)}`)
      const out = path.join(dir, `${model}.mp4`)
      await download(app, st.res_url!, out)
      const o = inspect(out)
      t.same([o.width, o.height], resolution ?? [64, 48], `${model}: size`)
      t.equal(o.frames, 2 * src.frames, `${model}: ${o.frames} frames`)
      const steps = o.pts.slice(1).map((p, i) => p - o.pts[i])
      t.ok(steps.every((d) => Math.abs(d - 1 / 24) < 0.002), `${model}: constant 1/24 s apart`)
      t.ok(Math.abs(o.duration - src.duration) <= 1 / 24 + 0.002, `${model}: duration ${o.duration} vs ${src.duration}`)
      t.equal(audioHash(out), srcAudio, `${model}: audio packets identical`)
      if (model === 'frame_interpolation') {
        // The in-betweens are made, not copied: each odd frame differs from both neighbours.
        const fr = frames(out, 64, 48)
        const mad = (a: Buffer, b: Buffer) => { let s = 0; for (let i = 0; i < a.length; i++) s += Math.abs(a[i] - b[i]); return s / a.length }
        const odd = Array.from({ length: 11 }, (_, j) => 2 * j + 1)
        t.ok(odd.every((k) => mad(fr[k], fr[k - 1]) > 0.5 && mad(fr[k], fr[k + 1]) > 0.5), 'odd frames are new pictures')
      }
    }
    t.equal(await balance(app, id), 10_000 - charged, 'charged once each')
    t.same(fs.readdirSync(tmp), [], 'no temporary files left')
  })

  t.test('slow motion x2: twice the frames at the source rate, twice the duration, no audio', async (t) => {
    const { key } = await createKey(app, { coins: 10_000 })
    const r = await post(app, '/api/video-enhancer', key, { video_url: url, model_name: 'frame_interpolation', slowmo: 2, resolution: [64, 48] })
    const st = await finish(app, key, r.json().data.job_id)
    t.equal(st.status, 'COMPLETED', JSON.stringify(st))
    const out = path.join(dir, 'slow.mp4')
    await download(app, st.res_url!, out)
    const o = inspect(out)
    t.equal(o.frames, 2 * src.frames)
    t.ok(Math.abs(o.duration - 2 * src.duration) <= 1 / 12 + 0.002, `duration ${o.duration}`)
    t.equal(o.audioStreams, 0, 'audio dropped (its timing no longer applies)')
  })

  t.test('variable frame rate in, constant rate out over the real frame times; audio kept', async (t) => {
    const { key } = await createKey(app, { coins: 10_000 })
    const vfr = path.join(dir, 'vfr.mp4')
    // 15 frames at 30 fps, then 5 at 10 fps: 1 s of video whose rate changes halfway.
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=30:duration=0.67', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=1',
      '-vf', "setpts='if(lt(N,15),N/30,0.5+(N-15)/10)/TB'", '-fps_mode', 'vfr', '-frames:v', '20', '-c:v', 'libx264', '-c:a', 'aac', vfr)
    const v = inspect(vfr)
    t.equal(v.frames, 20)
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('vfr.mp4', fs.readFileSync(vfr)), model_name: 'general_restore_2x', resolution: [128, 96], fps: 60 })
    const st = await finish(app, key, r.json().data.job_id)
    t.equal(st.status, 'COMPLETED', JSON.stringify(st))
    const out = path.join(dir, 'vfr-out.mp4')
    await download(app, st.res_url!, out)
    const o = inspect(out)
    const steps = o.pts.slice(1).map((p, i) => p - o.pts[i])
    t.ok(steps.every((d) => Math.abs(d - 1 / 60) < 0.002), 'constant 1/60 s apart')
    t.ok(Math.abs(o.duration - v.duration) <= 1 / 60 + 0.002, `duration ${o.duration} vs ${v.duration}`)
    t.equal(o.frames, Math.round(v.duration * 60), `${o.frames} frames`)
    t.equal(audioHash(out), audioHash(vfr), 'audio packets identical')
  })

  t.test('a scene cut is not blended: the frames at the cut equal one side', async (t) => {
    const { key } = await createKey(app, { coins: 10_000 })
    const cut = path.join(dir, 'cut.mp4')
    // 6 frames of red, then 6 of blue (12 fps); x264 near-lossless so the colours stay put.
    ff('-f', 'lavfi', '-i', 'color=c=red:size=64x48:rate=12:duration=0.5', '-f', 'lavfi', '-i', 'color=c=blue:size=64x48:rate=12:duration=0.5',
      '-filter_complex', '[0:v][1:v]concat=n=2:v=1[v]', '-map', '[v]', '-c:v', 'libx264', '-crf', '0', '-pix_fmt', 'yuv444p', cut)
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('cut.mp4', fs.readFileSync(cut)), model_name: 'frame_interpolation', fps: 24 })
    const st = await finish(app, key, r.json().data.job_id)
    t.equal(st.status, 'COMPLETED', JSON.stringify(st))
    const out = path.join(dir, 'cut-out.mp4')
    await download(app, st.res_url!, out)
    const fr = frames(out, 64, 48).map(mean)
    t.equal(fr.length, 24)
    const red = (m: number[]) => m[0] > 200 && m[2] < 60
    const blue = (m: number[]) => m[2] > 200 && m[0] < 60
    t.ok(fr.every((m) => red(m) || blue(m)), `every frame is red or blue, none blended: ${fr.map((m) => m.map(Math.round).join('/')).join(' ')}`)
    t.ok(fr.slice(0, 11).every(red) && fr.slice(12).every(blue), 'frames 0..10 red, 12.. blue')
    t.ok(red(fr[11]) || blue(fr[11]), 'the frame halfway across the cut is one side')
  })

  t.test('failure mid-way (corrupt stream): ERROR, refunded, no temp files', async (t) => {
    const { key, id } = await createKey(app, { coins: 1000 })
    const good = path.join(dir, 'good.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=12:duration=3', '-f', 'lavfi', '-i', 'sine=duration=3', '-c:v', 'libx264', '-g', '6', '-c:a', 'aac', '-movflags', '+faststart', good)
    const b = fs.readFileSync(good)
    let x = 777
    for (let i = b.length >> 1; i < (b.length >> 1) + 2000; i++) { x = (x * 1103515245 + 12345) >>> 0; b[i] = x >>> 24 }
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('bad.mp4', b), model_name: 'general_restore_1x', resolution: [64, 48], fps: 24 })
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
  })

  t.test('cancel mid-way: ERROR, refunded, no temp files', async (t) => {
    const { key, id } = await createKey(app, { coins: 10_000 })
    const long = path.join(dir, 'long.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=12:duration=20', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', long)
    const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('long.mp4', fs.readFileSync(long)), model_name: 'frame_interpolation', fps: 96 })
    t.equal(r.statusCode, 200)
    const job = r.json().data.job_id
    await waitFor(async () => fs.readdirSync(tmp).length > 0, 60_000, 20) // batches going, output being written
    t.ok(await app.lucent.jobs.cancel(job, { errorCode: 110400003, message: 'test cancel' }))
    const st = await finish(app, key, job)
    t.equal(st.status, 'ERROR')
    await waitFor(async () => (await balance(app, id)) === 10_000, 10_000)
    t.equal(await balance(app, id), 10_000, 'refunded')
    await waitFor(async () => fs.readdirSync(tmp).length === 0, 10_000, 50).catch(() => {})
    t.same(fs.readdirSync(tmp), [], 'no temporary files left')
  })
})
