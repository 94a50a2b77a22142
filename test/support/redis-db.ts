/**
 * A Redis database number of its own for a test, on the shared test Redis (scripts/services.sh): suites that run
 * side by side (tap --jobs, several checkouts on one machine, a run killed half-way) never share or wipe each
 * other's queues. `lucent serve` has no key-prefix setting, so a deployment under test gets a whole db number:
 *
 *   - db 0 holds the leases, `lucent-test:redis-db:<n>` = a token, taken with SET NX PX (atomic: one holder)
 *     and renewed every few seconds while the test runs; a holder that dies (SIGKILL, tap's timeout) leaves a
 *     lease that expires in LEASE_MS. db 0 itself is never leased (test/queue/bullmq.ts works there under
 *     unique BullMQ prefixes).
 *   - a db number some client is connected to (say `lucent serve` processes orphaned by a killed suite) is
 *     passed over even when its lease has expired.
 *   - only the holder flushes its db: once taken (what a dead holder left), and at the end, before it lets go.
 *   - all numbers taken: wait for one (up to `waitMs`).
 *
 * Pub/sub channels are not per db (Redis publishes to every db's subscribers): `lucent:job-ended` messages of
 * another suite reach our workers, which ignore ids they do not run.
 */
import crypto from 'node:crypto'
import os from 'node:os'
import { Redis } from 'ioredis'

interface T { teardown(fn: () => unknown): void }

const LEASE_MS = 60_000
const RENEW_MS = 10_000
const PREFIX = 'lucent-test:redis-db:'
// compare-and-renew / compare-and-delete: only the holder's token counts
const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

/** `redis://host:port` + `/n` (any db in the base URL is replaced). */
export function redisDbUrl(baseUrl: string, db: number): string {
  const u = new URL(baseUrl)
  u.pathname = `/${db}`
  return u.toString()
}

export interface RedisDbLease {
  db: number
  /** The server's URL with this db number. */
  url: string
  /** A connection to it (closed at the test's end). */
  redis: Redis
}

/** Leases a Redis db number (1..databases-1) for the rest of the test `t`, empty; flushed and released at its end. */
export async function leaseRedisDb(t: T, baseUrl: string, o: { waitMs?: number } = {}): Promise<RedisDbLease> {
  const locks = new Redis(redisDbUrl(baseUrl, 0), { maxRetriesPerRequest: 2 })
  locks.on('error', () => {})
  const token = `${os.hostname()}:${process.pid}:${crypto.randomBytes(6).toString('hex')}`
  let n = 16
  try {
    const r = (await locks.config('GET', 'databases')) as string[]
    if (Number(r[1]) > 1) n = Number(r[1])
  } catch {
    // CONFIG disabled: Redis's default
  }
  const end = Date.now() + (o.waitMs ?? 300_000)
  let db = 0
  while (!db) {
    // a random order: concurrent suites rarely race for the same number
    const order = Array.from({ length: n - 1 }, (_, i) => i + 1).sort(() => Math.random() - 0.5)
    let inUse: Set<number>
    try {
      // a db some client is connected to is not free, lease or not (e.g. servers orphaned by a killed suite)
      inUse = new Set([...String(await locks.client('LIST')).matchAll(/ db=(\d+) /g)].map((m) => Number(m[1])))
    } catch {
      inUse = new Set()
    }
    for (const i of order) {
      if (inUse.has(i)) continue
      if ((await locks.set(PREFIX + i, token, 'PX', LEASE_MS, 'NX')) === 'OK') {
        db = i
        break
      }
    }
    if (db) break
    if (Date.now() > end) {
      locks.disconnect()
      throw new Error(`no free Redis db number on ${baseUrl} after ${o.waitMs ?? 300_000} ms (all ${n - 1} leased)`)
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  const renew = setInterval(() => { locks.eval(RENEW, 1, PREFIX + db, token, String(LEASE_MS)).catch(() => {}) }, RENEW_MS)
  renew.unref()
  const url = redisDbUrl(baseUrl, db)
  const redis = new Redis(url)
  redis.on('error', () => {})
  t.teardown(async () => {
    clearInterval(renew)
    // still ours (not expired and taken by another): empty it for the next holder, then let go
    if ((await locks.get(PREFIX + db).catch(() => null)) === token) await redis.flushdb().catch(() => {})
    await locks.eval(RELEASE, 1, PREFIX + db, token).catch(() => {})
    redis.disconnect()
    locks.disconnect()
  })
  await redis.flushdb()
  return { db, url, redis }
}
