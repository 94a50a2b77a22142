/**
 * Extension: any output size for photos (target_width / target_height / scale): the family member chosen, the
 * size and price by output size, limits at submission, JPEG EXIF orientation, old requests unchanged; then a
 * real run through the engine (skipped until the addon is built).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { build, createKey, balance, post, png, pngHeader, inputServer, addonBuilt, waitFor, tempDir } from '../helper.js'
import { outputSize, variantFor, familyOf } from '../../server/jobs/output-size.js'
import { exifOrientation } from '../../server/media/orientation.js'
import { photoModel } from '../../server/catalog.js'
import { ApiError } from '../../server/errors.js'
import { sniff } from '../../server/media/sniff.js'

const g2 = photoModel('general_2x')!
const codeOf = (fn: () => unknown) => {
  try {
    fn()
  } catch (e) {
    return e instanceof ApiError ? e.errorCode : String(e)
  }
  return 'no error'
}

t.test('the family member with the next scale, then resampled', async (t) => {
  t.same(familyOf(g2).map((m) => m.name), ['general_2x', 'general_4x'])
  t.same(familyOf(photoModel('generative_4x')!).map((m) => m.scale), [1, 2, 4])
  t.equal(variantFor(g2, 3).name, 'general_4x')
  t.equal(variantFor(g2, 1.5).name, 'general_2x')
  t.equal(variantFor(g2, 2).name, 'general_2x')
  t.equal(variantFor(g2, 0.5).name, 'general_2x', 'below the smallest: the smallest (then shrunk)')
  t.equal(variantFor(g2, 8).name, 'general_4x', 'above the largest: the largest (then enlarged)')
  t.equal(variantFor(photoModel('generative_4x')!, 0.7).name, 'generative_1x')
  t.equal(variantFor(photoModel('sharpen_denoise_1x')!, 2).name, 'sharpen_denoise_1x', 'a one-member family')

  t.match(outputSize({ scale: 3 }, g2, 100, 50), { model: { name: 'general_4x' }, width: 300, height: 150, target: { width: 300 } })
  t.match(outputSize({ scale: 1.5 }, g2, 101, 51), { model: { name: 'general_2x' }, width: 152, height: 77 })
  // One side: the aspect ratio kept (rounded as the engine rounds); both: as given, the larger ratio picks the model.
  t.match(outputSize({ target_width: 1000 }, g2, 400, 300), { model: { name: 'general_4x' }, width: 1000, height: 750 })
  t.same(outputSize({ target_width: 1000 }, g2, 400, 300).target, { width: 1000 })
  t.match(outputSize({ target_height: 450 }, g2, 400, 300), { model: { name: 'general_2x' }, width: 600, height: 450 })
  t.match(outputSize({ target_width: 500, target_height: 1000 }, g2, 400, 300), { model: { name: 'general_4x' }, width: 500, height: 1000 })
  // EXIF orientation 6 (stored 400 x 300, shown 300 x 400): sizes are of the upright picture.
  t.match(outputSize({ target_width: 600 }, g2, 400, 300, 6), { model: { name: 'general_2x' }, width: 600, height: 800 })
  t.match(outputSize({ scale: 2 }, g2, 400, 300, 8), { width: 600, height: 800 })
  t.match(outputSize({ scale: 2 }, g2, 400, 300, 3), { width: 800, height: 600 }, '180 degrees: no swap')

  t.equal(codeOf(() => outputSize({ scale: 2, target_width: 10 }, g2, 400, 300)), 100403000, 'scale and a target')
  t.equal(codeOf(() => outputSize({ target_width: 30000 }, g2, 10000, 7100)), 110400009, 'input over 70 MP')
  t.equal(codeOf(() => outputSize({ scale: 3 }, g2, 6000, 6000)), 110400010, 'the 4x model output over 432 MP')
  t.equal(codeOf(() => outputSize({ target_width: 40000, target_height: 20000 }, g2, 4000, 2000)), 110400010, 'target over 432 MP')
  t.equal(codeOf(() => outputSize({ target_width: 65535 }, g2, 100, 1)), 'no error', 'a long thin strip is fine')
  t.equal(codeOf(() => outputSize({ target_height: 65535 }, g2, 100, 1)), 110400010, 'a side over 65535')
  t.equal(codeOf(() => outputSize({ scale: 1.5 }, photoModel('generative_2x')!, 4000, 3000)), 110400010, 'generative: 34 MP')
})

/** A JPEG start: SOI, an APP1 Exif segment with IFD0 { Orientation = o }, then SOS. */
function jpegWithOrientation(o: number, le: boolean): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 12 + 4)
  tiff.write(le ? 'II' : 'MM', 0, 'latin1')
  const w16 = (v: number, p: number) => (le ? tiff.writeUInt16LE(v, p) : tiff.writeUInt16BE(v, p))
  const w32 = (v: number, p: number) => (le ? tiff.writeUInt32LE(v, p) : tiff.writeUInt32BE(v, p))
  w16(42, 2)
  w32(8, 4)
  w16(1, 8)
  w16(0x0112, 10)
  w16(3, 12)
  w32(1, 14)
  w16(o, 18)
  const app1 = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff])
  const len = Buffer.alloc(2)
  len.writeUInt16BE(app1.length + 2)
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x04, 0x00, 0x00])
  return Buffer.concat([Buffer.from([0xff, 0xd8]), app0, Buffer.from([0xff, 0xe1]), len, app1, Buffer.from([0xff, 0xda, 0x00, 0x02])])
}

