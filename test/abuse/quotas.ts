/**
 * Abuse, issue 29 holes 7 and 8: per-key quotas, sizes checked while streaming.
 * - Hole 7: a photo submission naming a stored upload over the photo limit is refused (110400009) before a byte of
 *   it is read (the storage's whole-object `get` is never called); 20 parallel submissions naming one 64 MiB upload
 *   keep the gateway's memory flat (peak RSS growth measured); a fetched URL is cut at the limit while streaming.
 * - Hole 8: stored bytes and files per key (multipart upload, pre-signed PUT, transfer, batch transfer), counted with
 *   their retention; over a quota: 429 + 100429000 + Retry-After + RateLimit-Policy / RateLimit, nothing stored,
 *   nothing debited; a streamed upload over the key's remaining bytes is cut while streaming; parallel uploads of one
 *   key cannot pass the quota together; jobs in flight per key (both submission routes: 429 before anything is
 *   fetched or debited).
 * - The quota store itself on SQLite and (services from scripts/services.sh; skipped locally when absent) PostgreSQL.
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { request, FormData } from 'undici'
import type { FastifyInstance } from 'fastify'
import { build, createKey, post, png, inputServer, balance } from '../helper.js'
import { RETENTION_MS } from '../../server/context.js'
import { PgStore } from '../../server/store/postgres.js'
import { SqliteStore } from '../../server/store/sqlite.js'
import type { Store } from '../../server/store/types.js'
import { freshDatabase, requireServices } from '../scaleout/services.js'
import { tempDir } from '../helper.js'

const KiB = 1024
const MiB = 1024 * KiB

async function live(t: Test, env: Record<string, string> = {}) {
  const app = await build(t, env)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  app.lucent.config.publicUrl = `http://127.0.0.1:${port}`
  return { app, base: app.lucent.config.publicUrl }
}

/** Files stored under u/ (uploads and transfers) on local storage, meta files aside. */
function storedUploads(app: FastifyInstance): string[] {
  const root = path.join(app.lucent.config.dataDir, 'objects', 'u')
  if (!fs.existsSync(root)) return []
  return (fs.readdirSync(root, { recursive: true }) as string[])
    .filter((f) => !f.endsWith('.meta.json') && !f.endsWith('.tmp') && fs.statSync(path.join(root, f)).isFile())
}

/** A PNG of about `n` bytes (a valid header and IDAT, padded with an ancillary chunk). */
function pngOf(n: number): Buffer {
  const head = png(8, 8)
  const pad = Math.max(0, n - head.length - 12)
  const chunk = Buffer.alloc(pad + 12)
  chunk.writeUInt32BE(pad, 0)
  chunk.write('teXt', 4, 'latin1')
  return Buffer.concat([head.subarray(0, head.length - 12), chunk, head.subarray(head.length - 12)])
}

async function upload(base: string, key: string, body: Buffer, name = 'a.png') {
  const form = new FormData()
  form.append('file', new Blob([new Uint8Array(body)], { type: 'image/png' }), name)
  const r = await request(`${base}/api/oss/upload`, { method: 'POST', headers: { apikey: key }, body: form })
  return { status: r.statusCode, headers: r.headers, body: (await r.body.json()) as any }
}

/** The 429 of a quota: code, Retry-After, the draft-ietf-httpapi-ratelimit-headers fields. */
function check429(t: Test, r: { status?: number; statusCode?: number; headers: Record<string, unknown>; body: any }, quota: string, q: number, what: string) {
  t.equal(r.status ?? r.statusCode, 429, `${what}: HTTP 429`)
  t.equal(r.body.error_code, 100429000, `${what}: error_code 100429000`)
  t.match(String(r.headers['retry-after']), /^[1-9]\d*$/, `${what}: Retry-After in seconds`)
  const unit = quota === 'stored_bytes' ? 'content-bytes' : quota === 'stored_files' ? 'requests' : 'concurrent-requests'
  t.match(String(r.headers['ratelimit-policy']), new RegExp(`^"${quota}";q=${q};qu="${unit}"(;w=\\d+)?$`), `${what}: RateLimit-Policy`)
  t.match(String(r.headers.ratelimit), new RegExp(`^"${quota}";r=\\d+;t=\\d+$`), `${what}: RateLimit`)
}

