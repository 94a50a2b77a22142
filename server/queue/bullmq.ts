/**
 * The gateway's Queue on BullMQ (Redis): shared by every gateway (producers) and worker (consumers).
 * - job id = our job id: adding a job that is already queued or running is a no-op (dedupe, safe recovery);
 * - at-least-once: a job is removed from Redis only when its handler settles; a worker that dies mid-job loses
 *   its lock and BullMQ's stalled-job check (lockDuration / stalledInterval) puts the job back for another worker;
 * - a handler that throws is retried with exponential backoff (attempts / backoffMs); when BullMQ gives up
 *   (attempts or stalls exhausted) `onFailed` runs (the caller fails the job in the store: ERROR + refund).
 *   The store's attempt counter (store.startAttempt) is the authoritative crash counter; BullMQ's limits are set
 *   above it so the runner normally ends a job itself, and `onFailed` is the safety net.
 * - the bound (LUCENT_QUEUE_MAX) is checked against the shared waiting count, refreshed every `countsMs`
 *   (tryReserve is synchronous): with several gateways it is approximate by design.
 * Coins are debited once at submission (store.debitAndCreateJob); nothing here charges.
 *
 * Fair share across keys (BullMQ OSS has no groups): start-time fair queuing on BullMQ's priorities (lower runs
 * sooner, FIFO within one priority). A virtual clock V is the priority of the last job a worker took; a job of
 * key k gets priority max(V, last_k) + 1, last_k being the priority of k's previous job still waiting. So a key
 * that floods gets V+1, V+2, ... V+1000, while another key's single job gets V+1: it runs after at most one job
 * of each key with jobs waiting, and every key's own jobs keep their order. The bookkeeping lives next to the
 * queue in Redis, changed by Lua scripts (atomic): `<prefix>:<name>:fair` (v, and per waiting key n:<key> jobs
 * waiting and l:<key> last priority) and `<prefix>:<name>:fair:jobs` (job id -> key, for the jobs counted as
 * waiting). An add of an id BullMQ already holds is not counted (dedupe); a job leaves the count when a worker
 * takes it or a cancel removes it. V is reset when nothing is waiting and it passed 2^20 (priorities stop at
 * 2^21 - 1: past that the order degrades to FIFO until the queue empties once). The per-key bound
 * (LUCENT_QUEUE_MAX_PER_KEY) reads the per-key counts refreshed with the shared counts (approximate, as above).
 */
import crypto from 'node:crypto'
import os from 'node:os'
import { Queue as BQueue, Worker, QueueEvents, WaitingError, type ConnectionOptions, type Job as BJob } from 'bullmq'
import type { EnqueueOptions, JobHandler, Queue, Reservation } from './types.js'
import { QueueBound } from './bound.js'
import { within } from '../within.js'

/** BullMQ's highest priority (job.ts PRIORITY_LIMIT). */
const PRIORITY_LIMIT = 2 ** 21 - 1
/** The virtual clock is reset when nothing waits and it passed this. */
const CLOCK_RESET = 2 ** 20

/** KEYS fair, fairJobs, the job's BullMQ key; ARGV jobId, keyId, limit -> {counted 1|0, priority}. */
const FAIR_ADD = `
local fair, jobs, jobKey = KEYS[1], KEYS[2], KEYS[3]
local id, key, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local v = tonumber(redis.call('HGET', fair, 'v') or '0')
if redis.call('EXISTS', jobKey) == 1 or redis.call('HEXISTS', jobs, id) == 1 then
  return {0, math.min(v + 1, limit)}
end
local p = math.max(v, tonumber(redis.call('HGET', fair, 'l:' .. key) or '0')) + 1
if p > limit then p = limit end
redis.call('HSET', fair, 'l:' .. key, p)
redis.call('HINCRBY', fair, 'n:' .. key, 1)
redis.call('HSET', jobs, id, key)
return {1, p}
`
/** KEYS fair, fairJobs; ARGV jobId, priority taken (0: removed, not taken), reset -> 1 when it was counted. */
const FAIR_TAKE = `
local fair, jobs = KEYS[1], KEYS[2]
local id, p = ARGV[1], tonumber(ARGV[2])
local key = redis.call('HGET', jobs, id)
if key then
  redis.call('HDEL', jobs, id)
  if redis.call('HINCRBY', fair, 'n:' .. key, -1) <= 0 then redis.call('HDEL', fair, 'n:' .. key, 'l:' .. key) end
end
if p > 0 then
  local v = tonumber(redis.call('HGET', fair, 'v') or '0')
  if p > v then
    v = p
    redis.call('HSET', fair, 'v', v)
  end
  if v > tonumber(ARGV[3]) and redis.call('HLEN', jobs) == 0 then redis.call('HDEL', fair, 'v') end
end
if key then return 1 end
return 0
`

interface FairClient {
  lucentFairAdd(fair: string, jobs: string, jobKey: string, id: string, key: string, limit: number): Promise<[number, number]>
  lucentFairTake(fair: string, jobs: string, id: string, priority: number, reset: number): Promise<number>
  hgetall(key: string): Promise<Record<string, string>>
}

