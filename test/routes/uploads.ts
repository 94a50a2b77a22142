/** Upload facility over real HTTP: presigned PUT (right/wrong type, expired), multipart, transfer. */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { request, FormData } from 'undici'
import { build, createKey, post, png, inputServer, sharedData } from '../helper.js'

async function live(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  app.lucent.config.publicUrl = `http://127.0.0.1:${port}`
  return { app, base: app.lucent.config.publicUrl }
}

t.test('presign-put, PUT, access_url; wrong type and expiry -> 403', async (t) => {
  const { app, base } = await live(t)
  app.lucent.queue.pause()
  const { key } = await createKey(app)
  const bytes = png(20, 10)
  const pre = await request(`${base}/api/oss/presign-put`, {
    method: 'POST', headers: { apikey: key, 'content-type': 'application/json' },
    body: JSON.stringify({ filename: '../../etc/my photo.png', content_type: 'image/png', expire_seconds: 120 }),
  })
  t.equal(pre.statusCode, 200)
  const p = ((await pre.body.json()) as any)
  t.equal(p.code, 200)
  t.match(p.data, { upload_url: String, access_url: String, object_key: /^u\/[0-9a-f]{32}\/my_photo\.png$/, content_type: 'image/png', expire_at: String })
  t.ok(Math.abs(Date.parse(p.data.expire_at) - Date.now() - 120_000) < 5000)

  const wrong = await request(p.data.upload_url, { method: 'PUT', headers: { 'content-type': 'image/jpeg' }, body: bytes })
  t.equal(wrong.statusCode, 403)
  t.equal(((await wrong.body.json()) as any).error_code, 100403001)
  const before = await request(p.data.access_url)
  t.equal(before.statusCode, 403, 'nothing stored by the refused PUT')
  await before.body.dump()

  const put = await request(p.data.upload_url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  t.equal(put.statusCode, 200)
  t.match(await put.body.json(), { code: 200, data: { object_key: p.data.object_key, size: bytes.length } })
  const get = await request(p.data.access_url)
  t.equal(get.statusCode, 200)
  t.equal(get.headers['content-type'], 'image/png')
  t.same(Buffer.from(await get.body.arrayBuffer()), bytes)

  const expired = app.lucent.storage.signedPutUrl('u/expired/x.png', 'image/png', Date.now() - 2000)
  const e = await request(expired, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  t.equal(e.statusCode, 403)
  await e.body.dump()
  const forged = p.data.upload_url.replace(/u\/[0-9a-f]+\//, 'u/0123456789abcdef0123456789abcdef/')
  const f = await request(forged, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  t.equal(f.statusCode, 403)
  await f.body.dump()

  // bad inputs
  t.equal((await post(app, '/api/oss/presign-put', key, { filename: 'a.exe', content_type: 'application/x-msdownload' })).json().error_code, 110400007)
  t.equal((await post(app, '/api/oss/presign-put', key, { filename: 'a.png', content_type: 'image/png', expire_seconds: 10 })).json().error_code, 100403000)
  const batch = await post(app, '/api/oss/presign-put/batch', key, { files: [{ filename: 'a.png', content_type: 'image/png' }, { filename: 'b.txt', content_type: 'text/plain' }, { filename: 'c.mp4', content_type: 'video/mp4' }] })
  t.match(batch.json(), { code: 200, data: { total: 3, success: 2, failed: 1 } })
  t.equal(batch.json().data.items[1].error_code, 110400007)
  t.equal((await post(app, '/api/oss/presign-put/batch', key, { files: [] })).json().error_code, 100403000)

  // the access_url is a valid img_url, read from storage directly (publicUrl is this server: no fetch allow-list needed)
  app.lucent.config.fetchAllow = []
  const sub = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: p.data.access_url, extension: '.png' })
  t.equal(sub.statusCode, 200)
  t.equal(sub.json().data.consume_coins, 10)
})

t.test('multipart upload and transfer', async (t) => {
  const { app, base } = await live(t)
  app.lucent.queue.pause()
  const srv = await inputServer(t)
  const { key } = await createKey(app)
  const file = path.join(sharedData, 'photos', '0014.jpg')
  const bytes = fs.readFileSync(file)
  const form = new FormData()
  form.append('file', new Blob([bytes], { type: 'image/jpeg' }), '0014.jpg')
  const up = await request(`${base}/api/oss/upload`, { method: 'POST', headers: { apikey: key }, body: form })
  t.equal(up.statusCode, 200)
  const u = (await up.body.json()) as any
  t.match(u, { code: 200, data: { url: String, object_key: /^u\/.*0014\.jpg$/, size: bytes.length } })
  const got = await request(u.data.url)
  t.equal(got.headers['content-type'], 'image/jpeg')
  t.same(Buffer.from(await got.body.arrayBuffer()), bytes)

  const bad = new FormData()
  bad.append('file', new Blob([Buffer.from('#!/bin/sh')], { type: 'text/x-shellscript' }), 'run.sh')
  const br = await request(`${base}/api/oss/upload`, { method: 'POST', headers: { apikey: key }, body: bad })
  t.equal(br.statusCode, 400)
  t.equal(((await br.body.json()) as any).error_code, 110400007)

  // uploaded file used as img_url
  app.lucent.config.fetchAllow = []
  const sub = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: u.data.url, extension: '.jpg' })
  t.equal(sub.statusCode, 200)
  app.lucent.config.fetchAllow = ['127.0.0.1']

  const tr = await post(app, '/api/oss/transfer', key, { url: srv.shared('photos/0030.jpg') })
  t.equal(tr.statusCode, 200)
  const trd = tr.json().data
  t.equal(trd.size, fs.statSync(path.join(sharedData, 'photos', '0030.jpg')).size)
  const o = new URL(trd.url)
  const got2 = await app.inject({ method: 'GET', url: o.pathname + o.search })
  t.equal(got2.headers['content-type'], 'image/jpeg')
  t.equal((await post(app, '/api/oss/transfer', key, { url: 'http://127.0.0.1:1/x.png' })).json().error_code, 100400001)

  const bt = await post(app, '/api/oss/batch-transfer', key, { urls: [srv.shared('photos/0014.jpg'), 'nonsense', srv.put('t.txt', Buffer.from('plain text'), 'text/plain')] })
  t.match(bt.json(), { code: 200, data: { total: 3, success: 1, failed: 2 } })
  t.match(bt.json().data.items[0], { source_url: srv.shared('photos/0014.jpg'), url: String, object_key: String, size: bytes.length })
  t.match(bt.json().data.items[1], { source_url: 'nonsense', error_code: 100400001 })
  t.match(bt.json().data.items[2], { error_code: 110400007 })
})
