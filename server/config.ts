/**
 * The ONE configuration module: `loadConfig()` builds the service's `Config` from the environment through the
 * settings schema of server/settings.ts (every runtime setting declared there once: type, default, unit, doc,
 * readers, validation). A bad value throws a ConfigError naming the variable and what it must be (`lucent serve`
 * prints it and exits 2). The settings, their defaults and meanings: docs/configuration.md (generated from the
 * schema), or `lucent config` for the values in effect.
 */
import path from 'node:path'
import type { S3Config } from './storage/s3.js'
import { defaultQuotas, type KeyQuotas } from './store/quotas.js'
import type { OutboundSettings, PortRule } from './fetch/policy.js'
import { ConfigError, MODELS_META_DIR, SETTINGS, nativeOnly, readSetting } from './settings.js'
import { parseAdminTokens, type AdminTokenHash } from './admin/token.js'
import { observabilityConfig, type ObservabilityConfig } from './observability/config.js'

export { ConfigError, MODELS_META_DIR }

/** Video tools and encoding settings (server/video/, server/jobs/video.ts). */
export interface VideoSettings {
  ffmpeg: string
  ffprobe: string
  mkvmerge: string
  crf: number
  preset: string
  batchMb: number
  tmpDir: string
  /** Most ms a packet listing (the frame count of server/video/plan.ts) may take. */
  probeTimeoutMs: number
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
  /** Replays allowed per delivery (POST /api/webhooks/deliveries/{id}/replay). */
  maxReplays: number
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
  /** Base of /files links (another origin for user files, same service); null: publicUrl. */
  filesBaseUrl: string | null
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
  /** A key's share of the waiting places (LUCENT_QUEUE_MAX_PER_KEY); null: half of queueMax. */
  queueMaxPerKey: number | null
  pricesFile?: string
  video: VideoSettings
  fetchMaxBytes: number
  /** LUCENT_INPUT_MEMORY_BYTES: photo input bytes held in memory at once per process (server/input.ts). */
  inputMemoryBytes: number
  fetchMaxVideoBytes: number
  fetchTimeoutMs: number
  /** Every outbound request a user names: allowed ports, DNS time limit and servers (server/fetch/policy.ts). */
  outbound: OutboundSettings
  /** The PUT of a result to a job's output_put_url (server/jobs/output-put.ts). */
  outputPut: { attempts: number; backoffMs: number; timeoutMs: number; deadlineMs: number }
  uploadMaxBytes: number
  /** Per-key quotas' defaults (LUCENT_QUOTA_*; server/store/quotas.ts). */
  quotas: KeyQuotas
  jobTimeoutMs: number
  jobMaxAttempts: number
  keyCacheMs: number
  /** Bring your own model: how often the registry is re-read from the store (server/own-models/registry.ts). */
  ownModelsRefreshMs: number
  logLevel: string
  role: 'all' | 'gateway' | 'worker'
  httpProcesses: number
  databaseUrl?: string
  redisUrl?: string
  queueLockMs: number
  /** LUCENT_DRAIN_GRACE_MS, LUCENT_RECONCILE_MS, LUCENT_READY_GRACE_MS (drain, queue reconciler, readiness). */
  drainGraceMs: number
  reconcileMs: number
  readyGraceMs: number
  queueStalledMs: number
  queueBackoffMs: number
  /** S3 media storage; null = local disk. */
  s3: S3Config | null
  /** Serve the web playground at / and /playground (server/playground.ts). */
  playground: boolean
  webhooks: WebhookSettings
  /** The admin API (server/admin/): the tokens' hashes (none: no admin API), its own listener (port null: on PORT
   *  under /admin/v1). */
  admin: { tokens: AdminTokenHash[]; port: number | null; host: string }
  /** Metrics listener or token, traces, warm-up (server/observability/config.ts). */
  observability: ObservabilityConfig
}

const num = (env: NodeJS.ProcessEnv, name: string) => readSetting(env, name) as number
const str = (env: NodeJS.ProcessEnv, name: string) => readSetting(env, name) as string
const opt = (env: NodeJS.ProcessEnv, name: string) => readSetting(env, name) as string | undefined
const list = (env: NodeJS.ProcessEnv, name: string) => readSetting(env, name) as string[]

