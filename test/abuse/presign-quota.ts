/**
 * Abuse, issue 29 hole 8 on S3 storage: a pre-signed PUT link goes straight to the bucket (signed for its
 * content-type only: the request carries no size), so the gateway never sees its bytes. Before, such an object
 * counted one file and no byte: a key could park up to S3's 5 GB per link, 10,000 links, for the retention.
 * Now its real size is measured (HEAD) when a job first names its access_url and, for every link, once it has expired
 * (the hourly sweep: server/routes/presigned.ts measurePresigned), and recorded against the key that asked for it:
 * - an object over the upload limit (LUCENT_UPLOAD_MAX_BYTES) is deleted and stops counting;
 * - objects that pass the key's stored-bytes quota are deleted, newest presign first (the sweep measures oldest
 *   first); a link never used frees its file;
 * - then presign-put and uploads answer 429 as the other uploads do;
 * - a job naming an oversize object is refused as too large, one whose bytes pass the key's remaining quota with
 *   the quota's 429: nothing debited either way;
 * - an object measured at its first use and PUT again, bigger, while its link was still valid is measured again
 *   after the link expires.
 * Against the real S3 server (moto, scripts/services.sh) on SQLite and PostgreSQL; locally skipped when the services
 * are missing, a failure in CI.
 */
import t, { type Test } from 'tap'
import crypto from 'node:crypto'
import { request, FormData } from 'undici'
import { S3Client, CreateBucketCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { build, createKey, post, png, chunk, balance } from '../helper.js'
import { freshDatabase, requireServices, type ServiceEnv } from '../scaleout/services.js'
import { measurePresigned } from '../../server/routes/presigned.js'

const QUOTA = 100_000
const UPLOAD_MAX = 200_000

/** A valid PNG of exactly `n` bytes (an 8x8 image, padded with a tEXt chunk). */
function pngOf(n: number): Buffer {
  const img = png(8, 8)
  const iend = img.subarray(img.length - 12)
  const pad = n - img.length - 12 - 4 // a chunk: length, type, CRC; "pad\0"
  if (pad < 0) throw new Error('too small')
  const text = Buffer.concat([Buffer.from('pad\0'), Buffer.alloc(pad, 0x61)])
  const out = Buffer.concat([img.subarray(0, img.length - 12), chunk('tEXt', text), iend])
  if (out.length !== n) throw new Error(`pngOf: ${out.length} != ${n}`)
  return out
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** An app on S3 storage (a fresh bucket of its own) with the store asked for; the queue paused (jobs stay queued). */
async function s3App(t: Test, svc: ServiceEnv, db: 'sqlite' | 'postgres') {
  const bucket = `lucent-pq-${crypto.randomBytes(5).toString('hex')}`
  const s3 = new S3Client({
    endpoint: svc.LUCENT_S3_ENDPOINT, region: svc.LUCENT_S3_REGION, forcePathStyle: true,
    credentials: { accessKeyId: svc.LUCENT_S3_ACCESS_KEY_ID, secretAccessKey: svc.LUCENT_S3_SECRET_ACCESS_KEY },
  })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: bucket }))
  const env: Record<string, string> = {
    LUCENT_S3_ENDPOINT: svc.LUCENT_S3_ENDPOINT, LUCENT_S3_BUCKET: bucket, LUCENT_S3_REGION: svc.LUCENT_S3_REGION,
    LUCENT_S3_ACCESS_KEY_ID: svc.LUCENT_S3_ACCESS_KEY_ID, LUCENT_S3_SECRET_ACCESS_KEY: svc.LUCENT_S3_SECRET_ACCESS_KEY, LUCENT_S3_FORCE_PATH_STYLE: '1',
    LUCENT_UPLOAD_MAX_BYTES: String(UPLOAD_MAX),
  }
  if (db === 'postgres') env.LUCENT_DATABASE_URL = await freshDatabase(t, svc.LUCENT_DATABASE_URL)
  const app = await build(t, env)
  app.lucent.queue.pause()
  /** Object keys under u/ (uploads) in the bucket. */
  const uploads = async () => ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'u/' }))).Contents ?? []).map((o) => o.Key!).sort()
  /** presign-put (a 60 s link), then PUT `bytes` bytes to it with undici as the official client does (none: unused). */
  const presignPut = async (key: string, bytes: number | null) => {
    await sleep(3) // presigns in distinct milliseconds: "newest" is well defined
    const r = await post(app, '/api/oss/presign-put', key, { filename: 'x.png', content_type: 'image/png', expire_seconds: 60 })
    t.equal(r.statusCode, 200, 'presign-put')
    const p = r.json().data as { upload_url: string; access_url: string; object_key: string }
    if (bytes !== null) await put(p.upload_url, bytes)
    return p
  }
  const put = async (url: string, bytes: number) => {
    const r = await request(url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: pngOf(bytes) })
    await r.body.dump()
    t.equal(r.statusCode, 200, `PUT of ${bytes} bytes straight to the bucket`)
  }
  return { app, uploads, presignPut, put }
}