t.test('hole 7: an oversize stored upload is refused before a byte is read; parallel submissions keep memory flat', async (t) => {
  const { app, base } = await live(t, { LUCENT_FETCH_MAX_BYTES: String(MiB) })
  app.lucent.queue.pause()
  const { key, id } = await createKey(app, { coins: 1000 })
  const storage = app.lucent.storage
  const big = Buffer.alloc(64 * MiB)
  png(8, 8).copy(big)
  await storage.put('u/0123456789abcdef0123456789abcdef/big.png', big, 'image/png')
  const url = storage.signedGetUrl('u/0123456789abcdef0123456789abcdef/big.png', Date.now() + 3600_000)
  // a spy on the real storage (it still runs): the whole-object read must never happen for an oversize object
  let gets = 0
  const get = storage.get.bind(storage)
  storage.get = async (k: string) => { gets++; return get(k) }
  t.teardown(() => { storage.get = get })

  const one = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })
  t.equal(one.statusCode, 400)
  t.equal(one.json().error_code, 110400009, 'the photo API\'s code for too large')
  t.equal(gets, 0, 'the oversize upload was never read whole')

  global.gc?.()
  const base0 = process.memoryUsage().rss
  let peak = base0
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 2)
  const rs = await Promise.all(Array.from({ length: 20 }, () =>
    post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })))
  clearInterval(timer)
  peak = Math.max(peak, process.memoryUsage().rss)
  t.ok(rs.every((r) => r.json().error_code === 110400009), 'all 20 refused as too large')
  const grew = (peak - base0) / MiB
  t.comment(`20 parallel submissions naming one 64 MiB upload: peak RSS growth ${grew.toFixed(0)} MiB`)
  t.ok(grew < 256, `peak RSS growth ${grew.toFixed(0)} MiB < 256 MiB (whole reads would hold 20 x 64 MiB)`)
  t.equal(gets, 0, 'never read whole')
  t.equal(await balance(app, id), 1000, 'nothing debited')
  t.equal((await app.lucent.store.ledger(id)).filter((e) => e.kind === 'debit').length, 0, 'no debit row')

  // a fetched URL with no Content-Length: cut at the limit while streaming (the sender sees the connection close)
  let sent = 0
  const srv = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' })
    const chunk = Buffer.alloc(64 * KiB)
    const pump = () => {
      while (sent < 512 * MiB) {
        sent += chunk.length
        if (!res.write(chunk)) return void res.once('drain', pump)
      }
      res.end()
    }
    res.on('error', () => {})
    pump()
  })
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { srv.closeAllConnections(); srv.close(() => r()) }))
  const endless = `http://127.0.0.1:${(srv.address() as { port: number }).port}/x.png`
  const f = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: endless, extension: '.png' })
  t.equal(f.json().error_code, 110400009, 'a fetched body past the limit: too large')
  t.ok(sent < 64 * MiB, `the fetch stopped early (${(sent / MiB).toFixed(1)} MiB sent of 512)`)
  void base
})

