/**
 * The webhook delivery loop of one process: leases due deliveries from the outbox (server/store/webhooks.ts),
 * POSTs each through the SSRF-safe client (server/fetch/post.ts), signed (./signing.ts), and records the answer:
 *   2xx -> delivered; 410 -> failed (the receiver asked to stop); a URL the outbound rule refuses for good
 *   (port, scheme: server/fetch/policy.ts) -> failed at once; anything else (other status, timeout, refused
 *   connection, blocked address, a name that does not resolve) -> retried with exponential backoff and jitter
 *   until the retry window (LUCENT_WEBHOOK_MAX_AGE_MS, from the event or its last replay) has passed; the last
 *   try is at the window's end. Replays are bounded and a replay during an attempt is kept (server/store/webhooks.ts).
 * Body: `{type, timestamp, data}` with `data` = the job's task-status answer at the time of the attempt (links
 * stay valid); `webhook-id` is the delivery's id, the same on every attempt and replay.
 * Isolation: at most LUCENT_WEBHOOK_CONCURRENCY POSTs in flight, LUCENT_WEBHOOK_KEY_CONCURRENCY per key, each
 * bounded by LUCENT_WEBHOOK_TIMEOUT_MS; jobs never wait on deliveries (the outbox row is written by the store).
 * Leases outlive one attempt (2 x timeout + 5 s): a process killed mid-attempt leaves a row that another process
 * (or this one after a restart) claims again once the lease is over.
 */
import crypto from 'node:crypto'
import type { WebhookSettings } from '../config.js'
import type { OutboundSettings } from '../fetch/policy.js'
import type { JobStatusRow, Store } from '../store/types.js'
import type { Delivery, DeliveryOutcome, WebhookEvent } from '../store/webhooks.js'
import type { TaskStatusData } from '../jobs/status.js'
import { FetchError } from '../fetch/index.js'
import { safePost } from '../fetch/post.js'
import { webhookHeaders } from './signing.js'
import { obsOf } from '../observability/context.js'

export interface DelivererDeps {
  store: Store
  /** The job's task-status answer (the route's own builder): the payload's `data`. */
  answer(job: JobStatusRow): TaskStatusData | Promise<TaskStatusData>
  settings: WebhookSettings
  fetchAllow: readonly string[]
  /** Ports and DNS limits of user-named URLs (server/fetch/policy.ts); default: this process's environment. */
  outbound?: OutboundSettings
  log: { warn(o: object, msg: string): void; error(o: object, msg: string): void }
}

/** Delay before retry number `attempts` (1 = the first retry): base * 2^(n-1), at most max, with jitter
 *  (between half and all of it). */
export function backoffMs(attempts: number, base: number, max: number, rand = Math.random): number {
  const d = Math.min(max, base * 2 ** Math.min(30, Math.max(0, attempts - 1)))
  return Math.round(d / 2 + rand() * (d / 2))
}

/** A final ERROR event is sent as job.canceled when the job's answer says it was canceled. */
export function eventOf(d: Pick<Delivery, 'event'>, data: TaskStatusData & { reason?: unknown }): WebhookEvent {
  if (d.event === 'job.failed' && data.reason === 'canceled') return 'job.canceled'
  return d.event
}

export class WebhookDeliverer {
  readonly owner = `${process.pid}:${crypto.randomBytes(6).toString('hex')}`
  private readonly perKey = new Map<string, number>()
  private readonly inflight = new Set<Promise<void>>()
  private readonly abort = new AbortController()
  private running = false
  private loop: Promise<void> | null = null
  private wake: (() => void) | null = null
  private pendingWake = false

  constructor(private readonly d: DelivererDeps) {}

  start(): void {
    if (this.running) return
    this.running = true
    this.loop = this.run()
  }

  /** Looks for due deliveries now (a job of this process ended, a slot came free). */
  nudge(): void {
    this.pendingWake = true
    this.wake?.()
  }

  /** Stops claiming, aborts the POSTs in flight and gives their leases back (they are sent again later). */
  async stop(): Promise<void> {
    if (!this.running) return
    this.running = false
    this.abort.abort()
    this.wake?.()
    await this.loop
    await Promise.allSettled([...this.inflight])
  }

  private get total(): number { return this.inflight.size }

