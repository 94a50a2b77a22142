/**
 * Issue 22, holes 4 and 5 (money): the price follows the work, not only the size asked for, and every format's
 * orientation is read the way the engine reads it.
 * - 4: a photo asked for at a tiny size (`target_width: 1`, `scale: 0.0001`, one side squeezed) costs at least the
 *   native output of the model that does the work, for single networks and chains (face / portrait models);
 *   a video asked for smaller than its input costs the tier of the network's own output; honest requests as before.
 * - 5: sideways PNG (eXIf), WebP (EXIF chunk), TIFF (IFD0), TGA (developer-area EXIF), JPEG (a LONG-typed tag)
 *   and HEIF (irot) are sized and priced upright at submission; `lucent enhance --scale` sizes a sideways PNG
 *   upright; a HEIF is not turned twice by the engine (libheif applies irot, the EXIF orientation is ignored).
 * Crafted files are made here; the submission checks need no engine (the queue is paused, nothing decodes).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { build, createKey, post, pngHeader, chunk, inputServer, tempDir } from '../helper.js'
import { photoPrice, videoPrice } from '../../server/pricing.js'
import { sniff } from '../../server/media/sniff.js'
import { lucent, makePhoto, makeVideo, skipEngine, hasFfmpeg } from '../support/enhance-cli.js'

// --- crafted files -----------------------------------------------------------------------------------------------

/** A TIFF structure (EXIF block) whose IFD0 holds Orientation = o, of TIFF type `type` (3 SHORT, 4 LONG). */
function exifBlock(o: number, le = false, type = 3): Buffer {
  const b = Buffer.alloc(8 + 2 + 12 + 4)
  b.write(le ? 'II' : 'MM', 0, 'latin1')
  const w16 = (v: number, p: number) => (le ? b.writeUInt16LE(v, p) : b.writeUInt16BE(v, p))
  const w32 = (v: number, p: number) => (le ? b.writeUInt32LE(v, p) : b.writeUInt32BE(v, p))
  w16(42, 2); w32(8, 4); w16(1, 8)
  w16(0x0112, 10); w16(type, 12); w32(1, 14)
  if (type === 4) w32(o, 18)
  else w16(o, 18)
  return b
}

/** A PNG with an eXIf chunk (orientation o) right after IHDR. */
function pngWithExif(png: Buffer, o: number): Buffer {
  const afterIhdr = 8 + 12 + 13
  return Buffer.concat([png.subarray(0, afterIhdr), chunk('eXIf', exifBlock(o)), png.subarray(afterIhdr)])
}

function riffChunk(type: string, data: Buffer): Buffer {
  const h = Buffer.alloc(8)
  h.write(type, 0, 'latin1')
  h.writeUInt32LE(data.length, 4)
  return Buffer.concat([h, data, data.length & 1 ? Buffer.alloc(1) : Buffer.alloc(0)])
}

/** An extended WebP (VP8X canvas w x h, EXIF flag) with an EXIF chunk; no image data. */
function webpHeader(w: number, h: number, o: number): Buffer {
  const x = Buffer.alloc(10)
  x[0] = 0x08
  x.writeUIntLE(w - 1, 4, 3)
  x.writeUIntLE(h - 1, 7, 3)
  const body = Buffer.concat([Buffer.from('WEBP', 'latin1'), riffChunk('VP8X', x), riffChunk('EXIF', Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), exifBlock(o, true)]))])
  const head = Buffer.alloc(8)
  head.write('RIFF', 0, 'latin1')
  head.writeUInt32LE(body.length, 4)
  return Buffer.concat([head, body])
}

/** A little-endian TIFF header + IFD0 (width, height, orientation); no strips. */
function tiffHeader(w: number, h: number, o: number): Buffer {
  const b = Buffer.alloc(8 + 2 + 3 * 12 + 4)
  b.write('II', 0, 'latin1')
  b.writeUInt16LE(42, 2); b.writeUInt32LE(8, 4); b.writeUInt16LE(3, 8)
  const entry = (i: number, tag: number, type: number, v: number) => {
    const e = 10 + i * 12
    b.writeUInt16LE(tag, e); b.writeUInt16LE(type, e + 2); b.writeUInt32LE(1, e + 4)
    if (type === 4) b.writeUInt32LE(v, e + 8)
    else b.writeUInt16LE(v, e + 8)
  }
  entry(0, 256, 4, w); entry(1, 257, 4, h); entry(2, 0x0112, 3, o)
  return b
}

