/**
 * `lucent segment` (server/enhance/segment.ts): background removal through the real CLI and the engine in-process
 * (CPU backend, u2netp). A folder with a real photo and a broken file: the RGBA PNG of the photo's size with a real
 * alpha, the grey mask equal to that alpha, the broken file failed with its error code and exit 1, reruns skipping
 * what exists (and redoing a file whose mask is missing); a missing model named with the command that fetches it;
 * a mask never written over an input. Pixels are read back with ffmpeg (a decoder that is not the engine's).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { tempDir, modelDir, repoRoot } from '../helper.js'
import { events, listFiles, lucent, skipEngine } from '../support/enhance-cli.js'
import { loadAddon } from '../../server/engine/addon.js'

const photos = path.resolve(repoRoot, '../shared/data/photos')
const photo = path.join(photos, '0014.jpg') // 179x179
const hasSegment = !skipEngine && typeof loadAddon().segment === 'function'
/** Why these tests cannot run here (CI must be able to run them). */
const skip = skipEngine || (!hasSegment ? 'the addon has no segment (npm run build:native)'
  : !fs.existsSync(path.join(modelDir!, 'seg/u2netp.onnx')) ? `no seg/u2netp.onnx in ${modelDir} (lucent models fetch seg/u2netp)`
  : !fs.existsSync(photo) ? `${photo} missing (shared data)` : false)
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)

/** Stream facts ffprobe reads from an image file. */
function probe(file: string): { width: number; height: number; pix_fmt: string } {
  return JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=width,height,pix_fmt', '-of', 'json', file]).toString()).streams[0]
}
/** Raw pixels decoded by ffmpeg. */
const raw = (file: string, pixFmt: 'rgba' | 'gray') => execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', pixFmt, '-'], { maxBuffer: 1 << 28 })

t.test('a folder with a photo and a broken file: RGBA cutout, grey mask, the failure coded, reruns skip', { skip }, async (t) => {
  const dir = await tempDir(t, 'lucent-segment-')
  fs.mkdirSync(path.join(dir, 'in'))
  fs.copyFileSync(photo, path.join(dir, 'in', 'photo.jpg'))
  fs.writeFileSync(path.join(dir, 'in', 'broken.png'), 'not a png at all')
  fs.writeFileSync(path.join(dir, 'in', 'notes.txt'), 'ignored')
  const out = path.join(dir, 'out')

  // 1: without --mask, --json
  const r1 = lucent(['segment', 'in', '--model', 'u2netp', '--out', 'out', '--json'], dir)
  t.equal(r1.status, 1, `a file failed: exit 1 (${r1.stderr})`)
  const e1 = events(r1.stdout)
  t.match(e1[0], { event: 'start', total: 2, ignored: 1, model: 'u2netp', backend: 'cpu' })
  t.match(e1.find((e) => e.event === 'done'), { input: path.join(dir, 'in', 'photo.jpg'), output: path.join(out, 'photo.png'), kind: 'photo', width: 179, height: 179 })
  t.notOk(e1.find((e) => e.event === 'done')!.mask, 'no mask without --mask')
  t.match(e1.find((e) => e.event === 'failed'), { input: path.join(dir, 'in', 'broken.png'), error_code: 110400007, engine_code: 'unsupported_format' })
  t.match(e1.at(-1), { event: 'summary', done: 1, skipped: 0, failed: 1, ignored: 1, failures: [{ error_code: 110400007 }] })
  t.same(listFiles(out), ['photo.png'], 'one output, no temporaries, nothing for the broken file')
  t.match(probe(path.join(out, 'photo.png')), { width: 179, height: 179, pix_fmt: 'rgba' }, 'RGBA PNG of the photo size')
  const rgba = raw(path.join(out, 'photo.png'), 'rgba')
  t.equal(rgba.length, 179 * 179 * 4)
  const alpha = Buffer.alloc(179 * 179)
  for (let i = 0; i < alpha.length; i++) alpha[i] = rgba[i * 4 + 3]!
  const opaque = alpha.filter((a) => a === 255).length
  const clear = alpha.filter((a) => a === 0).length
  t.ok(opaque > 0 && clear > 0 && opaque < alpha.length && clear < alpha.length, `a subject and a background (${opaque} opaque, ${clear} clear)`)
  t.ok(alpha.some((a) => a > 0 && a < 255), 'soft edges: fractional alpha')

  // 2: --mask: the photo is redone (its mask is missing); the broken file fails again
  const before = fs.statSync(path.join(out, 'photo.png')).mtimeMs
  const r2 = lucent(['segment', 'in', '--model', 'u2netp', '--out', 'out', '--mask', '--json'], dir)
  t.equal(r2.status, 1, r2.stderr)
  t.match(events(r2.stdout).find((e) => e.event === 'done'), { output: path.join(out, 'photo.png'), mask: path.join(out, 'photo.mask.png') })
  t.same(listFiles(out), ['photo.mask.png', 'photo.png'])
  t.match(probe(path.join(out, 'photo.mask.png')), { width: 179, height: 179, pix_fmt: 'gray' }, 'grey mask of the same size')
  t.ok(raw(path.join(out, 'photo.mask.png'), 'gray').equals(alpha), 'the mask is the cutout\'s alpha')

  // 3: again, plain output: everything present is skipped and left alone
  const mtimes = ['photo.png', 'photo.mask.png'].map((f) => fs.statSync(path.join(out, f)).mtimeMs)
  t.ok(mtimes[0]! >= before)
  const r3 = lucent(['segment', 'in', '--model', 'u2netp', '--out', 'out', '--mask'], dir)
  t.equal(r3.status, 1, r3.stderr)
  t.match(r3.stdout, /^lucent segment: 2 file\(s\), 1 ignored; model u2netp; engine cpu/m)
  t.match(r3.stdout, /^skip  in\/photo\.jpg \(exists: out\/photo\.png\)$/m)
  t.match(r3.stdout, /^fail  in\/broken\.png: 110400007 The extension is not valid/m)
  t.match(r3.stdout, /done 0, skipped 1 \(output exists\), failed 1, ignored 1 /)
  t.same(['photo.png', 'photo.mask.png'].map((f) => fs.statSync(path.join(out, f)).mtimeMs), mtimes, 'not rewritten')
})

