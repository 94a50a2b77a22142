/**
 * Extension: output_put_url. The PUT with its retry rule against real HTTP servers (one failing on purpose, one
 * rejecting, one flaky), the real S3 server of scripts/services.sh through an official pre-signed PUT URL, the
 * submission check (private addresses, bad URLs), and whole jobs (the engine; skipped until the addon is built):
 * delivered to S3, and a rejected PUT that leaves the result at res_url and says so.
 */
import t from 'tap'
import crypto from 'node:crypto'
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import type { FastifyInstance } from 'fastify'
import { build, createKey, balance, post, png, inputServer, addonBuilt, waitFor, freePort, tempDir } from '../helper.js'
import { outputPutter, providerHeaders } from '../../server/jobs/output-put.js'
import { S3Storage } from '../../server/storage/s3.js'
import { requireServices } from '../scaleout/services.js'
import { sniff } from '../../server/media/sniff.js'

interface T { teardown(fn: () => unknown): void }
interface Seen { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer }

/** A local receiver answering each request with the next status of `statuses` (the last one repeats; 0: no answer). */
async function receiver(t: T, statuses: number[]) {
  const seen: Seen[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) })
      const status = statuses[Math.min(seen.length - 1, statuses.length - 1)]!
      if (status === 0) return // never answers
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status >= 400 ? `nope ${status}` : '')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }))
  return { seen, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/bucket/out.png?X-Amz-Signature=abc%2Fdef&b=1` }
}

/** A job row for the store's foreign key (queue paused: it never runs). */
async function jobRow(app: FastifyInstance, keyId: string) {
  const id = crypto.randomBytes(16).toString('hex')
  await app.lucent.store.debitAndCreateJob({
    id, keyId, kind: 'photo', model: 'general_2x', coins: 1, originalKey: `o/${id}.png`,
    params: { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 16, height: 16 } },
  })
  return id
}

const settings = { attempts: 3, backoffMs: 20, timeoutMs: 5000 }

t.test('the PUT: delivered, retried on 5xx and on no answer, final on 4xx, refused for private addresses', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const { id: keyId } = await createKey(app)
  const put = outputPutter({ store: app.lucent.store, config: { fetchAllow: ['127.0.0.1'], outputPut: settings } })
  const data = crypto.randomBytes(3000)

  const ok = await receiver(t, [200])
  const j1 = await jobRow(app, keyId)
  t.same(await put(j1, ok.url, data, 'image/png'), { status: 'delivered', httpStatus: 200, attempts: 1, error: null })
  t.equal(ok.seen.length, 1)
  t.match(ok.seen[0], { method: 'PUT', url: '/bucket/out.png?X-Amz-Signature=abc%2Fdef&b=1', headers: { 'content-type': 'image/png', 'content-length': '3000' } })
  t.ok(ok.seen[0]!.body.equals(data), 'the bytes arrive as they are')
  t.notOk('x-ms-blob-type' in ok.seen[0]!.headers)
  t.same(await app.lucent.store.outputPut(j1), { status: 'delivered', httpStatus: 200, attempts: 1, error: null })

  const flaky = await receiver(t, [503, 500, 201])
  const j2 = await jobRow(app, keyId)
  t.match(await put(j2, flaky.url, data, 'image/png'), { status: 'delivered', httpStatus: 201, attempts: 3 })
  t.equal(flaky.seen.length, 3)

  const failing = await receiver(t, [500])
  const j3 = await jobRow(app, keyId)
  t.match(await put(j3, failing.url, data, 'image/png'), { status: 'failed', httpStatus: 500, attempts: 3, error: /^HTTP 500: nope 500/ })
  t.equal(failing.seen.length, 3, 'no more than LUCENT_OUTPUT_PUT_ATTEMPTS tries')

  const rejecting = await receiver(t, [403, 200])
  const j4 = await jobRow(app, keyId)
  t.match(await put(j4, rejecting.url, data, 'image/png'), { status: 'failed', httpStatus: 403, attempts: 1 })
  t.equal(rejecting.seen.length, 1, 'a 403 (expired signature) is not retried')

  const closed = `http://127.0.0.1:${await freePort()}/x`
  const j5 = await jobRow(app, keyId)
  t.match(await put(j5, closed, data, 'image/png'), { status: 'failed', httpStatus: null, attempts: 3, error: /^network: / })

  // Not allow-listed: 127.0.0.1 is private, refused without a connection.
  const strict = outputPutter({ store: app.lucent.store, config: { fetchAllow: [], outputPut: settings } })
  const j6 = await jobRow(app, keyId)
  t.match(await strict(j6, ok.url, data, 'image/png'), { status: 'failed', attempts: 1, error: /^blocked_address: / })
  t.equal(ok.seen.length, 1, 'nothing sent')

  // The job stops (cancel, timeout, shutdown) while a PUT waits for its answer: it ends at once.
  const silent = await receiver(t, [0])
  const j7 = await jobRow(app, keyId)
  const ac = new AbortController()
  setTimeout(() => ac.abort(), 200)
  const t0 = Date.now()
  t.match(await put(j7, silent.url, data, 'image/png', ac.signal), { status: 'failed', httpStatus: null, attempts: 1, error: /aborted/ })
  t.ok(Date.now() - t0 < 2000, `stopped after ${Date.now() - t0} ms (a try may last ${settings.timeoutMs} ms)`)

  t.same(providerHeaders('https://acct.blob.core.windows.net/c/o.png?sv=2024-01-01&sig=abc'), { 'x-ms-blob-type': 'BlockBlob' })
  t.same(providerHeaders('https://storage.googleapis.com/b/o.png?X-Goog-Signature=1'), {})
})

