/**
 * Test access to the scale-out services (Redis, PostgreSQL, S3). Uses LUCENT_REDIS_URL / LUCENT_DATABASE_URL /
 * LUCENT_S3_* when they are set, else runs scripts/services.sh (idempotent) and reads the env it prints.
 * In CI (CI=true) a service that cannot start is a test FAILURE; locally the tests skip with the reason.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { repoRoot, freePort, tempDir } from '../helper.js'

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

/** Services for a test: in CI a missing service fails the test, locally it returns the skip reason. */
export async function requireServices(t: T): Promise<ServiceEnv | { skip: string }> {
  const env = await serviceEnv()
  if (typeof env !== 'string') return env
  // CI: a missing service is a failure, never a skip
  if (inCI) throw new Error(`scale-out services unavailable in CI: ${env}`)
  return { skip: `scale-out services unavailable (locally this skips; CI fails): ${env}` }
}

/** A fresh, empty PostgreSQL database on the configured server; dropped on teardown. Returns its URL. */
export async function freshDatabase(t: T, baseUrl: string): Promise<string> {
  const name = `lucent_t_${crypto.randomBytes(6).toString('hex')}`
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

/** One test's isolated scale-out deployment on the shared services: a fresh PostgreSQL database, a fresh Redis
 *  db number (flushed before and after) and a fresh S3 bucket; `env` is what every `lucent serve` process of the
 *  test starts with (embedded defaults for the rest: CPU backend, one engine thread, warn logs). */
export async function isolatedDeployment(t: T, svc: ServiceEnv, modelDir: string) {
  const { Redis } = await import('ioredis')
  const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3')
  const databaseUrl = await freshDatabase(t, svc.LUCENT_DATABASE_URL)
  const redisUrl = `${svc.LUCENT_REDIS_URL.replace(/\/\d*$/, '')}/${1 + crypto.randomInt(15)}`
  const redis = new Redis(redisUrl)
  await redis.flushdb()
  t.teardown(async () => { await redis.flushdb().catch(() => {}); redis.disconnect() })
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
  const children: ChildProcess[] = []
  t.teardown(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)))
  })
  /** Starts `lucent serve --role ROLE` on a free port with `env` (+ `extra`); killed at the test's end. */
  const serve = async (role: 'gateway' | 'worker', extra: Record<string, string> = {}) => {
    const port = await freePort()
    const child = spawn(process.execPath, [path.join(repoRoot, 'bin', 'lucent.js'), 'serve', '--role', role], {
      env: { ...env, ...extra, PORT: String(port), DATA_DIR: await tempDir(t, `lucent-${role}-`) }, stdio: ['ignore', 'inherit', 'inherit'],
    })
    children.push(child)
    return { child, base: `http://127.0.0.1:${port}`, role }
  }
  return { databaseUrl, redisUrl, redis, bucket, s3, env, serve, children }
}