t.test('hole 8: stored bytes per key (multipart): 429 with the headers, cut while streaming, nothing stored or debited', async (t) => {
  const { app, base } = await live(t)
  const { key, id } = await createKey(app, { coins: 500 })
  const quotas = app.lucent.store.quotas
  t.same(await quotas.get(id), app.lucent.config.quotas, 'defaults from settings')
  t.same(app.lucent.config.quotas, { maxStoredBytes: 10 * 1024 * MiB, maxStoredFiles: 10_000, maxJobsInFlight: 100 }, 'the documented defaults')
  t.same(await quotas.set(id, { maxStoredBytes: 100_000 }), { ...app.lucent.config.quotas, maxStoredBytes: 100_000 })

  const a = await upload(base, key, pngOf(60_000))
  t.equal(a.status, 200, 'under the quota')
  t.match(String(a.headers['ratelimit-policy']), /"stored_bytes";q=100000;qu="content-bytes";w=604800/, 'a success says the policy too')
  t.match(String(a.headers.ratelimit), new RegExp(`"stored_bytes";r=${100_000 - a.body.data.size}`), 'and what is left')
  const before = storedUploads(app)
  t.equal(before.length, 1)

  // a stream over the key's remaining bytes: cut while streaming (the 2 MiB body is never stored whole)
  const b = await upload(base, key, pngOf(2 * MiB))
  check429(t, b, 'stored_bytes', 100_000, 'over the remaining bytes')
  const c = await upload(base, key, pngOf(60_000))
  check429(t, c, 'stored_bytes', 100_000, 'over by a little')
  t.same(storedUploads(app), before, 'nothing stored by the refused uploads')
  t.same(await quotas.usage(id), { storedBytes: a.body.data.size, storedFiles: 1, jobsInFlight: 0 }, 'usage: the one kept upload')
  t.equal(await balance(app, id), 500, 'nothing debited')
  t.equal((await app.lucent.store.ledger(id)).length, 1, 'no ledger row but the grant')

  // the quota bounds parallel uploads of one key too (each one checked again at its commit)
  await quotas.set(id, { maxStoredBytes: a.body.data.size + 100_000 })
  const par = await Promise.all(Array.from({ length: 6 }, (_, i) => upload(base, key, pngOf(30_000), `p${i}.png`)))
  const okN = par.filter((r) => r.status === 200).length
  t.ok(okN >= 1 && okN <= 3, `${okN} of 6 parallel 30 kB uploads kept under 100 kB more`)
  t.ok(par.every((r) => r.status === 200 || r.body.error_code === 100429000), 'the others: 429')
  const u = await quotas.usage(id)
  t.ok(u.storedBytes <= a.body.data.size + 100_000, `stored ${u.storedBytes} bytes within the quota`)
  t.equal(storedUploads(app).length, 1 + okN, 'only the kept ones are on disk')

  // another key is not affected; back to the defaults
  const other = await createKey(app)
  t.equal((await upload(base, other.key, pngOf(60_000))).status, 200, 'another key uploads')
  t.same(await quotas.set(id, null), app.lucent.config.quotas, 'back to the defaults')
  t.equal((await upload(base, key, pngOf(60_000))).status, 200, 'room again')
})