/** The 429 of the stored-bytes quota, as the other uploads answer it. */
function check429(t: Test, r: { statusCode: number; headers: Record<string, unknown>; json(): any }, what: string) {
  t.equal(r.statusCode, 429, `${what}: HTTP 429`)
  t.equal(r.json().error_code, 100429000, `${what}: error_code 100429000`)
  t.match(String(r.headers['retry-after']), /^[1-9]\d*$/, `${what}: Retry-After`)
  t.match(String(r.headers['ratelimit-policy']), new RegExp(`^"stored_bytes";q=${QUOTA};qu="content-bytes";w=\\d+$`), `${what}: RateLimit-Policy`)
}

async function sweepCase(t: Test, db: 'sqlite' | 'postgres') {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const { app, uploads, presignPut } = await s3App(t, svc, db)
  const quotas = app.lucent.store.quotas
  const { key, id } = await createKey(app, { coins: 100 })
  await quotas.set(id, { maxStoredBytes: QUOTA })
  // 440 kB PUT to five links of a key allowed 100 kB, one of them over the upload limit, one link never used
  const a = await presignPut(key, 50_000)
  const b = await presignPut(key, 50_000)
  const c = await presignPut(key, 40_000) // passes the quota after a + b
  const d = await presignPut(key, 300_000) // over the upload limit (200 kB)
  const e = await presignPut(key, null) // never used
  t.same(await uploads(), [a, b, c, d].map((p) => p.object_key).sort(), 'the bucket holds the four PUTs')

  // the hourly sweep, at a time past the links' expiry (60 s)
  await measurePresigned(app.lucent, { now: Date.now() + 61_000 })
  const u = await quotas.usage(id)
  t.comment(`after the sweep: ${u.storedBytes} bytes, ${u.storedFiles} files counted; ${(await uploads()).length} objects in the bucket`)
  t.equal(u.storedBytes, 100_000, 'the measured bytes counted (before: 0, only files)')
  t.equal(u.storedFiles, 2, 'two files kept (before: 5, a file per link)')
  t.same(await uploads(), [a, b].map((p) => p.object_key).sort(), 'oversize and newest over-quota objects gone from the bucket')
  void e

  // the key is at its quota: presign-put and uploads answer 429
  check429(t, await post(app, '/api/oss/presign-put', key, { filename: 'y.png', content_type: 'image/png' }), 'the next presign')
  const form = new FormData()
  form.append('file', new Blob([new Uint8Array(pngOf(1000))], { type: 'image/png' }), 'z.png')
  const up = await app.inject({ method: 'POST', url: '/api/oss/upload', headers: { apikey: key }, payload: form as any })
  t.equal(up.statusCode, 429, 'a multipart upload: 429')
  t.equal((await quotas.usage(id)).storedBytes, 100_000, 'nothing more counted')
  t.equal(await balance(app, id), 100, 'nothing debited')
}

