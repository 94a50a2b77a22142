/**
 * The web playground (playground/, issue 13) as one Fastify plugin: GET / and GET /playground answer the page
 * (/playground/ redirects there),
 * GET /playground/assets/<name>-<hash>.<ext> its bundled assets. The page uses only the public API.
 *
 * Files come from playground/dist (built by `npm run build:playground`, which `npm ci` runs through the
 * `prepare` hook; scripts/build-playground.mjs), read once at registration and served from memory.
 * - Caching: assets have content-hashed names -> `public, max-age=31536000, immutable`; the HTML (which names
 *   them) `no-cache` with an ETag, so a new build is picked up on the next load.
 * - A strict Content-Security-Policy on the HTML: no inline script or style, scripts/styles/fetch from the
 *   page's own origin only; images and media also from the origin that result links point at (LUCENT_PUBLIC_URL,
 *   or the S3 public endpoint / bucket host in scale-out), derived from the configured storage itself.
 * - Off with LUCENT_PLAYGROUND=0 (app.ts does not register it): the paths then get the API's not-found answer.
 * Not built: the page routes answer 503 with a line saying how to build it (the API is unaffected).
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { MediaStorage } from './storage/types.js'

export const PLAYGROUND_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'playground', 'dist')
export const PAGE_PATHS = ['/', '/playground']
export const ASSET_PREFIX = '/playground/assets/'

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8', '.png': 'image/png', '.woff2': 'font/woff2',
}

interface Served { body: Buffer; type: string; etag: string }

/** Origins (scheme://host[:port]) that result and original links of this storage point at. */
export function mediaOrigins(storage: MediaStorage): string[] {
  try {
    return [new URL(storage.signedGetUrl('playground-csp-probe', Date.now() + 60_000)).origin]
  } catch {
    return []
  }
}

/** The page's Content-Security-Policy: `self` plus the media origins for images and video, nothing inline. */
export function contentSecurityPolicy(media: string[]): string {
  const extra = [...new Set(media)].filter((o) => /^https?:\/\/[^\s;,']+$/.test(o)).join(' ')
  const src = (s: string) => (extra ? `${s} ${extra}` : s)
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    src("img-src 'self' blob:"),
    src("media-src 'self' blob:"),
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ')
}

function load(dist: string): { page: Served; assets: Map<string, Served> } | null {
  const html = path.join(dist, 'index.html')
  if (!fs.existsSync(html)) return null
  const served = (file: string): Served => {
    const body = fs.readFileSync(file)
    return { body, type: TYPES[path.extname(file)] ?? 'application/octet-stream', etag: `"${crypto.hash('sha256', body, 'base64url').slice(0, 27)}"` }
  }
  const page = { ...served(html), type: 'text/html; charset=utf-8' }
  const assets = new Map<string, Served>()
  const dir = path.join(dist, 'assets')
  for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) assets.set(name, served(path.join(dir, name)))
  return { page, assets }
}

function send(req: FastifyRequest, reply: FastifyReply, f: Served, cacheControl: string) {
  reply.header('content-type', f.type).header('cache-control', cacheControl).header('etag', f.etag)
    .header('x-content-type-options', 'nosniff')
  if (req.headers['if-none-match'] === f.etag) return reply.code(304).send()
  return reply.send(f.body)
}

const playground: FastifyPluginAsync<{ dist?: string }> = async (app, opts) => {
  const files = load(opts.dist ?? PLAYGROUND_DIST)
  const hidden = { config: { public: true }, schema: { hide: true } }
  if (!files) {
    app.log.warn('playground not built (playground/dist missing): run `npm run build:playground`, or set LUCENT_PLAYGROUND=0')
    for (const p of PAGE_PATHS) {
      app.get(p, hidden, async (_req, reply) => reply.code(503).header('content-type', 'text/plain; charset=utf-8')
        .send('The playground is not built: run `npm run build:playground` and restart (LUCENT_PLAYGROUND=0 turns it off).\n'))
    }
    return
  }
  for (const p of PAGE_PATHS) {
    app.get(p, hidden, async (req, reply) => {
      // per request: the public URL is only final once the server listens (cli.ts, port 0)
      reply.header('content-security-policy', contentSecurityPolicy(mediaOrigins(app.lucent.storage)))
        .header('referrer-policy', 'no-referrer')
        .header('x-frame-options', 'DENY')
        .header('cross-origin-opener-policy', 'same-origin')
        .header('permissions-policy', 'camera=(), microphone=(), geolocation=()')
      return send(req, reply, files.page, 'no-cache')
    })
  }
  // relative asset and API paths resolve from /playground, not from /playground/
  app.get('/playground/', hidden, async (_req, reply) => reply.redirect('../playground', 301))
  // one route per built file: any other name under the prefix gets the API's not-found answer
  for (const [name, f] of files.assets) {
    app.get(ASSET_PREFIX + name, hidden, async (req, reply) => send(req, reply, f, 'public, max-age=31536000, immutable'))
  }
}

export default playground
