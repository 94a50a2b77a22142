/**
 * The job lifecycle: the ONE module that moves a job between its states, writes them through the store and
 * tells the rest of the server, one typed event per transition. Over 500 lines on purpose: the transitions,
 * ActiveRun and the drain share this class's private state (runs, deliveries, run log writes); split, each part
 * would reach into the other's internals.
 *
 *   submit() ─> queued ─start()─> running ─progress()*─> completed
 *                 ^                 │  ├──────────────> failed     engine error, timeout, crash limit, ...
 *                 └──── released <──┘  └──────────────> canceled   cancel(): out of the queue, run aborted
 *   a queued job can also end at once: failed (enqueue failure, BullMQ gave up) or canceled
 *
 * Stored (API) states: CONVERTING = queued | running; COMPLETED; ERROR = failed | canceled (refunded exactly
 * once by the store). `released` leaves the job CONVERTING: a run that stops without an outcome (shutdown, or
 * a throw the shared queue retries) goes back to the queue.
 *
 * Subscribing (metrics, kept task-status answers, the cluster broadcast, webhooks ...):
 *   const off = app.lucent.jobs.on('completed', (e) => notify(e.job.keyId, e.job.id, e.resultKey))
 *   app.lucent.jobs.onChange((jobId) => cache.drop(jobId))   // after ANY state write, even one that threw
 * Listeners run synchronously after the store write; one that throws is logged and never breaks the job.
 * Events fire in the process that made the transition (a worker's runs on the worker; a gateway's
 * submissions on the gateway).
 *
 * Running jobs: start() hands the runner a `Run` with an AbortSignal, aborted (reason: a `RunAborted`) when
 * the job timeout passes (LUCENT_JOB_TIMEOUT_MS), on cancel(), on shutdown(), or when the job ends elsewhere.
 * The runner passes the signal down (engine pool, ffmpeg) and settles the run with `settleAborted()`.
 *
 * Results and delivery: a runner hands its stored result to run.complete(key, deliver?). The store records the
 * result first (storeResult, only while the job is CONVERTING: a job canceled meanwhile, even by a process whose
 * relay this one missed, gets no result and no delivery); from then on the job can only complete: cancel and
 * failure are refused, nothing is refunded (server/jobs/refund.ts, the money policy). With `deliver` (the PUT to
 * output_put_url) the run ends at once, so the runner's queue slot is free, and the delivery goes on here under
 * one total deadline (deliveryDeadlineMs); the job completes when it is over, delivered or not. A delivery cut
 * by shutdown or a crash leaves the job CONVERTING with its result: the next start() of it delivers again
 * (server/jobs/runner.ts) without running the engine.
 *
 * Cancel (for POST /api/task-cancel): cancel(jobId, {errorCode, message}) removes the job from the queue if it
 * is waiting, ends it in the store (ERROR + the refund the money policy gives a cancel: all of it while waiting,
 * the unprocessed share once running; refused once the result exists), emits
 * `canceled`, and aborts its run when it runs in this process. A run on another process finds out when its
 * next write is refused (the store only moves CONVERTING jobs); to stop it at once, forward the cancel to the
 * process that runs it (cluster IPC / Redis: server/plugins/cluster.ts, server/plugins/cancel-relay.ts), which
 * calls endedElsewhere(): the run there is aborted at once without another write.
 *
 * Time estimates (server/jobs/eta.ts, with `eta` in the deps): start() and every progress write store the run's
 * expected finish; a completed run's time per unit of work feeds the (model, backend) moving average.
 */
import { randomUUID } from 'node:crypto'
import { CANCELED_CODE, type ErrorCode } from '../errors.js'
import type { Queue } from '../queue/types.js'
import type { DebitResult, JobKind, NewJob, Store } from '../store/types.js'
import { decodeJob, type JobSpec, type TypedJob } from './params.js'
import { remainingMs, type EtaModel } from './eta.js'
import { timeoutCause } from './refund.js'
import { jobObs } from '../observability/context.js'

export interface JobRef { id: string; keyId: string; kind: JobKind; model: string; createdAt: number }
/** A run of this process: its attempt number (1 = first) and how long it ran. */
export interface RunInfo { attempt: number; ms: number }