t.test('submission: private, malformed and non-http output_put_url refused, nothing charged', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const img = srv.put('a.png', png(8, 8))
  for (const bad of ['http://10.1.2.3/b/o.png', 'http://[::1]:9/x', 'http://169.254.169.254/latest', 'ftp://example.com/x', 'not a url', 'http://localhost./x']) {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png', output_put_url: bad })
    t.equal(r.json().error_code, 100400001, bad)
  }
  t.equal(await balance(app, id), 100)
  // Allow-listed (LUCENT_FETCH_ALLOW=127.0.0.1 in tests): accepted, and the job says its PUT is pending.
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png', output_put_url: 'http://127.0.0.1:9/o.png' })
  t.equal(r.statusCode, 200)
  t.same(Object.keys(r.json().data), ['job_id', 'consume_coins'])
  t.match((await app.lucent.store.getJob(r.json().data.job_id))!.params, { output_put_url: 'http://127.0.0.1:9/o.png' })
})

t.test('a pre-signed PUT URL of a real S3 server', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return void t.plan(0, svc.skip)
  const bucket = `lucent-put-${crypto.randomBytes(4).toString('hex')}`
  const s3 = new S3Storage({
    endpoint: svc.LUCENT_S3_ENDPOINT, bucket, region: svc.LUCENT_S3_REGION, accessKeyId: svc.LUCENT_S3_ACCESS_KEY_ID,
    secretAccessKey: svc.LUCENT_S3_SECRET_ACCESS_KEY, forcePathStyle: true,
  })
  t.teardown(() => s3.close())
  await s3.ensureBucket(true)
  const app = await build(t)
  app.lucent.queue.pause()
  const { id: keyId } = await createKey(app)
  const host = new URL(svc.LUCENT_S3_ENDPOINT).hostname
  const put = outputPutter({ store: app.lucent.store, config: { fetchAllow: [host], outputPut: settings } })
  const data = crypto.randomBytes(20_000)
  const url = await getSignedUrl(s3.client, new PutObjectCommand({ Bucket: bucket, Key: 'deliveries/a b.png' }), { expiresIn: 600 })
  const j = await jobRow(app, keyId)
  t.match(await put(j, url, data, 'image/png'), { status: 'delivered', attempts: 1, error: null })
  const got = await s3.client.send(new GetObjectCommand({ Bucket: bucket, Key: 'deliveries/a b.png' }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(data), 'the object holds the bytes')
  t.equal(got.ContentType, 'image/png')
  // A bucket that does not exist: S3 answers 404 (NoSuchBucket), final at once, with S3's answer.
  const nobucket = await getSignedUrl(s3.client, new PutObjectCommand({ Bucket: `${bucket}-none`, Key: 'x.png' }), { expiresIn: 600 })
  const j2 = await jobRow(app, keyId)
  t.match(await put(j2, nobucket, data, 'image/png'), { status: 'failed', httpStatus: 404, attempts: 1, error: /^HTTP 404: .*NoSuchBucket/ })

  // A whole job (the engine): delivered to the bucket, the same bytes as res_url.
  if (!addonBuilt) return
  const app2 = await build(t, { LUCENT_FETCH_ALLOW: `127.0.0.1,${host}`, LUCENT_OUTPUT_PUT_BACKOFF_MS: '20' })
  const srv = await inputServer(t)
  const k = await createKey(app2, { coins: 100 })
  const dest = await getSignedUrl(s3.client, new PutObjectCommand({ Bucket: bucket, Key: 'jobs/out.png' }), { expiresIn: 600 })
  const r = await post(app2, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: srv.put('in.png', png(24, 16)), extension: '.png', output_put_url: dest })
  t.equal(r.statusCode, 200)
  const done = await waitFor(async () => {
    const d = (await post(app2, '/api/task-status', k.key, { job_id: r.json().data.job_id })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000)
  t.match(done, { status: 'COMPLETED', output_put: { status: 'delivered', http_status: 200, attempts: 1, error: null } })
  const u = new URL(done.res_url)
  const res = (await app2.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
  t.ok((await s3.get('jobs/out.png'))?.data.equals(res), 'the bucket holds the result')
})

t.test('a job whose PUT is rejected completes; the result stays at res_url and task-status says so', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t, { LUCENT_OUTPUT_PUT_BACKOFF_MS: '20' })
  const srv = await inputServer(t)
  const rejecting = await receiver(t, [500])
  const { key, id } = await createKey(app, { coins: 100 })
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('in.png', png(24, 16)), extension: '.png', output_put_url: rejecting.url })
  t.equal(r.statusCode, 200)
  const done = await waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000)
  t.match(done, { status: 'COMPLETED', progress: 100, output_put: { status: 'failed', http_status: 500, attempts: 3, error: /HTTP 500/ } })
  t.equal(rejecting.seen.length, 3)
  const u = new URL(done.res_url)
  const res = await app.inject({ method: 'GET', url: u.pathname + u.search })
  t.equal(res.statusCode, 200)
  t.match(sniff(res.rawPayload), { format: 'png', width: 48, height: 32 })
  t.ok(rejecting.seen[0]!.body.equals(res.rawPayload), 'what was offered is the result')
  t.equal(await balance(app, id), 90, 'charged: the job itself succeeded')
})

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0

