/**
 * Abuse, issue 22 hole 3: stored files (uploads, originals, results) are never served back as a page.
 * - Presign (+ PUT), multipart upload and transfer with hostile types (`video/mp4;x=1, text/html`, `text/html`,
 *   `image/svg+xml`, `image/png, text/html`, case and whitespace tricks) and an HTML (or SVG) body with a script:
 *   either refused with the API's code (110400007), or served with a canonical type from the fixed table, nosniff,
 *   `Content-Security-Policy: sandbox; default-src 'none'`, and `Content-Disposition: attachment` unless an image or
 *   video the playground shows. The same for objects stored with a hostile type (results, originals) and for the
 *   `res_url` / `original_url` of real jobs.
 * - Chromium (as test/playground/browser.ts launches it) opens every served link: the planted script never runs (no
 *   title change, no request out, the gateway origin's localStorage, where the playground keeps the API key,
 *   untouched).
 * - LUCENT_FILES_BASE_URL: file links on another origin (same service), still accepted as img_url.
 * - S3 (services from scripts/services.sh; skipped locally when absent): what is stored and signed is canonical.
 */
import t, { type Test } from 'tap'
import { request, FormData } from 'undici'
import { launchChromium, noChromium } from '../support/chromium.js'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor, tempDir } from '../helper.js'
import { loadConfig } from '../../server/config.js'
import { requireServices } from '../scaleout/services.js'


const SCRIPT = `document.title = 'PWNED';
try { localStorage.setItem('pwned', String(localStorage.getItem('lucent.playground.apiKey'))) } catch (e) {}
try { new Image().src = '/exfil?k=' + encodeURIComponent(String(localStorage.getItem('lucent.playground.apiKey'))) } catch (e) { new Image().src = '/exfil?e=1' }`
const HTML = Buffer.from(`<!doctype html><html><head><title>clean</title></head><body><h1>free coins</h1><script>${SCRIPT}</script></body></html>`)
const SVG = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>${SCRIPT}</script></svg>`)

/** Hostile declared types. */
const HOSTILE = [
  'video/mp4;x=1, text/html', 'text/html', 'image/svg+xml', 'image/png, text/html', 'VIDEO/MP4;X=1, TEXT/HTML',
  ' video/mp4 , text/html ', 'video/mp4,text/html', 'video/mp4;\ttext/html', 'video/x, text/html', 'video/html',
  'image/png;charset=utf-8', 'Text/HTML', 'image/svg+xml; charset=utf-8', 'application/xhtml+xml',
]
/** Legit types carrying a script body: accepted, but served safely. */
const LEGIT = ['video/mp4', 'image/png', 'image/jpeg', 'image/heic', 'video/x-matroska', 'video/avi']

/** The only types a stored object may be served with (the fixed table's, or octet-stream). */
const SAFE_TYPE = /^(image\/(png|jpeg|webp|bmp|x-tga|tiff|heif|heic|gif)|video\/(mp4|x-m4v|quicktime|x-matroska|webm|x-msvideo|x-flv|x-ms-wmv|mpeg|3gpp|3gpp2|ogg|mp2t)|application\/(mxf|octet-stream))$/
/** Images and videos the playground shows (may be inline); anything else must be an attachment. */
const SHOWN = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/bmp', 'video/mp4', 'video/webm', 'video/quicktime', 'video/x-m4v'])
const CSP = "sandbox; default-src 'none'"
/** What presign-put may sign: one bare image or video type (no parameters, no list, never SVG). */
const BARE = /^(image\/(?!svg)|video\/)[a-z0-9][a-z0-9.+-]*$/

type Headers = Record<string, string | string[] | undefined>

function checkHeaders(t: Test, h: Headers, what: string) {
  const ct = String(h['content-type'])
  t.match(ct, SAFE_TYPE, `${what}: canonical Content-Type (got ${JSON.stringify(ct)})`)
  t.equal(h['x-content-type-options'], 'nosniff', `${what}: nosniff`)
  t.equal(h['content-security-policy'], CSP, `${what}: sandbox CSP`)
  if (!SHOWN.has(ct)) t.match(String(h['content-disposition']), /^attachment(;|$)/, `${what}: attachment (${ct} is not shown by the playground)`)
  else t.match(String(h['content-disposition'] ?? 'inline'), /^(inline|attachment)(;|$)/, `${what}: disposition`)
}

async function checkServed(t: Test, url: string, what: string, body?: Buffer) {
  const r = await request(url)
  t.equal(r.statusCode, 200, `${what}: served`)
  const got = Buffer.from(await r.body.arrayBuffer())
  if (body) t.ok(got.equals(body), `${what}: the stored bytes`)
  checkHeaders(t, r.headers as Headers, what)
}

async function live(t: Test, env: Record<string, string> = {}) {
  const app = await build(t, env)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  app.lucent.config.publicUrl = `http://127.0.0.1:${port}`
  return { app, base: app.lucent.config.publicUrl, port }
}

