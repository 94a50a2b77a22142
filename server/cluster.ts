/**
 * Several HTTP processes on one host (LUCENT_HTTP_PROCESSES=N, N >= 2): one Node process serves HTTP on one core,
 * so a gateway that must use more cores forks N HTTP children (node:cluster, one shared listening port).
 *
 *   primary (the `lucent serve` process)   role all: the engine host: SQLite, the in-process queue, the engine
 *                                          pool, the job runner, crash recovery, the sweeper; never listens.
 *                                          role gateway: supervision only.
 *   children (N)                           the HTTP API on PORT; role all: their queue and rate limiter are the
 *                                          primary's, reached over the cluster IPC channel (below); role gateway
 *                                          or any role with LUCENT_REDIS_URL: BullMQ + Redis as usual.
 *
 * Everything durable is shared through the store (SQLite in WAL mode across processes: every write is an
 * IMMEDIATE transaction, so coins stay exact) and the media storage (one disk directory, one link secret).
 *
 * IPC (role all, no Redis):
 *   - the queue: a child enqueues on the primary's queue; its bound check uses the depth the primary broadcasts
 *     every 250 ms plus its own reservations, so with N children the bound may be passed by the submissions
 *     in flight at that moment (the same "approximate by design" as BullMQ's shared queue).
 *   - rate limits: the primary owns the token buckets; a child leases tokens (about 50 ms of a key's rate,
 *     1..1000) and spends them locally, asking again when the lease is spent or older than 1 s. A key never gets
 *     more than its bucket: unspent leased tokens lapse, they are never handed out twice.
 *   - job changes (progress, completion, failure) are broadcast, so children keep converting jobs' task-status
 *     answers exactly (server/jobs/status.ts).
 *   - a cancel made by a child (POST /api/task-cancel: the job ended in the shared SQLite store) is sent to the
 *     primary, which stops the job's run at once (JobLifecycle.endedElsewhere: engine aborted, ffmpeg killed).
 *   - engine state (for /healthz, /readyz, /metrics): broadcast by the primary with the queue depth; a child's
 *     /metrics adds the primary's job families (lucent_job_*, lucent_jobs_total), asked for on each scrape.
 * A child that dies is forked again; when the primary dies the children stop (the IPC channel closes).
 */
import cluster, { type Worker } from 'node:cluster'
import { ApiError } from './errors.js'
import { BoundedCache } from './cache.js'
import { rateLimited, type RateLimiter } from './auth.js'
import type { EnqueueOptions, JobHandler, Queue, Reservation } from './queue/types.js'
import { QueueBound } from './queue/bound.js'
import type { EngineState } from './engine/pool.js'
import type { WorkerInfo } from './roles/registry.js'

type QueueStats = ReturnType<Queue['stats']>

/** What the primary broadcasts to every child. */
export interface PrimaryState {
  engine: EngineState
  /** `heavy`: the keys holding at least half their share of the queue, with their jobs waiting (the children's
   *  per-key bound, LUCENT_QUEUE_MAX_PER_KEY; a key below half cannot pass it between two broadcasts at any
   *  sane rate). */
  queue: { waiting: number; running: number; max: number; heavy?: Record<string, number> }
  worker: WorkerInfo | null
}

type Request =
  | { op: 'enqueue'; jobId: string; keyId: string }
  | { op: 'remove'; jobId: string }
  | { op: 'metrics' }
  | { op: 'grant'; keyId: string; rate: number | null; want: number }
type Message =
  | { t: 'req'; rid: number; req: Request }
  | { t: 'res'; rid: number; ok: true; value: unknown }
  | { t: 'res'; rid: number; ok: false; error: string }
  | { t: 'state'; state: PrimaryState }
  | { t: 'listening'; address: string }
  /** a job's state changed (progress, completion, failure): kept task-status answers are dropped */
  | { t: 'job'; id: string }
  /** child -> primary: a child ended this job (cancel); its run on the primary must stop */
  | { t: 'ended'; id: string }

const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && typeof (m as { t?: unknown }).t === 'string'

// --- primary side -----------------------------------------------------------------------------------------

/** Answers the children's requests and broadcasts the primary's state (role all). */
export class ClusterHub {
  private timer: NodeJS.Timeout | null = null
  private onMessage = (w: Worker, m: unknown) => {
    if (!isMessage(m)) return
    if (m.t === 'req') this.answer(w, m.rid, m.req)
    else if (m.t === 'job') this.jobChanged(m.id)
    else if (m.t === 'ended') this.src.ended?.(m.id)
  }

  constructor(private readonly src: {
    state: () => PrimaryState
    enqueue: (jobId: string, keyId: string) => Promise<void>
    /** Takes a waiting job out of the primary's queue (cancel from a child). */
    remove: (jobId: string) => Promise<boolean>
    rate: Pick<RateLimiter, 'grant'>
    /** Prometheus text of the job metrics (recorded here, where jobs run). */
    metrics: () => Promise<string>
    /** A child ended (canceled) this job: stop its run here. */
    ended?: (jobId: string) => void
  }) {}