t.test('hole 8: stored files per key, with their retention; pre-signed PUT; transfers', async (t) => {
  const { app, base } = await live(t)
  const srv = await inputServer(t)
  const { key, id } = await createKey(app)
  const quotas = app.lucent.store.quotas
  await quotas.set(id, { maxStoredFiles: 2, maxStoredBytes: 200_000 })

  // a pre-signed PUT: its file counts from the presign, its bytes at the PUT (cut at the remaining bytes)
  const pre = await post(app, '/api/oss/presign-put', key, { filename: 'x.png', content_type: 'image/png' })
  t.equal(pre.statusCode, 200)
  const put = async (body: Buffer) => {
    const r = await request(pre.json().data.upload_url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body })
    return { status: r.statusCode, headers: r.headers, body: (await r.body.json()) as any }
  }
  check429(t, await put(pngOf(300_000)), 'stored_bytes', 200_000, 'a PUT over the byte quota')
  t.equal(storedUploads(app).length, 0, 'nothing stored')
  const okPut = await put(pngOf(50_000))
  t.equal(okPut.status, 200, 'the same link, a PUT that fits')
  t.same(await quotas.usage(id), { storedBytes: okPut.body.data.size, storedFiles: 1, jobsInFlight: 0 })

  // a transfer over the remaining bytes: refused while fetching, nothing stored
  const bigUrl = srv.put('big.png', pngOf(180_000), 'image/png')
  const tr = await post(app, '/api/oss/transfer', key, { url: bigUrl })
  check429(t, { statusCode: tr.statusCode, headers: tr.headers, body: tr.json() }, 'stored_bytes', 200_000, 'a transfer over the byte quota')
  t.equal(storedUploads(app).length, 1, 'nothing more stored')
  const small = srv.put('small.png', pngOf(20_000), 'image/png')
  const tr2 = await post(app, '/api/oss/transfer', key, { url: small })
  t.equal(tr2.statusCode, 200, 'a transfer that fits')

  // two files now: the third of any kind is refused before anything is fetched
  const hits = srv.hits.get('/mem/small.png')
  const tr3 = await post(app, '/api/oss/transfer', key, { url: small })
  check429(t, { statusCode: tr3.statusCode, headers: tr3.headers, body: tr3.json() }, 'stored_files', 2, 'a transfer over the file quota')
  t.equal(srv.hits.get('/mem/small.png'), hits, 'nothing fetched')
  const bt = await post(app, '/api/oss/batch-transfer', key, { urls: [small, small, small] })
  check429(t, { statusCode: bt.statusCode, headers: bt.headers, body: bt.json() }, 'stored_files', 2, 'a batch transfer at the file quota')
  t.equal(srv.hits.get('/mem/small.png'), hits, 'nothing fetched by the batch')
  check429(t, await upload(base, key, pngOf(1000)), 'stored_files', 2, 'an upload over the file quota')
  const p2 = await post(app, '/api/oss/presign-put', key, { filename: 'y.png', content_type: 'image/png' })
  check429(t, { statusCode: p2.statusCode, headers: p2.headers, body: p2.json() }, 'stored_files', 2, 'a presign over the file quota')
  t.equal(storedUploads(app).length, 2, 'two files stored')

  // one file of room, a batch of three: one kept, two refused item by item
  await quotas.set(id, { maxStoredFiles: 3 })
  const bt2 = await post(app, '/api/oss/batch-transfer', key, { urls: [small, small, small] })
  t.equal(bt2.statusCode, 200)
  t.match(bt2.json().data, { total: 3, success: 1, failed: 2 })
  t.equal(bt2.json().data.items.filter((i: any) => i.error_code === 100429000).length, 2, 'two items over the file quota')
  t.equal(storedUploads(app).length, 3)

  // retention: what has expired stops counting
  const later = Date.now() + RETENTION_MS + 60_000
  t.same(await quotas.usage(id, later), { storedBytes: 0, storedFiles: 0, jobsInFlight: 0 }, 'nothing counts after the retention')
  const r = await quotas.reserve(id, { objectKey: 'u/later/x.png', bytes: 0, expiresAt: later + 3600_000, now: later })
  t.ok(r.ok, 'room again once the objects expired')
})

t.test('hole 8: jobs in flight per key, on both submission routes, before anything is fetched or debited', async (t) => {
  const app = await build(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  await app.lucent.store.quotas.set(id, { maxJobsInFlight: 2 })
  const img = srv.put('a.png', png(16, 16), 'image/png')
  const first = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })
  t.equal(first.statusCode, 200)
  const second = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })
  t.equal(second.statusCode, 200)
  t.equal((await app.lucent.store.quotas.usage(id)).jobsInFlight, 2)
  const coins = await balance(app, id)
  const hits = srv.hits.get('/mem/a.png')
  const third = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })
  check429(t, { statusCode: third.statusCode, headers: third.headers, body: third.json() }, 'jobs_in_flight', 2, 'a photo over the jobs quota')
  const vid = await post(app, '/api/video-enhancer', key, { model_name: 'general_restore_2x', video_url: srv.put('v.mp4', Buffer.alloc(100), 'video/mp4'), resolution: [64, 64] })
  check429(t, { statusCode: vid.statusCode, headers: vid.headers, body: vid.json() }, 'jobs_in_flight', 2, 'a video over the jobs quota')
  t.equal(srv.hits.get('/mem/a.png'), hits, 'nothing fetched')
  t.notOk(srv.hits.get('/mem/v.mp4'), 'the video not fetched')
  t.equal(await balance(app, id), coins, 'nothing debited')
  t.equal((await app.lucent.store.jobsByStatus('CONVERTING')).length, 2, 'no job created')
  // another key is not limited by this one's jobs
  const other = await createKey(app)
  t.equal((await post(app, '/api/photo-enhancer', other.key, { model_name: 'general_2x', img_url: img, extension: '.png' })).statusCode, 200)
  // a job that ends frees its place
  await app.lucent.store.failJob(first.json().data.job_id, 100500000, 'test')
  t.equal((await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).statusCode, 200, 'room again')
})