/** A TGA 2.0 header (24-bit true colour, w x h) whose developer area holds the engine's EXIF tag; no pixels. */
function tgaHeader(w: number, h: number, o: number): Buffer {
  const head = Buffer.alloc(18)
  head[2] = 2
  head.writeUInt16LE(w, 12); head.writeUInt16LE(h, 14); head[16] = 24
  const exif = exifBlock(o, true)
  const dir = Buffer.alloc(2 + 10)
  dir.writeUInt16LE(1, 0); dir.writeUInt16LE(0x4578, 2); dir.writeUInt32LE(18, 4); dir.writeUInt32LE(exif.length, 8)
  const footer = Buffer.alloc(8)
  footer.writeUInt32LE(18 + exif.length, 4)
  return Buffer.concat([head, exif, dir, footer, Buffer.from('TRUEVISION-XFILE.\0', 'latin1')])
}

/** A JPEG header: APP1 Exif (orientation o, as a LONG: the engine accepts BYTE/SHORT/LONG), SOF0 w x h. */
function jpegHeader(w: number, h: number, o: number): Buffer {
  const app1 = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), exifBlock(o, false, 4)])
  const a = Buffer.from([0xff, 0xe1, 0, 0]); a.writeUInt16BE(app1.length + 2, 2)
  const sof = Buffer.from([0xff, 0xc0, 0, 17, 8, 0, 0, 0, 0, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
  sof.writeUInt16BE(h, 5); sof.writeUInt16BE(w, 7)
  return Buffer.concat([Buffer.from([0xff, 0xd8]), a, app1, sof, Buffer.from([0xff, 0xda, 0, 2])])
}

function box(type: string, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts)
  const h = Buffer.alloc(8)
  h.writeUInt32BE(8 + body.length)
  h.write(type, 4, 'latin1')
  return Buffer.concat([h, body])
}
const fullBox = (type: string, vflags: number, ...parts: Buffer[]) => {
  const v = Buffer.alloc(4)
  v.writeUInt32BE(vflags)
  return box(type, v, ...parts)
}

/** A HEIC's boxes (ftyp + meta: pitm 1, ispe w x h, optional irot / imir, associated with item 1); no data. */
function heifHeader(w: number, h: number, irot?: number, imir?: number): Buffer {
  const ispe = Buffer.alloc(8)
  ispe.writeUInt32BE(w); ispe.writeUInt32BE(h, 4)
  const props = [fullBox('ispe', 0, ispe)]
  if (irot !== undefined) props.push(box('irot', Buffer.from([irot])))
  if (imir !== undefined) props.push(box('imir', Buffer.from([imir])))
  const assoc = Buffer.from([0, 0, 0, 1, 0, 1, props.length, ...props.map((_, i) => 0x80 | (i + 1))])
  const pitm = fullBox('pitm', 0, Buffer.from([0, 1]))
  const meta = fullBox('meta', 0, pitm, box('iprp', box('ipco', ...props), fullBox('ipma', 0, assoc)))
  return Buffer.concat([box('ftyp', Buffer.from('heic\0\0\0\0mif1heic', 'latin1')), meta])
}

// --- hole 4: the price follows the work ---------------------------------------------------------------------------

