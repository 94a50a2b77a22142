/**
 * POST /api/image-segmentation (background removal, issue 31) end to end with the real engine (u2netp on
 * data/test-models, a real photo of /work/shared/data/photos): matted / mask / all through task-status, the
 * price debited, a broken input refunded, the request's validation codes, a hostile key's inputs refused as the
 * photo path refuses them, GET /api/models listing the two models with `available`, the stages' progress in
 * task-status while the job runs, and `output_put_url` (a real S3 server's pre-signed PUT URL; private addresses
 * refused as on the photo route; a rejected PUT leaves the result at res_url).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import http from 'node:http'
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { build, createKey, balance, post, png, inputServer, addonBuilt, jobEnded, modelDir, repoRoot, sharedData, tempDir } from '../helper.js'
import { loadPrices } from '../../server/pricing.js'
import { sniff } from '../../server/media/sniff.js'
import { S3Storage } from '../../server/storage/s3.js'
import { requireServices } from '../scaleout/services.js'
import type { FastifyInstance } from 'fastify'

const dir = path.resolve(repoRoot, modelDir ?? 'data/test-models')
const skip = !addonBuilt ? 'native addon not built'
  : !fs.existsSync(path.join(dir, 'seg/u2netp.onnx')) ? `no seg/u2netp.onnx in ${dir}`
  : !fs.existsSync(path.join(sharedData, 'photos/OST_009.png')) ? 'shared photos absent' : false
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)

/** A PNG's IHDR: bit depth and colour type (0 grey, 2 RGB, 4 grey+alpha, 6 RGBA). */
const ihdr = (b: Buffer) => ({ depth: b[24], colorType: b[25] })

const finished = jobEnded

async function fetchLink(app: FastifyInstance, url: string) {
  const u = new URL(url)
  const r = await app.inject({ method: 'GET', url: u.pathname + u.search })
  return { status: r.statusCode, type: r.headers['content-type'], body: r.rawPayload }
}

const errorOf = (r: { statusCode: number; json(): any }) => ({ status: r.statusCode, code: r.json().error_code })

t.test('matted, mask and all through the API on a real photo; priced, debited once', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const url = srv.shared('photos/OST_009.png') // 448 x 640 RGB: 0.29 MP, the first tier (5 coins)

  // matted (the default return_type): res_url only
  const a = await post(app, '/api/image-segmentation', key, { file_url: url })
  t.equal(a.statusCode, 200, a.body)
  t.same(Object.keys(a.json()), ['code', 'message', 'data'])
  t.match(a.json(), { code: 200, message: 'OK', data: { job_id: /^[0-9a-f]{32}$/, consume_coins: 5 } })
  t.same(Object.keys(a.json().data), ['job_id', 'consume_coins'], 'the photo answer, nothing added')
  const da = await finished(app, key, a.json().data.job_id)
  t.equal(da.status, 'COMPLETED', JSON.stringify(da))
  t.notOk('mask_url' in da || 'thumbnail_url' in da, 'matted: no mask, no thumbnail')
  const ra = await fetchLink(app, da.res_url)
  t.equal(ra.status, 200)
  t.equal(ra.type, 'image/png')
  t.match(sniff(ra.body), { kind: 'image', format: 'png', width: 448, height: 640 })
  t.same(ihdr(ra.body), { depth: 8, colorType: 6 }, 'RGBA, 8 bits')
  t.equal((await app.lucent.store.getJob(a.json().data.job_id))?.model, 'u2netp', 'default: u2netp where u2net is not installed')

  // mask: res_url + mask_url (grey PNG of the photo's size)
  const m = await post(app, '/api/image-segmentation', key, { file_url: url, return_type: 'mask', model_name: 'u2netp' })
  t.equal(m.statusCode, 200)
  const dm = await finished(app, key, m.json().data.job_id)
  t.equal(dm.status, 'COMPLETED')
  t.notOk('thumbnail_url' in dm)
  const mask = await fetchLink(app, dm.mask_url)
  t.equal(mask.status, 200)
  t.equal(mask.type, 'image/png')
  t.match(sniff(mask.body), { format: 'png', width: 448, height: 640 })
  t.same(ihdr(mask.body), { depth: 8, colorType: 0 }, 'grey, 8 bits')

  // all + webp: the matted image as webp, the mask, a thumbnail of 256 px on the long side
  const al = await post(app, '/api/image-segmentation', key, { file_url: url, return_type: 'all', extension: '.webp' })
  t.equal(al.statusCode, 200)
  const dl = await finished(app, key, al.json().data.job_id)
  t.equal(dl.status, 'COMPLETED', JSON.stringify(dl))
  const rl = await fetchLink(app, dl.res_url)
  t.equal(rl.type, 'image/webp')
  t.match(sniff(rl.body), { format: 'webp', width: 448, height: 640 })
  t.match(sniff((await fetchLink(app, dl.mask_url)).body), { format: 'png', width: 448, height: 640 })
  const th = await fetchLink(app, dl.thumbnail_url)
  t.equal(th.status, 200)
  t.match(sniff(th.body), { format: 'png', width: 179, height: 256 }, 'thumbnail: smaller, aspect kept')
  t.same(ihdr(th.body), { depth: 8, colorType: 6 }, 'thumbnail keeps the alpha')

  // all + the default .png: the thumbnail is a PNG too (its file never the input's: ffmpeg would refuse to write it)
  const ap = await post(app, '/api/image-segmentation', key, { file_url: url, return_type: 'all' })
  const dp = await finished(app, key, ap.json().data.job_id)
  t.equal(dp.status, 'COMPLETED', JSON.stringify(dp))
  t.match(sniff((await fetchLink(app, dp.res_url)).body), { format: 'png', width: 448, height: 640 })
  t.match(sniff((await fetchLink(app, dp.thumbnail_url)).body), { format: 'png', width: 179, height: 256 })

  t.equal(await balance(app, id), 80, '4 jobs x 5 coins')
  const ledger = await app.lucent.store.ledger(id)
  t.same(ledger.map((e) => e.kind).sort(), ['debit', 'debit', 'debit', 'debit', 'grant'])

  // GET /api/models: the two models, kind segmentation, the price table charged above, available as installed
  const models = (await app.inject({ method: 'GET', url: '/api/models' })).json().data.models as any[]
  const seg = models.filter((x) => x.kind === 'segmentation')
  t.same(seg.map((x) => x.name), ['u2netp', 'u2net'])
  t.equal(seg[0].available, true, 'u2netp installed')
  t.equal(seg[1].available, fs.existsSync(path.join(dir, 'seg/u2net.onnx')), 'u2net: as its file')
  t.same(seg[0].price, { unit: 'input_megapixels', tiers: [{ below_mp: 4, coins: 5 }, { below_mp: 12, coins: 10 }, { below_mp: 24, coins: 15 }, { below_mp: null, coins: 20 }] })
  t.equal(seg[0].limits.max_input_mp, 70)
})

