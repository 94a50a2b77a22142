/** Test helpers: a real app on a temp DATA_DIR (real SQLite file), keys, a local HTTP server for inputs. */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { build as buildApp } from '../server/app.js'
import { loadConfig, type Config } from '../server/config.js'
import { newApiKey } from '../server/auth.js'

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const sharedDir = path.resolve(repoRoot, '../shared')
export const sharedData = path.join(sharedDir, 'data')
/** Models: $LUCENT_MODEL_DIR, else the directory `npm test` fills with `lucent models fetch` from the shared
 *  mirror (data/test-models), else the shared mirror itself (lacks the converted denoisers). */
export const modelDir = process.env.LUCENT_MODEL_DIR
  ? path.resolve(process.env.LUCENT_MODEL_DIR)
  : fs.existsSync(path.join(repoRoot, 'data/test-models/denoise/ffdnet_clip_color.bin'))
    ? path.join(repoRoot, 'data/test-models')
    : path.join(sharedDir, 'models')
export const addonBuilt = fs.existsSync(path.join(repoRoot, 'native/node/index.js'))

interface T { teardown(fn: () => unknown): void }

export async function tempDir(t: T, prefix = 'lucent-test-'): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix))
  t.teardown(() => fsp.rm(dir, { recursive: true, force: true }))
  return dir
}

/** Builds the app on a fresh temp DATA_DIR; closes it on teardown. */
export async function build(t: T, env: Record<string, string> = {}, overrides: Partial<Config> = {}): Promise<FastifyInstance> {
  const dataDir = await tempDir(t)
  const config = loadConfig({
    DATA_DIR: dataDir, LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'silent',
    LUCENT_PUBLIC_URL: 'http://lucent.invalid', LUCENT_RATE_BURST: '100000', LUCENT_RATE_PER_SEC: '100000', ...env,
  }, overrides)
  const app = await buildApp(config)
  await app.ready()
  t.teardown(() => app.close())
  return app
}

export async function createKey(app: FastifyInstance, o: { coins?: number; trial?: number; expiresAt?: number | null; rate?: number | null } = {}) {
  const k = newApiKey()
  await app.lucent.store.createKey({ id: k.id, hash: k.hash, coins: o.coins ?? 1000, trial: o.trial ?? 0, expiresAt: o.expiresAt ?? null, rate: o.rate ?? null })
  return { key: k.key, id: k.id }
}

export async function balance(app: FastifyInstance, id: string): Promise<number> {
  return (await app.lucent.store.findKey(id))!.coins
}

/** POST JSON with the key. */
export function post(app: FastifyInstance, url: string, key: string | null, body: unknown, headerName = 'Apikey') {
  return app.inject({ method: 'POST', url, headers: key === null ? {} : { [headerName]: key }, payload: body as object })
}

/** A PNG (valid signature + IHDR with a right CRC) declaring w x h; the image data is absent. */
export function pngHeader(w: number, h: number): Buffer {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(w, 0)
  ihdr.writeUInt32BE(h, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr)])
}

/** One PNG chunk (length, type, data, CRC). */
export function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4)
  len.writeUInt32BE(data.length)
  const td = Buffer.concat([Buffer.from(type, 'latin1'), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(zlib.crc32(td) >>> 0)
  return Buffer.concat([len, td, crc])
}

/** A complete, valid RGB PNG w x h (gradient). */
export function png(w: number, h: number): Buffer {
  const raw = Buffer.alloc((w * 3 + 1) * h)
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = y * (w * 3 + 1) + 1 + x * 3
      raw[o] = (x * 255) / Math.max(1, w - 1)
      raw[o + 1] = (y * 255) / Math.max(1, h - 1)
      raw[o + 2] = 128
    }
  }
  return Buffer.concat([pngHeader(w, h), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))])
}

/**
 * Local input server on 127.0.0.1: /shared/<path> serves /work/shared/data files, /mem/<name> serves buffers
 * registered in `files`. Counts requests per path.
 */
export async function inputServer(t: T) {
  const files = new Map<string, { body: Buffer; type: string }>()
  const hits = new Map<string, number>()
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x')
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1)
    if (url.pathname.startsWith('/mem/')) {
      const f = files.get(url.pathname.slice(5))
      if (!f) return void res.writeHead(404).end()
      return void res.writeHead(200, { 'content-type': f.type, 'content-length': f.body.length }).end(f.body)
    }
    if (url.pathname.startsWith('/shared/')) {
      const p = path.join(sharedData, decodeURIComponent(url.pathname.slice(8)))
      if (!p.startsWith(sharedData)) return void res.writeHead(403).end()
      try {
        const body = await fsp.readFile(p)
        return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length }).end(body)
      } catch {
        return void res.writeHead(404).end()
      }
    }
    res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }))
  const port = (server.address() as { port: number }).port
  const base = `http://127.0.0.1:${port}`
  return {
    base, files, hits,
    put(name: string, body: Buffer, type = 'application/octet-stream') {
      files.set(name, { body, type })
      return `${base}/mem/${name}`
    },
    shared: (p: string) => `${base}/shared/${p}`,
  }
}

/** A TCP port free right now on 127.0.0.1 (for spawned servers). */
export async function freePort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as net.AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 120_000, stepMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error('waitFor: timed out')
    await new Promise((r) => setTimeout(r, stepMs))
  }
}

/** The task-status answer of a job once it has ended (polled with the key: keys made by createKey allow the rate). */
export async function jobEnded(app: FastifyInstance, key: string, jobId: string, timeoutMs = 300_000) {
  return waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: jobId })).json().data
    return d.status !== 'CONVERTING' && d
  }, timeoutMs, 100)
}
