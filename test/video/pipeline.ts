/**
 * Video pipeline plumbing (server/video/*), no engine needed: ffmpeg decode -> a frame processor -> fit +
 * encode + mux. The processor here is a plain pixel-doubling function (a real FrameProcessor, not a stand-in
 * for the engine: the engine path is covered in pipeline-e2e.ts). Checks: requested size, frame count,
 * duration, bit-exact audio, every output container, VFR timestamps restored, rotation applied, corrupt
 * input and cancel clean up. Also the submission errors of /api/video-enhancer.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { transcode, TranscodeError, encodedSize, timestampFile, type VideoStreamInfo } from '../../server/video/transcode.js'
import { probeVideo, probeTimestamps, analyseTimestamps } from '../../server/video/probe.js'
import { inspect, audioHash } from '../support/inspect.js'
import { build, createKey, balance, post, png, inputServer, sharedData, tempDir } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const hasMkvmerge = spawnSync('mkvmerge', ['--version']).status === 0
const demo = path.join(sharedData, 'video', 'onepiece_demo.mp4')
const ff = (...a: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...a])

/** Pixel doubling (nearest neighbour 2x), counting the frames and sizes it was given. */
function doubler() {
  const seen = { frames: 0, sizes: new Set<string>() }
  const fn = async (f: Buffer, w: number, h: number, n: number) => {
    seen.frames += n
    seen.sizes.add(`${w}x${h}`)
    const o = Buffer.alloc(f.length * 4)
    for (let k = 0; k < n; k++) {
      for (let y = 0; y < h * 2; y++) {
        for (let x = 0; x < w * 2; x++) {
          const s = k * w * h * 3 + ((y >> 1) * w + (x >> 1)) * 3
          const d = k * w * h * 12 + (y * w * 2 + x) * 3
          o[d] = f[s]; o[d + 1] = f[s + 1]; o[d + 2] = f[s + 2]
        }
      }
    }
    return { data: o, width: w * 2, height: h * 2 }
  }
  return { fn, seen }
}

async function infoOf(file: string): Promise<VideoStreamInfo> {
  const p = await probeVideo(file)
  return {
    width: p.width, height: p.height, rotation: p.rotation, fps: p.fpsRational, frames: p.frames, hasAudio: p.hasAudio,
    hasSubtitles: p.hasSubtitles, subtitleCodecs: p.subtitleCodecs, videoOffset: p.videoStart - p.fileStart,
  }
}

/** First audio packet time (seconds). */
const firstAudio = (file: string) => Math.min(...execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', file])
  .toString().trim().split('\n').map(Number).filter(Number.isFinite))

const leftovers = (dir: string) => fs.readdirSync(dir).filter((f) => f.startsWith('out'))