export interface JobEvents {
  queued: { job: JobRef; coins: number; trial: boolean }
  running: { job: JobRef; attempt: number }
  progress: { job: JobRef; progress: number }
  completed: { job: JobRef; resultKey: string; run: RunInfo; latencyMs: number }
  failed: { job: JobRef; errorCode: ErrorCode; message: string; run: RunInfo | null }
  canceled: { job: JobRef; errorCode: ErrorCode; message: string; run: RunInfo | null }
  released: { job: JobRef; reason: 'retry' | 'shutdown'; run: RunInfo }
}
export type JobEventType = keyof JobEvents

/** Why a run's signal was aborted. `ended`: the job was ended by cancel() or fail() while running. */
export class RunAborted extends Error {
  constructor(readonly why: 'timeout' | 'shutdown' | 'ended', message: string) {
    super(message)
    this.name = 'RunAborted'
  }
}

export type RunState = 'running' | 'completed' | 'failed' | 'canceled' | 'released'

/** One running job, handed to its runner by start(). Every method is a no-op once the run has ended. */
export interface Run<J extends TypedJob = TypedJob> {
  readonly job: J
  readonly attempt: number
  readonly signal: AbortSignal
  /** 'running' until the run ends; then how (failed also when ended by fail() from elsewhere). */
  readonly state: RunState
  readonly ended: boolean
  /** True when the runner must stop without writing anything more: ended, or shutting down. (A timeout still
   *  lets a result that is already there complete the job.) */
  readonly stopped: boolean
  /** Progress 0..100 (written at most every 200 ms, never backwards, below 100 until completion). Resolves
   *  once written or skipped; never rejects (a failed progress write is not a job failure). */
  progress(pct: number): Promise<void>
  /** The result is stored under `resultKey`: the job completes, after `deliver` when given (which then runs
   *  outside the run, under the delivery deadline). False when the job had ended meanwhile. */
  complete(resultKey: string, deliver?: Deliver): Promise<boolean>
  fail(errorCode: ErrorCode, message: string): Promise<boolean>
  /** Stops without an outcome: the job stays CONVERTING (queued again by the queue or the next start). */
  release(reason: 'retry' | 'shutdown'): void
}

export type SubmitResult =
  | { ok: true; charged: number }
  | Extract<DebitResult, { ok: false }>
  /** Debited but the queue refused the job (Redis or the cluster primary unreachable): ended, refunded. */
  | { ok: false; reason: 'not_queued'; error: Error }

export interface LifecycleDeps {
  store: Store
  queue: Queue
  log: { info(o: object, msg: string): void; warn(o: object, msg: string): void; error(o: object, msg: string): void }
  jobTimeoutMs: number
  maxAttempts: number
  /** Time estimates (measured throughput); absent: no eta is written. */
  eta?: EtaModel
  /** Total deadline of a result's delivery (output_put_url), all tries; default 300 s. */
  deliveryDeadlineMs?: number
}

/** Delivers a stored result (the PUT to output_put_url); must end soon after `signal` aborts. */
export type Deliver = (signal: AbortSignal) => Promise<unknown>

const ref = (j: { id: string; keyId: string; kind: JobKind; model: string; createdAt: number }): JobRef =>
  ({ id: j.id, keyId: j.keyId, kind: j.kind, model: j.model, createdAt: j.createdAt })

const PROGRESS_EVERY_MS = 200

export class JobLifecycle {
  private readonly listeners = new Map<JobEventType, Set<(e: never) => void>>()
  private readonly changeListeners = new Set<(jobId: string) => void>()
  private readonly runs = new Map<string, ActiveRun>()
  /** Jobs another process said had ended while no run of them was registered here (a run starting meanwhile
   *  checks this once it is registered). */
  private readonly endedIds = new Map<string, NodeJS.Timeout>()
  /** Results being delivered by this process (after their runs ended): aborted by shutdown(). */
  private readonly deliveries = new Map<string, { stop: AbortController; done: Promise<void> }>()
  private stopping = false
  /** This process's id in the run log (server/store/job-runs.ts). */
  private readonly runner = randomUUID()
  /** Run log writes in flight (drain() awaits them). */
  private readonly runLogWrites = new Set<Promise<void>>()