/**
 * Plants hostile files through every upload path and as stored objects; returns the links that were served
 * (what: how it got there). Refusals are checked here (the API's code 110400007).
 */
async function plant(t: Test, app: Awaited<ReturnType<typeof build>>, key: string) {
  const links: Array<{ url: string; what: string; body: Buffer }> = []
  const bodyFor = (ct: string) => (/svg/i.test(ct) ? SVG : HTML)
  // presign + PUT
  for (const ct of [...HOSTILE, ...LEGIT]) {
    const pre = await post(app, '/api/oss/presign-put', key, { filename: /svg/i.test(ct) ? 'evil.svg' : 'evil.html', content_type: ct })
    const j = pre.json()
    if (j.code !== 200) {
      t.equal(pre.statusCode, 400, `presign ${JSON.stringify(ct)}: refused`)
      t.equal(j.error_code, 110400007, `presign ${JSON.stringify(ct)}: refused with 110400007`)
      t.notOk(LEGIT.includes(ct), `presign ${JSON.stringify(ct)}: a legit type is not refused`)
      continue
    }
    t.match(j.data.content_type, BARE, `presign ${JSON.stringify(ct)}: the signed type is a bare image/video type (${JSON.stringify(j.data.content_type)})`)
    const put = await request(j.data.upload_url, { method: 'PUT', headers: { 'content-type': j.data.content_type }, body: bodyFor(ct) })
    const pj = (await put.body.json()) as { code?: number }
    if (put.statusCode !== 200) {
      t.equal(put.statusCode, 403, `PUT ${JSON.stringify(ct)}: refused`)
      continue
    }
    t.equal(pj.code, 200)
    links.push({ url: j.data.access_url, what: `presign ${JSON.stringify(ct)}`, body: bodyFor(ct) })
  }
  // batch presign: the same rule per item
  const batch = await post(app, '/api/oss/presign-put/batch', key, { files: HOSTILE.slice(0, 5).map((ct) => ({ filename: 'evil.html', content_type: ct })) })
  for (const item of batch.json().data.items) {
    if (item.error_code !== undefined) t.equal(item.error_code, 110400007, `batch ${JSON.stringify(item.content_type)}: 110400007`)
    else t.match(item.content_type, BARE, `batch ${JSON.stringify(item.content_type)}: bare type`)
  }
  // multipart upload, declared hostile types
  for (const ct of ['video/mp4, text/html', 'text/html', 'image/svg+xml', 'video/x, text/html']) {
    const form = new FormData()
    form.append('file', new Blob([bodyFor(ct)], { type: ct }), /svg/.test(ct) ? 'evil.svg' : 'evil.html')
    const base = app.lucent.config.publicUrl
    const up = await request(`${base}/api/oss/upload`, { method: 'POST', headers: { apikey: key }, body: form })
    const uj = (await up.body.json()) as any
    if (uj.code !== 200) {
      t.equal(uj.error_code, 110400007, `upload ${JSON.stringify(ct)}: refused with 110400007`)
      continue
    }
    links.push({ url: uj.data.url, what: `upload ${JSON.stringify(ct)}`, body: bodyFor(ct) })
  }
  // transfer from a server answering hostile types
  const srv = await inputServer(t)
  for (const [i, ct] of ['video/mp4;x=1, text/html', 'text/html', 'image/svg+xml', 'video/x, text/html'].entries()) {
    const tr = await post(app, '/api/oss/transfer', key, { url: srv.put(`evil${i}`, bodyFor(ct), ct) })
    const tj = tr.json()
    if (tj.code !== 200) {
      t.equal(tj.error_code, 110400007, `transfer ${JSON.stringify(ct)}: refused with 110400007`)
      continue
    }
    links.push({ url: tj.data.url, what: `transfer ${JSON.stringify(ct)}`, body: bodyFor(ct) })
  }
  // objects stored with hostile types (a result or original written with the uploader's string)
  const stored: Array<[string, string, Buffer]> = [
    ['r/evil1.html', 'text/html', HTML], ['r/evil2.png', 'text/html; charset=utf-8', HTML], ['r/evil3.svg', 'image/svg+xml', SVG],
    ['o/evil4', 'video/mp4;x=1, text/html', HTML], ['u/0123/evil5.mp4', 'video/mp4, text/html', HTML], ['r/evil6.tiff', 'image/tiff', HTML],
  ]
  for (const [k, ct, body] of stored) {
    await app.lucent.storage.put(k, body, ct)
    links.push({ url: app.lucent.storage.signedGetUrl(k, Date.now() + 3600_000), what: `stored ${k} as ${JSON.stringify(ct)}`, body })
  }
  return links
}