export interface BullQueueOptions {
  redisUrl: string
  /** BullMQ queue name (default 'jobs') and key prefix (default 'lucent'). */
  name?: string
  prefix?: string
  max: number
  /** A key's share of the waiting places (LUCENT_QUEUE_MAX_PER_KEY); default half of `max`. */
  maxPerKey?: number | null
  /** Jobs processed at once by this process (consumers only). */
  concurrency: number
  attempts: number
  backoffMs?: number
  lockDurationMs?: number
  stalledIntervalMs?: number
  maxStalledCount?: number
  countsMs?: number
  /** A job BullMQ gave up on (final failure): fail it in the store (idempotent there). Same as onGiveUp(). */
  onFailed?: (jobId: string, reason: string) => Promise<unknown>
}

export function redisConnection(url: string): ConnectionOptions {
  const u = new URL(url)
  return {
    host: u.hostname || '127.0.0.1',
    port: Number(u.port || 6379),
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
    tls: u.protocol === 'rediss:' ? {} : undefined,
    maxRetriesPerRequest: null, // required by BullMQ workers
  }
}

/** How long close() waits for BullMQ's own close before it drops the Redis connections. */
export const CLOSE_WAIT_MS = 5000

export class BullQueue implements Queue {
  readonly queue: BQueue
  readonly name: string
  readonly prefix: string
  private worker: Worker | null = null
  private events: QueueEvents | null = null
  private readonly connection: ConnectionOptions
  private waiting = 0
  /** Jobs waiting per key (last known: the shared counts, plus this process's adds since). */
  private waitingByKey = new Map<string, number>()
  private readonly fairKey: string
  private readonly fairJobsKey: string
  private fairReady: Promise<FairClient> | null = null
  /** Shared counts applied so far: a local ++ after an add is skipped when counts arrived meanwhile (they may
   *  already hold the job: counting it twice refused submissions with the queue not full). */
  private refreshes = 0
  private active = 0
  private running = 0
  private readonly bound: QueueBound
  private closed = false
  private readonly timer: NodeJS.Timeout
  /** Set when the last refresh of the shared counts failed (Redis unreachable). */
  lastError: string | null = null

  constructor(private readonly o: BullQueueOptions) {
    this.name = o.name ?? 'jobs'
    this.prefix = o.prefix ?? 'lucent'
    this.connection = redisConnection(o.redisUrl)
    this.bound = new QueueBound(o.max, () => this.waiting, () => this.closed, (k) => this.waitingByKey.get(k) ?? 0, o.maxPerKey)
    this.queue = new BQueue(this.name, { connection: this.connection, prefix: this.prefix })
    this.fairKey = this.queue.toKey('fair')
    this.fairJobsKey = this.queue.toKey('fair:jobs')
    this.queue.on('error', (e) => { this.lastError = String(e?.message ?? e) })
    this.timer = setInterval(() => { this.refresh().catch(() => {}) }, o.countsMs ?? 500).unref()
    this.refresh().catch(() => {})
    if (o.onFailed) this.onGiveUp(o.onFailed)
  }

  /** `fn` on every final failure. QueueEvents sees them all, including jobs failed by the stalled check (no
   *  worker event), on every process that listens: `fn` must be idempotent (the store's failJob is). */
  onGiveUp(fn: (jobId: string, reason: string) => Promise<unknown>): void {
    if (!this.events) {
      this.events = new QueueEvents(this.name, { connection: this.connection, prefix: this.prefix })
      this.events.on('error', () => {})
    }
    this.events.on('failed', ({ jobId, failedReason }) => { fn(jobId, failedReason).catch(() => {}) })
  }

  /** Shared counts from Redis (all gateways and workers). */
  async counts(): Promise<{ waiting: number; active: number; delayed: number; failed: number }> {
    const c = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed', 'paused')
    return { waiting: (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.paused ?? 0), active: c.active ?? 0, delayed: c.delayed ?? 0, failed: c.failed ?? 0 }
  }

  /** The queue's Redis client with the fair-share scripts defined. */
  private fair(): Promise<FairClient> {
    this.fairReady ??= this.queue.client.then((c) => {
      const r = c as unknown as FairClient & { defineCommand(n: string, d: { numberOfKeys: number; lua: string }): void; lucentFairAdd?: unknown }
      if (!r.lucentFairAdd) {
        r.defineCommand('lucentFairAdd', { numberOfKeys: 3, lua: FAIR_ADD })
        r.defineCommand('lucentFairTake', { numberOfKeys: 2, lua: FAIR_TAKE })
      }
      return r
    })
    this.fairReady.catch(() => { this.fairReady = null })
    return this.fairReady
  }

  /** Jobs waiting per key, from Redis (the fair-share counts). */
  async keyCounts(): Promise<Map<string, number>> {
    const h = await (await this.fair()).hgetall(this.fairKey)
    const m = new Map<string, number>()
    for (const [f, v] of Object.entries(h)) if (f.startsWith('n:') && Number(v) > 0) m.set(f.slice(2), Number(v))
    return m
  }

