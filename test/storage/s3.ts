/**
 * S3 MediaStorage against a real S3-compatible server (moto, from scripts/services.sh), and its pre-signed links
 * against the official signer (@aws-sdk/s3-request-presigner): same V4 signatures for the same request.
 */
import t from 'tap'
import crypto from 'node:crypto'
import { Readable } from 'node:stream'
import { request } from 'undici'
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { S3Storage, presignQuery, amzDate, uriEncode } from '../../server/storage/s3.js'
import { TooLargeError } from '../../server/storage/local.js'
import { requireServices } from '../scaleout/services.js'

const creds = { region: 'eu-west-3', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' }

t.test('signatures equal the official presigner (GET, PUT with Content-Type, virtual-hosted and path style)', async (t) => {
  for (const forcePathStyle of [true, false]) {
    const s = new S3Storage({ endpoint: 'https://s3.example.test', bucket: 'media', forcePathStyle, ...creds })
    t.teardown(() => s.close())
    const date = new Date(Date.UTC(2026, 10, 21, 7, 30, 5))
    const key = 'r/abc 1/Résumé+x.png'
    const sdkGet = new URL(await getSignedUrl(s.client, new GetObjectCommand({ Bucket: 'media', Key: key }), { expiresIn: 900, signingDate: date }))
    const sdkPut = new URL(await getSignedUrl(s.client, new PutObjectCommand({ Bucket: 'media', Key: key, ContentType: 'image/png' }),
      { expiresIn: 900, signingDate: date, signableHeaders: new Set(['content-type']) }))
    t.equal(sdkPut.searchParams.get('X-Amz-SignedHeaders'), 'content-type;host')
    for (const [method, sdk, headers] of [['GET', sdkGet, undefined], ['PUT', sdkPut, { 'content-type': 'image/png' }]] as const) {
      const extraQuery = [...sdk.searchParams.entries()].filter(([k]) => !k.startsWith('X-Amz-'))
      const q = presignQuery({ method, url: s.objectUrl(key), date: amzDate(date.getTime()), expires: 900, headers, extraQuery, ...creds })
      t.equal(`${sdk.origin}${sdk.pathname}`, s.objectUrl(key).href, `${method} ${forcePathStyle ? 'path' : 'vhost'}: same object URL`)
      t.equal(q.find(([k]) => k === 'X-Amz-Signature')![1], sdk.searchParams.get('X-Amz-Signature'), `${method} ${forcePathStyle ? 'path' : 'vhost'}: same signature`)
    }
  }
  t.equal(uriEncode('a b/ü~*', true), 'a%20b/%C3%BC~%2A')
})

t.test('ownKey: accepts its own and the SDK\'s GET links, rejects tampered, foreign and expired ones', async (t) => {
  const s = new S3Storage({ endpoint: 'http://127.0.0.1:9', bucket: 'media', forcePathStyle: true, ...creds })
  t.teardown(() => s.close())
  const url = s.signedGetUrl('u/ab12/in.png', Date.now() + 60_000)
  t.match(url, /^http:\/\/127\.0\.0\.1:9\/media\/u\/ab12\/in\.png\?X-Amz-Algorithm=AWS4-HMAC-SHA256&.*X-Amz-Expires=60&.*X-Amz-Signature=[0-9a-f]{64}$/)
  t.equal(s.ownKey(url), 'u/ab12/in.png')
  const sdk = await getSignedUrl(s.client, new GetObjectCommand({ Bucket: 'media', Key: 'o/x.png' }), { expiresIn: 60 })
  t.equal(s.ownKey(sdk), 'o/x.png', 'the official signer\'s link verifies')
  t.equal(s.ownKey(url.replace('in.png', 'in2.png')), 'invalid', 'other key')
  const flipped = url.slice(0, -1) + (url.endsWith('0') ? '1' : '0')
  t.equal(s.ownKey(flipped), 'invalid', 'tampered signature')
  t.equal(s.ownKey(url.replace('X-Amz-Expires=60', 'X-Amz-Expires=61')), 'invalid', 'tampered expiry')
  const other = new S3Storage({ endpoint: 'http://127.0.0.1:9', bucket: 'media', forcePathStyle: true, ...creds, secretAccessKey: 'other' })
  t.teardown(() => other.close())
  t.equal(s.ownKey(other.signedGetUrl('u/ab12/in.png', Date.now() + 60_000)), 'invalid', 'signed with another secret')
  t.equal(s.ownKey(s.signedPutUrl('u/ab12/in.png', 'image/png', Date.now() + 60_000)), 'invalid', 'a PUT link is not a GET link')
  const old = new URL(url)
  const past = amzDate(Date.now() - 3600_000)
  const q = presignQuery({ method: 'GET', url: s.objectUrl('u/ab12/in.png'), date: past, expires: 60, ...creds })
  old.search = q.map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).join('&')
  t.equal(s.ownKey(old.href), 'invalid', 'expired')
  t.equal(s.ownKey('https://example.com/media/u/ab12/in.png'), null, 'not ours')
  t.equal(s.ownKey('http://127.0.0.1:9/othermedia/x.png?X-Amz-Signature=1'), null, 'other bucket')
  t.match(s.signedGetUrl('r/x.png', Date.now() + 30 * 24 * 3600_000), /X-Amz-Expires=604800&/, 'capped at 7 days')
  t.equal(s.verifyGet(), 'bad', 'the service serves no /files links in S3 mode')
})

