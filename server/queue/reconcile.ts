/**
 * The queue reconciler (shared queue only): the job store is the truth, the BullMQ queue in Redis a copy of its
 * CONVERTING jobs. A Redis that loses its data (restarted without persistence, a failover that drops recent
 * writes, an eviction) would otherwise leave jobs CONVERTING for ever: debited, never run, never refunded.
 *
 * Every LUCENT_RECONCILE_MS one process (a Redis lease, SET NX PX: whoever takes it) reads the CONVERTING jobs
 * of the store and, for each one:
 *   - held by the queue (waiting / prioritized / delayed / active / paused): nothing to do;
 *   - its result is stored (a delivery in flight or cut): left to the redelivery check (lifecycle redeliverStale);
 *   - running somewhere: a process that runs a job touches its row (updated_at) every period
 *     (lifecycle touchRunning), so a row written in the last 3 periods is left alone;
 *   - BullMQ gave up on it (state failed) but the store did not hear it: failed as BullMQ's hook would have;
 *   - otherwise (no BullMQ job, or one completed while the store says CONVERTING): queued again. BullMQ's job id
 *     is our id, so two reconcilers or a late enqueue add it once; the lifecycle's start() runs only CONVERTING
 *     jobs, so a job queued twice runs once.
 * A wiped queue is also noticed: a marker key written at start (`<prefix>:<name>:epoch`) that is gone is logged
 * (error) and written again.
 * At start, checkRedis() reads the Redis settings the queue needs (CONFIG GET: `maxmemory-policy` must be
 * `noeviction`; no AOF and no RDB snapshots means a restart loses the queue) and warns; a Redis with CONFIG
 * disabled (managed services) is tolerated (logged at info).
 */
import crypto from 'node:crypto'
import type { BullQueue } from './bullmq.js'
import type { Store } from '../store/types.js'
import type { JobLifecycle } from '../jobs/lifecycle.js'

interface Log { info(o: object, msg: string): void; warn(o: object, msg: string): void; error(o: object, msg: string): void }

interface RedisLike {
  set(key: string, value: string, ...args: Array<string | number>): Promise<string | null>
  get(key: string): Promise<string | null>
  config(op: 'GET', name: string): Promise<unknown>
}

/** BullMQ states in which the queue holds a job (it will run, or runs now). */
const HELD = new Set(['waiting', 'prioritized', 'delayed', 'active', 'paused', 'waiting-children'])

export interface ReconcileDeps {
  store: Store
  queue: BullQueue
  jobs: JobLifecycle
  log: Log
  /** LUCENT_RECONCILE_MS */
  everyMs: number
}

export interface ReconcileResult { checked: number; requeued: number; failed: number; wiped: boolean }

export class QueueReconciler {
  private timer: NodeJS.Timeout | null = null
  private readonly token = crypto.randomUUID()
  private epoch: string | null = null
  private busy = false

  constructor(private readonly d: ReconcileDeps) {}

  private redis(): Promise<RedisLike> { return this.d.queue.queue.client as unknown as Promise<RedisLike> }
  private key(k: string): string { return this.d.queue.queue.toKey(k) }

  /** Writes the epoch marker (or reads the one there), then checks every `everyMs`. */
  async start(): Promise<void> {
    await this.mark().catch(() => {})
    this.timer = setInterval(() => { void this.tick().catch((err) => this.d.log.warn({ err }, 'queue reconcile failed')) }, this.d.everyMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  private async mark(): Promise<boolean> {
    const r = await this.redis()
    const k = this.key('epoch')
    const mine = crypto.randomUUID()
    await r.set(k, mine, 'NX')
    const now = await r.get(k)
    // gone since the last look: this process wrote it again, or another one did (either way not the one seen)
    const wiped = this.epoch !== null && now !== this.epoch
    this.epoch = now
    return wiped
  }

  /** One check (when this process holds the lease): see the header. */
  async tick(): Promise<ReconcileResult | null> {
    if (this.busy) return null
    this.busy = true
    try {
      const r = await this.redis()
      const wiped = await this.mark()
      if (wiped) this.d.log.error({ queue: this.d.queue.name }, 'the queue\'s Redis lost its data (epoch marker gone): CONVERTING jobs are queued again from the job store')
      if (await r.set(this.key('reconcile'), this.token, 'PX', Math.max(500, this.d.everyMs - 100), 'NX') !== 'OK' &&
        await r.get(this.key('reconcile')) !== this.token) return null
      return { ...await this.reconcile(), wiped }
    } finally {
      this.busy = false
    }
  }

  private async reconcile(): Promise<Omit<ReconcileResult, 'wiped'>> {
    const fresh = Date.now() - 3 * this.d.everyMs
    const jobs = await this.d.store.jobsByStatus('CONVERTING')
    let requeued = 0
    let failed = 0
    for (const job of jobs) {
      if (job.resultKey || job.updatedAt > fresh) continue
      const b = await this.d.queue.queue.getJob(job.id)
      const state = b ? await b.getState() : 'unknown'
      if (HELD.has(state)) continue
      if (state === 'failed') {
        // BullMQ gave up on it and the store did not hear (its QueueEvents stream lost): as the give-up hook does
        if (await this.d.jobs.fail(job.id, 100500000, `job failed after retries: ${b?.failedReason ?? ''}`.slice(0, 500))) failed++
        continue
      }
      if (b) await b.remove().catch(() => {})
      // read again: the job may have ended meanwhile (a run finishing as its queue entry vanished)
      const now = await this.d.store.getJob(job.id)
      if (now?.status !== 'CONVERTING' || now.resultKey || now.updatedAt > fresh) continue
      await this.d.queue.enqueue(job.id, { keyId: job.keyId, force: true })
      requeued++
    }
    if (requeued || failed) this.d.log.warn({ requeued, failed, converting: jobs.length }, 'queue reconciled from the job store: CONVERTING jobs no queue held')
    return { checked: jobs.length, requeued, failed }
  }
}

/** The Redis settings the queue needs, read at start: warnings in the log (never a refusal to start). */
export async function checkRedis(queue: BullQueue, log: Log): Promise<string[]> {
  const r = await queue.queue.client as unknown as RedisLike
  const get = async (name: string): Promise<string | null> => {
    const v = await r.config('GET', name)
    return Array.isArray(v) && v.length >= 2 ? String(v[1]) : null
  }
  let policy: string | null, aof: string | null, save: string | null
  try {
    [policy, aof, save] = [await get('maxmemory-policy'), await get('appendonly'), await get('save')]
  } catch (err) {
    log.info({ err: String((err as Error)?.message ?? err) }, 'Redis CONFIG GET refused: the queue\'s Redis settings (noeviction, persistence) not checked')
    return []
  }
  const warnings: string[] = []
  if (policy !== null && policy !== 'noeviction') {
    warnings.push(`maxmemory-policy is ${policy}: Redis may evict queued jobs; set maxmemory-policy noeviction`)
  }
  if (aof !== null && save !== null && aof !== 'yes' && save.trim() === '') {
    warnings.push('Redis has no persistence (appendonly no, save ""): a restart empties the queue; jobs are queued again from the store by the reconciler (LUCENT_RECONCILE_MS), set appendonly yes to avoid the wait')
  }
  for (const w of warnings) log.warn({ redis: 'config' }, w)
  return warnings
}