t.test('a video job: its result streamed to output_put_url', { skip: (!addonBuilt && 'native addon not built') || (!hasFfmpeg && 'ffmpeg/ffprobe not installed') }, async (t) => {
  const app = await build(t, { LUCENT_OUTPUT_PUT_BACKOFF_MS: '20' })
  const srv = await inputServer(t)
  const ok = await receiver(t, [502, 200])
  const { key } = await createKey(app, { coins: 100 })
  const file = path.join(await tempDir(t), 'in.mp4')
  execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=1.2:size=32x24:rate=10', '-pix_fmt', 'yuv420p', file])
  const r = await post(app, '/api/video-enhancer', key, { video_url: srv.put('in.mp4', fs.readFileSync(file)), model_name: 'general_restore_1x', resolution: [32, 24], output_put_url: ok.url })
  t.equal(r.statusCode, 200, JSON.stringify(r.json()))
  const done = await waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000)
  t.match(done, { status: 'COMPLETED', output_put: { status: 'delivered', http_status: 200, attempts: 2, error: null } })
  const u = new URL(done.res_url)
  const res = (await app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
  t.equal(ok.seen.length, 2, 'a 502, then the retry')
  t.match(ok.seen[1]!.headers, { 'content-type': 'video/mp4', 'content-length': String(res.length) })
  t.ok(ok.seen[1]!.body.equals(res), 'the bucket got the result')
})