t.test('objects on a real S3 server: put/get/stream/putStream/delete/sweep, pre-signed GET and PUT', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const bucket = `lucent-s3t-${crypto.randomBytes(4).toString('hex')}`
  const s = new S3Storage({
    endpoint: svc.LUCENT_S3_ENDPOINT, bucket, region: svc.LUCENT_S3_REGION, accessKeyId: svc.LUCENT_S3_ACCESS_KEY_ID,
    secretAccessKey: svc.LUCENT_S3_SECRET_ACCESS_KEY, forcePathStyle: true,
  })
  t.teardown(() => s.close())
  await s.ensureBucket(true)
  t.ok(await s.ping())
  const data = crypto.randomBytes(5000)
  const meta = await s.put('o/a.png', data, 'image/png')
  t.match(meta, { contentType: 'image/png', size: 5000 })
  const got = await s.get('o/a.png')
  t.ok(got && got.data.equals(data), 'get returns the bytes')
  t.match(got!.meta, { contentType: 'image/png', size: 5000, createdAt: meta.createdAt })
  const st = await s.stream('o/a.png')
  const chunks: Buffer[] = []
  for await (const c of st!.stream) chunks.push(c as Buffer)
  t.ok(Buffer.concat(chunks).equals(data), 'stream returns the bytes')
  t.equal(await s.get('o/missing.png'), null)
  t.equal(await s.stream('o/missing.png'), null)
  t.equal(s.localPath('o/a.png'), null)
  const big = crypto.randomBytes(300_000)
  t.match(await s.putStream('u/big.bin', Readable.from([big.subarray(0, 100_000), big.subarray(100_000)]), 'video/mp4', 1_000_000), { size: 300_000 })
  t.ok((await s.get('u/big.bin'))!.data.equals(big))
  await t.rejects(s.putStream('u/toobig.bin', Readable.from([big]), 'video/mp4', 1000), TooLargeError)
  t.equal(await s.get('u/toobig.bin'), null, 'nothing left past maxBytes')

  // pre-signed links work against the server itself
  const r = await request(s.signedGetUrl('o/a.png', Date.now() + 60_000))
  t.equal(r.statusCode, 200)
  t.ok(Buffer.from(await r.body.arrayBuffer()).equals(data), 'pre-signed GET')
  const put = await request(s.signedPutUrl('u/p/in.png', 'image/png', Date.now() + 60_000), { method: 'PUT', headers: { 'content-type': 'image/png' }, body: data })
  await put.body.dump()
  t.equal(put.statusCode, 200, 'pre-signed PUT')
  t.match((await s.get('u/p/in.png'))!.meta, { contentType: 'image/png', size: 5000 })

  await s.delete('o/a.png')
  t.equal(await s.get('o/a.png'), null, 'deleted')
  t.equal(await s.sweep('u', Date.now() - 3600_000), 0, 'nothing old enough')
  t.equal(await s.sweep('u', Date.now() + 60_000), 2, 'sweeps everything under u/ older than the cut-off')
  t.equal(await s.get('u/big.bin'), null)
})