t.test('config: LUCENT_FILES_BASE_URL', async (t) => {
  t.equal(loadConfig({}).filesBaseUrl, null, 'unset: file links on LUCENT_PUBLIC_URL')
  t.equal(loadConfig({ LUCENT_FILES_BASE_URL: ' https://files.example.com/ ' }).filesBaseUrl, 'https://files.example.com')
  t.throws(() => loadConfig({ LUCENT_FILES_BASE_URL: 'files.example.com' }), /LUCENT_FILES_BASE_URL/)
  t.throws(() => loadConfig({ LUCENT_FILES_BASE_URL: 'javascript:alert(1)' }), /LUCENT_FILES_BASE_URL/)
})

t.test('hostile uploads and stored objects: refused, or served with canonical type, nosniff, sandbox, attachment', async (t) => {
  const { app } = await live(t)
  app.lucent.queue.pause()
  const { key } = await createKey(app)
  const links = await plant(t, app, key)
  t.ok(links.length >= 6, `${links.length} links served`)
  for (const l of links) await checkServed(t, l.url, l.what, l.body)
  // SVG is never served as image/svg+xml, and the exact hostile strings never come back
  for (const l of links) {
    const r = await request(l.url, { method: 'HEAD' })
    await r.body.dump()
    t.notMatch(String(r.headers['content-type']), /svg|html|,|;/, `${l.what}: HEAD type`)
  }
  // a legit PNG upload still works end to end, shown inline
  const bytes = png(20, 10)
  const p = (await post(app, '/api/oss/presign-put', key, { filename: 'photo.png', content_type: 'image/png' })).json().data
  const put = await request(p.upload_url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  t.equal(put.statusCode, 200)
  await put.body.dump()
  const got = await request(p.access_url)
  t.equal(got.headers['content-type'], 'image/png')
  t.notMatch(String(got.headers['content-disposition'] ?? ''), /^attachment/, 'a PNG the playground shows is not forced to download')
  t.ok(Buffer.from(await got.body.arrayBuffer()).equals(bytes))
})

t.test('results and originals of real jobs carry the same headers', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const { app } = await live(t)
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key } = await createKey(app)
  for (const ext of ['.png', '.tiff']) {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put(`in${ext}.png`, png(16, 12), 'image/png'), extension: ext })
    t.equal(r.statusCode, 200, JSON.stringify(r.json()))
    const done = await waitFor(async () => {
      const d = (await post(app, '/api/task-status', key, { job_id: r.json().data.job_id })).json().data
      return d.status !== 'CONVERTING' && d
    }, 300_000, 200)
    t.equal(done.status, 'COMPLETED', JSON.stringify(done))
    await checkServed(t, done.res_url, `res_url ${ext}`)
    await checkServed(t, done.original_url, `original_url ${ext}`)
    const h = (await request(done.res_url)).headers
    if (ext === '.png') t.equal(h['content-type'], 'image/png')
    else t.match(String(h['content-disposition']), /^attachment/, 'a TIFF result downloads')
  }
})