  constructor(private readonly d: LifecycleDeps) {
    // BullMQ's failure hook: a job the shared queue gave up on (attempts or stalls exhausted) ends here.
    d.queue.onGiveUp?.((jobId, reason) => this.fail(jobId, 100500000, `job failed after retries: ${reason}`.slice(0, 500)))
  }

  // --- subscribing ------------------------------------------------------------------------------------------

  /** Calls `fn` on every `type` transition made by this process. Returns the unsubscribe function. */
  on<E extends JobEventType>(type: E, fn: (e: JobEvents[E]) => void): () => void {
    let set = this.listeners.get(type)
    if (!set) this.listeners.set(type, (set = new Set()))
    set.add(fn as (e: never) => void)
    return () => { set.delete(fn as (e: never) => void) }
  }

  /** Calls `fn(jobId)` after every write of a job's state by this process (progress, completion, failure,
   *  cancel), also when the write threw: for caches of job state. Returns the unsubscribe function. */
  onChange(fn: (jobId: string) => void): () => void {
    this.changeListeners.add(fn)
    return () => { this.changeListeners.delete(fn) }
  }

  private emit<E extends JobEventType>(type: E, e: JobEvents[E]): void {
    for (const fn of this.listeners.get(type) ?? []) this.guard(() => (fn as (e: JobEvents[E]) => void)(e), type)
  }

  private changed(jobId: string): void {
    for (const fn of this.changeListeners) this.guard(() => fn(jobId), 'change')
  }

  private guard(fn: () => void, what: string): void {
    try {
      fn()
    } catch (err) {
      this.d.log.error({ err, event: what }, 'job event listener threw')
    }
  }