t.test('a broken input ends in ERROR, refunded; bad requests answer the API codes, nothing debited', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const good = png(64, 64)
  const cut = good.subarray(0, good.length - 40) // the header sniffs, the pixels do not decode
  const r = await post(app, '/api/image-segmentation', key, { file_url: srv.put('cut.png', cut) })
  t.equal(r.statusCode, 200)
  t.equal(r.json().data.consume_coins, 5)
  const d = await finished(app, key, r.json().data.job_id)
  t.equal(d.status, 'ERROR')
  t.equal(d.error_code, 100400002, 'decode failed')
  t.notOk('res_url' in d || 'mask_url' in d)
  t.equal(await balance(app, id), 100, 'refunded in full (no progress)')

  const url = srv.shared('photos/0014.jpg')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, return_type: 'cutout' })), { status: 403, code: 100403000 }, 'bad return_type: the validation answer')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, model_name: 'general_4x' })), { status: 400, code: 110400005 }, 'unknown model')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, model_name: '../sr/x' })), { status: 400, code: 110400005 })
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, extension: '.jpg' })), { status: 400, code: 110400007 }, 'jpg holds no alpha')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, extension: '.exe' })), { status: 400, code: 110400007 })
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: url, extension: '.heif', return_type: 'all' })), { status: 400, code: 110400007 }, 'no thumbnail from HEIF')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { return_type: 'mask' })), { status: 403, code: 100403000 }, 'file_url required')
  t.same(errorOf(await post(app, '/api/image-segmentation', key, { file_url: srv.put('t.txt', Buffer.from('not an image')) })), { status: 400, code: 110400007 })
  t.equal(await balance(app, id), 100, 'nothing debited for refused requests')
})