t.test('LUCENT_FILES_BASE_URL: file links on a separate origin (the same service), still valid img_url', async (t) => {
  const { app, port } = await live(t)
  app.lucent.queue.pause()
  const files = `http://localhost:${port}`
  app.lucent.config.filesBaseUrl = files
  const { key } = await createKey(app)
  const bytes = png(20, 10)
  const p = (await post(app, '/api/oss/presign-put', key, { filename: 'photo.png', content_type: 'image/png' })).json().data
  t.match(p.access_url, `${files}/files/u/`, 'access_url on the files origin')
  t.match(p.upload_url, `${app.lucent.config.publicUrl}/upload/`, 'upload_url stays on the public URL')
  const put = await request(p.upload_url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  t.equal(put.statusCode, 200)
  await put.body.dump()
  await checkServed(t, p.access_url, 'files origin', bytes)
  app.lucent.config.fetchAllow = []
  const sub = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: p.access_url, extension: '.png' })
  t.equal(sub.statusCode, 200, 'the files-origin link is read from storage as img_url')
  const st = (await post(app, '/api/task-status', key, { job_id: sub.json().data.job_id })).json().data
  t.match(st.original_url, `${files}/files/o/`)
  const page = await app.inject({ method: 'GET', url: '/' })
  if (page.statusCode === 200) t.match(String(page.headers['content-security-policy']), `img-src 'self' blob: ${files}`, 'the playground may show images from the files origin')
})

t.test('Chromium: opening served uploads never runs their script on the gateway origin', { skip: noChromium }, async (t) => {
  const { app, base } = await live(t)
  app.lucent.queue.pause()
  const { key } = await createKey(app)
  const links = await plant(t, app, key)
  const { ctx } = await launchChromium(t)
  const exfil: string[] = []
  ctx.on('request', (r) => { if (r.url().includes('/exfil')) exfil.push(r.url()) })
  const page = ctx.pages()[0] ?? await ctx.newPage()
  // the playground's key on the gateway origin
  await page.goto(`${base}/healthz`)
  await page.evaluate((k) => localStorage.setItem('lucent.playground.apiKey', k), key)
  // control: the planted script does run when the bytes are served as a page (the check below can see it)
  await page.route(`${base}/control`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: HTML }))
  await page.goto(`${base}/control`)
  await page.waitForTimeout(300)
  t.equal(await page.title(), 'PWNED', 'control: a page with this script on the origin does run it')
  t.equal(await page.evaluate(() => localStorage.getItem('pwned')), key, 'control: and reads the key')
  await page.evaluate(() => localStorage.removeItem('pwned'))
  await page.unroute(`${base}/control`)
  await waitFor(async () => exfil.length > 0, 5000, 50)
  exfil.length = 0

  for (const l of links) {
    await page.goto('about:blank')
    const downloaded = page.waitForEvent('download', { timeout: 1500 }).then(() => true, () => false)
    const res = await page.goto(l.url).catch((e: Error) => e)
    await page.waitForTimeout(250)
    const isDownload = await downloaded
    const title = await page.title().catch(() => '')
    const doc = res instanceof Error ? null : await page.evaluate(() => document.contentType).catch(() => null)
    t.not(title, 'PWNED', `${l.what}: script did not run (${isDownload ? 'downloaded' : `shown as ${doc}`})`)
    t.notMatch(String(doc), /html|svg|xml/, `${l.what}: not rendered as a document`)
  }
  await page.goto(`${base}/healthz`)
  t.same(await page.evaluate(() => ({ pwned: localStorage.getItem('pwned'), key: localStorage.getItem('lucent.playground.apiKey'), n: localStorage.length })),
    { pwned: null, key, n: 1 }, "the gateway origin's localStorage is untouched")
  t.same(exfil, [], 'no request left a served file')
})

