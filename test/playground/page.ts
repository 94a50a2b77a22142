/**
 * The playground as served (server/playground.ts): caching, Content-Security-Policy derived from the storage's
 * links (local and S3), no inline code in the page, SRI of the assets, LUCENT_PLAYGROUND=0, an unbuilt page.
 * The page itself in a real browser: test/playground/browser.ts.
 */
import t from 'tap'
import crypto from 'node:crypto'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import Fastify from 'fastify'
import { build, createKey, repoRoot, tempDir } from '../helper.js'
import { loadConfig } from '../../server/config.js'
import playground, { contentSecurityPolicy, mediaOrigins } from '../../server/playground.js'
import { S3Storage } from '../../server/storage/s3.js'

// the suite serves what the build script makes from the current sources
execFileSync(process.execPath, [path.join(repoRoot, 'scripts/build-playground.mjs')], { stdio: 'ignore' })

/** The CSP header as {directive: [values]}. */
function parseCsp(h: unknown): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const part of String(h).split(';')) {
    const [name, ...values] = part.trim().split(/\s+/)
    if (name) out[name] = values
  }
  return out
}

t.test('the page: no-cache + ETag, strict CSP, security headers, nothing inline', async (t) => {
  const app = await build(t)
  for (const url of ['/', '/playground']) {
    const r = await app.inject({ method: 'GET', url })
    t.equal(r.statusCode, 200, url)
    t.equal(r.headers['content-type'], 'text/html; charset=utf-8')
    t.equal(r.headers['cache-control'], 'no-cache')
    t.match(r.headers.etag, /^"[A-Za-z0-9_-]+"$/)
    t.equal(r.headers['x-content-type-options'], 'nosniff')
    t.equal(r.headers['x-frame-options'], 'DENY')
    t.equal(r.headers['referrer-policy'], 'no-referrer')
    const csp = parseCsp(r.headers['content-security-policy'])
    t.same(csp['default-src'], ["'none'"])
    t.same(csp['script-src'], ["'self'"], 'scripts from the origin only: no inline, no eval')
    t.same(csp['style-src'], ["'self'"], 'styles from the origin only: no inline')
    t.same(csp['connect-src'], ["'self'"])
    t.same(csp['img-src'], ["'self'", 'blob:', 'http://lucent.invalid'], 'images: the page, picked files, result links (LUCENT_PUBLIC_URL)')
    t.same(csp['media-src'], ["'self'", 'blob:', 'http://lucent.invalid'])
    t.same(csp['frame-ancestors'], ["'none'"])
    t.same(csp['base-uri'], ["'none'"])
    t.same(csp['form-action'], ["'none'"])
    const html = r.body
    t.notMatch(html, /<style/i, 'no <style> element')
    t.notMatch(html, /\sstyle=/i, 'no style attribute')
    t.notMatch(html, /\son[a-z]+=/i, 'no inline event handler')
    for (const m of html.matchAll(/<script\b[^>]*>/gi)) t.match(m[0], /\ssrc="playground\/assets\/app-[A-Za-z0-9_-]+\.js"/, 'every script is an asset')
    t.notMatch(html, /https?:\/\//, 'nothing from another origin (works offline on a LAN)')
    const again = await app.inject({ method: 'GET', url, headers: { 'if-none-match': r.headers.etag as string } })
    t.equal(again.statusCode, 304)
    t.equal(again.body, '')
    const head = await app.inject({ method: 'HEAD', url })
    t.equal(head.statusCode, 200)
  }
  const slash = await app.inject({ method: 'GET', url: '/playground/' })
  t.equal(slash.statusCode, 301)
  t.equal(new URL(slash.headers.location as string, 'http://h/playground/').pathname, '/playground', '/playground/ -> /playground (relative links)')
})

t.test('assets: hashed names, immutable, the integrity the page names', async (t) => {
  const app = await build(t)
  const html = (await app.inject({ method: 'GET', url: '/' })).body
  const refs = [...html.matchAll(/(?:href|src)="(playground\/assets\/[^"]+)"(?:\s+integrity="([^"]+)")?/g)].map((m) => ({ url: `/${m[1]}`, sri: m[2] }))
  t.same(refs.map((r) => path.extname(r.url)).sort(), ['.css', '.js', '.svg'])
  for (const ref of refs) {
    t.match(ref.url, /\/(app|style|icon)-[A-Za-z0-9_-]{8,}\.(js|css|svg)$/, `${ref.url}: content-hashed name`)
    const r = await app.inject({ method: 'GET', url: ref.url })
    t.equal(r.statusCode, 200, ref.url)
    t.equal(r.headers['cache-control'], 'public, max-age=31536000, immutable')
    t.equal(r.headers['x-content-type-options'], 'nosniff')
    t.match(r.headers['content-type'], { '.js': /^text\/javascript/, '.css': /^text\/css/, '.svg': /^image\/svg\+xml/ }[path.extname(ref.url)]!)
    if (ref.sri) t.equal(ref.sri, `sha384-${crypto.createHash('sha384').update(r.rawPayload).digest('base64')}`, `${ref.url}: SRI matches the served bytes`)
    else t.equal(path.extname(ref.url), '.svg', 'only the icon has no integrity attribute')
  }
  const js = refs.find((r) => r.url.endsWith('.js'))!
  const map = await app.inject({ method: 'GET', url: `${js.url}.map` })
  t.equal(map.statusCode, 200, 'source map served')
  // unknown names get the API's not-found answer (as any unknown path)
  const { key } = await createKey(app)
  const missing = await app.inject({ method: 'GET', url: '/playground/assets/app-XXXXXXXX.js', headers: { apikey: key } })
  const other = await app.inject({ method: 'GET', url: '/no/such/path', headers: { apikey: key } })
  t.equal(missing.statusCode, 400)
  t.same(missing.json(), other.json())
  t.equal(missing.json().error_code, 100400002)
})