t.test('hole 4: a photo asked for smaller than the network output costs the network output', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1_000_000 })
  const prices = app.lucent.prices
  const submit = async (model: string, url: string, extra: object = {}) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: model, img_url: url, extension: '.png', ...extra })
    t.equal(r.statusCode, 200, JSON.stringify(r.json()))
    return r.json().data as { consume_coins: number; model_name?: string; output_width?: number; output_height?: number }
  }
  // 24 MP (6000 x 4000) on general_2x: 12000 x 8000 = 96 MP of network output.
  const big = srv.put('big.png', pngHeader(6000, 4000))
  const native = photoPrice(prices, 'enhance', 96e6)
  t.equal((await submit('general_2x', big)).consume_coins, native, 'native size: 140 coins by default')
  t.equal((await submit('general_2x', big, { target_width: 1 })).consume_coins, native, 'target_width 1: the same work, the same price')
  t.equal((await submit('general_2x', big, { target_height: 1 })).consume_coins, native, 'target_height 1')
  t.equal((await submit('general_2x', big, { scale: 0.0001 })).consume_coins, native, 'a tiny fractional scale')
  t.equal((await submit('general_2x', big, { scale: 1 })).consume_coins, native, 'scale 1: general_2x still runs at 2x')
  // One side squeezed: 1 x 16000 asks 4x of the height, so general_4x runs: its native 384 MP is charged.
  const squeezed = await submit('general_2x', big, { target_width: 1, target_height: 16000 })
  t.match(squeezed, { model_name: 'general_4x', consume_coins: photoPrice(prices, 'enhance', 384e6) }, 'a squeezed side does not shrink the work')

  // Chains: face_2x (whole-picture base network + face network) and a generative portrait (34 MP limits).
  t.equal((await submit('face_2x', big, { target_width: 1 })).consume_coins, photoPrice(prices, 'enhance', 96e6), 'face_2x chain at target_width 1')
  const portrait = srv.put('portrait.png', pngHeader(4000, 2500)) // 10 MP: generative_portrait_1x runs, native 10 MP
  const p1 = await submit('generative_portrait_2x', portrait, { target_width: 1 })
  t.match(p1, { model_name: 'generative_portrait_1x', consume_coins: photoPrice(prices, 'generative_portrait', 10e6) }, 'portrait chain at target_width 1')

  // Honest requests cost what they did: the output's megapixels.
  const mid = srv.put('mid.png', pngHeader(1000, 1000))
  t.equal((await submit('general_2x', mid)).consume_coins, photoPrice(prices, 'enhance', 4e6))
  t.equal((await submit('general_2x', mid, { scale: 3 })).consume_coins, photoPrice(prices, 'enhance', 9e6), 'scale 3 (general_4x runs): by the 9 MP asked for')
  t.equal((await submit('general_2x', mid, { scale: 4 })).consume_coins, photoPrice(prices, 'enhance', 16e6))
  t.equal((await submit('general_4x', mid, { target_width: 1500 })).consume_coins, photoPrice(prices, 'enhance', 4e6), 'below 2x: general_2x native')
  t.equal((await submit('general_2x', mid, { target_width: 5000 })).consume_coins, photoPrice(prices, 'enhance', 25e6), 'a target above native: by the target')
})

t.test('hole 4: a video asked smaller than its input costs the tier of the network output; the contract\'s prices otherwise', { skip: !hasFfmpeg && 'ffmpeg missing' }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1_000_000 })
  const dir = await tempDir(t)
  const file = path.join(dir, 'v.mp4')
  makeVideo(file, 320, 240, 1) // x4 = 1280 x 960: the 1080p tier
  const url = srv.put('v.mp4', fs.readFileSync(file))
  const submit = async (model: string, resolution: [number, number]) => {
    const r = await post(app, '/api/video-enhancer', key, { model_name: model, video_url: url, resolution })
    t.equal(r.statusCode, 200, JSON.stringify(r.json()))
    return r.json().data.consume_coins as number
  }
  const native = await submit('general_restore_4x', [1280, 960])
  t.equal(native, videoPrice(app.lucent.prices, 'standard', 1280, 960, 5, 1), 'native: the 1080p tier at the clip\'s rate and length')
  t.equal(await submit('general_restore_4x', [32, 24]), native, 'a 32 x 24 output of a 4x network costs its 1280 x 960 frames')
  t.equal(await submit('general_restore_4x', [160, 120]), native)
  // at or above the input's size: compat.md's price by `resolution`, unchanged (the contract's answers)
  t.equal(await submit('general_restore_4x', [320, 240]), videoPrice(app.lucent.prices, 'standard', 320, 240, 5, 1))
  t.ok(await submit('general_restore_4x', [3840, 2880]) > native, 'above native: the larger tier asked for, as before')
  const small = await submit('general_restore_1x', [320, 240])
  t.equal(await submit('general_restore_1x', [16, 12]), small, '1x: the input size is the floor')
})

