/**
 * Prometheus metrics (prom-client, one registry per app). Each process exposes what it sees at GET /metrics:
 * - lucent_queue_depth{state}            waiting / active / delayed / failed (shared queue: same on every process)
 * - lucent_queue_backlog_seconds         estimated engine seconds the CONVERTING jobs still need (server/jobs/backlog.ts;
 *                                        the workers' autoscaling signal) ; lucent_queue_backlog_unestimated_jobs: those
 *                                        without a measured speed (same on every process: read from the store)
 * - lucent_job_duration_seconds{model,status}  run time of jobs this process ran (worker / all roles)
 * - lucent_job_latency_seconds{model}     submission -> COMPLETED (queue wait included) of jobs this process completed
 * - lucent_jobs_total{model,status}      runs this process finished (COMPLETED / ERROR / CANCELED / RETRY)
 * - lucent_workers{backend}              live workers (registry) ; lucent_worker_concurrency / lucent_worker_running
 * - lucent_worker_utilisation            sum(running) / sum(concurrency) over live workers (0..1)
 * - lucent_fetch_errors_total{kind}      user URLs that could not be fetched (gateway)
 * - lucent_coins_debited_total           coins debited at submission (gateway)
 * - lucent_jobs_submitted_total{kind}    accepted submissions (gateway)
 * - lucent_http_requests_total{method,route,status}    answers of this process's public port (route templates)
 * - lucent_http_request_duration_seconds{method,route,code}  their latency (code: 2xx, 4xx, 5xx, ...)
 * - lucent_queue_wait_seconds{kind}      submission -> first run start, of the jobs this process started
 * - lucent_refunds_total{reason}         jobs ended with a refund due under the money policy: service / input / canceled
 * - lucent_engine_call_seconds{op,model,outcome}  engine calls (enhance / frames / interp) of this process's pool
 * - lucent_engine_init_seconds           engine load (addon + backend + adapter) of this process
 * - lucent_model_warmup_seconds{model}   LUCENT_WARMUP_MODELS: one small enhance per model (load + tune + run)
 * - lucent_engine_info{backend,adapter,f16,cpu_isa}  1, the engine this process runs (none on a gateway)
 * plus prom-client's default process metrics (lucent_process_*, lucent_nodejs_*).
 * docs/observability.md lists them with example alerts.
 * The job families, coins and submissions are counted from the job lifecycle's events (`watch`).
 */
import { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client'
import type { JobLifecycle, RunInfo } from './jobs/lifecycle.js'
import type { WorkerInfo } from './roles/registry.js'
import type { Backlog } from './jobs/backlog.js'
import { failureCause } from './jobs/refund.js'

const JOB_FAMILIES = ['lucent_job_duration_seconds', 'lucent_job_latency_seconds', 'lucent_jobs_total']

export interface MetricsSources {
  queueCounts: () => Promise<{ waiting: number; active: number; delayed?: number; failed?: number }>
  workers: () => Promise<WorkerInfo[]>
  /** The queue's backlog in engine seconds (server/jobs/backlog.ts); absent: no backlog gauges. */
  backlog?: () => Promise<Backlog>
}

export class Metrics {
  readonly registry = new Registry()
  readonly jobDuration: Histogram<'model' | 'status'>
  readonly jobs: Counter<'model' | 'status'>
  readonly jobLatency: Histogram<'model'>
  readonly fetchErrors: Counter<'kind'>
  readonly coinsDebited: Counter
  readonly submitted: Counter<'kind'>
  readonly httpRequests: Counter<'method' | 'route' | 'status'>
  readonly httpDuration: Histogram<'method' | 'route' | 'code'>
  readonly queueWait: Histogram<'kind'>
  readonly refunds: Counter<'reason'>
  readonly engineCall: Histogram<'op' | 'model' | 'outcome'>
  readonly engineInit: Gauge
  readonly modelWarmup: Gauge<'model'>
  readonly engineInfo: Gauge<'backend' | 'adapter' | 'f16' | 'cpu_isa'>

  constructor(src: MetricsSources) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'lucent_' })
    new Gauge({
      name: 'lucent_queue_depth', help: 'Jobs in the shared queue by state', labelNames: ['state'], registers,
      async collect() {
        const c = await src.queueCounts().catch(() => null)
        if (!c) return
        this.set({ state: 'waiting' }, c.waiting)
        this.set({ state: 'active' }, c.active)
        this.set({ state: 'delayed' }, c.delayed ?? 0)
        this.set({ state: 'failed' }, c.failed ?? 0)
      },
    })
    const backlog = src.backlog
    if (backlog) {
      new Gauge({
        name: 'lucent_queue_backlog_seconds', help: 'Estimated engine seconds of work the queued and running jobs still need (measured speed per model x size x share not done)', registers,
        async collect() { const b = await backlog().catch(() => null); if (b) this.set(b.seconds) },
      })
      new Gauge({
        name: 'lucent_queue_backlog_unestimated_jobs', help: 'Queued and running jobs without a measured speed for their model (not in lucent_queue_backlog_seconds)', registers,
        async collect() { const b = await backlog().catch(() => null); if (b) this.set(b.unestimated) },
      })
    }
    let workersCache: Promise<WorkerInfo[]> | null = null
    const workers = () => (workersCache ??= src.workers().catch(() => [] as WorkerInfo[]).finally(() => setTimeout(() => { workersCache = null }, 50)))
    new Gauge({
      name: 'lucent_workers', help: 'Live workers by engine backend', labelNames: ['backend'], registers,
      async collect() {
        this.reset()
        for (const w of await workers()) this.inc({ backend: w.backend })
      },
    })
    new Gauge({
      name: 'lucent_worker_concurrency', help: 'Sum of the live workers\' concurrency (job slots)', registers,
      async collect() { this.set((await workers()).reduce((s, w) => s + w.concurrency, 0)) },
    })
    new Gauge({
      name: 'lucent_worker_running', help: 'Jobs running on live workers', registers,
      async collect() { this.set((await workers()).reduce((s, w) => s + w.running, 0)) },
    })
    new Gauge({
      name: 'lucent_worker_utilisation', help: 'Busy job slots / all job slots over live workers (0..1)', registers,
      async collect() {
        const ws = await workers()
        const slots = ws.reduce((s, w) => s + w.concurrency, 0)
        this.set(slots ? ws.reduce((s, w) => s + w.running, 0) / slots : 0)
      },
    })
    this.jobDuration = new Histogram({
      name: 'lucent_job_duration_seconds', help: 'Job run time on this process by model and outcome', labelNames: ['model', 'status'], registers,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800],
    })
    this.jobLatency = new Histogram({
      name: 'lucent_job_latency_seconds', help: 'Submission to completion (queue wait + run) by model', labelNames: ['model'], registers,
      buckets: [0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600],
    })
    this.jobs = new Counter({ name: 'lucent_jobs_total', help: 'Jobs finished by this process', labelNames: ['model', 'status'], registers })
    this.fetchErrors = new Counter({ name: 'lucent_fetch_errors_total', help: 'User URLs that could not be fetched', labelNames: ['kind'], registers })
    this.coinsDebited = new Counter({ name: 'lucent_coins_debited_total', help: 'Coins debited at submission', registers })
    this.submitted = new Counter({ name: 'lucent_jobs_submitted_total', help: 'Accepted job submissions', labelNames: ['kind'], registers })
    this.httpRequests = new Counter({ name: 'lucent_http_requests_total', help: 'HTTP answers of the public port by route template and status', labelNames: ['method', 'route', 'status'], registers })
    this.httpDuration = new Histogram({
      name: 'lucent_http_request_duration_seconds', help: 'HTTP request latency by route template and status class', labelNames: ['method', 'route', 'code'], registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    })
    this.queueWait = new Histogram({
      name: 'lucent_queue_wait_seconds', help: 'Submission to the first run start of jobs started by this process', labelNames: ['kind'], registers,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600],
    })
    this.refunds = new Counter({ name: 'lucent_refunds_total', help: 'Jobs ended with a refund due under the money policy, by cause (service, input, canceled)', labelNames: ['reason'], registers })
    this.engineCall = new Histogram({
      name: 'lucent_engine_call_seconds', help: 'Engine calls of this process (enhance: a photo, decode + network + encode; frames / interp: a video batch)', labelNames: ['op', 'model', 'outcome'], registers,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    })
    this.engineInit = new Gauge({ name: 'lucent_engine_init_seconds', help: 'Time the engine took to load in this process (addon, backend, adapter)', registers })
    this.modelWarmup = new Gauge({ name: 'lucent_model_warmup_seconds', help: 'LUCENT_WARMUP_MODELS: time of the warm-up enhance per model (load, tune, run)', labelNames: ['model'], registers })
    this.engineInfo = new Gauge({ name: 'lucent_engine_info', help: 'The engine this process runs (1)', labelNames: ['backend', 'adapter', 'f16', 'cpu_isa'], registers })
  }

  /** One answer of the public port: `route` is the route's template ('unmatched' for unknown URLs). */
  http(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) })
    this.httpDuration.observe({ method, route, code: `${Math.floor(status / 100)}xx` }, seconds)
  }

  /** The engine this process loaded. */
  engineLoaded(info: { backend?: string; adapter?: string; f16?: boolean; cpuIsa?: string } | undefined, seconds: number): void {
    this.engineInit.set(seconds)
    if (!info || !info.backend) return
    this.engineInfo.reset()
    this.engineInfo.set({ backend: info.backend, adapter: info.adapter ?? '', f16: String(Boolean(info.f16)), cpu_isa: info.cpuIsa ?? '' }, 1)
  }

  /** Counts from the lifecycle's events: submissions and coins (where jobs are submitted), and the runs of
   *  this process (duration and outcome; completion latency since submission). */
  watch(jobs: Pick<JobLifecycle, 'on'>): void {
    const ran = (model: string, status: string, run: RunInfo | null) => {
      if (!run) return // ended without running here (enqueue failure, BullMQ giving up, cancel while waiting)
      this.jobDuration.observe({ model, status }, run.ms / 1000)
      this.jobs.inc({ model, status })
    }
    jobs.on('queued', (e) => {
      this.coinsDebited.inc(e.coins)
      this.submitted.inc({ kind: e.job.kind })
    })
    jobs.on('completed', (e) => {
      ran(e.job.model, 'COMPLETED', e.run)
      this.jobLatency.observe({ model: e.job.model }, e.latencyMs / 1000)
    })
    jobs.on('running', (e) => {
      if (e.attempt === 1) this.queueWait.observe({ kind: e.job.kind }, Math.max(0, Date.now() - e.job.createdAt) / 1000)
    })
    jobs.on('failed', (e) => {
      ran(e.job.model, 'ERROR', e.run)
      this.refunds.inc({ reason: failureCause('failed', e.errorCode) })
    })
    jobs.on('canceled', (e) => {
      ran(e.job.model, 'CANCELED', e.run)
      this.refunds.inc({ reason: 'canceled' })
    })
    jobs.on('released', (e) => ran(e.job.model, 'RETRY', e.run))
  }

  text(): Promise<string> { return this.registry.metrics() }

  /** The families of jobs run by this process (an embedded cluster's primary: its HTTP children expose them). */
  async jobsText(): Promise<string> {
    return (await Promise.all(JOB_FAMILIES.map((n) => this.registry.getSingleMetricAsString(n)))).join('\n') + '\n'
  }

  /** An embedded cluster's HTTP child runs no jobs: it shows the primary's job families instead of its own. */
  dropJobFamilies(): void {
    for (const n of JOB_FAMILIES) this.registry.removeSingleMetric(n)
  }
  get contentType(): string { return this.registry.contentType }
}