  private async run(): Promise<void> {
    while (this.running) {
      this.pendingWake = false
      try {
        await this.tick()
      } catch (err) {
        if (this.running) this.d.log.warn({ err }, 'webhook claim failed')
      }
      if (!this.running) break
      if (this.pendingWake) continue
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, this.d.settings.pollMs)
        function done() { clearTimeout(t); resolve() }
        this.wake = () => { this.wake = null; done() }
      })
      this.wake = null
    }
  }

  private async tick(): Promise<void> {
    const s = this.d.settings
    const free = s.concurrency - this.total
    if (free <= 0) return
    const full = [...this.perKey].filter(([, n]) => n >= s.keyConcurrency).map(([k]) => k)
    const rows = await this.d.store.webhooks.claim({
      owner: this.owner, now: Date.now(), leaseMs: 2 * s.timeoutMs + 5000, limit: free, perKey: s.keyConcurrency, excludeKeys: full,
    })
    for (const row of rows) {
      const n = this.perKey.get(row.keyId) ?? 0
      if (!this.running || n >= s.keyConcurrency) {
        await this.d.store.webhooks.release(row.id, this.owner).catch(() => {})
        continue
      }
      this.perKey.set(row.keyId, n + 1)
      const p: Promise<void> = this.send(row).catch((err) => this.d.log.error({ err, delivery: row.id }, 'webhook delivery failed')).finally(() => {
        this.inflight.delete(p)
        const m = (this.perKey.get(row.keyId) ?? 1) - 1
        if (m <= 0) this.perKey.delete(row.keyId)
        else this.perKey.set(row.keyId, m)
        this.nudge()
      })
      this.inflight.add(p)
    }
  }

  /** One attempt of a leased delivery. */
  private async send(row: Delivery): Promise<void> {
    const w = this.d.store.webhooks
    const s = this.d.settings
    const job = await this.d.store.jobStatus(row.jobId)
    const { secret } = await w.keyWebhook(row.keyId)
    const now = Date.now()
    const settle = (o: Omit<DeliveryOutcome, 'at'>) => w.settle(row.id, this.owner, { ...o, at: Date.now() })
    if (!job || !secret) {
      await settle({ status: 'failed', event: row.event, lastStatus: null, lastError: !job ? 'the job no longer exists' : 'the key has no webhook secret', nextAt: null })
      return
    }
    if (row.event === 'job.progress' && job.status !== 'CONVERTING') {
      await settle({ status: 'failed', event: row.event, lastStatus: null, lastError: 'the job has ended: progress no longer sent', nextAt: null })
      return
    }
    const data = await this.d.answer(job)
    const event = eventOf(row, data)
    if (!row.events.includes(event)) {
      await settle({ status: 'failed', event, lastStatus: null, lastError: `${event} not subscribed`, nextAt: null })
      return
    }
    const body = JSON.stringify({ type: event, timestamp: new Date(now).toISOString(), data })
    let status: number | null = null
    let error: string | null = null
    let final = false
    try {
      // the submitting request's X-Request-Id (server/observability/context.ts), so a receiver's logs join ours
      const reqId = obsOf((await this.d.store.getJob(row.jobId).catch(() => null))?.params).request_id
      const headers = { ...webhookHeaders(secret, row.id, body, now), ...(reqId ? { 'x-request-id': reqId } : {}) }
      const r = await safePost(row.url, body, headers, {
        allow: this.d.fetchAllow, ...this.d.outbound, maxBytes: 64 * 1024, connectTimeoutMs: s.timeoutMs, headersTimeoutMs: s.timeoutMs, bodyTimeoutMs: s.timeoutMs,
        maxRedirects: 0, totalTimeoutMs: s.timeoutMs,
      }, this.abort.signal)
      status = r.status
    } catch (e) {
      if (!this.running) {
        await w.release(row.id, this.owner).catch(() => {}) // stopping: not an attempt, sent again later
        return
      }
      error = e instanceof FetchError ? `${e.reason}: ${e.message}` : String((e as Error)?.message ?? e)
      // the URL itself is refused (scheme, port): no later attempt can succeed (an address may change: retried)
      final = e instanceof FetchError && (e.reason === 'blocked_port' || e.reason === 'unsupported_scheme' || e.reason === 'invalid_url')
    }
    const at = Date.now()
    if (status !== null && status >= 200 && status <= 299) {
      await settle({ status: 'delivered', event, lastStatus: status, lastError: null, nextAt: null })
    } else if (final) {
      await settle({ status: 'failed', event, lastStatus: null, lastError: error, nextAt: null })
    } else if (status === 410) {
      await settle({ status: 'failed', event, lastStatus: status, lastError: 'the receiver answered 410 Gone: no more attempts', nextAt: null })
    } else {
      const end = row.retryFrom + s.maxAgeMs
      const next = at + backoffMs(row.attempts + 1, s.backoffMs, s.backoffMaxMs)
      if (at >= end) await settle({ status: 'failed', event, lastStatus: status, lastError: error ?? `HTTP ${status}; retry window over`, nextAt: null })
      else await settle({ status: 'pending', event, lastStatus: status, lastError: error ?? `HTTP ${status}`, nextAt: Math.min(next, end) })
    }
  }
}