t.test('hole 8 on PostgreSQL: parallel uploads and submissions of one key through the API', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const { app, base } = await live(t, { LUCENT_DATABASE_URL: await freshDatabase(t, svc.LUCENT_DATABASE_URL), LUCENT_QUOTA_JOBS_IN_FLIGHT: '1' })
  app.lucent.queue.pause()
  const { key, id } = await createKey(app, { coins: 100 })
  t.equal((await app.lucent.store.quotas.get(id)).maxJobsInFlight, 1, 'the default from LUCENT_QUOTA_JOBS_IN_FLIGHT')
  await app.lucent.store.quotas.set(id, { maxStoredBytes: 100_000 })
  const par = await Promise.all(Array.from({ length: 8 }, (_, i) => upload(base, key, pngOf(30_000), `p${i}.png`)))
  const okN = par.filter((r) => r.status === 200).length
  t.ok(okN >= 1 && okN <= 3, `${okN} of 8 parallel 30 kB uploads kept under 100 kB`)
  t.ok(par.every((r) => r.status === 200 || r.body.error_code === 100429000), 'the others: 429')
  t.ok((await app.lucent.store.quotas.usage(id)).storedBytes <= 100_000, 'within the quota')
  t.equal(storedUploads(app).length, okN, 'only the kept ones are stored')
  const srv = await inputServer(t)
  const img = srv.put('a.png', png(16, 16), 'image/png')
  t.equal((await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).statusCode, 200)
  const over = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })
  check429(t, { statusCode: over.statusCode, headers: over.headers, body: over.json() }, 'jobs_in_flight', 1, 'PostgreSQL: over the jobs quota')
  t.equal(await balance(app, id), 90, 'one job debited')
})

/** 20 parallel photo submissions of one key with maxJobsInFlight 3: the store counts the key's jobs in its debit
 *  transaction, so exactly 3 are accepted (before: the route's check alone let parallel ones pass together). */
async function parallelInFlight(t: Test, env: Record<string, string> = {}) {
  const app = await build(t, env)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  await app.lucent.store.quotas.set(id, { maxJobsInFlight: 3 })
  const img = srv.put('a.png', png(16, 16), 'image/png')
  const rs = await Promise.all(Array.from({ length: 20 }, () =>
    post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })))
  const accepted = rs.filter((r) => r.statusCode === 200)
  t.equal(accepted.length, 3, `exactly 3 of 20 parallel submissions accepted (${accepted.length})`)
  const refused = rs.filter((r) => r.statusCode !== 200)
  t.ok(refused.every((r) => r.statusCode === 429 && r.json().error_code === 100429000), 'the others: 429 100429000')
  const late = refused.find((r) => r.headers['ratelimit-policy'] !== undefined)!
  check429(t, { statusCode: late.statusCode, headers: late.headers, body: late.json() }, 'jobs_in_flight', 3, 'refused in the debit transaction or before')
  const charged = accepted.reduce((n, r) => n + r.json().data.consume_coins, 0)
  t.equal(await balance(app, id), 1000 - charged, 'only the accepted ones debited')
  t.equal((await app.lucent.store.ledger(id)).filter((e) => e.kind === 'debit').length, 3, 'three debit rows')
  t.equal((await app.lucent.store.quotas.usage(id)).jobsInFlight, 3, 'three jobs in flight')
  t.equal(storedOriginals(app), 3, 'the refused ones left no stored original')
}

/** Originals stored under o/ (photo submissions) on local storage, meta files aside. */
function storedOriginals(app: FastifyInstance): number {
  const root = path.join(app.lucent.config.dataDir, 'objects', 'o')
  if (!fs.existsSync(root)) return 0
  return (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => !f.endsWith('.meta.json') && !f.endsWith('.tmp')).length
}