t.test('JPEG EXIF orientation from the header', async (t) => {
  t.equal(exifOrientation(jpegWithOrientation(6, true)), 6)
  t.equal(exifOrientation(jpegWithOrientation(8, false)), 8)
  t.equal(exifOrientation(jpegWithOrientation(9, false)), undefined, 'out of range')
  t.equal(exifOrientation(png(4, 4)), undefined, 'not a JPEG')
  t.equal(exifOrientation(jpegWithOrientation(6, true).subarray(0, 20)), undefined, 'cut short')
  t.equal(exifOrientation(Buffer.from([0xff, 0xd8, 0xff, 0xda, 0, 2])), undefined, 'no EXIF')
})

t.test('submission: model, size and price by output size; old requests answer as before', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  const url = srv.put('p.png', pngHeader(1000, 1000))
  // Without the new fields: the commercial answer, exactly its two fields.
  const old = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })
  t.equal(old.statusCode, 200)
  t.same(Object.keys(old.json().data), ['job_id', 'consume_coins'])
  t.equal(old.json().data.consume_coins, 10, '2000 x 2000 = 4 MP: the first enhance tier')
  t.notOk('target' in (await app.lucent.store.getJob(old.json().data.job_id))!.params)

  // scale 3 on general_2x: general_4x runs, 3000 x 3000 = 9 MP -> the (8, 12] tier: 20 coins
  const s3 = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png', scale: 3 })
  t.equal(s3.statusCode, 200)
  t.match(s3.json().data, { consume_coins: 20, model_name: 'general_4x', output_width: 3000, output_height: 3000 })
  const job = (await app.lucent.store.getJob(s3.json().data.job_id))!
  t.equal(job.model, 'general_4x')
  t.match(job.params, { output: { width: 3000, height: 3000 }, target: { width: 3000 } })

  // A smaller output than the model's own costs less: 1500 x 1500 with general_2x = 2.25 MP -> 10 coins.
  const w = await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: url, extension: '.png', target_width: 1500 })
  t.match(w.json().data, { consume_coins: 10, model_name: 'general_2x', output_width: 1500, output_height: 1500 })

  const spent = 10 + 20 + 10
  t.equal(await balance(app, id), 1000 - spent)
  const bad = async (body: object) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png', ...body })
    return r.json().error_code
  }
  t.equal(await bad({ scale: 2, target_width: 100 }), 100403000)
  t.equal(await bad({ scale: 0 }), 100403000)
  t.equal(await bad({ scale: -1 }), 100403000)
  t.equal(await bad({ target_width: 0 }), 100403000)
  t.equal(await bad({ target_height: 1.5 }), 100403000)
  t.equal(await bad({ target_width: 30000, target_height: 30000 }), 110400010)
  t.equal(await balance(app, id), 1000 - spent, 'refused submissions cost nothing')
})

t.test('a real run: scale 1.5 and a target width', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const url = srv.put('in.png', png(40, 30))
  const run = async (body: object) => {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png', ...body })
    t.equal(r.statusCode, 200, JSON.stringify(r.json()))
    const done = await waitFor(async () => {
      const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
      return d.status !== 'CONVERTING' && d
    }, 300_000)
    t.equal(done.status, 'COMPLETED', JSON.stringify(done))
    t.notOk('output_put' in done, 'no output_put_url: no output_put field')
    const u = new URL(done.res_url)
    return sniff((await app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload)
  }
  t.match(await run({ scale: 1.5 }), { format: 'png', width: 60, height: 45 })
  t.match(await run({ target_width: 130 }), { format: 'png', width: 130, height: 98 })
})

t.test('a JPEG turned by its EXIF orientation: sizes and price of the upright picture', { skip: (!addonBuilt && 'native addon not built') || (spawnSync('ffmpeg', ['-version']).status !== 0 && 'ffmpeg not installed') }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  // 48 x 32 as stored, orientation 6 (turn 90 degrees clockwise): 32 x 48 upright.
  const file = path.join(await tempDir(t), 'stored.jpg')
  execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=48x32', '-frames:v', '1', file])
  const plain = fs.readFileSync(file)
  const exif = jpegWithOrientation(6, false)
  const turned = Buffer.concat([exif.subarray(0, exif.length - 4), plain.subarray(2)]) // SOI + APP0 + APP1, then the rest
  t.equal(exifOrientation(turned), 6)
  t.match(sniff(turned), { format: 'jpeg', width: 48, height: 32 })
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('turned.jpg', turned), extension: '.png', target_width: 64 })
  t.match(r.json().data, { model_name: 'general_2x', output_width: 64, output_height: 96 })
  const done = await waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000)
  t.equal(done.status, 'COMPLETED', JSON.stringify(done))
  const u = new URL(done.res_url)
  t.match(sniff((await app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload), { format: 'png', width: 64, height: 96 })
})
