/**
 * Persistence of webhooks (interface; SQLite in webhooks-sqlite.ts, PostgreSQL in webhooks-postgres.ts):
 * - `webhook_keys`: a key's default callback URL and its signing secret (`whsec_<base64>`, Standard Webhooks);
 * - `webhook_subs`: a job's subscription (URL, events), written at submission before the job row;
 * - `webhook_deliveries`: the outbox. A job's final event enters it IN THE SAME TRANSACTION as the job's state
 *   change: a trigger on `jobs.status` (CONVERTING -> COMPLETED | ERROR) copies the job's subscription into a
 *   delivery row, whoever wrote the state (completion, failure, cancel, crash limit). Progress events are added
 *   by the delivery plugin from the lifecycle's `progress` event (best effort).
 * Deliveries are claimed with a lease (owner + lease_until): a process that dies mid-delivery loses its lease and
 * the row is claimed again (delivery at least once, the same id each time).
 * Held subscriptions: a submission writes its subscription `held` before the job exists (so an event of a job
 * that ends at once is not lost) and arms it once the client has its job_id; a job's events while its
 * subscription is held enter the outbox `held` (never sent): a submission that failed after the debit (the queue
 * refused it) drops them with the subscription, so no webhook tells of a job the client never heard of.
 * Replays (the one rule): a replay makes the delivery due again with a new retry window; at most `maxReplays`
 * per delivery (LUCENT_WEBHOOK_MAX_REPLAYS), so no row is kept alive for ever; a replay while an attempt is in
 * flight (leased) is kept (`replay_pending`) and makes the delivery due again when that attempt is settled,
 * whatever its outcome.
 */
export const WEBHOOK_EVENTS = ['job.completed', 'job.failed', 'job.canceled', 'job.progress'] as const
export type WebhookEvent = typeof WEBHOOK_EVENTS[number]
export const DEFAULT_EVENTS: WebhookEvent[] = ['job.completed', 'job.failed', 'job.canceled']

/** pending: to be sent (again); delivered: a 2xx came back; failed: given up (410, or the retry window passed);
 *  held: the submission had not answered yet (never listed, never sent; ./webhooks.ts header). */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'held'

/** Replays per delivery when the caller names no limit (LUCENT_WEBHOOK_MAX_REPLAYS' default). */
export const DEFAULT_MAX_REPLAYS = 5

/** A replay refused: the delivery has been replayed `maxReplays` times. */
export class ReplayLimitError extends Error {
  constructor(readonly id: string, readonly replays: number) {
    super(`delivery ${id} was replayed ${replays} times: no more replays`)
    this.name = 'ReplayLimitError'
  }
}

export interface KeyWebhook { url: string | null; secret: string | null }
export interface WebhookSub { url: string; events: WebhookEvent[] }

export interface Delivery {
  /** The `webhook-id`: `msg_<job id>_end` (final event) or `msg_<job id>_p<decile>` (progress). */
  id: string
  keyId: string
  jobId: string
  event: WebhookEvent
  /** The events the subscription asked for (a final ERROR event resolves to failed or canceled when sent). */
  events: WebhookEvent[]
  url: string
  status: DeliveryStatus
  attempts: number
  nextAt: number | null
  lastStatus: number | null
  lastError: string | null
  lastAt: number | null
  createdAt: number
  deliveredAt: number | null
  /** Start of the retry window (creation, or the last replay). */
  retryFrom: number
  /** Replays so far (at most the configured maximum). */
  replays: number
}

export interface DeliveryOutcome {
  status: DeliveryStatus
  /** The event as sent (a final ERROR event resolved to job.failed or job.canceled). */
  event: WebhookEvent
  lastStatus: number | null
  lastError: string | null
  at: number
  nextAt: number | null
}

export interface WebhookStore {
  keyWebhook(keyId: string): Promise<KeyWebhook>
  /** Sets the key's default URL (null clears it) and/or its secret; returns the result. */
  setKeyWebhook(keyId: string, o: { url?: string | null; secret?: string }): Promise<KeyWebhook>
  /** `held`: written before the submission answers; events wait (status `held`) until arm(). */
  subscribe(jobId: string, keyId: string, sub: WebhookSub, opts?: { held?: boolean }): Promise<void>
  /** The submission answered with the job_id: the subscription and its held deliveries go live. */
  arm(jobId: string): Promise<void>
  /** Drops a job's subscription and deliveries (a submission that did not go through). */
  unsubscribe(jobId: string): Promise<void>
  subscription(jobId: string): Promise<(WebhookSub & { keyId: string; held: boolean }) | null>
  /** Adds a delivery unless one with this id exists; true if added. */
  addDelivery(d: { id: string; keyId: string; jobId: string; event: WebhookEvent; events: WebhookEvent[]; url: string; at: number }): Promise<boolean>
  /** Leases up to `limit` due deliveries (at most `perKey` of one key, none of `excludeKeys`) to `owner`. */
  claim(o: { owner: string; now: number; leaseMs: number; limit: number; perKey: number; excludeKeys: string[] }): Promise<Delivery[]>
  /** Gives a leased delivery back unsent (shutdown, or over the key's concurrency). */
  release(id: string, owner: string): Promise<void>
  /** Records an attempt of a delivery leased to `owner`; false if the lease was lost meanwhile. */
  settle(id: string, owner: string, o: DeliveryOutcome): Promise<boolean>
  /** The key's deliveries, newest first (held ones never). */
  list(keyId: string, o: { limit: number; jobId?: string; status?: DeliveryStatus }): Promise<Delivery[]>
  get(id: string): Promise<Delivery | null>
  /** A delivery of `keyId` due again now (attempts kept, a new retry window from `now`), or, while an attempt of
   *  it is in flight, once that attempt is settled; null if not the key's (or held). Throws ReplayLimitError when
   *  it was replayed `maxReplays` (default DEFAULT_MAX_REPLAYS) times already. */
  replay(id: string, keyId: string, now: number, maxReplays?: number): Promise<Delivery | null>
  /** Drops finished deliveries last touched before `before`, and subscriptions of ended jobs made before it. */
  purge(before: number): Promise<void>
}

/** Events as stored: `,a,b,` (a trigger matches `,event,` with instr/strpos). */
export const eventsColumn = (events: readonly WebhookEvent[]): string => `,${events.join(',')},`
export const parseEvents = (s: string): WebhookEvent[] =>
  s.split(',').filter((e): e is WebhookEvent => (WEBHOOK_EVENTS as readonly string[]).includes(e))

/** The delivery row as both stores read it. */
export interface DeliveryRow {
  id: string; key_id: string; job_id: string; event: string; events: string; url: string; status: DeliveryStatus; attempts: number
  next_at: number | null; last_status: number | null; last_error: string | null; last_at: number | null; created_at: number
  delivered_at: number | null; retry_from: number; replays: number; lease_owner?: string | null; lease_until?: number | null
}

export const toDelivery = (r: DeliveryRow): Delivery => ({
  id: r.id, keyId: r.key_id, jobId: r.job_id, event: r.event as WebhookEvent, events: parseEvents(r.events), url: r.url, status: r.status,
  attempts: r.attempts, nextAt: r.status === 'pending' ? r.next_at : null, lastStatus: r.last_status, lastError: r.last_error, lastAt: r.last_at,
  createdAt: r.created_at, deliveredAt: r.delivered_at, retryFrom: r.retry_from, replays: r.replays ?? 0,
})
