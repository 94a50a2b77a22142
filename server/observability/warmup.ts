/**
 * Warm-up (LUCENT_WARMUP_MODELS): once the engine has loaded, one small enhance (a 16 x 16 PNG) per named photo
 * model through the pool, one after the other, so that each model's network is loaded (and, on a GPU, its
 * kernels tuned) before the first job pays for it. /readyz answers 503 until it is done (check `warmup`); a model
 * that fails to warm up (an unknown name, an engine error) keeps the process not ready and is logged.
 * Time per model: lucent_model_warmup_seconds{model}.
 */
import zlib from 'node:zlib'
import type { EnginePool } from '../engine/pool.js'
import type { EngineState } from '../engine/pool.js'
import type { Metrics } from '../metrics.js'

export interface WarmupState {
  state: 'none' | 'waiting' | 'running' | 'done' | 'error'
  done: string[]
  error?: string
}

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4)
  len.writeUInt32BE(data.length)
  const td = Buffer.concat([Buffer.from(type, 'latin1'), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(zlib.crc32(td) >>> 0)
  return Buffer.concat([len, td, crc])
}

/** A small RGB PNG (a gradient: not a flat image a model could skip). */
export function tinyPng(w = 16, h = 16): Buffer {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(w, 0)
  ihdr.writeUInt32BE(h, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  const raw = Buffer.alloc(h * (1 + 3 * w))
  for (let y = 0; y < h; y++) {
    const row = y * (1 + 3 * w)
    for (let x = 0; x < w; x++) {
      raw[row + 1 + 3 * x] = (x * 16) & 255
      raw[row + 2 + 3 * x] = (y * 16) & 255
      raw[row + 3 + 3 * x] = ((x + y) * 8) & 255
    }
  }
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  return Buffer.concat([sig, pngChunk('IHDR', ihdr), pngChunk('IDAT', zlib.deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))])
}

export interface WarmupDeps {
  pool: EnginePool
  engine: () => EngineState
  metrics: Metrics
  log: { info(o: object, msg: string): void; error(o: object, msg: string): void }
  /** True once the process is closing: the warm-up stops. */
  closing: () => boolean
}

/** Runs the warm-up of `models` in the background; the returned state is updated as it goes. */
export function startWarmup(models: readonly string[], d: WarmupDeps, s: WarmupState = { state: 'none', done: [] }): WarmupState {
  s.state = models.length ? 'waiting' : 'none'
  if (!models.length) return s
  void (async () => {
    while (d.engine().state === 'starting' && !d.closing()) await new Promise((r) => setTimeout(r, 50))
    if (d.closing()) return
    if (d.engine().state !== 'ready') {
      s.state = 'error'
      s.error = 'the engine did not load'
      return
    }
    s.state = 'running'
    for (const model of models) {
      if (d.closing()) return
      const t0 = performance.now()
      const r = await d.pool.enhance(tinyPng(), { model, format: 'png' }).catch((e: unknown) => ({ ok: false as const, error_code: 'thrown', message: String((e as Error)?.message ?? e) }))
      const secs = (performance.now() - t0) / 1000
      if (!r.ok) {
        s.state = 'error'
        s.error = `${model}: ${r.error_code}${'message' in r && r.message ? ` (${r.message})` : ''}`
        d.log.error({ model, err: s.error }, 'warm-up failed: this process stays not ready')
        return
      }
      d.metrics.modelWarmup.set({ model }, secs)
      s.done.push(model)
      d.log.info({ model, ms: Math.round(secs * 1000) }, 'model warmed up')
    }
    s.state = 'done'
  })()
  return s
}