t.test("a hostile key: a private address and a forged link to another key's result are refused as the photo path refuses them", { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const victim = await createKey(app, { coins: 100 })
  const v = await post(app, '/api/image-segmentation', victim.key, { file_url: srv.shared('photos/0014.jpg'), return_type: 'mask' })
  const dv = await finished(app, victim.key, v.json().data.job_id)
  t.equal(dv.status, 'COMPLETED')
  const attacker = await createKey(app, { coins: 100 })
  const both = async (url: string) => {
    const s = await post(app, '/api/image-segmentation', attacker.key, { file_url: url })
    const p = await post(app, '/api/photo-enhancer', attacker.key, { model_name: 'general_2x', img_url: url, extension: '.png' })
    return { seg: errorOf(s), photo: errorOf(p) }
  }
  // the victim's mask link with its signature altered (guessing another key's files): refused as for photos
  const forged = new URL(dv.mask_url)
  forged.searchParams.set('s', 'A'.repeat((forged.searchParams.get('s') ?? 'x').length))
  const f = await both(forged.href)
  t.same(f.seg, f.photo)
  t.equal(f.seg.status, 400)
  // another job's file named with the victim's signature: refused
  const swapped = dv.mask_url.replace(/\/mask\.png/, '/thumbnail.png')
  const s = await both(swapped)
  t.same(s.seg, s.photo)
  t.equal(s.seg.status, 400)
  // a private address (loopback, not allowed any more)
  app.lucent.config.fetchAllow = []
  const p = await both(srv.shared('photos/0014.jpg'))
  t.same(p.seg, p.photo)
  t.equal(p.seg.status, 400)
  t.equal(await balance(app, attacker.id), 100, 'nothing debited')
})

t.test('LUCENT_PRICES sets the segmentation table: charged by upright input megapixels and shown in GET /api/models', { skip }, async (t) => {
  const file = path.join(await tempDir(t), 'prices.json')
  fs.writeFileSync(file, JSON.stringify({ segmentation: [[0.1, 3], [1, 7], [null, 11]] }))
  const app = await build(t, { LUCENT_PRICES: file })
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const small = await post(app, '/api/image-segmentation', key, { file_url: srv.shared('photos/0014.jpg') }) // 179 x 179: 0.03 MP
  t.equal(small.json().data.consume_coins, 3)
  const mid = await post(app, '/api/image-segmentation', key, { file_url: srv.shared('photos/OST_009.png'), return_type: 'all' }) // 0.29 MP
  t.equal(mid.json().data.consume_coins, 7)
  t.equal(await balance(app, id), 90)
  const seg = ((await app.inject({ method: 'GET', url: '/api/models' })).json().data.models as any[]).filter((x) => x.kind === 'segmentation')
  t.same(seg[1].price.tiers, [{ below_mp: 0.1, coins: 3 }, { below_mp: 1, coins: 7 }, { below_mp: null, coins: 11 }])
  fs.writeFileSync(file, JSON.stringify({ segmentation: [[1, -1]] }))
  t.throws(() => loadPrices(file), /segmentation/, 'a bad table stops the start')
})

t.test('u2net asked for where its file is not installed: the job ends model_missing (100500005), refunded in full', { skip: skip || (fs.existsSync(path.join(dir, 'seg/u2net.onnx')) && 'u2net installed here') }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/image-segmentation', key, { file_url: srv.shared('photos/0014.jpg'), model_name: 'u2net' })
  t.equal(r.statusCode, 200)
  const d = await finished(app, key, r.json().data.job_id)
  t.equal(d.status, 'ERROR')
  t.equal(d.error_code, 100500005, 'model missing: the service')
  t.equal(await balance(app, id), 100)
})

t.test('the work budget: a job whose stored sides claim less than its file holds stops with 110400015, charged only its progress', { skip }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/image-segmentation', key, { file_url: srv.shared('photos/OST_009.png') })
  const jobId = r.json().data.job_id as string
  // the params as a tampered store row would hold them: a 40 x 30 picture (budget 0.0013 MP; the file holds 0.29 MP)
  const db = (app.lucent.store as unknown as { db: { prepare(s: string): { run(...a: unknown[]): unknown } } }).db
  const job = (await app.lucent.store.getJob(jobId))!
  db.prepare('UPDATE jobs SET params = ? WHERE id = ?').run(JSON.stringify({ ...job.params, upright: { width: 40, height: 30 } }), jobId)
  app.lucent.queue.resume()
  const d = await finished(app, key, jobId)
  t.equal(d.status, 'ERROR')
  t.equal(d.error_code, 110400015, 'stopped by the meter before the network ran')
  t.equal(await balance(app, id), 100, 'no progress: all back (the money policy)')
})

/** A JPEG start: SOI, APP0, an APP1 Exif segment with IFD0 { Orientation = o } (big-endian), to put before a JPEG's
 *  own segments (as test/routes/output-size.ts does). */