// --- hole 5: every format's orientation, upright at submission --------------------------------------------------

t.test('hole 5: sideways PNG, WebP, TIFF, TGA, JPEG (LONG tag) and HEIF (irot) are sized and priced upright', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1_000_000 })
  const prices = app.lucent.prices
  // Stored 6000 x 1000, turned a quarter: 1000 x 6000 upright. target_width 3000 asks 3x: general_4x runs and
  // resamples to 3000 x 18000 (54 MP). Read as stored it would be 3000 x 500.
  const upright = { model_name: 'general_4x', output_width: 3000, output_height: 18000, consume_coins: photoPrice(prices, 'enhance', 54e6) }
  const cases: Array<[string, Buffer]> = [
    ['png eXIf 6', Buffer.concat([pngHeader(6000, 1000).subarray(0, 33), chunk('eXIf', exifBlock(6))])],
    ['png eXIf 8 (little-endian)', Buffer.concat([pngHeader(6000, 1000), chunk('eXIf', exifBlock(8, true))])],
    ['webp EXIF chunk', webpHeader(6000, 1000, 6)],
    ['tiff IFD0', tiffHeader(6000, 1000, 6)],
    ['tga developer-area EXIF', tgaHeader(6000, 1000, 5)],
    ['jpeg LONG-typed tag', jpegHeader(6000, 1000, 7)],
    ['heic irot 90', heifHeader(6000, 1000, 1)],
    ['heic irot 270 + imir', heifHeader(6000, 1000, 3, 0)],
  ]
  for (const [name, file] of cases) {
    t.match(sniff(file), { width: 6000, height: 1000 }, `${name}: stored 6000 x 1000`)
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put(name.replace(/\W/g, '_'), file), extension: '.png', target_width: 3000 })
    t.equal(r.statusCode, 200, `${name}: ${r.body}`)
    t.match(r.json().data, upright, name)
  }
  // Not turned: orientation 3 (half turn), HEIF irot 180, no orientation.
  const flat = { model_name: 'general_2x', output_width: 3000, output_height: 500 }
  for (const [name, file] of [['png 3', Buffer.concat([pngHeader(6000, 1000), chunk('eXIf', exifBlock(3))])], ['heic irot 180', heifHeader(6000, 1000, 2)], ['png', pngHeader(6000, 1000)]] as const) {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put(name.replace(/\W/g, '_'), file), extension: '.png', target_width: 3000 })
    t.match(r.json().data, flat, name)
  }
})

t.test('hole 5: `lucent enhance --scale` sizes a sideways PNG upright', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'plain.png'), 40, 30)
  fs.mkdirSync(path.join(dir, 'in'))
  fs.writeFileSync(path.join(dir, 'in', 'turned.png'), pngWithExif(fs.readFileSync(path.join(dir, 'plain.png')), 6))
  const out = path.join(dir, 'out')
  const r = lucent(['enhance', path.join(dir, 'in'), '--model', 'sharpen_denoise_1x', '--out', out, '--scale', '2', '--format', 'png'])
  t.equal(r.status, 0, r.stderr + r.stdout)
  t.match(sniff(fs.readFileSync(path.join(out, 'turned.png'))), { width: 60, height: 80 }, 'upright 30 x 40, twice')
})

// --- HEIF: turned once --------------------------------------------------------------------------------------------

/** Boxes of an ISO-BMFF region: [type, start, end, headerSize]. */
function* isoBoxes(b: Buffer, from: number, to: number): Generator<[string, number, number, number]> {
  for (let o = from; o + 8 <= to;) {
    const size = b.readUInt32BE(o)
    if (size < 8 || o + size > to) return
    yield [b.toString('latin1', o + 4, o + 8), o, o + size, 8]
    o += size
  }
}