  /** Runs `write` (a store write of `jobId`'s state), then tells the change listeners, whatever happened. */
  private async write<T>(jobId: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write()
    } finally {
      this.changed(jobId)
    }
  }

  // --- transitions ------------------------------------------------------------------------------------------

  /** A new job: debit and create it (one store transaction), then hand it to the queue (`reserved`: with the
   *  place the route reserved). */
  async submit(job: Omit<NewJob, 'kind' | 'params'> & JobSpec, opts: { reserved?: boolean } = {}): Promise<SubmitResult> {
    // the submitting request's id and trace context go with the job (params.obs; never in an answer)
    const obs = jobObs()
    if (obs) job = { ...job, params: { ...job.params, obs } } as unknown as typeof job
    const r = await this.d.store.debitAndCreateJob(job)
    if (!r.ok) return r
    this.emit('queued', { job: ref(r.job), coins: r.charged, trial: r.trial })
    try {
      await this.d.queue.enqueue(job.id, { keyId: job.keyId, reserved: opts.reserved })
    } catch (e) {
      await this.fail(job.id, 100500000, 'the job could not be queued').catch(() => {})
      return { ok: false, reason: 'not_queued', error: e as Error }
    }
    return { ok: true, charged: r.charged }
  }

  /** Starts a run of a queued job; null when there is nothing to run (unknown, already ended, stopping, or over
   *  its attempts: then it fails here, 'crashed'). */
  async start(jobId: string): Promise<Run | null> {
    if (this.stopping) return null
    const job = await this.d.store.getJob(jobId)
    if (!job || job.status !== 'CONVERTING') return null
    // the attempt counts unless the previous run died with its process in company (server/store/job-runs.ts)
    const { attempt, interrupted } = await this.write(jobId, () => this.d.store.runs.begin(jobId, this.runner, this.d.maxAttempts))
    if (interrupted && interrupted.suspects > 0) {
      this.d.log.warn({ job: jobId, attempt, suspects: interrupted.suspects }, interrupted.forgiven
        ? 'the previous run died with its process among others: its attempt is given back'
        : 'the previous run died with its process: one attempt used')
    }
    // a delivery that ends the job at once still counts as a (zero-length) run of this process
    if (attempt > this.d.maxAttempts) {
      // a job whose result exists cannot fail any more: it completes (its delivery not tried again)
      if (job.resultKey) await this.completeStored(ref(job), job.resultKey, { attempt, ms: 0 })
      else await this.failWaiting(jobId, 100500006, `job did not finish after ${this.d.maxAttempts} attempts`, { attempt, ms: 0 })
      this.endRun(jobId)
      return null
    }
    const typed = decodeJob(job)
    if (typeof typed === 'string') {
      await this.failWaiting(jobId, 100403000, typed, { attempt, ms: 0 })
      this.endRun(jobId)
      return null
    }
    const run = new ActiveRun(this, typed, attempt)
    this.runs.set(jobId, run)
    if (this.endedIds.has(jobId) && await this.endedElsewhere(jobId)) return null
    this.emit('running', { job: ref(job), attempt })
    if (this.d.eta) {
      run.expectedMs = await this.d.eta.expectedMs(typed).catch(() => null)
      const left = remainingMs(run.expectedMs, 0, 0)
      await this.write(jobId, () => this.d.store.setProgress(jobId, job.progress, left === null ? null : Date.now() + left)).catch(() => {})
    }
    return run
  }

  /** Ends a job that is not (or no longer) running here: an enqueue failure, BullMQ giving up. A run of it
   *  in this process is aborted ('ended'). */
  async fail(jobId: string, errorCode: ErrorCode, message: string): Promise<boolean> {
    const run = this.runs.get(jobId)
    if (run) return run.fail(errorCode, message, 'ended')
    return this.failWaiting(jobId, errorCode, message, null)
  }

  private async failWaiting(jobId: string, errorCode: ErrorCode, message: string, run: RunInfo | null): Promise<boolean> {
    const job = await this.d.store.getJob(jobId)
    if (!job) return false
    const ok = await this.write(jobId, () => this.d.store.failJob(jobId, errorCode, message))
    if (ok) {
      this.d.log.warn({ job: jobId, code: errorCode, msg: message }, 'job failed')
      this.emit('failed', { job: ref(job), errorCode, message, run })
    }
    return ok
  }

  /** Cancels a job: out of the queue if waiting, ERROR + refund in the store, `canceled`, its run here aborted.
   *  False when the job had already ended (or does not exist). */
  async cancel(jobId: string, reason: { errorCode: ErrorCode; message: string }): Promise<boolean> {
    await this.d.queue.remove(jobId).catch(() => false)
    const run = this.runs.get(jobId)
    const job = run?.job ?? await this.d.store.getJob(jobId)
    if (!job) return false
    const ok = await this.write(jobId, () => this.d.store.failJob(jobId, reason.errorCode, reason.message, 'canceled'))
    if (!ok) return false
    const info = run?.end('canceled', new RunAborted('ended', `job canceled: ${reason.message}`)) ?? null
    this.d.log.info({ job: jobId, code: reason.errorCode }, 'job canceled')
    this.emit('canceled', { job: ref(job), errorCode: reason.errorCode, message: reason.message, run: info })
    return true
  }

  /** The job was ended by another process (a cancel that reached a gateway or another HTTP process): its run
   *  here, if any, is aborted at once and ends without another write ('canceled', or 'failed' / 'completed' as
   *  the store says). True when a run here was ended. The store is asked first: only an ended job is stopped. */
  async endedElsewhere(jobId: string): Promise<boolean> {
    const run = this.runs.get(jobId)
    if (!run) {
      // a run may be starting right now (start() read the job before it ended): it checks this on registering
      clearTimeout(this.endedIds.get(jobId))
      this.endedIds.set(jobId, setTimeout(() => this.endedIds.delete(jobId), 60_000).unref())
      return false
    }
    const st = await this.d.store.jobStatus(jobId)
    if (!st || st.status === 'CONVERTING') return false
    const state = st.status === 'COMPLETED' ? 'completed' : st.errorCode === CANCELED_CODE ? 'canceled' : 'failed'
    const info = run.end(state, new RunAborted('ended', `job ended elsewhere (${state})`))
    if (info) this.d.log.info({ job: jobId, state }, 'run stopped: the job ended in another process')
    this.changed(jobId)
    return !!info
  }

  /** Crash recovery at start: every CONVERTING job back into the queue (a shared queue ignores ids it holds). */
  async recover(): Promise<number> {
    const jobs = await this.d.store.jobsByStatus('CONVERTING')
    for (const job of jobs) await this.d.queue.enqueue(job.id, { keyId: job.keyId, force: true })
    return jobs.length
  }

  /** Puts a job whose run this process released back into the queue (an engine thread that died under it, on the
   *  in-process queue: server/jobs/runner.ts); its next start counts the attempt. */
  async requeue(jobId: string): Promise<void> {
    const job = await this.d.store.getJob(jobId)
    if (job?.status === 'CONVERTING' && !this.runs.has(jobId)) await this.d.queue.enqueue(jobId, { keyId: job.keyId, force: true })
  }

  /** Jobs whose result is stored but that no process completed within `staleMs` (their delivery was cut by the
   *  crash of the process delivering it: a shared queue no longer holds them) go back into the queue, so that a
   *  worker delivers and completes them. Returns how many. */
  async redeliverStale(staleMs: number): Promise<number> {
    let n = 0
    for (const id of await this.d.store.staleResults(Date.now() - staleMs)) {
      if (this.runs.has(id) || this.deliveries.has(id)) continue
      const job = await this.d.store.getJob(id)
      if (!job) continue
      await this.d.queue.enqueue(id, { keyId: job.keyId, force: true })
      n++
    }
    if (n) this.d.log.warn({ jobs: n }, 'stored results nobody delivered: queued again')
    return n
  }

  /** Stopping: no new runs; every run's signal is aborted ('shutdown'), its runner releases the job; every
   *  delivery stops (its job stays CONVERTING with its result, delivered again by the next start). */
  shutdown(): void {
    this.stopping = true
    for (const run of this.runs.values()) run.abort(new RunAborted('shutdown', 'shutting down'))
    for (const d of this.deliveries.values()) d.stop.abort()
  }

  /** A graceful stop (SIGTERM, server/plugins/lifecycle.ts): no new runs from now; the runs and deliveries of
   *  this process go on until they end or `graceMs` passes; then shutdown() (what is left is released: its next
   *  start counts no attempt) and drain(). Resolves how many runs and deliveries were cut at the deadline. */
  async finish(graceMs: number): Promise<number> {
    this.stopping = true
    const end = Date.now() + graceMs
    while ((this.runs.size || this.deliveries.size) && Date.now() < end) await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, end - Date.now()))))
    const cut = this.runs.size + this.deliveries.size
    this.shutdown()
    await this.drain()
    return cut
  }

  /** Stopping (finish() or shutdown() called): no new runs start in this process. */
  get draining(): boolean { return this.stopping }

  /** Keeps the job rows of this process's runs fresh (updated_at), so that the queue reconciler
   *  (server/queue/reconcile.ts) knows them running while a wiped queue no longer holds them. */
  async touchRunning(): Promise<void> {
    for (const run of [...this.runs.values()]) await this.d.store.setProgress(run.job.id, run.writtenProgress).catch(() => {})
  }

  /** Resolves when every delivery of this process has settled (after shutdown(): soon). */
  async drain(): Promise<void> {
    await Promise.all([...this.deliveries.values()].map((d) => d.done))
    await Promise.all(this.runLogWrites)
  }

  /** Jobs running in this process now. */
  get running(): number { return this.runs.size }

  /** Results this process is delivering now. */
  get delivering(): number { return this.deliveries.size }

  // --- called by ActiveRun -----------------------------------------------------------------------------------

  /** @internal */
  runEnded(run: ActiveRun): void {
    if (this.runs.get(run.job.id) === run) this.runs.delete(run.job.id)
    if (run.state !== 'released') this.endRun(run.job.id)   // a release: runReleased() says how
  }

  /** The run log's row of a run of this process goes (its run ended here; server/store/job-runs.ts). */
  private endRun(jobId: string): void {
    this.runLog(jobId, this.d.store.runs.end(jobId, this.runner))
  }

  /** A run log write, awaited by drain() (a shutdown's releases are written before the process exits). */
  private runLog(jobId: string, write: Promise<void>): void {
    const p = write.catch((err) => this.d.log.warn({ err, job: jobId }, 'run log not updated')).finally(() => this.runLogWrites.delete(p))
    this.runLogWrites.add(p)
  }

  /** @internal */
  runProgress(run: ActiveRun, progress: number): Promise<void> {
    let etaAt: number | null | undefined
    if (this.d.eta) {
      const left = remainingMs(run.expectedMs, run.elapsedMs, progress)
      etaAt = left === null ? null : Date.now() + left
    }
    return this.write(run.job.id, () => this.d.store.setProgress(run.job.id, progress, etaAt)).then(
      () => this.emit('progress', { job: ref(run.job), progress }),
      () => {},
    )
  }

  /** @internal The result is stored: record it (from here the job can only complete), end the run, then
   *  complete the job now or after its delivery. False when the job had ended meanwhile (no delivery then). */
  async runComplete(run: ActiveRun, resultKey: string, deliver?: Deliver): Promise<boolean> {
    const id = run.job.id
    let stored = false
    try {
      stored = await this.write(id, () => this.d.store.storeResult(id, resultKey))
    } catch (err) {
      // the store could not say: the run ends without an outcome (the job stays CONVERTING for a retry)
      run.release('retry')
      throw err
    }
    if (!stored) {
      // ended elsewhere (a cancel this process did not hear of): no delivery, the run ends as the store says
      const st = await this.d.store.jobStatus(id).catch(() => null)
      run.end(st?.status === 'COMPLETED' ? 'completed' : st?.errorCode === CANCELED_CODE ? 'canceled' : 'failed', new RunAborted('ended', 'job ended elsewhere'))
      return false
    }
    const info = run.end('completed')
    if (!info) return false
    if (!deliver) return this.completeStored(ref(run.job), resultKey, info, run.job)
    const stop = new AbortController()
    const deadline = new AbortController()
    const timer = setTimeout(() => deadline.abort(new Error('delivery deadline')), this.d.deliveryDeadlineMs ?? 300_000)
    const signal = AbortSignal.any([stop.signal, deadline.signal])
    const done = (async () => {
      try {
        await deliver(signal)
      } catch (err) {
        this.d.log.warn({ err, job: id }, 'delivery failed; the result stays at res_url')
      }
      // stopped by shutdown: the job keeps its result and stays CONVERTING; the next start delivers again
      if (!stop.signal.aborted) await this.completeStored(ref(run.job), resultKey, info, run.job).catch((err) => this.d.log.error({ err, job: id }, 'job not completed'))
    })().finally(() => {
      clearTimeout(timer)
      this.deliveries.delete(id)
    })
    this.deliveries.set(id, { stop, done })
    return true
  }

  private async completeStored(job: JobRef, resultKey: string, info: RunInfo, typed?: TypedJob): Promise<boolean> {
    const ok = await this.write(job.id, () => this.d.store.completeJob(job.id, resultKey))
    if (ok) {
      this.emit('completed', { job, resultKey, run: info, latencyMs: Math.max(0, Date.now() - job.createdAt) })
      if (typed && info.ms > 0) this.d.eta?.record(typed, info.ms).catch((err) => this.d.log.warn({ err, job: job.id }, 'throughput not recorded'))
    }
    return ok
  }

  /** @internal */
  async runFail(run: ActiveRun, info: RunInfo, errorCode: ErrorCode, message: string): Promise<boolean> {
    // the job timeout is the input's fault unless the box ran the job slowly (server/jobs/refund.ts)
    const timedOut = errorCode === 100500007 && run.signal.reason instanceof RunAborted && run.signal.reason.why === 'timeout'
    // the expected time read again when the run started without one (the engine was still loading then)
    const expectedMs = timedOut ? run.expectedMs ?? await this.d.eta?.expectedMs(run.job).catch(() => null) ?? null : null
    const cause = timedOut ? timeoutCause({ progress: run.writtenProgress, elapsedMs: info.ms, expectedMs }) : 'failed'
    const ok = await this.write(run.job.id, () => this.d.store.failJob(run.job.id, errorCode, message, cause))
    if (ok) {
      this.d.log.warn({ job: run.job.id, code: errorCode, msg: message }, 'job failed')
      this.emit('failed', { job: ref(run.job), errorCode, message, run: info })
    }
    return ok
  }

  /** @internal */
  runReleased(run: ActiveRun, info: RunInfo, reason: 'retry' | 'shutdown'): void {
    this.emit('released', { job: ref(run.job), reason, run: info })
    // stopped by this process's shutdown: not the job's crash, its next start does not count (server/store/job-runs.ts)
    this.runLog(run.job.id, reason === 'shutdown' ? this.d.store.runs.release(run.job.id, this.runner) : this.d.store.runs.end(run.job.id, this.runner))
    // back in the queue: its expected finish no longer holds (the next start writes a new one)
    if (this.d.eta) void this.write(run.job.id, () => this.d.store.setProgress(run.job.id, run.writtenProgress, null)).catch(() => {})
  }

  /** @internal */
  get timeoutMs(): number { return this.d.jobTimeoutMs }
}