t.test('LUCENT_PLAYGROUND=0: the paths answer like any unknown path; the API (and /api/models) stays', async (t) => {
  const app = await build(t, { LUCENT_PLAYGROUND: '0' })
  const { key } = await createKey(app)
  const html = (await (await build(t)).inject({ method: 'GET', url: '/' })).body
  const asset = /src="(playground\/assets\/[^"]+)"/.exec(html)![1]
  for (const headers of [{}, { apikey: key }]) {
    const unknown = await app.inject({ method: 'GET', url: '/no/such/path', headers })
    for (const url of ['/', '/playground', `/${asset}`]) {
      const r = await app.inject({ method: 'GET', url, headers })
      t.equal(r.statusCode, 400, `${url} ${Object.keys(headers).length ? 'with' : 'without'} a key`)
      t.same(r.json(), unknown.json())
    }
  }
  t.equal((await app.inject({ method: 'GET', url: '/api/models' })).statusCode, 200)
  t.equal(loadConfig({ LUCENT_PLAYGROUND: '0' }).playground, false)
  t.equal(loadConfig({ LUCENT_PLAYGROUND: 'off' }).playground, false)
  t.equal(loadConfig({}).playground, true)
  t.equal(loadConfig({ LUCENT_PLAYGROUND: '1' }).playground, true)
  t.throws(() => loadConfig({ LUCENT_PLAYGROUND: 'maybe' }), /LUCENT_PLAYGROUND must be 1 or 0/)
})

t.test('scale-out: S3 result links (pre-signed, at the public endpoint) are allowed for images and media', async (t) => {
  const s3 = { LUCENT_S3_BUCKET: 'media', LUCENT_S3_ACCESS_KEY_ID: 'k', LUCENT_S3_SECRET_ACCESS_KEY: 's', LUCENT_S3_ENDPOINT: 'http://127.0.0.1:9' }
  const virtualHost = loadConfig({ ...s3, LUCENT_S3_PUBLIC_ENDPOINT: 'https://s3.example.com:8443' }).s3!
  t.same(mediaOrigins(new S3Storage(virtualHost)), ['https://media.s3.example.com:8443'], 'virtual-host style: the bucket host')
  const pathStyle = loadConfig({ ...s3, LUCENT_S3_FORCE_PATH_STYLE: '1', LUCENT_S3_PUBLIC_ENDPOINT: 'https://minio.lan' }).s3!
  t.same(mediaOrigins(new S3Storage(pathStyle)), ['https://minio.lan'], 'path style: the endpoint')
  // and in the header of a gateway configured that way (no S3 call is needed to answer the page)
  const app = await build(t, { ...s3, LUCENT_S3_FORCE_PATH_STYLE: '1', LUCENT_S3_PUBLIC_ENDPOINT: 'https://minio.lan' })
  const csp = parseCsp((await app.inject({ method: 'GET', url: '/' })).headers['content-security-policy'])
  t.same(csp['img-src'], ["'self'", 'blob:', 'https://minio.lan'])
  t.same(csp['media-src'], ["'self'", 'blob:', 'https://minio.lan'])
  t.same(csp['connect-src'], ["'self'"], 'the page uploads through the gateway (multipart): no S3 CORS needed')
  t.notMatch(contentSecurityPolicy(["https://x.example'; script-src *"]), /script-src \*/, 'an origin cannot inject directives')
})

t.test("the page's TypeScript type-checks (strict, DOM types; esbuild only strips types)", async (t) => {
  const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc')
  const out = (() => {
    try {
      return execFileSync(process.execPath, [tsc, '-p', path.join(repoRoot, 'playground')], { encoding: 'utf8' })
    } catch (e) {
      return String((e as { stdout?: string }).stdout ?? e)
    }
  })()
  t.equal(out.trim(), '', 'tsc -p playground: no errors')
})

t.test('not built: the page answers 503 saying how to build it', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(playground, { dist: await tempDir(t) })
  const r = await app.inject({ method: 'GET', url: '/' })
  t.equal(r.statusCode, 503)
  t.match(r.body, /npm run build:playground/)
})