/**
 * The HEIC `heic` with an `irot` property (angle in quarter turns, counter-clockwise) appended to ipco and
 * associated with the primary item; the enclosing boxes grow and iloc's offsets (data after meta) are moved.
 */
function withIrot(heic: Buffer, angle: number): Buffer {
  const b = Buffer.from(heic)
  const meta = [...isoBoxes(b, 0, b.length)].find(([ty]) => ty === 'meta')!
  const kids = [...isoBoxes(b, meta[1] + 12, meta[2])]
  const iprp = kids.find(([ty]) => ty === 'iprp')!
  const pitm = kids.find(([ty]) => ty === 'pitm')!
  const iloc = kids.find(([ty]) => ty === 'iloc')!
  const primary = b[pitm[1] + 8] === 0 ? b.readUInt16BE(pitm[1] + 12) : b.readUInt32BE(pitm[1] + 12)
  const props = [...isoBoxes(b, iprp[1] + 8, iprp[2])]
  const ipco = props.find(([ty]) => ty === 'ipco')!
  const ipma = props.find(([ty]) => ty === 'ipma')!
  const index = [...isoBoxes(b, ipco[1] + 8, ipco[2])].length + 1
  const irot = Buffer.from([0, 0, 0, 9, 0x69, 0x72, 0x6f, 0x74, angle])
  // ipma: one more association for the primary item
  const version = b[ipma[1] + 8]!
  const large = (b[ipma[1] + 11]! & 1) === 1
  let o = ipma[1] + 16
  const count = b.readUInt32BE(ipma[1] + 12)
  let insertAt = -1
  let countAt = -1
  for (let i = 0; i < count; i++) {
    const item = version < 1 ? b.readUInt16BE(o) : b.readUInt32BE(o)
    o += version < 1 ? 2 : 4
    const n = b[o]!
    if (item === primary) { countAt = o; insertAt = o + 1 + n * (large ? 2 : 1) }
    o += 1 + n * (large ? 2 : 1)
  }
  if (insertAt < 0) throw new Error('primary item has no ipma entry')
  const assoc = large ? Buffer.from([(index >> 8) | 0x80, index & 0xff]) : Buffer.from([0x80 | index])
  const grow = irot.length + assoc.length
  b[countAt] = b[countAt]! + 1
  // iloc: move every offset past meta by `grow` (version 0/1, offset_size 4 or 8, base_offset_size 0/4/8)
  const iv = b[iloc[1] + 8]!
  let p = iloc[1] + 12
  const offSize = b[p]! >> 4, lenSize = b[p]! & 15, baseSize = b[p + 1]! >> 4, idxSize = iv >= 1 ? b[p + 1]! & 15 : 0
  p += 2
  const items = iv < 2 ? b.readUInt16BE(p) : b.readUInt32BE(p)
  p += iv < 2 ? 2 : 4
  const bump = (at: number, size: number) => {
    if (size === 4) b.writeUInt32BE(b.readUInt32BE(at) + grow, at)
    else if (size === 8) b.writeBigUInt64BE(b.readBigUInt64BE(at) + BigInt(grow), at)
  }
  for (let i = 0; i < items; i++) {
    p += iv < 2 ? 2 : 4 // item id
    let method = 0
    if (iv >= 1) { method = b.readUInt16BE(p) & 15; p += 2 }
    p += 2 // data reference index
    const base = p
    p += baseSize
    const extents = b.readUInt16BE(p)
    p += 2
    if (method === 0 && baseSize > 0) bump(base, baseSize)
    for (let e = 0; e < extents; e++) {
      p += idxSize
      if (method === 0 && baseSize === 0) bump(p, offSize)
      p += offSize + lenSize
    }
  }
  const grown = (at: number, by: number) => b.writeUInt32BE(b.readUInt32BE(at) + by, at)
  grown(meta[1], grow); grown(iprp[1], grow); grown(ipco[1], irot.length); grown(ipma[1], assoc.length)
  // ipma follows ipco: insert the association first (higher offset), then the property at ipco's end
  const withAssoc = Buffer.concat([b.subarray(0, insertAt), assoc, b.subarray(insertAt)])
  return Buffer.concat([withAssoc.subarray(0, ipco[2]), irot, withAssoc.subarray(ipco[2])])
}