t.test('jobs in flight counted exactly: 20 parallel submissions, quota 3 (SQLite)', (t) => parallelInFlight(t))

t.test('jobs in flight counted exactly: 20 parallel submissions, quota 3 (PostgreSQL)', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  await parallelInFlight(t, { LUCENT_DATABASE_URL: await freshDatabase(t, svc.LUCENT_DATABASE_URL) })
})

/** A server of slow PNG bodies without Content-Length: /<n>.png sends n bytes in 10 pieces 15 ms apart. */
async function slowServer(t: Test) {
  const srv = http.createServer((req, res) => {
    const n = Number(/\/(\d+)/.exec(req.url ?? '')?.[1] ?? 0)
    res.writeHead(200, { 'content-type': 'image/png' })
    let sent = 0
    const piece = Math.ceil(n / 10)
    const tick = () => {
      if (res.destroyed) return
      if (sent >= n) return void res.end()
      const k = Math.min(piece, n - sent)
      sent += k
      res.write(Buffer.alloc(k, 7))
      setTimeout(tick, 15)
    }
    res.on('error', () => {})
    tick()
  })
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { srv.closeAllConnections(); srv.close(() => r()) }))
  return `http://127.0.0.1:${(srv.address() as { port: number }).port}`
}

t.test('hole 8: a batch transfer holds at most the key\'s remaining bytes on disk at once', async (t) => {
  const { app, base } = await live(t)
  const { key, id } = await createKey(app, { coins: 100 })
  const quota = 1000 * KiB
  await app.lucent.store.quotas.set(id, { maxStoredBytes: quota })
  const src = await slowServer(t)
  const tmp = path.join(app.lucent.config.dataDir, 'tmp')
  let peak = 0
  const timer = setInterval(() => {
    if (!fs.existsSync(tmp)) return
    let n = 0
    for (const f of fs.readdirSync(tmp)) if (f.startsWith('in-')) n += fs.statSync(path.join(tmp, f), { throwIfNoEntry: false })?.size ?? 0
    peak = Math.max(peak, n)
  }, 3)
  t.teardown(() => clearInterval(timer))
  const batch = async (urls: string[]) => {
    const r = await request(`${base}/api/oss/batch-transfer`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify({ urls }) })
    return (await r.body.json()) as any
  }
  // 20 items of 600 kB: each would fit alone, two do not; before, all 20 fetched at once (12 MB on disk for a 1 MB quota)
  const big = await batch(Array.from({ length: 20 }, (_, i) => `${src}/${600 * KiB}?${i}`))
  t.equal(big.data.success, 1, 'one 600 kB item kept')
  t.ok(big.data.items.filter((i: any) => !i.url).every((i: any) => i.error_code === 100429000), 'the others: 429')
  t.ok(peak <= quota, `peak bytes on disk at once ${(peak / KiB).toFixed(0)} kB <= the key's remaining ${quota / KiB} kB`)
  t.ok((await app.lucent.store.quotas.usage(id)).storedBytes <= quota, 'within the quota')
  t.equal(storedUploads(app).length, 1, 'one stored')
  // small items still all go through (one after the other where the held cuts need it)
  await app.lucent.store.quotas.set(id, { maxStoredBytes: quota + 600 * KiB })
  peak = 0
  const small = await batch(Array.from({ length: 5 }, (_, i) => `${src}/${100 * KiB}?s${i}`))
  t.equal(small.data.success, 5, 'five 100 kB items kept within the 1000 kB left')
  t.ok(peak <= quota, `peak bytes on disk at once ${(peak / KiB).toFixed(0)} kB <= ${quota / KiB} kB`)
  t.equal(storedUploads(app).length, 6)
  // single transfers in parallel: one holds the key's remaining bytes; another meanwhile gets 429 with a Retry-After
  // bounded by the reservation's expiry (an hour at most), not the first stored object's retention days away
  await app.lucent.store.quotas.set(id, { maxStoredBytes: (await app.lucent.store.quotas.usage(id)).storedBytes + quota })
  const two = await Promise.all([0, 1].map(async (i) => {
    const r = await request(`${base}/api/oss/transfer`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify({ url: `${src}/${100 * KiB}?t${i}` }) })
    return { status: r.statusCode, headers: r.headers, body: (await r.body.json()) as any }
  }))
  t.ok(two.some((r) => r.status === 200), 'one single transfer kept')
  for (const r of two.filter((x) => x.status !== 200)) {
    check429(t, r, 'stored_bytes', (await app.lucent.store.quotas.get(id)).maxStoredBytes!, 'a parallel single transfer')
    t.ok(Number(r.headers['retry-after']) <= 3600, `Retry-After ${r.headers['retry-after']} <= 3600: held by a transfer under way`)
  }
  t.equal(await balance(app, id), 100, 'nothing debited')
})