t.test('pipeline plumbing', { skip: !hasFfmpeg && 'ffmpeg/ffprobe not installed' }, async (t) => {
  const dir = await tempDir(t)
  // ~1 s of the demo clip, downscaled to 128x96, audio copied (its packets are the reference).
  const cut = path.join(dir, 'cut.mp4')
  ff('-i', demo, '-t', '1', '-vf', 'scale=128:96', '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'copy', cut)
  const src = inspect(cut)
  const srcAudio = audioHash(cut)
  const fps = 1199 / 50

  t.test('every output container: size, frames, duration, audio', async (t) => {
    for (const c of ['mp4', 'mov', 'mkv', 'm4v', 'avi', 'gif']) {
      const out = path.join(dir, `out.${c}`)
      const { fn, seen } = doubler()
      const r = await transcode({ input: cut, output: out, container: c, target: [300, 200], info: await infoOf(cut), process: fn, batch: 5 })
      t.equal(r.frames, src.frames, `${c}: frames through the processor`)
      t.same([...seen.sizes], ['128x96'])
      const o = inspect(out)
      t.same([o.width, o.height], c === 'gif' ? [300, 200] : [300, 200], `${c}: requested size`)
      t.equal(o.frames, src.frames, `${c}: frame count`)
      t.ok(Math.abs(o.duration - src.duration) <= 1 / fps + 0.011, `${c}: duration ${o.duration} vs ${src.duration}`)
      if (c === 'gif') t.equal(o.audioStreams, 0)
      else t.equal(audioHash(out), srcAudio, `${c}: audio packets bit-exact`)
      t.equal(o.codec, c === 'gif' ? 'gif' : 'h264')
      fs.rmSync(out)
    }
  })

  t.test('letterbox fit and even sizes', async (t) => {
    t.same(encodedSize([301, 201], 'mp4'), [300, 200])
    t.same(encodedSize([301, 201], 'gif'), [301, 201])
    const out = path.join(dir, 'out-box.mp4')
    // 256x192 (4:3) into 400x192: pillarbox, black bars left and right.
    await transcode({ input: cut, output: out, container: 'mp4', target: [400, 192], info: await infoOf(cut), process: doubler().fn })
    const px = execFileSync('ffmpeg', ['-v', 'error', '-i', out, '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'gray', '-']).subarray(0, 400 * 192)
    const col = (x: number) => { let s = 0; for (let y = 0; y < 192; y++) s += px[y * 400 + x]; return s / 192 }
    t.ok(col(2) < 24 && col(397) < 24, `bars are black (${col(2)}, ${col(397)})`)
    t.ok(col(200) > 40, 'picture in the middle')
    fs.rmSync(out)
  })

  t.test('subtitles and metadata kept where the container allows', async (t) => {
    const srt = path.join(dir, 's.srt')
    fs.writeFileSync(srt, '1\n00:00:00,100 --> 00:00:00,800\nHello\n')
    const withSubs = path.join(dir, 'subs.mkv')
    ff('-i', cut, '-i', srt, '-map', '0', '-map', '1', '-c:v', 'copy', '-c:a', 'copy', '-c:s', 'srt', '-metadata', 'title=Lucent test', '-metadata:s:s:0', 'language=fra', withSubs)
    for (const [c, codec] of [['mkv', 'subrip'], ['mp4', 'mov_text'], ['avi', null]] as const) {
      const out = path.join(dir, `out-subs.${c}`)
      await transcode({ input: withSubs, output: out, container: c, target: [256, 192], info: await infoOf(withSubs), process: doubler().fn })
      const j = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_streams', '-show_format', out]).toString())
      const subs = j.streams.filter((s: { codec_type: string }) => s.codec_type === 'subtitle')
      t.same(subs.map((s: { codec_name: string }) => s.codec_name), codec ? [codec] : [], `${c}: subtitles`)
      if (codec) t.equal(subs[0].tags?.language, 'fra', `${c}: subtitle language kept`)
      if (c !== 'avi') t.equal(j.format.tags?.title, 'Lucent test', `${c}: title kept`)
      t.equal(audioHash(out), srcAudio, `${c}: audio bit-exact`)
      fs.rmSync(out)
    }
  })

  t.test('above 4K: HEVC (hvc1)', async (t) => {
    const big = path.join(dir, 'big.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=2048x1152:rate=4:duration=0.5', '-c:v', 'libx264', '-preset', 'ultrafast', big)
    const out = path.join(dir, 'out-big.mp4')
    await transcode({ input: big, output: out, container: 'mp4', target: [4096, 2304], info: await infoOf(big), process: doubler().fn, preset: 'ultrafast' })
    const o = inspect(out)
    t.same([o.codec, o.width, o.height, o.frames], ['hevc', 4096, 2304, 2])
    const tag = execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=codec_tag_string', '-of', 'csv=p=0', out]).toString().trim()
    t.equal(tag, 'hvc1')
    fs.rmSync(out)
  })

  t.test('variable frame rate: timestamps restored', { skip: !hasMkvmerge && 'mkvmerge (mkvtoolnix) not installed' }, async (t) => {
    const vfr = path.join(dir, 'vfr.mp4')
    // 15 frames at 30 fps, then 15 at 10 fps, with a 2 s tone.
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=30:duration=1', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=2',
      '-vf', "setpts='if(lt(N,15),N/30,0.5+(N-15)/10)/TB'", '-fps_mode', 'vfr', '-c:v', 'libx264', '-c:a', 'aac', vfr)
    const ts = await probeTimestamps(vfr)
    t.equal(ts.vfr, true, 'detected as VFR')
    t.equal((await probeTimestamps(cut)).vfr, false, 'the CFR cut is not VFR')
    for (const c of ['mp4', 'mkv', 'mov']) {
      const out = path.join(dir, `out-vfr.${c}`)
      const r = await transcode({ input: vfr, output: out, container: c, target: [128, 96], info: await infoOf(vfr), process: doubler().fn, timestamps: ts.pts })
      t.equal(r.vfrRestored, true)
      const o = inspect(out)
      t.equal(o.frames, 30, `${c}: all frames`)
      const worst = Math.max(...o.pts.map((p, i) => Math.abs(p - ts.pts[i])))
      t.ok(worst <= 0.0015, `${c}: every frame at its original time (worst ${worst.toFixed(4)} s)`)
      t.ok(Math.abs(firstAudio(out) - o.pts[0]) <= 0.0015, `${c}: audio and video start together (A/V sync kept)`)
      t.equal(audioHash(out), audioHash(vfr), `${c}: audio bit-exact`)
      fs.rmSync(out)
    }
    t.same(leftovers(dir), [], 'no intermediates left')
  })

  t.test('rotation: decoded upright, no rotation in the output', async (t) => {
    const base = path.join(dir, 'base.mp4')
    const rot = path.join(dir, 'rot.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=10:duration=1', '-c:v', 'libx264', base)
    ff('-i', base, '-c', 'copy', '-metadata:s:v:0', 'rotate=90', rot)
    const p = await probeVideo(rot)
    t.equal(p.rotation % 180, 90, `display matrix seen (${p.rotation})`)
    for (const c of ['mp4', 'mkv']) {
      const out = path.join(dir, `out-rot.${c}`)
      const { fn, seen } = doubler()
      await transcode({ input: rot, output: out, container: c, target: [96, 128], info: await infoOf(rot), process: fn })
      t.same([...seen.sizes], ['48x64'], 'frames reached the processor upright (portrait)')
      const o = inspect(out)
      t.same([o.width, o.height], [96, 128])
      t.equal(o.rotation, null, `${c}: no display matrix`)
      t.equal(o.rotateTag, null, `${c}: no rotate tag`)
      // Upright content: equals ffmpeg's own autorotated decode (scaled the same way), not the unrotated one.
      const ours = execFileSync('ffmpeg', ['-v', 'error', '-i', out, '-frames:v', '1', '-vf', 'scale=48:64', '-f', 'rawvideo', '-pix_fmt', 'gray', '-'])
      const ref = execFileSync('ffmpeg', ['-v', 'error', '-i', rot, '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'gray', '-'])
      const wrong = execFileSync('ffmpeg', ['-v', 'error', '-noautorotate', '-i', rot, '-frames:v', '1', '-vf', 'transpose=1', '-f', 'rawvideo', '-pix_fmt', 'gray', '-'])
      const mad = (a: Buffer, b: Buffer) => { let s = 0; for (let i = 0; i < a.length; i++) s += Math.abs(a[i] - b[i]); return s / a.length }
      t.ok(mad(ours, ref) < 12 && mad(ours, ref) < mad(ours, wrong) / 2, `${c}: upright (${mad(ours, ref).toFixed(1)} vs ${mad(ours, wrong).toFixed(1)})`)
      fs.rmSync(out)
    }
  })

  t.test('corrupt stream mid-file: decode error, nothing left', async (t) => {
    const good = path.join(dir, 'good.mp4')
    const bad = path.join(dir, 'bad.mp4')
    ff('-f', 'lavfi', '-i', 'testsrc=size=96x64:rate=25:duration=2', '-f', 'lavfi', '-i', 'sine=duration=2', '-c:v', 'libx264', '-g', '10', '-c:a', 'aac', '-movflags', '+faststart', good)
    fs.writeFileSync(bad, corruptMiddle(fs.readFileSync(good)))
    const out = path.join(dir, 'out-bad.mp4')
    const { fn, seen } = doubler()
    const e = await transcode({ input: bad, output: out, container: 'mp4', target: [192, 128], info: await infoOf(bad), process: fn }).catch((e) => e)
    t.type(e, TranscodeError)
    t.equal(e.reason, 'decode', e.message)
    t.ok(seen.frames > 0 && seen.frames < 50, `failed mid-file after ${seen.frames} frames`)
    t.same(leftovers(dir), [], 'partial output removed')
  })

  t.test('cancel: processes stopped, nothing left', async (t) => {
    const out = path.join(dir, 'out-cancel.mkv')
    const ac = new AbortController()
    const { fn, seen } = doubler()
    const e = await transcode({
      input: cut, output: out, container: 'mkv', target: [256, 192], info: await infoOf(cut), batch: 2, signal: ac.signal,
      timestamps: [0, 0.01, 0.5], // VFR path too: its intermediates must go as well
      process: async (f, w, h, n) => { if (seen.frames >= 6) ac.abort(); return fn(f, w, h, n) },
    }).catch((e) => e)
    t.type(e, TranscodeError)
    t.equal(e.reason, 'aborted')
    t.ok(seen.frames < src.frames)
    t.same(leftovers(dir), [])
  })
})

t.test('timestamp analysis and files', async (t) => {
  t.equal(analyseTimestamps([0, 0.04, 0.08, 0.12, 0.16]).vfr, false)
  t.equal(analyseTimestamps([0, 0.0417, 0.0834, 0.125, 0.1667]).vfr, false, 'time-base rounding is not VFR')
  t.equal(analyseTimestamps([0, 0.04, 0.08, 0.2, 0.24]).vfr, true)
  t.equal(timestampFile([0, 0.0333333, 0.1], 4, 0.05), '# timestamp format v2\n0.000\n33.333\n100.000\n150.000\n')
  t.equal(timestampFile([0, 0, 0.1], 3, 0.05), '# timestamp format v2\n0.000\n1.000\n100.000\n', 'strictly increasing')
})

/** Overwrites 3000 bytes in the middle of the file (inside the media data) with pseudo-random bytes. */
function corruptMiddle(buf: Buffer): Buffer {
  const b = Buffer.from(buf)
  let x = 12345
  for (let i = b.length >> 1; i < (b.length >> 1) + 3000 && i < b.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    b[i] = x >>> 24
  }
  return b
}

t.test('submission errors', { skip: !hasFfmpeg && 'ffmpeg/ffprobe not installed' }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const dir = await tempDir(t)
  const { key, id } = await createKey(app, { coins: 10_000 })
  const short = path.join(dir, 'short.mp4')
  ff('-f', 'lavfi', '-i', 'testsrc=duration=0.3:size=64x48:rate=25', '-pix_fmt', 'yuv420p', short)
  const clip = path.join(dir, 'clip.mp4')
  ff('-i', demo, '-t', '1', '-vf', 'scale=128:96', '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'copy', clip)
  const clipUrl = srv.put('clip.mp4', fs.readFileSync(clip))
  const base = { video_url: clipUrl, model_name: 'general_restore_2x', resolution: [256, 192] }
  const cases: Array<[string, unknown, number]> = [
    ['0.3 s clip', { ...base, video_url: srv.put('short.mp4', fs.readFileSync(short)) }, 110400011],
    ['target over 36 MP', { ...base, resolution: [8000, 4600] }, 110400010],
    ['a PNG', { ...base, video_url: srv.put('p.mp4', png(16, 16)) }, 110400007],
    ['text', { ...base, video_url: srv.put('t.mp4', Buffer.from('not a video at all\n'.repeat(100))) }, 110400007],
    ['unreachable URL', { ...base, video_url: 'http://127.0.0.1:1/v.mp4' }, 110400008],
    ['404', { ...base, video_url: `${srv.base}/mem/missing.mp4` }, 110400008],
  ]
  for (const [name, body, code] of cases) {
    const r = await post(app, '/api/video-enhancer', key, body)
    t.equal(r.json().error_code, code, name)
  }
  t.equal(await balance(app, id), 10_000, 'nothing charged')
  // Accepted: price per output second from compat.md (192p target, 23.98 fps: 10 coins/s; premium x2).
  const dur = (await probeVideo(clip)).duration
  const ok = await post(app, '/api/video-enhancer', key, base)
  t.equal(ok.statusCode, 200)
  t.equal(ok.json().data.consume_coins, Math.ceil(10 * dur))
  const job = await app.lucent.store.getJob(ok.json().data.job_id)
  t.match(job?.params, { ext: 'mp4', resolution: [256, 192], input: { width: 128, height: 96, rotation: 0, frames: 24 } })
})

t.test('ffmpeg missing: videos answer 100500005, photos still work', async (t) => {
  const app = await build(t, { LUCENT_FFMPEG: '/nonexistent/ffmpeg' })
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key } = await createKey(app)
  const v = await post(app, '/api/video-enhancer', key, { video_url: srv.put('v.mp4', fs.readFileSync(demo)), model_name: 'general_restore_1x', resolution: [640, 480] })
  t.same({ status: v.statusCode, code: v.json().error_code }, { status: 500, code: 100500005 })
  const p = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('p.png', png(16, 16)), extension: '.png' })
  t.equal(p.statusCode, 200)
})