t.test('S3: stored and signed types are canonical; hostile types refused', async (t) => {
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const app = await build(t, {
    LUCENT_S3_ENDPOINT: svc.LUCENT_S3_ENDPOINT, LUCENT_S3_BUCKET: svc.LUCENT_S3_BUCKET, LUCENT_S3_REGION: svc.LUCENT_S3_REGION,
    LUCENT_S3_ACCESS_KEY_ID: svc.LUCENT_S3_ACCESS_KEY_ID, LUCENT_S3_SECRET_ACCESS_KEY: svc.LUCENT_S3_SECRET_ACCESS_KEY, LUCENT_S3_FORCE_PATH_STYLE: '1',
  })
  app.lucent.queue.pause()
  const { key } = await createKey(app)
  for (const ct of HOSTILE) {
    const j = (await post(app, '/api/oss/presign-put', key, { filename: 'evil.html', content_type: ct })).json()
    if (j.code !== 200) {
      t.equal(j.error_code, 110400007, `S3 presign ${JSON.stringify(ct)}: 110400007`)
      continue
    }
    t.match(j.data.content_type, BARE, `S3 presign ${JSON.stringify(ct)}: bare signed type`)
  }
  const check = async (url: string, what: string) => {
    const u = new URL(url)
    const rct = u.searchParams.get('response-content-type')
    t.match(String(rct), SAFE_TYPE, `${what}: the GET link asks S3 for a canonical type`)
    if (!SHOWN.has(String(rct))) t.match(String(u.searchParams.get('response-content-disposition')), /^attachment/, `${what}: and an attachment`)
    const r = await request(url)
    await r.body.dump()
    t.equal(r.statusCode, 200)
    t.match(String(r.headers['content-type']), SAFE_TYPE, `${what}: S3 answers a canonical type`)
    t.equal(app.lucent.storage.ownKey(url) !== 'invalid' && app.lucent.storage.ownKey(url) !== null, true, `${what}: the link is still accepted as img_url`)
  }
  // a legit type with an HTML body, PUT to S3 itself
  const p = (await post(app, '/api/oss/presign-put', key, { filename: 'evil.html', content_type: 'video/mp4' })).json().data
  const put = await request(p.upload_url, { method: 'PUT', headers: { 'content-type': p.content_type }, body: HTML })
  await put.body.dump()
  t.equal(put.statusCode, 200)
  await check(p.access_url, 'S3 presigned upload')
  // server-side writes with a hostile type are stored canonical
  for (const [k, ct] of [['r/s3evil.html', 'text/html'], ['r/s3evil.svg', 'image/svg+xml'], ['o/s3evil', 'video/mp4, text/html']]) {
    const name = k.replace('s3evil', `s3evil-${Date.now()}`)
    await app.lucent.storage.put(name, HTML, ct)
    const url = app.lucent.storage.signedGetUrl(name, Date.now() + 600_000)
    await check(url, `S3 stored ${k} as ${JSON.stringify(ct)}`)
    const r = await request(url)
    await r.body.dump()
    t.match(String(r.headers['content-disposition']), /^attachment/, `S3 stored ${k}: the object itself is an attachment`)
    await app.lucent.storage.delete(name)
  }
  await app.lucent.storage.delete(p.object_key)
})