async function jobCase(t: Test, db: 'sqlite' | 'postgres') {
  const svc = await requireServices(t)
  if ('skip' in svc) return t.plan(0, svc.skip)
  const { app, uploads, presignPut, put } = await s3App(t, svc, db)
  const quotas = app.lucent.store.quotas
  const { key, id } = await createKey(app, { coins: 100 })
  await quotas.set(id, { maxStoredBytes: QUOTA })
  const a = await presignPut(key, 50_000)
  const b = await presignPut(key, 50_000)
  const c = await presignPut(key, 40_000)
  const d = await presignPut(key, 300_000)
  const e = await presignPut(key, 40_000)
  const job = (p: { access_url: string }, k = key) => post(app, '/api/photo-enhancer', k, { model_name: 'general_2x', img_url: p.access_url, extension: '.png' })
  const debits = async () => (await app.lucent.store.ledger(id)).filter((x) => x.kind === 'debit').length

  // first use, links still valid: each object measured before anything is read or debited
  const ja = await job(a)
  t.equal(ja.statusCode, 200, 'a job naming a 50 kB object: accepted')
  t.equal((await quotas.usage(id)).storedBytes, 50_000, 'its bytes counted at its first use (before: 0)')
  const paid = await balance(app, id)
  t.ok(paid < 100, 'debited')

  const jd = await job(d)
  t.equal(jd.statusCode, 400, 'a job naming an object over the upload limit: refused (before: accepted and debited)')
  t.equal(jd.json().error_code, 110400009, 'as too large')
  t.notOk((await uploads()).includes(d.object_key), 'the oversize object is gone from the bucket')
  t.equal(await balance(app, id), paid, 'nothing debited')

  t.equal((await job(b)).statusCode, 200, 'b fits: the quota is full now')
  const paid2 = await balance(app, id)
  // another key naming the owner's over-quota object: refused as an input that cannot be read, never shown the
  // owner's limit and usage
  const other = await createKey(app, { coins: 100 })
  const je = await job(e, other.key)
  t.equal(je.statusCode, 400, 'another key: 400')
  t.equal(je.json().error_code, 100400001, 'as an input that cannot be read')
  t.notOk(je.headers['ratelimit'] ?? je.headers['ratelimit-policy'], 'no quota headers (the owner\'s figures)')
  t.notOk(/100000|50000|100 ?kB/.test(je.body), 'no figure of the owner\'s in the answer')
  t.equal(await balance(app, other.id), 100, 'the other key: nothing debited')
  t.notOk((await uploads()).includes(e.object_key), 'the over-quota object is gone')
  const jc = await job(c)
  check429(t, jc, 'a job naming an object past the key\'s remaining bytes')
  t.notOk((await uploads()).includes(c.object_key), 'the over-quota object is gone')
  t.equal(await balance(app, id), paid2, 'nothing debited')
  t.equal(await debits(), 2, 'two debits: the jobs on a and b')
  check429(t, await post(app, '/api/oss/presign-put', key, { filename: 'y.png', content_type: 'image/png' }), 'the next presign')

  // a's link is still valid: PUT again, bigger than the upload limit, after its first use; measured again once the
  // link has expired
  await put(a.upload_url, 300_000)
  await measurePresigned(app.lucent, { now: Date.now() + 61_000 })
  t.same(await uploads(), [b.object_key], 'a (grown past the limit) deleted, b kept, c and d gone')
  t.match(await quotas.usage(id), { storedBytes: 50_000, storedFiles: 1 }, 'b alone counts')
}

t.test('S3 pre-signed PUTs measured by the sweep: bytes counted, oversize and over-quota objects deleted (SQLite)', (t) => sweepCase(t, 'sqlite'))
t.test('S3 pre-signed PUTs measured by the sweep (PostgreSQL)', (t) => sweepCase(t, 'postgres'))
t.test('S3 pre-signed objects measured at a job\'s first use: oversize and over-quota refused, nothing debited (SQLite)', (t) => jobCase(t, 'sqlite'))
t.test('S3 pre-signed objects measured at a job\'s first use (PostgreSQL)', (t) => jobCase(t, 'postgres'))