  private onOnline = (w: Worker) => this.send(w, { t: 'state', state: this.src.state() })

  start(): void {
    cluster.on('message', this.onMessage)
    cluster.on('online', this.onOnline)
    this.timer = setInterval(() => this.broadcast(), 250)
    this.timer.unref()
  }

  broadcast(): void {
    this.sendAll({ t: 'state', state: this.src.state() })
  }

  /** A job's state changed (here, or in a child that said so): every child drops its kept answer. */
  jobChanged(id: string): void {
    this.sendAll({ t: 'job', id })
  }

  private sendAll(msg: Message): void {
    for (const w of Object.values(cluster.workers ?? {})) if (w) this.send(w, msg)
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    cluster.off('message', this.onMessage)
    cluster.off('online', this.onOnline)
  }

  private send(w: Worker, m: Message): void {
    if (!w.isConnected()) return
    try {
      w.send(m, undefined, () => {})
    } catch {
      // the child is going away; it asks again after a restart
    }
  }

  private answer(w: Worker, rid: number, req: Request): void {
    const reply = (p: Promise<unknown>) => p.then(
      (value) => this.send(w, { t: 'res', rid, ok: true, value }),
      (e: unknown) => this.send(w, { t: 'res', rid, ok: false, error: e instanceof Error ? e.message : String(e) }),
    )
    switch (req.op) {
      case 'enqueue':
        reply(this.src.enqueue(req.jobId, req.keyId).then(() => this.src.state().queue))
        break
      case 'remove':
        reply(this.src.remove(req.jobId))
        break
      case 'grant':
        reply(Promise.resolve().then(() => this.src.rate.grant(req.keyId, req.rate, req.want)))
        break
      case 'metrics':
        reply(this.src.metrics())
        break
      default:
        reply(Promise.reject(new Error(`unknown request ${JSON.stringify(req)}`)))
    }
  }
}

// --- child side -------------------------------------------------------------------------------------------

/** A child's end of the IPC channel: requests to the primary, and the primary's last broadcast state. */
export class ClusterLink {
  state: PrimaryState | null = null
  private rid = 0
  private pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>()
  private listeners: Array<(s: PrimaryState) => void> = []
  private jobListeners: Array<(id: string) => void> = []

  constructor(private readonly proc: NodeJS.Process = process, private readonly timeoutMs = 5000) {
    if (!proc.send) throw new Error('ClusterLink: this process has no IPC channel (not a cluster child)')
    proc.on('message', (m: unknown) => {
      if (!isMessage(m)) return
      if (m.t === 'state') {
        this.state = m.state
        for (const f of this.listeners) f(m.state)
      } else if (m.t === 'job') {
        for (const f of this.jobListeners) f(m.id)
      } else if (m.t === 'res') {
        const p = this.pending.get(m.rid)
        if (!p) return
        this.pending.delete(m.rid)
        clearTimeout(p.timer)
        if (m.ok) p.resolve(m.value)
        else p.reject(new Error(m.error))
      }
    })
  }

  onState(f: (s: PrimaryState) => void): void {
    this.listeners.push(f)
    if (this.state) f(this.state)
  }

  /** `f(jobId)` when the primary says a job's state changed. */
  onJobChanged(f: (id: string) => void): void {
    this.jobListeners.push(f)
  }

  /** This child changed a job's state (a submission that could not be queued, a cancel): the primary tells
   *  every child. */
  jobChanged(id: string): void {
    this.proc.send?.({ t: 'job', id } satisfies Message)
  }

  /** This child ended a job (cancel): the primary stops its run. */
  jobEnded(id: string): void {
    this.proc.send?.({ t: 'ended', id } satisfies Message)
  }

  request<T>(req: Request): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const rid = ++this.rid
      const timer = setTimeout(() => {
        this.pending.delete(rid)
        reject(new Error(`primary did not answer ${req.op} within ${this.timeoutMs} ms`))
      }, this.timeoutMs)
      this.pending.set(rid, { resolve: resolve as (v: unknown) => void, reject, timer })
      this.proc.send!({ t: 'req', rid, req } satisfies Message, undefined, {}, (e) => {
        if (!e) return
        this.pending.delete(rid)
        clearTimeout(timer)
        reject(e)
      })
    })
  }

  notifyListening(address: string): void {
    this.proc.send?.({ t: 'listening', address } satisfies Message)
  }
}

/** A child's queue: jobs go to the primary's queue (fair share is the primary's); the bounds use the primary's
 *  broadcast depth and heavy keys. */
export class IpcQueue implements Queue {
  private closed = false
  private readonly bound: QueueBound