function s3Config(env: NodeJS.ProcessEnv): S3Config | null {
  const endpoint = opt(env, 'LUCENT_S3_ENDPOINT')
  if (!endpoint) return null
  const need = (n: string) => {
    const v = opt(env, n)
    if (!v) throw new ConfigError(`${n} is required when LUCENT_S3_ENDPOINT is set`)
    return v
  }
  return {
    endpoint: endpoint.replace(/\/+$/, ''),
    bucket: need('LUCENT_S3_BUCKET'),
    region: str(env, 'LUCENT_S3_REGION'),
    accessKeyId: need('LUCENT_S3_ACCESS_KEY_ID'),
    secretAccessKey: need('LUCENT_S3_SECRET_ACCESS_KEY'),
    sessionToken: opt(env, 'LUCENT_S3_SESSION_TOKEN'),
    forcePathStyle: readSetting(env, 'LUCENT_S3_FORCE_PATH_STYLE') as boolean,
    publicEndpoint: opt(env, 'LUCENT_S3_PUBLIC_ENDPOINT'),
  }
}

export function videoSettings(env: NodeJS.ProcessEnv = process.env): VideoSettings {
  return {
    ffmpeg: str(env, 'LUCENT_FFMPEG'),
    ffprobe: str(env, 'LUCENT_FFPROBE'),
    mkvmerge: str(env, 'LUCENT_MKVMERGE'),
    crf: num(env, 'LUCENT_VIDEO_CRF'),
    preset: str(env, 'LUCENT_VIDEO_PRESET'),
    batchMb: num(env, 'LUCENT_VIDEO_BATCH_MB'),
    tmpDir: str(env, 'LUCENT_VIDEO_TMP'),
    probeTimeoutMs: num(env, 'LUCENT_VIDEO_PROBE_TIMEOUT_MS'),
  }
}

/** The model-file settings alone (the `lucent models` CLI needs no server configuration). */
export function modelSettings(env: NodeJS.ProcessEnv = process.env): ModelSettings {
  return {
    modelDir: path.resolve(str(env, 'LUCENT_MODEL_DIR')),
    manifest: str(env, 'LUCENT_MODEL_MANIFEST'),
    mirror: opt(env, 'LUCENT_MODEL_MIRROR') ?? null,
    githubRawBase: str(env, 'LUCENT_GITHUB_RAW_BASE'),
    npmRegistry: opt(env, 'LUCENT_NPM_REGISTRY'),
  }
}

