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
 */
import crypto from 'node:crypto'
import os from 'node:os'
import { Queue as BQueue, Worker, QueueEvents, type ConnectionOptions, type Job as BJob } from 'bullmq'
import type { JobHandler, Queue } from './types.js'
import { QueueBound } from './bound.js'

export interface BullQueueOptions {
  redisUrl: string
  /** BullMQ queue name (default 'jobs') and key prefix (default 'lucent'). */
  name?: string
  prefix?: string
  max: number
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

export class BullQueue implements Queue {
  readonly queue: BQueue
  readonly name: string
  readonly prefix: string
  private worker: Worker | null = null
  private events: QueueEvents | null = null
  private readonly connection: ConnectionOptions
  private waiting = 0
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
    this.bound = new QueueBound(o.max, () => this.waiting, () => this.closed)
    this.queue = new BQueue(this.name, { connection: this.connection, prefix: this.prefix })
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

  private async refresh(): Promise<void> {
    try {
      const c = await this.counts()
      this.waiting = c.waiting + c.delayed
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

  tryReserve(): boolean { return this.bound.tryReserve() }
  release(): void { this.bound.release() }

  async enqueue(jobId: string, opts: { reserved?: boolean; force?: boolean } = {}): Promise<void> {
    this.bound.admit(opts)
    const seen = this.refreshes
    await this.queue.add('enhance', { jobId }, {
      jobId,
      attempts: this.o.attempts,
      backoff: { type: 'exponential', delay: this.o.backoffMs ?? 1000 },
      removeOnComplete: true, // the store holds the outcome; a removed id can be re-added by recovery
      removeOnFail: { age: 7 * 24 * 3600, count: 100_000 },
    })
    if (this.refreshes === seen) this.waiting++
  }

  async remove(jobId: string): Promise<boolean> {
    const job = await this.queue.getJob(jobId)
    if (!job || !(await job.isWaiting() || await job.isDelayed())) return false
    try {
      await job.remove()
    } catch {
      return false // taken by a worker meanwhile (locked)
    }
    this.waiting = Math.max(0, this.waiting - 1)
    return true
  }

  process(handler: JobHandler): void {
    if (this.worker) throw new Error('process() called twice')
    this.worker = new Worker(this.name, async (job: BJob<{ jobId: string }>) => {
      this.running++
      try {
        await handler(job.data.jobId)
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

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.timer)
    await this.worker?.close().catch(() => {})
    await this.events?.close().catch(() => {})
    await this.queue.close().catch(() => {})
  }
}
