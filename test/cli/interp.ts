/**
 * `lucent enhance clip.mp4 --fps N` / `--slowmo N`: frame interpolation (RIFE) from the command line, with the
 * server's rules (server/video/interp.ts) and frame schedule; bad values fail the file with the API's code.
 */
import t from 'tap'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { tempDir } from '../helper.js'
import { events, lucent, makeVideo, skipEngine } from '../support/enhance-cli.js'

const probe = (file: string) => JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-count_frames',
  '-show_entries', 'stream=width,height,nb_read_frames,r_frame_rate:format=duration', '-of', 'json', file]).toString())

t.test('--fps doubles the frame rate, --slowmo stretches, bad values fail with 100403000', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-enhance-interp-')
  const clip = path.join(dir, 'in', 'clip.mp4')
  makeVideo(clip, 32, 24, 0.8)
  const src = probe(clip)
  const srcFrames = Number(src.streams[0].nb_read_frames)
  const [n, d] = src.streams[0].r_frame_rate.split('/').map(Number)
  const srcFps = n / (d || 1)

  const out = path.join(dir, 'out')
  const r = lucent(['enhance', clip, '--model', 'frame_interpolation', '--fps', String(srcFps * 2), '--out', out, '--backend', 'cpu', '--json'])
  t.equal(r.status, 0, r.stderr)
  t.match(events(r.stdout).at(-1), { event: 'summary', done: 1, failed: 0 })
  const p = probe(path.join(out, 'clip.mp4'))
  t.match(p.streams[0], { width: 32, height: 24 }, 'frame_interpolation keeps the size')
  const [on, od] = p.streams[0].r_frame_rate.split('/').map(Number)
  t.equal(on / (od || 1), srcFps * 2, 'twice the frame rate')
  t.ok(Math.abs(Number(p.streams[0].nb_read_frames) - srcFrames * 2) <= 1, `twice the frames (${p.streams[0].nb_read_frames} from ${srcFrames})`)
  t.ok(Math.abs(Number(p.format.duration) - Number(src.format.duration)) <= 1 / srcFps + 1e-3, 'same duration within a frame')

  const slow = path.join(dir, 'slow')
  const s = lucent(['enhance', clip, '--model', 'frame_interpolation', '--slowmo', '2', '--out', slow, '--backend', 'cpu', '--json'])
  t.equal(s.status, 0, s.stderr)
  const ps = probe(path.join(slow, 'clip.mp4'))
  t.ok(Math.abs(Number(ps.format.duration) - 2 * Number(src.format.duration)) <= 2 / srcFps + 1e-3, `twice as long (${ps.format.duration} s)`)

  const bad = lucent(['enhance', clip, '--model', 'frame_interpolation', '--fps', String(srcFps * 9), '--out', path.join(dir, 'bad'), '--backend', 'cpu', '--json'])
  t.equal(bad.status, 1, 'over 8x the source: the file fails')
  const f = events(bad.stdout).find((e) => e.event === 'failed')
  t.match(f, { error_code: 100403000 }, 'with the API\'s code')
  t.match(String(f?.detail ?? ''), /8x/, 'the detail says why')

  const none = lucent(['enhance', clip, '--model', 'frame_interpolation', '--out', path.join(dir, 'none'), '--backend', 'cpu', '--json'])
  t.equal(none.status, 1, 'frame_interpolation without --fps or --slowmo fails the file')

  const usage = lucent(['enhance', clip, '--model', 'frame_interpolation', '--slowmo', '3', '--out', path.join(dir, 'u')])
  t.equal(usage.status, 2, '--slowmo 3 is a usage error')
})
