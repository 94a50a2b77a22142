/**
 * Test access to the scale-out services (Redis, PostgreSQL, S3). Uses LUCENT_REDIS_URL / LUCENT_DATABASE_URL /
 * LUCENT_S3_* when they are set, else runs scripts/services.sh (idempotent) and reads the env it prints.
 * In CI (CI=true) a service that cannot start is a test FAILURE; locally the tests skip with the reason.
 */
import { execFile } from 'node:child_process'
import crypto from 'node:crypto'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { addonBuilt, repoRoot, tempDir } from '../helper.js'
import { lucentServer, type LucentServer, type ServeOptions } from '../support/serve.js'
import { leaseRedisDb } from '../support/redis-db.js'

export interface ServiceEnv {
  LUCENT_REDIS_URL: string
  LUCENT_DATABASE_URL: string
  LUCENT_S3_ENDPOINT: string
  LUCENT_S3_BUCKET: string
  LUCENT_S3_REGION: string
  LUCENT_S3_ACCESS_KEY_ID: string
  LUCENT_S3_SECRET_ACCESS_KEY: string
  LUCENT_S3_FORCE_PATH_STYLE: string
}

const NAMES: Array<keyof ServiceEnv> = ['LUCENT_REDIS_URL', 'LUCENT_DATABASE_URL', 'LUCENT_S3_ENDPOINT', 'LUCENT_S3_BUCKET', 'LUCENT_S3_REGION',
  'LUCENT_S3_ACCESS_KEY_ID', 'LUCENT_S3_SECRET_ACCESS_KEY', 'LUCENT_S3_FORCE_PATH_STYLE']

export const inCI = process.env.CI === 'true' || process.env.CI === '1'

let cached: Promise<ServiceEnv | string> | null = null

/** The service env, or a string saying why the services are unavailable. */
export function serviceEnv(): Promise<ServiceEnv | string> {
  cached ??= (async () => {
    if (NAMES.every((n) => process.env[n])) return Object.fromEntries(NAMES.map((n) => [n, process.env[n]!])) as unknown as ServiceEnv
    try {
      const { stdout } = await promisify(execFile)(path.join(repoRoot, 'scripts', 'services.sh'), [], { timeout: 240_000 })
      const env: Record<string, string> = {}
      for (const m of stdout.matchAll(/^export (\w+)=(.*)$/gm)) env[m[1]] = m[2]
      const missing = NAMES.filter((n) => !env[n])
      if (missing.length) return `scripts/services.sh printed no ${missing.join(', ')}`
      return env as unknown as ServiceEnv
    } catch (e) {
      const err = e as { stderr?: string; message?: string }
      return `scripts/services.sh failed: ${(err.stderr || err.message || String(e)).trim()}`
    }
  })()
  return cached
}

interface T { teardown(fn: () => unknown): void }

/** What a scale-out test with real processes needs: the built addon and the services. Null after `t.plan(0, why)`
 *  when either is missing here; in CI a missing addon or service fails the test instead. */
export async function processServices(t: T & { plan(n: number, why?: string): void }): Promise<ServiceEnv | null> {
  if (!addonBuilt) {
    if (inCI) throw new Error('native/node is not built (npm run build:native)')
    t.plan(0, 'native addon not built (npm run build:native)')
    return null
  }
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return null
  }
  return svc
}

/** Services for a test: in CI a missing service fails the test, locally it returns the skip reason. */
export async function requireServices(t: T): Promise<ServiceEnv | { skip: string }> {
  const env = await serviceEnv()
  if (typeof env !== 'string') return env
  // CI: a missing service is a failure, never a skip
  if (inCI) throw new Error(`scale-out services unavailable in CI: ${env}`)
  return { skip: `scale-out services unavailable (locally this skips; CI fails): ${env}` }
}

/** A fresh, empty PostgreSQL database on the configured server, its own (`lucent_t_<pid>_<random>`: no two suites,
 *  side by side or run again, share one); dropped on teardown. Returns its URL. */
export async function freshDatabase(t: T, baseUrl: string): Promise<string> {
  const name = `lucent_t_${process.pid}_${crypto.randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: baseUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: baseUrl })
    await c.connect()
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await c.end()
    }
  })
  const u = new URL(baseUrl)
  u.pathname = `/${name}`
  return u.toString()
}

/** One test's isolated scale-out deployment on the shared services: a fresh PostgreSQL database, a Redis db
 *  number leased for the test alone (test/support/redis-db.ts: empty, flushed and released at the end) and a
 *  fresh S3 bucket; `env` is what every `lucent serve` process of the test starts with (embedded defaults for the
 *  rest: CPU backend, one engine thread, warn logs). */
export async function isolatedDeployment(t: T, svc: ServiceEnv, modelDir: string) {
  const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3')
  const databaseUrl = await freshDatabase(t, svc.LUCENT_DATABASE_URL)
  // registered before the servers: tap's teardowns run last-first, so the servers stop before the db is flushed
  const { url: redisUrl, redis } = await leaseRedisDb(t, svc.LUCENT_REDIS_URL)
  const bucket = `lucent-t-${crypto.randomBytes(5).toString('hex')}`
  const s3 = new S3Client({
    endpoint: svc.LUCENT_S3_ENDPOINT, region: svc.LUCENT_S3_REGION, forcePathStyle: true,
    credentials: { accessKeyId: svc.LUCENT_S3_ACCESS_KEY_ID, secretAccessKey: svc.LUCENT_S3_SECRET_ACCESS_KEY },
  })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: bucket }))
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>), ...svc,
    LUCENT_DATABASE_URL: databaseUrl, LUCENT_REDIS_URL: redisUrl, LUCENT_S3_BUCKET: bucket,
    HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn',
    LUCENT_WORKERS: '1', LUCENT_ENGINE_THREADS: '1', LUCENT_BACKEND: 'cpu',
  }
  delete env.LUCENT_ROLE
  const servers: Array<LucentServer & { role: 'gateway' | 'worker' }> = []
  /** Starts `lucent serve --role ROLE` on a free port with `env` (+ `extra`) and waits until its /healthz
   *  answers 200 (`ready` for another check); stopped at the test's end. */
  const serve = async (role: 'gateway' | 'worker', extra: Record<string, string> = {}, o: Pick<ServeOptions, 'ready' | 'readyTimeoutMs'> = {}) => {
    const s = Object.assign(lucentServer(t, {
      env: { ...env, ...extra, DATA_DIR: await tempDir(t, `lucent-${role}-`) }, args: ['serve', '--role', role], label: `lucent ${role}`, ...o,
    }), { role })
    servers.push(s)
    await s.start()
    return s
  }
  return { databaseUrl, redisUrl, redis, bucket, s3, env, serve, servers }
}