/** Sets the value of the first Orientation tag found in the file's EXIF (a TIFF structure anywhere in it). */
function patchExifOrientation(file: Buffer, o: number): Buffer {
  const b = Buffer.from(file)
  for (const magic of ['MM\0*', 'II*\0']) {
    const t0 = b.indexOf(magic, 0, 'latin1')
    if (t0 < 0) continue
    const le = magic === 'II*\0'
    const u16 = (p: number) => (le ? b.readUInt16LE(p) : b.readUInt16BE(p))
    const ifd = t0 + (le ? b.readUInt32LE(t0 + 4) : b.readUInt32BE(t0 + 4))
    for (let i = 0; i < u16(ifd); i++) {
      const e = ifd + 2 + i * 12
      if (u16(e) === 0x0112) {
        if (le) b.writeUInt16LE(o, e + 8)
        else b.writeUInt16BE(o, e + 8)
        return b
      }
    }
  }
  throw new Error('no EXIF orientation in the file')
}

t.test('HEIF: the engine turns by irot once and ignores the EXIF orientation (as libheif and every reader do)', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-heif-')
  makePhoto(path.join(dir, 'plain.png'), 40, 30)
  // PNG with EXIF (orientation 1) -> HEIC through the CLI, keeping EXIF: 40 x 30 stored, EXIF orientation 1.
  fs.mkdirSync(path.join(dir, 'in'))
  fs.writeFileSync(path.join(dir, 'in', 'src.png'), pngWithExif(fs.readFileSync(path.join(dir, 'plain.png')), 1))
  const made = lucent(['enhance', path.join(dir, 'in'), '--model', 'sharpen_denoise_1x', '--out', path.join(dir, 'heic'), '--format', 'heif'])
  const heicFile = fs.existsSync(path.join(dir, 'heic')) ? fs.readdirSync(path.join(dir, 'heic'))[0] : undefined
  if (made.status !== 0 || !heicFile) return void t.pass(`skipped: this build cannot write HEIF (${made.stderr.trim().split('\n').at(-1)})`)
  const heic = fs.readFileSync(path.join(dir, 'heic', heicFile))
  t.match(sniff(heic), { width: 40, height: 30 })
  const variants: Array<[string, Buffer, [number, number]]> = [
    ['EXIF 6, no irot: shown as stored', patchExifOrientation(heic, 6), [40, 30]],
    ['irot 90 (counter-clockwise), EXIF 1', withIrot(heic, 1), [30, 40]],
    ['irot 270 + EXIF 6 (a phone photo): turned once', patchExifOrientation(withIrot(heic, 3), 6), [30, 40]],
  ]
  fs.mkdirSync(path.join(dir, 'variants'))
  variants.forEach(([, b], i) => fs.writeFileSync(path.join(dir, 'variants', `v${i}.heic`), b))
  const r = lucent(['enhance', path.join(dir, 'variants'), '--model', 'sharpen_denoise_1x', '--out', path.join(dir, 'out'), '--format', 'png'])
  t.equal(r.status, 0, r.stderr + r.stdout)
  variants.forEach(([name, , [w, h]], i) => {
    t.match(sniff(fs.readFileSync(path.join(dir, 'out', `v${i}.png`))), { width: w, height: h }, name)
  })
  // --scale sizes them upright as well (the addon's probe gives libheif's sides, irot applied)
  const s = lucent(['enhance', path.join(dir, 'variants'), '--model', 'sharpen_denoise_1x', '--out', path.join(dir, 'scaled'), '--format', 'png', '--scale', '2'])
  t.equal(s.status, 0, s.stderr + s.stdout)
  variants.forEach(([name, , [w, h]], i) => {
    t.match(sniff(fs.readFileSync(path.join(dir, 'scaled', `v${i}.png`))), { width: 2 * w, height: 2 * h }, `--scale 2: ${name}`)
  })
})