t.test('a missing model file: exit 2 before anything is written, with the command that fetches it', { skip }, async (t) => {
  const dir = await tempDir(t, 'lucent-segment-')
  fs.copyFileSync(photo, path.join(dir, 'p.jpg'))
  const r = lucent(['segment', 'p.jpg', '--out', 'out'], dir, { LUCENT_MODEL_DIR: path.join(dir, 'no-models') })
  t.equal(r.status, 2)
  t.match(r.stderr, /100500005 .*seg\/u2netp\.onnx is missing.*\nhint: lucent models fetch seg\/u2netp/s, 'default u2netp when u2net is absent too')
  t.notOk(fs.existsSync(path.join(dir, 'out')), 'no output folder')
  const bad = lucent(['segment', 'p.jpg', '--model', 'u3net'], dir)
  t.equal(bad.status, 2)
  t.match(bad.stderr, /Allowed choices are u2net, u2netp/)
})

t.test('a mask is never written over an input; --format webp; two files whose outputs meet: the later one fails', { skip }, async (t) => {
  const dir = await tempDir(t, 'lucent-segment-')
  fs.copyFileSync(photo, path.join(dir, 'a.jpg'))
  fs.writeFileSync(path.join(dir, 'a.mask.png'), 'an input of its own')
  // --format webp: a.jpg -> a.webp + a.mask.png, which is the second input
  const r = lucent(['segment', 'a.jpg', 'a.mask.png', '--out', '.', '--mask', '--format', 'webp'], dir)
  t.equal(r.status, 2, 'bad usage: the batch does not start')
  t.match(r.stderr, /the output of a\.jpg would be the input a\.mask\.png/)
  t.equal(fs.readFileSync(path.join(dir, 'a.mask.png'), 'utf8'), 'an input of its own')
  t.same(listFiles(dir), ['a.jpg', 'a.mask.png'])
  // the same file alone: the WebP cutout, with its alpha
  const w = lucent(['segment', 'a.jpg', '--out', 'webp', '--format', 'webp', '--json'], dir)
  t.equal(w.status, 0, w.stderr)
  t.match(events(w.stdout).find((e) => e.event === 'done'), { output: path.join(dir, 'webp', 'a.webp'), width: 179, height: 179 })
  t.same(listFiles(path.join(dir, 'webp')), ['a.webp'])
  t.match(probe(path.join(dir, 'webp', 'a.webp')), { width: 179, height: 179, pix_fmt: /^(argb|rgba|bgra|yuva420p)$/ }, 'a WebP with alpha')

  // in a folder: b.mask.png's cutout and b.png's mask are the same file under --out
  fs.mkdirSync(path.join(dir, 'in'))
  fs.writeFileSync(path.join(dir, 'in', 'b.mask.png'), 'broken')
  fs.writeFileSync(path.join(dir, 'in', 'b.png'), 'broken')
  const j = lucent(['segment', 'in', '--out', 'out', '--mask', '--json'], dir)
  t.equal(j.status, 1, j.stderr)
  const failed = events(j.stdout).filter((e) => e.event === 'failed')
  t.match(failed.find((e) => e.input === path.join(dir, 'in', 'b.png')), { error_code: 100403000, detail: /b\.mask\.png is also the output of .*b\.mask\.png/ })
  t.match(failed.find((e) => e.input === path.join(dir, 'in', 'b.mask.png')), { error_code: 110400007 })
  t.same(listFiles(path.join(dir, 'out')), [])
})

t.test('lucent segment --help: options, defaults, examples', async (t) => {
  const h = lucent(['segment', '--help'])
  t.equal(h.status, 0)
  for (const o of ['--model', '--out', '--recursive', '--mask', '--format', '--backend', '--jobs', '--overwrite', '--json']) t.match(h.stdout, new RegExp(`${o}\\b`), o)
  t.match(h.stdout, /--format <ext>.*choices:\s+"png",\s+"webp",\s+default:\s+"png"/s)
  t.match(h.stdout, /default:\s+u2net\s+where\s+its\s+file\s+is\s+present,\s+else\s+u2netp/)
  t.match(h.stdout, /lucent models fetch seg\/u2netp/)
  t.match(h.stdout, /Examples:\n  lucent segment /)
})