/** The service's configuration from `env` (every setting of the schema that Node reads is checked, those of the
 *  `lucent` commands too), then `overrides` on top. Throws ConfigError on a bad value. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  for (const s of SETTINGS) if (!nativeOnly(s)) readSetting(env, s.name)
  const port = num(env, 'PORT')
  const host = str(env, 'HOST')
  const publicUrlEnv = env.LUCENT_PUBLIC_URL?.trim() ? opt(env, 'LUCENT_PUBLIC_URL') : undefined
  const dnsServers = list(env, 'LUCENT_DNS_SERVERS')
  const cfg: Config = {
    port,
    host,
    dataDir: path.resolve(str(env, 'DATA_DIR')),
    publicUrl: (publicUrlEnv || `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`).replace(/\/+$/, ''),
    publicUrlFromEnv: !!publicUrlEnv,
    filesBaseUrl: opt(env, 'LUCENT_FILES_BASE_URL')?.replace(/\/+$/, '') ?? null,
    fetchAllow: list(env, 'LUCENT_FETCH_ALLOW'),
    modelDir: path.resolve(str(env, 'LUCENT_MODEL_DIR')),
    backend: opt(env, 'LUCENT_BACKEND') as Config['backend'],
    adapter: opt(env, 'LUCENT_ADAPTER'),
    workers: num(env, 'LUCENT_WORKERS'),
    engineThreads: readSetting(env, 'LUCENT_ENGINE_THREADS') as number | undefined,
    rateBurst: num(env, 'LUCENT_RATE_BURST'),
    ratePerSec: num(env, 'LUCENT_RATE_PER_SEC'),
    queueMax: num(env, 'LUCENT_QUEUE_MAX'),
    queueMaxPerKey: (readSetting(env, 'LUCENT_QUEUE_MAX_PER_KEY') as number | undefined) ?? null,
    pricesFile: opt(env, 'LUCENT_PRICES'),
    video: videoSettings(env),
    fetchMaxBytes: num(env, 'LUCENT_FETCH_MAX_BYTES'),
    inputMemoryBytes: num(env, 'LUCENT_INPUT_MEMORY_BYTES'),
    fetchMaxVideoBytes: num(env, 'LUCENT_FETCH_MAX_VIDEO_BYTES'),
    fetchTimeoutMs: num(env, 'LUCENT_FETCH_TIMEOUT_MS'),
    outbound: {
      ports: readSetting(env, 'LUCENT_OUTBOUND_PORTS') as PortRule,
      dnsTimeoutMs: num(env, 'LUCENT_DNS_TIMEOUT_MS'),
      dnsServers: dnsServers.length ? dnsServers : null,
    },
    outputPut: {
      attempts: num(env, 'LUCENT_OUTPUT_PUT_ATTEMPTS'),
      backoffMs: num(env, 'LUCENT_OUTPUT_PUT_BACKOFF_MS'),
      timeoutMs: num(env, 'LUCENT_OUTPUT_PUT_TIMEOUT_MS'),
      deadlineMs: num(env, 'LUCENT_OUTPUT_PUT_DEADLINE_MS'),
    },
    uploadMaxBytes: num(env, 'LUCENT_UPLOAD_MAX_BYTES'),
    quotas: defaultQuotas(env),
    jobTimeoutMs: num(env, 'LUCENT_JOB_TIMEOUT_MS'),
    jobMaxAttempts: num(env, 'LUCENT_JOB_MAX_ATTEMPTS'),
    keyCacheMs: num(env, 'LUCENT_KEY_CACHE_MS'),
    ownModelsRefreshMs: num(env, 'LUCENT_OWN_MODELS_REFRESH_MS'),
    logLevel: str(env, 'LUCENT_LOG_LEVEL'),
    role: str(env, 'LUCENT_ROLE') as Config['role'],
    httpProcesses: num(env, 'LUCENT_HTTP_PROCESSES'),
    databaseUrl: opt(env, 'LUCENT_DATABASE_URL'),
    redisUrl: opt(env, 'LUCENT_REDIS_URL'),
    queueLockMs: num(env, 'LUCENT_QUEUE_LOCK_MS'),
    drainGraceMs: num(env, 'LUCENT_DRAIN_GRACE_MS'),
    reconcileMs: num(env, 'LUCENT_RECONCILE_MS'),
    readyGraceMs: num(env, 'LUCENT_READY_GRACE_MS'),
    queueStalledMs: num(env, 'LUCENT_QUEUE_STALLED_MS'),
    queueBackoffMs: num(env, 'LUCENT_QUEUE_BACKOFF_MS'),
    s3: s3Config(env),
    playground: readSetting(env, 'LUCENT_PLAYGROUND') as boolean,
    webhooks: {
      timeoutMs: num(env, 'LUCENT_WEBHOOK_TIMEOUT_MS'),
      maxAgeMs: num(env, 'LUCENT_WEBHOOK_MAX_AGE_MS'),
      backoffMs: num(env, 'LUCENT_WEBHOOK_BACKOFF_MS'),
      backoffMaxMs: num(env, 'LUCENT_WEBHOOK_BACKOFF_MAX_MS'),
      concurrency: num(env, 'LUCENT_WEBHOOK_CONCURRENCY'),
      keyConcurrency: num(env, 'LUCENT_WEBHOOK_KEY_CONCURRENCY'),
      pollMs: num(env, 'LUCENT_WEBHOOK_POLL_MS'),
      maxReplays: num(env, 'LUCENT_WEBHOOK_MAX_REPLAYS'),
    },
    admin: adminConfig(env),
    observability: observabilityConfig(env),
  }
  return { ...cfg, ...overrides }
}

function adminConfig(env: NodeJS.ProcessEnv): Config['admin'] {
  const tokens = parseAdminTokens(list(env, 'LUCENT_ADMIN_TOKEN_SHA256'))
  const port = (readSetting(env, 'LUCENT_ADMIN_PORT') as number | undefined) ?? null
  if (port !== null && !tokens.length) throw new ConfigError('LUCENT_ADMIN_PORT needs LUCENT_ADMIN_TOKEN_SHA256 (`lucent admin token` makes a token and prints the line)')
  return { tokens, port, host: str(env, 'LUCENT_ADMIN_HOST') }
}
