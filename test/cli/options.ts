/**
 * `lucent enhance` options on the engine (CPU backend): output size (--scale / --width / --height, photos and videos,
 * EXIF-turned JPEGs sized upright), metadata kept or stripped, the default --out inside the input folder.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { tempDir } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { bin, env, events, listFiles, lucent, makePhoto, makeVideo, skipEngine } from '../support/enhance-cli.js'

t.test('output size: --scale, --width, --height (photos through the engine, videos through the fit)', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-enhance-')
  makePhoto(path.join(dir, 'in', 'p.png'), 40, 30)
  makeVideo(path.join(dir, 'in', 'v.mp4'), 32, 24, 0.6)
  const size = (file: string) => {
    if (file.endsWith('.png')) return sniff(fs.readFileSync(file))
    const s = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'json', file]).toString()).streams[0]
    return { width: s.width, height: s.height }
  }
  for (const [opt, photo, video] of [[['--scale', '1.5'], [60, 45], [48, 36]], [['--width', '100'], [100, 75], [100, 74]], [['--height', '21'], [28, 21], [28, 20]]] as const) {
    const out = path.join(dir, `out${opt[0]}`)
    const r = lucent(['enhance', path.join(dir, 'in'), '--model', 'general_2x', '--video-model', 'general_restore_2x', '--out', out, '--json', ...opt])
    t.equal(r.status, 0, r.stderr)
    const done = events(r.stdout).filter((e) => e.event === 'done')
    t.match(size(path.join(out, 'p.png')), { width: photo[0], height: photo[1] }, `photo ${opt.join(' ')}`)
    t.match(size(path.join(out, 'v.mp4')), { width: video[0], height: video[1] }, `video ${opt.join(' ')} (even sides for yuv420p)`)
    t.same(done.map((e) => [e.width, e.height]).sort(), [[...photo], [...video]].sort(), 'the events say the sizes written')
  }
})

/** A JPEG with an EXIF APP1 segment whose IFD0 holds Orientation = `o` (big-endian TIFF), inserted after SOI. */
function withOrientation(jpeg: Buffer, o: number): Buffer {
  const tiff = Buffer.from([0x4d, 0x4d, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, o, 0, 0, 0, 0, 0, 0])
  const body = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff])
  const head = Buffer.from([0xff, 0xe1, 0, 0])
  head.writeUInt16BE(body.length + 2, 2)
  return Buffer.concat([jpeg.subarray(0, 2), head, body, jpeg.subarray(2)])
}

t.test('--scale on a photo turned by its EXIF orientation scales the upright sides', { skip: skipEngine }, async (t) => {
  const { jpegOrientation } = await import('../../server/enhance/engine.js')
  const dir = await tempDir(t, 'lucent-enhance-')
  makePhoto(path.join(dir, 'plain.jpg'), 40, 30)
  const plain = fs.readFileSync(path.join(dir, 'plain.jpg'))
  t.equal(jpegOrientation(plain), 1)
  t.equal(jpegOrientation(fs.readFileSync(path.join(dir, 'plain.jpg')).subarray(0, 10)), 1, 'cut short')
  for (const o of [3, 6, 8]) t.equal(jpegOrientation(withOrientation(plain, o)), o)
  fs.mkdirSync(path.join(dir, 'in'))
  fs.writeFileSync(path.join(dir, 'in', 'turned.jpg'), withOrientation(plain, 6))
  const out = path.join(dir, 'out')
  const r = lucent(['enhance', path.join(dir, 'in'), '--model', 'sharpen_denoise_1x', '--out', out, '--scale', '2', '--format', 'png'])
  t.equal(r.status, 0, r.stderr + r.stdout)
  t.match(sniff(fs.readFileSync(path.join(out, 'turned.png'))), { width: 60, height: 80 }, 'upright 30x40, twice')

  // metadata: kept by default, dropped with --strip-meta
  const hasExif = (f: string) => fs.readFileSync(f).includes(Buffer.from('Exif\0\0', 'latin1'))
  t.equal(lucent(['enhance', path.join(dir, 'in'), '--model', 'sharpen_denoise_1x', '--out', path.join(dir, 'keep')]).status, 0)
  t.ok(hasExif(path.join(dir, 'keep', 'turned.jpg')), 'EXIF kept by default')
  t.equal(lucent(['enhance', path.join(dir, 'in'), '--model', 'sharpen_denoise_1x', '--out', path.join(dir, 'strip'), '--strip-meta']).status, 0)
  t.notOk(hasExif(path.join(dir, 'strip', 'turned.jpg')), 'EXIF dropped with --strip-meta')
})

t.test('the default --out inside the input folder is not read back as input', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-enhance-')
  makePhoto(path.join(dir, 'a.png'), 24, 16)
  const r1 = lucent(['enhance', '.', '--recursive', '--model', 'sharpen_denoise_1x', '--json'], dir)
  t.equal(r1.status, 0, r1.stderr)
  t.same(listFiles(path.join(dir, 'enhanced')), ['a.png'])
  const r2 = lucent(['enhance', '.', '--recursive', '--model', 'sharpen_denoise_1x', '--json'], dir)
  t.match(events(r2.stdout).at(-1), { event: 'summary', done: 0, skipped: 1, failed: 0, ignored: 0 })
})

t.test('on a terminal: the progress bar (counts, throughput, ETA, current file), failures and the summary', { skip: skipEngine || (spawnSync('script', ['--version']).status !== 0 && 'script (util-linux) missing') }, async (t) => {
  const dir = await tempDir(t, 'lucent-tty-')
  for (let i = 0; i < 3; i++) makePhoto(path.join(dir, 'in', `p${i}.png`), 32, 24, i)
  fs.writeFileSync(path.join(dir, 'in', 'zz-bad.png'), 'not a png')
  // `script` gives the command a pseudo-terminal and copies what it wrote into the typescript file
  const log = path.join(dir, 'typescript')
  const cmd = [process.execPath, bin, 'enhance', 'in', '--model', 'sharpen_denoise_1x', '--out', 'out'].map((a) => `'${a}'`).join(' ')
  const r = spawnSync('script', ['-qec', cmd, log], { cwd: dir, env: env(), stdio: ['ignore', 'ignore', 'pipe'] })
  t.equal(r.status, 1, r.stderr.toString())
  const text = fs.readFileSync(log, 'latin1').replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
  // cli-progress draws at most 10 frames a second: which file a frame shows depends on the machine's speed (the last
  // frame, always drawn, shows the last file), and a slow machine's ETA may read in minutes
  t.match(text, /\d\/4 files \| [\d.]+ files\/s \| ETA (-|\d+s|\d+m\d\ds) \| +\d+% in\/(p\d|zz-bad)\.png/, 'bar with counts, throughput, ETA, current file')
  t.match(text, /fail  in\/zz-bad\.png: 110400007 /, 'a failure printed above the bar')
  t.match(text, /done 3, skipped 0 \(output exists\), failed 1, ignored 0 /, 'the summary')
  t.same(listFiles(path.join(dir, 'out')), ['p0.png', 'p1.png', 'p2.png'])
})