function exifOrientationSegment(o: number): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 12 + 4)
  tiff.write('MM', 0, 'latin1')
  tiff.writeUInt16BE(42, 2); tiff.writeUInt32BE(8, 4); tiff.writeUInt16BE(1, 8)
  tiff.writeUInt16BE(0x0112, 10); tiff.writeUInt16BE(3, 12); tiff.writeUInt32BE(1, 14); tiff.writeUInt16BE(o, 18)
  const app1 = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff])
  const len = Buffer.alloc(2)
  len.writeUInt16BE(app1.length + 2)
  return Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xe1]), len, app1])
}

t.test('EXIF orientation: a JPEG stored 512 x 256 with orientation 6 gives a 256 x 512 upright result and mask', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 100 })
  const file = path.join(await tempDir(t), 'stored.jpg')
  execFileSync('ffmpeg', ['-v', 'error', '-i', path.join(sharedData, 'photos/00003.png'), '-frames:v', '1', file])
  const turned = Buffer.concat([exifOrientationSegment(6), fs.readFileSync(file).subarray(2)])
  t.match(sniff(turned), { format: 'jpeg', width: 512, height: 256 })
  const r = await post(app, '/api/image-segmentation', key, { file_url: srv.put('turned.jpg', turned), return_type: 'mask' })
  t.equal(r.statusCode, 200)
  t.match((await app.lucent.store.getJob(r.json().data.job_id))?.params, { input: { width: 512, height: 256 }, upright: { width: 256, height: 512 } })
  const d = await finished(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED')
  t.match(sniff((await fetchLink(app, d.res_url)).body), { format: 'png', width: 256, height: 512 })
  t.match(sniff((await fetchLink(app, d.mask_url)).body), { format: 'png', width: 256, height: 512 })
})

t.test('Idempotency-Key and cancel as on the photo route', { skip }, async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const body = { file_url: srv.shared('photos/0014.jpg'), return_type: 'all' }
  const send = (b: unknown) => app.inject({ method: 'POST', url: '/api/image-segmentation', headers: { apikey: key, 'idempotency-key': 'k1' }, payload: b as object })
  const a = await send(body)
  const b = await send(body)
  t.equal(a.statusCode, 200)
  t.same(b.json(), a.json(), 'the same answer again')
  t.equal(srv.hits.get('/shared/photos/0014.jpg'), 1, 'fetched once')
  t.equal((await send({ ...body, return_type: 'mask' })).json().error_code, 110409001, 'another body under the key')
  t.equal(await balance(app, id), 95, 'debited once')
  const c = await post(app, '/api/task-cancel', key, { job_id: a.json().data.job_id })
  t.match(c.json().data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' })
  t.equal(await balance(app, id), 100, 'canceled while waiting: all back')
})

t.test('progress: task-status shows the stages of a running segmentation rising, then 100', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  // polled every 25 ms: a key with a high rate limit
  const { key } = await createKey(app, { coins: 100, rate: 100_000 })
  // OST_009 at 4x (1792 x 2560, 4.6 MP): the refinement and the encodes last long enough to be seen
  const file = path.join(await tempDir(t), 'big.png')
  execFileSync('ffmpeg', ['-v', 'error', '-i', path.join(sharedData, 'photos/OST_009.png'), '-vf', 'scale=1792:2560', '-frames:v', '1', file])
  const written: number[] = []
  const off = app.lucent.jobs.on('progress', (e) => written.push(e.progress))
  t.teardown(off)
  const t0 = Date.now()
  const r = await post(app, '/api/image-segmentation', key, { file_url: srv.put('big.png', fs.readFileSync(file)), return_type: 'mask' })
  t.equal(r.statusCode, 200, r.body)
  const jobId = r.json().data.job_id as string
  const seen: number[] = []
  let last: any
  for (;;) {
    last = (await post(app, '/api/task-status', key, { job_id: jobId })).json().data
    if (last.status !== 'CONVERTING') break
    seen.push(last.progress)
    await new Promise((res) => setTimeout(res, 25))
  }
  t.comment(`${((Date.now() - t0) / 1000).toFixed(1)} s; polled: ${[...new Set(seen)].join(' ')}; written: ${written.join(' ')}`)
  t.match(last, { status: 'COMPLETED', progress: 100 })
  t.same(seen, [...seen].sort((a, b) => a - b), 'never goes back')
  t.ok(seen.some((p) => p > 0 && p < 100), 'a running job shows a progress between 0 and 100')
  t.ok(written.length >= 2, `written more than once (${written.join(', ')})`)
  t.same(written, [...new Set(written)].sort((a, b) => a - b), 'written rising')
  t.ok(written.every((p) => [10, 60, 80, 90, 99].includes(p)), 'the engine stages (100 is written as 99 until COMPLETED)')
})