  constructor(private readonly link: ClusterLink, max: number, maxPerKey?: number | null) {
    this.bound = new QueueBound(max, () => this.link.state?.queue.waiting ?? 0, () => this.closed,
      (k) => this.link.state?.queue.heavy?.[k] ?? 0, maxPerKey)
  }

  get maxPerKey(): number { return this.bound.maxPerKey }
  reserve(keyId: string): Reservation { return this.bound.reserve(keyId) }
  release(keyId: string): void { this.bound.release(keyId) }

  async enqueue(jobId: string, opts: EnqueueOptions): Promise<void> {
    this.bound.admit(opts)
    const q = await this.link.request<PrimaryState['queue']>({ op: 'enqueue', jobId, keyId: opts.keyId })
    if (this.link.state) this.link.state.queue = q
  }

  remove(jobId: string): Promise<boolean> {
    return this.link.request<boolean>({ op: 'remove', jobId })
  }

  process(_handler: JobHandler): void {
    throw new Error('IpcQueue: HTTP children do not run jobs (the cluster primary does)')
  }

  pause(): void {}
  resume(): void {}

  stats(): QueueStats {
    const q = this.link.state?.queue
    return { waiting: q?.waiting ?? 0, running: q?.running ?? 0, reserved: this.bound.reserved, max: this.bound.max }
  }

  async close(): Promise<void> { this.closed = true }
}

const LEASE_MS = 1000

/** A child's rate limiter: tokens leased from the primary's buckets, spent locally. */
export class IpcRateLimiter {
  private leases = new BoundedCache<string, { tokens: number; until: number }>(10_000)

  constructor(private readonly link: ClusterLink, private readonly perSec: number) {}

  take(keyId: string, keyRate: number | null): void | Promise<void> {
    const now = Date.now()
    const l = this.leases.get(keyId)
    if (l && l.tokens >= 1 && l.until > now) {
      l.tokens--
      return
    }
    const rate = keyRate ?? this.perSec
    const want = Math.max(1, Math.min(1000, Math.floor(rate * 0.05)))
    return this.link.request<{ granted: number; retryAfter: number }>({ op: 'grant', keyId, rate: keyRate, want }).then((g) => {
      if (g.granted < 1) throw rateLimited(g.retryAfter)
      const cur = this.leases.get(keyId)
      const t = Date.now()
      const left = cur && cur.until > t ? cur.tokens : 0
      // this request spends one token; the rest are the lease
      this.leases.set(keyId, { tokens: left + g.granted - 1, until: t + LEASE_MS })
    }, (e: Error) => {
      throw new ApiError(100500000, { detail: `rate limiter unavailable: ${e.message}` })
    })
  }
}

// --- supervision (primary) --------------------------------------------------------------------------------

export interface SupervisorOptions {
  processes: number
  log: { info: (o: object, msg: string) => void; warn: (o: object, msg: string) => void; error: (o: object, msg: string) => void }
  /** Called once every child listens. */
  onListening?: (addresses: string[]) => void
  /** Called when the supervisor gives up (children keep dying at start). */
  onFatal: (msg: string) => void
}

/** Forks and keeps `processes` HTTP children; `stop()` ends them gracefully (SIGTERM, then SIGKILL after 30 s). */
export function superviseChildren(o: SupervisorOptions): { stop: () => Promise<void> } {
  let stopping = false
  const listening = new Map<number, string>()
  let reported = false
  let quickDeaths = 0
  const fork = () => {
    const w = cluster.fork()
    const startedAt = Date.now()
    let listened = false
    w.on('message', (m: unknown) => {
      if (!isMessage(m) || m.t !== 'listening') return
      listened = true
      listening.set(w.id, m.address)
      if (!reported && listening.size >= o.processes) {
        reported = true
        o.onListening?.([...new Set(listening.values())])
      }
    })
    w.on('exit', (code, signal) => {
      listening.delete(w.id)
      if (stopping) return
      const quick = !listened || Date.now() - startedAt < 10_000
      quickDeaths = quick ? quickDeaths + 1 : 0
      if (code === 2 || quickDeaths >= 5) {
        o.onFatal(`HTTP process ${w.process.pid} exited (code ${code}${signal ? `, ${signal}` : ''}) while starting`)
        return
      }
      o.log.warn({ child: w.process.pid, code, signal }, 'HTTP process died; starting another')
      setTimeout(() => { if (!stopping) fork() }, 500).unref()
    })
  }
  for (let i = 0; i < o.processes; i++) fork()
  return {
    stop: async () => {
      stopping = true
      const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead())
      await Promise.all(alive.map((w) => new Promise<void>((resolve) => {
        if (w.isDead()) return resolve()
        const kill = setTimeout(() => w.process.kill('SIGKILL'), 30_000)
        w.once('exit', () => {
          clearTimeout(kill)
          resolve()
        })
        w.process.kill('SIGTERM')
      })))
    },
  }
}