/** The store's quota rules, the same on both backends. */
async function storeRules(t: Test, store: Store) {
  const q = store.quotas
  q.defaults = { maxStoredBytes: 1000, maxStoredFiles: 3, maxJobsInFlight: 5 }
  await store.createKey({ id: 'k1', hash: 'h1', coins: 0, trial: 0, expiresAt: null, rate: null })
  t.same(await q.get('k1'), q.defaults)
  t.same(await q.set('k1', { maxStoredFiles: null }), { maxStoredBytes: 1000, maxStoredFiles: null, maxJobsInFlight: 5 }, 'null = unlimited')
  t.same(await q.set('k1', { maxStoredBytes: 500 }), { maxStoredBytes: 500, maxStoredFiles: null, maxJobsInFlight: 5 }, 'patches merge')
  t.same(await q.overrides('k1'), { maxStoredFiles: null, maxStoredBytes: 500 })
  await t.rejects(q.set('k1', { maxStoredBytes: -1 }), TypeError, 'a negative quota is refused')
  t.same(await q.set('k1', null), q.defaults, 'null: back to the defaults')
  await q.set('k1', { maxStoredBytes: 500, maxStoredFiles: 4 })
  const now = Date.now()
  const r1 = await q.reserve('k1', { objectKey: 'u/a', bytes: 0, expiresAt: now + 60_000, now })
  t.match(r1, { ok: true, remainingBytes: 500 })
  t.same(await q.commit('u/a', { size: 400, expiresAt: now + 120_000, now }), { ok: true })
  t.same(await q.owner('u/a'), 'k1')
  // parallel reservations: each gets the remaining 100; commits are checked one by one
  const rs = await Promise.all([1, 2, 3].map((i) => q.reserve('k1', { objectKey: `u/p${i}`, bytes: 0, expiresAt: now + 60_000, now })))
  t.ok(rs.every((r) => r.ok))
  const cs = await Promise.all([1, 2, 3].map((i) => q.commit(`u/p${i}`, { size: 60, expiresAt: now + 120_000, now })))
  t.equal(cs.filter((c) => c.ok).length, 1, 'one 60-byte commit of three fits the 100 left')
  t.match(cs.find((c) => !c.ok), { ok: false, quota: 'stored_bytes', limit: 500 })
  t.same(await q.usage('k1', now), { storedBytes: 460, storedFiles: 2, jobsInFlight: 0 })
  await q.rekey('u/p1', 'u/p1b')
  t.equal(await q.owner('u/p1'), null)
  await q.release('u/a')
  t.equal((await q.usage('k1', now)).storedBytes, 60)
  t.equal((await q.usage('k1', now + 200_000)).storedFiles, 0, 'expired rows stop counting')
  t.ok(await q.purge(now + 200_000) >= 1, 'purge drops expired rows')
}

t.test('the quota store on SQLite', async (t) => {
  const dir = await tempDir(t)
  const store = new SqliteStore(path.join(dir, 'q.db'))
  t.teardown(() => store.close())
  await storeRules(t, store)
})

t.test('the quota store on PostgreSQL', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const url = await freshDatabase(t, svc.LUCENT_DATABASE_URL)
  const store = await PgStore.open(url)
  t.teardown(() => store.close())
  await storeRules(t, store)
})