/** A local receiver answering every request with `status`; what it got. */
async function receiver(t: { teardown(fn: () => unknown): void }, status: number) {
  const seen: Array<{ method: string; headers: http.IncomingHttpHeaders; body: Buffer }> = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      seen.push({ method: req.method!, headers: req.headers, body: Buffer.concat(chunks) })
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status >= 400 ? `nope ${status}` : '')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }))
  return { seen, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/bucket/cut.png?X-Amz-Signature=abc` }
}

t.test('output_put_url: private, malformed and non-http URLs refused as on the photo route, nothing debited', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const img = srv.put('a.png', png(8, 8))
  for (const bad of ['http://10.1.2.3/b/o.png', 'http://[::1]:9/x', 'http://169.254.169.254/latest', 'http://0x7f000001:9/x', 'ftp://example.com/x', 'not a url', 'http://localhost./x']) {
    app.lucent.config.fetchAllow = bad.includes('0x7f') ? [] : app.lucent.config.fetchAllow // loopback in hex: refused once not allow-listed
    const s = await post(app, '/api/image-segmentation', key, { file_url: img, output_put_url: bad })
    const p = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png', output_put_url: bad })
    t.same(errorOf(s), errorOf(p), `${bad}: the photo route's answer`)
    t.equal(s.json().error_code, 100400001, bad)
  }
  t.equal(await balance(app, id), 100, 'nothing debited')
})

t.test('output_put_url: the matted image delivered to a real S3 server; a rejected PUT leaves it at res_url, charged', { skip }, async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return void t.plan(0, svc.skip)
  const bucket = `lucent-seg-${crypto.randomBytes(4).toString('hex')}`
  const s3 = new S3Storage({
    endpoint: svc.LUCENT_S3_ENDPOINT, bucket, region: svc.LUCENT_S3_REGION, accessKeyId: svc.LUCENT_S3_ACCESS_KEY_ID,
    secretAccessKey: svc.LUCENT_S3_SECRET_ACCESS_KEY, forcePathStyle: true,
  })
  t.teardown(() => s3.close())
  await s3.ensureBucket(true)
  const host = new URL(svc.LUCENT_S3_ENDPOINT).hostname
  const app = await build(t, { LUCENT_FETCH_ALLOW: `127.0.0.1,${host}`, LUCENT_OUTPUT_PUT_BACKOFF_MS: '20' })
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const url = srv.shared('photos/0014.jpg') // 179 x 179

  const dest = await getSignedUrl(s3.client, new PutObjectCommand({ Bucket: bucket, Key: 'cutouts/0014.webp' }), { expiresIn: 600 })
  const a = await post(app, '/api/image-segmentation', key, { file_url: url, return_type: 'all', extension: '.webp', output_put_url: dest })
  t.equal(a.statusCode, 200, a.body)
  t.same(Object.keys(a.json().data), ['job_id', 'consume_coins'])
  const da = await finished(app, key, a.json().data.job_id)
  t.match(da, { status: 'COMPLETED', progress: 100, output_put: { status: 'delivered', http_status: 200, attempts: 1, error: null } })
  const res = await fetchLink(app, da.res_url)
  const got = await s3.client.send(new GetObjectCommand({ Bucket: bucket, Key: 'cutouts/0014.webp' }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(res.body), 'the bucket holds the matted image of res_url')
  t.equal(got.ContentType, 'image/webp')
  t.ok(da.mask_url && da.thumbnail_url, 'mask and thumbnail stay links')

  // a bucket that rejects: the job completes, the result stays at res_url, task-status says why; charged
  const rejecting = await receiver(t, 500)
  const b = await post(app, '/api/image-segmentation', key, { file_url: url, output_put_url: rejecting.url })
  const db = await finished(app, key, b.json().data.job_id)
  t.match(db, { status: 'COMPLETED', output_put: { status: 'failed', http_status: 500, attempts: 3, error: /HTTP 500/ } })
  t.equal(rejecting.seen.length, 3, 'retried on 5xx (LUCENT_OUTPUT_PUT_ATTEMPTS)')
  const rb = await fetchLink(app, db.res_url)
  t.equal(rb.status, 200)
  t.ok(rejecting.seen[0]!.body.equals(rb.body), 'what was offered is the result')
  t.equal(rejecting.seen[0]!.headers['content-type'], 'image/png')
  t.equal(await balance(app, id), 90, 'both charged: the jobs themselves succeeded')
  // a job without output_put_url: no output_put field
  t.notOk('output_put' in (await finished(app, key, (await post(app, '/api/image-segmentation', key, { file_url: url })).json().data.job_id)))
})