class ActiveRun implements Run {
  private readonly controller = new AbortController()
  private readonly t0 = performance.now()
  private readonly timer: NodeJS.Timeout
  private lastWrite = 0
  private lastPct = -1
  state: RunState = 'running'
  /** Expected run time from the measured throughput (eta.ts), null when unknown. */
  expectedMs: number | null = null

  constructor(private readonly owner: JobLifecycle, readonly job: TypedJob, readonly attempt: number) {
    const ms = owner.timeoutMs
    this.timer = setTimeout(() => this.abort(new RunAborted('timeout', `job exceeded ${ms} ms`)), ms)
  }

  get signal(): AbortSignal { return this.controller.signal }
  get elapsedMs(): number { return performance.now() - this.t0 }
  /** The progress stored for the job now (the last one this run wrote, else the job's). */
  get writtenProgress(): number { return this.lastPct >= 0 ? this.lastPct : this.job.progress }
  get ended(): boolean { return this.state !== 'running' }
  get stopped(): boolean {
    return this.ended || (this.signal.reason instanceof RunAborted && this.signal.reason.why !== 'timeout')
  }

  abort(reason: RunAborted): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason)
  }

  /** Ends the run (once) in `state`; returns its RunInfo, or null if it had ended already. */
  end(state: Exclude<RunState, 'running'>, abortWith?: RunAborted): RunInfo | null {
    if (this.state !== 'running') return null
    this.state = state
    clearTimeout(this.timer)
    this.owner.runEnded(this)
    if (abortWith) this.abort(abortWith)
    return { attempt: this.attempt, ms: performance.now() - this.t0 }
  }

  progress(pct: number): Promise<void> {
    if (this.ended) return Promise.resolve()
    const p = Math.max(0, Math.min(99, Math.floor(pct)))
    const now = Date.now()
    if (p <= this.lastPct || now - this.lastWrite < PROGRESS_EVERY_MS) return Promise.resolve()
    this.lastPct = p
    this.lastWrite = now
    return this.owner.runProgress(this, p)
  }

  complete(resultKey: string, deliver?: Deliver): Promise<boolean> {
    return this.ended ? Promise.resolve(false) : this.owner.runComplete(this, resultKey, deliver)
  }

  fail(errorCode: ErrorCode, message: string, abort?: 'ended'): Promise<boolean> {
    const info = this.end('failed', abort ? new RunAborted('ended', message) : undefined)
    return info ? this.owner.runFail(this, info, errorCode, message) : Promise.resolve(false)
  }

  release(reason: 'retry' | 'shutdown'): void {
    const info = this.end('released')
    if (info) this.owner.runReleased(this, info, reason)
  }
}

/** Settles a run whose signal was aborted: a timeout fails it (100500007), a shutdown releases it, a run
 *  ended elsewhere (cancel / fail) is left as it is. */
export async function settleAborted(run: Run): Promise<void> {
  if (run.ended) return
  const why = run.signal.reason instanceof RunAborted ? run.signal.reason : null
  if (why?.why === 'timeout') await run.fail(100500007, why.message)
  else if (why?.why === 'shutdown') run.release('shutdown')
  else await run.fail(100500000, 'job aborted')
}
