/**
 * `lucent enhance` on a folder tree (engine in-process, CPU backend): photos in sub-folders, a tiny video, junk
 * and a corrupt image. Outputs mirrored with the model's sizes and the kept formats, junk ignored and counted,
 * the corrupt file failed with its error code while the rest complete; a rerun skips everything done.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { tempDir } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { ERRORS, engineErrorCode } from '../../server/errors.js'
import { events, listFiles, lucent, makePhoto, makeVideo, skipEngine } from '../support/enhance-cli.js'

t.test('a folder tree: mirrored outputs, junk ignored, a corrupt file failed with its code, rerun skips', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-enhance-')
  const src = path.join(dir, 'in')
  makePhoto(path.join(src, 'a.png'), 48, 32, 0)
  makePhoto(path.join(src, 'sub', 'b.jpg'), 40, 30, 1)
  makePhoto(path.join(src, 'sub', 'deep', 'c.PNG'), 32, 32, 2)
  makeVideo(path.join(src, 'clips', 'clip.mp4'), 32, 24, 0.8)
  // junk and non-media
  fs.writeFileSync(path.join(src, 'Thumbs.db'), 'x')
  fs.writeFileSync(path.join(src, 'sub', '.DS_Store'), 'x')
  fs.writeFileSync(path.join(src, '._a.png'), 'AppleDouble')
  fs.writeFileSync(path.join(src, 'notes.txt'), 'hello')
  makePhoto(path.join(src, '.hidden', 'x.png'), 32, 32)
  // a corrupt image: a real PNG cut short
  const good = fs.readFileSync(path.join(src, 'a.png'))
  fs.writeFileSync(path.join(src, 'sub', 'bad.png'), good.subarray(0, Math.floor(good.length / 2)))
  const out = path.join(dir, 'out')

  const args = ['enhance', src, '--recursive', '--model', 'general_2x', '--video-model', 'general_restore_2x', '--out', out, '--backend', 'cpu', '--json']
  const r = lucent(args)
  t.equal(r.status, 1, `a failed file makes the exit status 1\n${r.stderr}`)
  const ev = events(r.stdout)
  t.equal(ev[0]!.event, 'start')
  t.match(ev[0], { total: 5, ignored: 5, backend: 'cpu', model: 'general_2x' })
  const ignored = ev.filter((e) => e.event === 'ignored').map((e) => `${path.relative(src, e.input as string)} ${e.reason}`).sort()
  t.same(ignored, ['._a.png junk', '.hidden hidden', 'Thumbs.db junk', 'notes.txt not_media', path.join('sub', '.DS_Store') + ' junk'])
  const done = ev.filter((e) => e.event === 'done')
  t.same(done.map((e) => path.relative(src, e.input as string)).sort(), ['a.png', path.join('clips', 'clip.mp4'), path.join('sub', 'b.jpg'), path.join('sub', 'deep', 'c.PNG')].sort())
  const failed = ev.filter((e) => e.event === 'failed')
  t.equal(failed.length, 1)
  const f = failed[0]!
  t.equal(path.relative(src, f.input as string), path.join('sub', 'bad.png'))
  t.ok(typeof f.engine_code === 'string', 'the engine code is given')
  t.equal(f.error_code, engineErrorCode(f.engine_code as string), 'error_code through server/errors.ts')
  t.equal(f.message, ERRORS[f.error_code as keyof typeof ERRORS].message)
  const sum = ev[ev.length - 1]!
  t.match(sum, { event: 'summary', done: 4, skipped: 0, failed: 1, ignored: 5, interrupted: false })

  // outputs mirrored, nothing else (no output for the corrupt file, no temporaries)
  t.same(listFiles(out), ['a.png', path.join('clips', 'clip.mp4'), path.join('sub', 'b.jpg'), path.join('sub', 'deep', 'c.PNG')].sort())
  const img = (p: string) => sniff(fs.readFileSync(path.join(out, p)))
  t.match(img('a.png'), { kind: 'image', format: 'png', width: 96, height: 64 })
  t.match(img(path.join('sub', 'b.jpg')), { kind: 'image', format: 'jpeg', width: 80, height: 60 })
  t.match(img(path.join('sub', 'deep', 'c.PNG')), { kind: 'image', format: 'png', width: 64, height: 64 })
  const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-count_frames', '-show_entries', 'stream=width,height,nb_read_frames,codec_name', '-of', 'json', path.join(out, 'clips', 'clip.mp4')]).toString()).streams[0]
  t.match(probe, { width: 64, height: 48, codec_name: 'h264', nb_read_frames: '4' }, 'the video at twice the size, every frame')

  // rerun: everything done is skipped, the corrupt file fails again
  const mtime = fs.statSync(path.join(out, 'a.png')).mtimeMs
  const r2 = lucent(args)
  t.equal(r2.status, 1)
  const s2 = events(r2.stdout).pop()!
  t.match(s2, { event: 'summary', done: 0, skipped: 4, failed: 1, ignored: 5 })
  t.equal(fs.statSync(path.join(out, 'a.png')).mtimeMs, mtime, 'not rewritten')

  // --overwrite with another photo format: only photos, jpg out
  const r3 = lucent(['enhance', path.join(src, 'sub'), '--model', 'general_2x', '--out', out, '--format', 'webp', '--overwrite'])
  t.equal(r3.status, 1, r3.stderr)
  t.match(r3.stdout, /^done  .*b\.jpg -> .*b\.webp 80x60/m, 'plain lines when stdout is not a terminal')
  t.match(r3.stdout, /^fail  .*bad\.png: \d{9} /m)
  t.match(r3.stdout, /done 1, skipped 0 \(output exists\), failed 1, ignored 2 /)
  t.match(img('b.webp'), { format: 'webp', width: 80, height: 60 }, 'a folder input\'s files go to the top of --out')
})

t.test('inputs: a file, a glob and a missing path; usage errors', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-enhance-')
  makePhoto(path.join(dir, 'p', 'one.png'), 32, 24)
  makePhoto(path.join(dir, 'p', 'two.jpg'), 32, 24, 3)
  makePhoto(path.join(dir, 'q', 'r', 'three.jpg'), 24, 16, 4)
  const out = path.join(dir, 'out')
  const r = lucent(['enhance', 'p/one.png', 'q/**/*.jpg', 'nothing-here.png', '--model', 'sharpen_denoise_1x', '--out', out, '--json', '--format', 'jpg', '--quality', '80'], dir)
  t.equal(r.status, 1, r.stderr)
  const ev = events(r.stdout)
  t.same(listFiles(out), ['one.jpg', path.join('r', 'three.jpg')], 'a file keeps its name, a glob its path under the fixed prefix')
  t.match(ev.find((e) => e.event === 'failed'), { input: 'nothing-here.png', error_code: 100403000 })
  t.match(sniff(fs.readFileSync(path.join(out, 'one.jpg'))), { format: 'jpeg', width: 32, height: 24 })

  const bad = lucent(['enhance', 'p', '--model', 'no_such_model'], dir)
  t.equal(bad.status, 2)
  t.match(bad.stderr, /unknown model no_such_model/)
  const fmt = lucent(['enhance', 'p', '--model', 'general_2x', '--format', 'exe'], dir)
  t.equal(fmt.status, 2)
  t.match(fmt.stderr, /--format.*must be keep or one of/)
  t.notOk(fs.existsSync(path.join(dir, 'enhanced')), 'nothing written on usage errors')
})
