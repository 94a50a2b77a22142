/**
 * The ONE configuration module. Every setting comes from the environment (defaults below).
 *
 * | Variable                   | Default               | Meaning |
 * |----------------------------|-----------------------|---------|
 * | PORT                       | 8080                  | HTTP port (0 = any free port) |
 * | HOST                       | 0.0.0.0               | Listen address |
 * | DATA_DIR                   | ./data                | SQLite database (lucent.db), media objects (objects/), server secret (secret) |
 * | LUCENT_PUBLIC_URL          | http://127.0.0.1:PORT | Base of res_url / original_url / access_url / upload_url |
 * | LUCENT_FETCH_ALLOW         | (empty)               | Comma list of hosts/IPs that may be fetched although private (local testing) |
 * | LUCENT_MODEL_DIR           | $DATA_DIR/models      | Model directory (`lucent models fetch` fills it; tests/CI: ../shared/models) |
 * | LUCENT_WORKERS             | 1                     | Worker pool size = number of jobs processed at once |
 * | LUCENT_ENGINE_THREADS      | (all cores)           | CPU backend threads per engine (passed to init) |
 * | LUCENT_RATE_BURST          | 20                    | Token bucket size per key (requests) |
 * | LUCENT_RATE_PER_SEC        | 10                    | Token refill per second per key (a key's --rate overrides it) |
 * | LUCENT_QUEUE_MAX           | 1000                  | Max jobs waiting in the queue; beyond -> 503 + Retry-After (error 100500007) |
 * | LUCENT_PRICES              | (built-in)            | JSON file overriding the price tables (see server/pricing.ts) |
 * | LUCENT_FFPROBE             | ffprobe (PATH)        | ffprobe binary for video probing |
 * | LUCENT_FETCH_MAX_BYTES     | 268435456 (256 MiB)   | Max bytes fetched for a photo |
 * | LUCENT_FETCH_MAX_VIDEO_BYTES | 1073741824 (1 GiB)  | Max bytes fetched for a video / upload |
 * | LUCENT_FETCH_TIMEOUT_MS    | 30000                 | Total deadline for fetching a user URL |
 * | LUCENT_UPLOAD_MAX_BYTES    | 1073741824 (1 GiB)    | Max size of one upload (PUT or multipart) |
 * | LUCENT_JOB_TIMEOUT_MS      | 1800000 (30 min)      | A job running longer is aborted (ERROR 100500007, refunded) |
 * | LUCENT_JOB_MAX_ATTEMPTS    | 3                     | A job restarted this many times (crashes) ends in ERROR, refunded |
 * | LUCENT_KEY_CACHE_MS        | 1000                  | How long a looked-up API key is cached (revocation takes effect within it) |
 * | LUCENT_LOG_LEVEL           | info                  | Fastify/pino log level (silent to disable) |
 */
import path from 'node:path'
import os from 'node:os'

export interface Config {
  port: number
  host: string
  dataDir: string
  publicUrl: string
  publicUrlFromEnv: boolean
  fetchAllow: string[]
  modelDir: string
  workers: number
  engineThreads?: number
  rateBurst: number
  ratePerSec: number
  queueMax: number
  pricesFile?: string
  ffprobe: string
  fetchMaxBytes: number
  fetchMaxVideoBytes: number
  fetchTimeoutMs: number
  uploadMaxBytes: number
  jobTimeoutMs: number
  jobMaxAttempts: number
  keyCacheMs: number
  logLevel: string
}

function int(env: NodeJS.ProcessEnv, name: string, def: number, min = 0): number {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return def
  const n = Number(raw)
  if (!Number.isFinite(n) || n < min) throw new Error(`configuration: ${name} must be a number >= ${min} (got ${JSON.stringify(raw)})`)
  return n
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const port = int(env, 'PORT', 8080)
  const host = env.HOST || '0.0.0.0'
  const publicUrlEnv = env.LUCENT_PUBLIC_URL?.trim()
  const cfg: Config = {
    port,
    host,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    publicUrl: (publicUrlEnv || `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`).replace(/\/+$/, ''),
    publicUrlFromEnv: !!publicUrlEnv,
    fetchAllow: (env.LUCENT_FETCH_ALLOW || '').split(',').map((s) => s.trim()).filter(Boolean),
    modelDir: path.resolve(env.LUCENT_MODEL_DIR || path.join(env.DATA_DIR || './data', 'models')),
    workers: int(env, 'LUCENT_WORKERS', 1, 1),
    engineThreads: env.LUCENT_ENGINE_THREADS ? int(env, 'LUCENT_ENGINE_THREADS', os.availableParallelism(), 1) : undefined,
    rateBurst: int(env, 'LUCENT_RATE_BURST', 20, 1),
    ratePerSec: int(env, 'LUCENT_RATE_PER_SEC', 10, 0),
    queueMax: int(env, 'LUCENT_QUEUE_MAX', 1000, 0),
    pricesFile: env.LUCENT_PRICES || undefined,
    ffprobe: env.LUCENT_FFPROBE || 'ffprobe',
    fetchMaxBytes: int(env, 'LUCENT_FETCH_MAX_BYTES', 256 * 1024 * 1024, 1),
    fetchMaxVideoBytes: int(env, 'LUCENT_FETCH_MAX_VIDEO_BYTES', 1024 * 1024 * 1024, 1),
    fetchTimeoutMs: int(env, 'LUCENT_FETCH_TIMEOUT_MS', 30_000, 1),
    uploadMaxBytes: int(env, 'LUCENT_UPLOAD_MAX_BYTES', 1024 * 1024 * 1024, 1),
    jobTimeoutMs: int(env, 'LUCENT_JOB_TIMEOUT_MS', 30 * 60_000, 1),
    jobMaxAttempts: int(env, 'LUCENT_JOB_MAX_ATTEMPTS', 3, 1),
    keyCacheMs: int(env, 'LUCENT_KEY_CACHE_MS', 1000, 0),
    logLevel: env.LUCENT_LOG_LEVEL || 'info',
  }
  return { ...cfg, ...overrides }
}