  private async refresh(): Promise<void> {
    try {
      const [c, byKey] = await Promise.all([this.counts(), this.keyCounts()])
      this.waiting = c.waiting + c.delayed
      this.waitingByKey = byKey
      this.refreshes++
      this.active = c.active
      this.lastError = null
    } catch (e) {
      this.lastError = String((e as Error)?.message ?? e)
      throw e
    }
  }

  async ping(): Promise<boolean> {
    try {
      const client = (await this.queue.client) as unknown as { ping(): Promise<string> }
      return (await client.ping()) === 'PONG'
    } catch {
      return false
    }
  }

  get maxPerKey(): number { return this.bound.maxPerKey }
  reserve(keyId: string): Reservation { return this.bound.reserve(keyId) }
  release(keyId: string): void { this.bound.release(keyId) }

  async enqueue(jobId: string, opts: EnqueueOptions): Promise<void> {
    this.bound.admit(opts)
    const seen = this.refreshes
    const fair = await this.fair()
    const [counted, priority] = await fair.lucentFairAdd(this.fairKey, this.fairJobsKey, this.queue.toKey(jobId), jobId, opts.keyId, PRIORITY_LIMIT)
    try {
      await this.queue.add('enhance', { jobId, keyId: opts.keyId }, {
        jobId,
        priority,
        attempts: this.o.attempts,
        backoff: { type: 'exponential', delay: this.o.backoffMs ?? 1000 },
        removeOnComplete: true, // the store holds the outcome; a removed id can be re-added by recovery
        removeOnFail: { age: 7 * 24 * 3600, count: 100_000 },
      })
    } catch (e) {
      if (counted) await fair.lucentFairTake(this.fairKey, this.fairJobsKey, jobId, 0, CLOCK_RESET).catch(() => {})
      throw e
    }
    if (this.refreshes === seen) {
      this.waiting++
      if (counted) this.waitingByKey.set(opts.keyId, (this.waitingByKey.get(opts.keyId) ?? 0) + 1)
    }
  }

  async remove(jobId: string): Promise<boolean> {
    const job = await this.queue.getJob(jobId)
    // waiting: 'prioritized' (every job of ours has a priority: fair share), or 'waiting' / 'delayed' (a retry)
    const state = job ? await job.getState() : 'unknown'
    if (!job || !(state === 'prioritized' || state === 'waiting' || state === 'delayed')) return false
    try {
      await job.remove()
    } catch {
      return false // taken by a worker meanwhile (locked)
    }
    this.waiting = Math.max(0, this.waiting - 1)
    const keyId = (job.data as { keyId?: string }).keyId
    if (keyId !== undefined && this.waitingByKey.has(keyId)) this.waitingByKey.set(keyId, Math.max(0, this.waitingByKey.get(keyId)! - 1))
    await (await this.fair()).lucentFairTake(this.fairKey, this.fairJobsKey, jobId, 0, CLOCK_RESET).catch(() => {})
    return true
  }

  process(handler: JobHandler): void {
    if (this.worker) throw new Error('process() called twice')
    this.worker = new Worker(this.name, async (job: BJob<{ jobId: string }>, token?: string) => {
      this.running++
      try {
        // out of its key's waiting count; the virtual clock moves to its priority (fair share, above)
        await this.fair().then((f) => f.lucentFairTake(this.fairKey, this.fairJobsKey, job.data.jobId, job.priority || 0, CLOCK_RESET)).catch(() => {})
        if (await handler(job.data.jobId) === 'handback') {
          // a drain handed the job back: waiting again at its priority, no retry counted, no backoff
          await job.moveToWait(token)
          throw new WaitingError()
        }
      } finally {
        this.running--
      }
    }, {
      connection: this.connection,
      prefix: this.prefix,
      concurrency: this.o.concurrency,
      lockDuration: this.o.lockDurationMs ?? 30_000,
      stalledInterval: this.o.stalledIntervalMs ?? 30_000,
      maxStalledCount: this.o.maxStalledCount ?? this.o.attempts,
      name: `${os.hostname()}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`,
      autorun: true,
    })
    this.worker.on('error', () => {})
  }

  pause(): void {
    if (this.worker && !this.closed) void this.worker.pause(true).catch(() => {})
  }

  resume(): void {
    this.worker?.resume()
  }

  stats() {
    return { waiting: this.waiting, running: this.running, reserved: this.bound.reserved, max: this.o.max, active: this.active }
  }

  /**
   * Closes the worker, the events listener and the queue. Over a Redis that does not answer (frozen, mid-restart:
   * a blocking read never returns) BullMQ's close waits forever: after CLOSE_WAIT_MS the connections are dropped
   * instead (a job still running was handed back or is recovered by the stalled check, as after a crash).
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.timer)
    const parts = [this.worker, this.events, this.queue].filter((x) => !!x)
    const graceful = Promise.all(parts.map((x) => x.close().catch(() => {})))
    if (await within(CLOSE_WAIT_MS, graceful)) return
    await within(CLOSE_WAIT_MS, Promise.all(parts.map((x) => x.disconnect().catch(() => {}))))
  }
}
