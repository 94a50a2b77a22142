/** Webhooks on SQLite (see ./webhooks.ts): the schema block appended to the store's, and the queries. */
import type Database from 'better-sqlite3'
import { DEFAULT_MAX_REPLAYS, ReplayLimitError, eventsColumn, parseEvents, toDelivery, type Delivery, type DeliveryOutcome, type DeliveryRow, type KeyWebhook, type WebhookStore, type WebhookSub } from './webhooks.js'

/** Due rows a claim looks at, at most, in next_at order (it stops earlier once it has its `limit`). */
const CLAIM_SCAN_MAX = 1000

/** The trigger (also in the schema below): a job's final event into the outbox, `held` while its subscription is. */
const WEBHOOK_TRIGGER_SQLITE = `
CREATE TRIGGER IF NOT EXISTS webhook_job_ended AFTER UPDATE OF status ON jobs
WHEN OLD.status = 'CONVERTING' AND NEW.status IN ('COMPLETED', 'ERROR')
BEGIN
  INSERT OR IGNORE INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
  SELECT 'msg_' || NEW.id || '_end', s.key_id, NEW.id, CASE NEW.status WHEN 'COMPLETED' THEN 'job.completed' ELSE 'job.failed' END,
    s.events, s.url, CASE WHEN s.held = 1 THEN 'held' ELSE 'pending' END, 0, NEW.updated_at, NEW.updated_at, NEW.updated_at
  FROM webhook_subs s
  WHERE s.job_id = NEW.id AND CASE NEW.status
    WHEN 'COMPLETED' THEN instr(s.events, ',job.completed,') > 0
    ELSE instr(s.events, ',job.failed,') > 0 OR instr(s.events, ',job.canceled,') > 0 END;
END;
`

/** Databases made before held subscriptions and bounded replays: their columns and the new trigger. */
function upgrade(db: Database.Database): void {
  db.transaction(() => {
    const cols = (t: string) => db.prepare<[], { name: string }>(`PRAGMA table_info(${t})`).all().map((c) => c.name)
    if (!cols('webhook_subs').includes('held')) db.exec('ALTER TABLE webhook_subs ADD COLUMN held INTEGER NOT NULL DEFAULT 0')
    const d = cols('webhook_deliveries')
    if (!d.includes('replays')) db.exec('ALTER TABLE webhook_deliveries ADD COLUMN replays INTEGER NOT NULL DEFAULT 0')
    if (!d.includes('replay_pending')) db.exec('ALTER TABLE webhook_deliveries ADD COLUMN replay_pending INTEGER NOT NULL DEFAULT 0')
    const trig = db.prepare<[], { sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'webhook_job_ended'").get()
    if (!trig?.sql.includes('s.held')) db.exec(`DROP TRIGGER IF EXISTS webhook_job_ended; ${WEBHOOK_TRIGGER_SQLITE}`)
  }).immediate()
}

/** Appended to the SQLite schema (idempotent). The trigger puts a job's final event into the outbox in the
 *  transaction that ends the job. */
export const WEBHOOK_SCHEMA_SQLITE = `
CREATE TABLE IF NOT EXISTS webhook_keys (
  key_id TEXT PRIMARY KEY REFERENCES keys(id),
  url TEXT,
  secret TEXT,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_subs (
  job_id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  held INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  event TEXT NOT NULL,
  events TEXT NOT NULL,
  url TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at INTEGER,
  lease_owner TEXT,
  lease_until INTEGER,
  last_status INTEGER,
  last_error TEXT,
  last_at INTEGER,
  created_at INTEGER NOT NULL,
  delivered_at INTEGER,
  retry_from INTEGER NOT NULL,
  replays INTEGER NOT NULL DEFAULT 0,
  replay_pending INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries(status, next_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_key ON webhook_deliveries(key_id, created_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_job ON webhook_deliveries(job_id);
${WEBHOOK_TRIGGER_SQLITE}
`

export class SqliteWebhooks implements WebhookStore {
  private s
  private txLease: Database.Transaction<(ids: string[], owner: string, now: number, until: number) => Delivery[]>
  private txArm: Database.Transaction<(jobId: string) => void>

  constructor(db: Database.Database) {
    upgrade(db)
    this.s = {
      key: db.prepare<[string], KeyWebhook>('SELECT url, secret FROM webhook_keys WHERE key_id = ?'),
      upsertKey: db.prepare(`INSERT INTO webhook_keys (key_id, url, secret, updated_at) VALUES (@keyId, @url, @secret, @now)
        ON CONFLICT (key_id) DO UPDATE SET url = CASE WHEN @setUrl THEN @url ELSE url END,
          secret = CASE WHEN @setSecret THEN @secret ELSE secret END, updated_at = @now`),
      sub: db.prepare('INSERT OR REPLACE INTO webhook_subs (job_id, key_id, url, events, created_at, held) VALUES (?, ?, ?, ?, ?, ?)'),
      armSub: db.prepare('UPDATE webhook_subs SET held = 0 WHERE job_id = ?'),
      armDeliveries: db.prepare("UPDATE webhook_deliveries SET status = 'pending' WHERE job_id = ? AND status = 'held'"),
      unsub: db.prepare('DELETE FROM webhook_subs WHERE job_id = ?'),
      unsubDeliveries: db.prepare('DELETE FROM webhook_deliveries WHERE job_id = ?'),
      getSub: db.prepare<[string], { key_id: string; url: string; events: string; held: number }>('SELECT key_id, url, events, held FROM webhook_subs WHERE job_id = ?'),
      add: db.prepare(`INSERT OR IGNORE INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
        VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)`),
      // Due rows in next_at order straight off the (status, next_at) index: no sort, read outside the write lock.
      due: db.prepare<[number], { id: string; key_id: string; lease_until: number | null }>(`SELECT id, key_id, lease_until
        FROM webhook_deliveries INDEXED BY webhook_deliveries_due
        WHERE status = 'pending' AND next_at <= ? ORDER BY next_at`),
      // The lease, by primary key, only if the row is still due and free (another claimer may have taken it).
      lease: db.prepare<[string, number, string, number, number], DeliveryRow>(`UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?
        WHERE id = ? AND status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?) RETURNING *`),
      // a replay asked for during the attempt stays asked for: the row is due as it was
      release: db.prepare('UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL, replay_pending = 0 WHERE id = ? AND lease_owner = ?'),
      // a replay asked for during the attempt: due again now, whatever the attempt's outcome
      settle: db.prepare(`UPDATE webhook_deliveries SET status = CASE WHEN replay_pending = 1 THEN 'pending' ELSE @status END, event = @event,
          attempts = attempts + 1, last_status = @lastStatus, last_error = @lastError, last_at = @at,
          next_at = CASE WHEN replay_pending = 1 THEN @at ELSE @nextAt END, delivered_at = CASE WHEN @status = 'delivered' THEN @at ELSE delivered_at END,
          replay_pending = 0, lease_owner = NULL, lease_until = NULL
        WHERE id = @id AND lease_owner = @owner AND status = 'pending'`),
      list: db.prepare<[string, string | null, string | null, string | null, string | null, number], DeliveryRow>(`SELECT * FROM webhook_deliveries
        WHERE key_id = ? AND (? IS NULL OR job_id = ?) AND (? IS NULL OR status = ?) AND status <> 'held' ORDER BY created_at DESC, id DESC LIMIT ?`),
      get: db.prepare<[string], DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = ?'),
      purgeDeliveries: db.prepare("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND COALESCE(last_at, created_at) < ?"),
      purgeSubs: db.prepare("DELETE FROM webhook_subs WHERE created_at < ? AND job_id NOT IN (SELECT id FROM jobs WHERE status = 'CONVERTING')"),
      // in flight (leased): only remembered, applied by settle; else due now. Both: a new retry window, one more replay.
      replay: db.prepare(`UPDATE webhook_deliveries SET replays = replays + 1, retry_from = @now,
          replay_pending = CASE WHEN lease_owner IS NOT NULL AND lease_until >= @now THEN 1 ELSE 0 END,
          status = CASE WHEN lease_owner IS NOT NULL AND lease_until >= @now THEN status ELSE 'pending' END,
          next_at = CASE WHEN lease_owner IS NOT NULL AND lease_until >= @now THEN next_at ELSE @now END
        WHERE id = @id AND key_id = @keyId AND status <> 'held' AND replays < @max`),
    }
    const s = this.s
    this.txLease = db.transaction((ids, owner, now, until) => {
      const out: Delivery[] = []
      for (const id of ids) {
        const r = s.lease.get(owner, until, id, now, now)
        if (r) out.push(toDelivery(r))
      }
      return out
    })
    this.txArm = db.transaction((jobId) => {
      s.armSub.run(jobId)
      s.armDeliveries.run(jobId)
    })
  }

  async keyWebhook(keyId: string): Promise<KeyWebhook> { return this.s.key.get(keyId) ?? { url: null, secret: null } }
  async setKeyWebhook(keyId: string, o: { url?: string | null; secret?: string }): Promise<KeyWebhook> {
    this.s.upsertKey.run({ keyId, url: o.url ?? null, secret: o.secret ?? null, setUrl: o.url !== undefined ? 1 : 0, setSecret: o.secret !== undefined ? 1 : 0, now: Date.now() })
    return this.keyWebhook(keyId)
  }
  async subscribe(jobId: string, keyId: string, sub: WebhookSub, opts: { held?: boolean } = {}) {
    this.s.sub.run(jobId, keyId, sub.url, eventsColumn(sub.events), Date.now(), opts.held ? 1 : 0)
  }
  async arm(jobId: string) { this.txArm.immediate(jobId) }
  async unsubscribe(jobId: string) {
    this.s.unsub.run(jobId)
    this.s.unsubDeliveries.run(jobId)
  }
  async subscription(jobId: string) {
    const r = this.s.getSub.get(jobId)
    return r ? { keyId: r.key_id, url: r.url, events: parseEvents(r.events), held: r.held === 1 } : null
  }
  async addDelivery(d: Parameters<WebhookStore['addDelivery']>[0]) {
    return this.s.add.run(d.id, d.keyId, d.jobId, d.event, eventsColumn(d.events), d.url, d.at, d.at, d.at).changes === 1
  }
  /** Picks candidates with a plain read (no write lock; WAL readers never block the writer) in index order, at
   *  most CLAIM_SCAN_MAX rows looked at, then leases them by id in one short write transaction. */
  async claim(o: Parameters<WebhookStore['claim']>[0]) {
    const excluded = new Set(o.excludeKeys)
    const perKey = new Map<string, number>()
    const ids: string[] = []
    let seen = 0
    for (const r of this.s.due.iterate(o.now)) {
      if (++seen > CLAIM_SCAN_MAX || ids.length >= o.limit) break
      if ((r.lease_until != null && r.lease_until >= o.now) || excluded.has(r.key_id)) continue
      const n = perKey.get(r.key_id) ?? 0
      if (n >= o.perKey) continue
      perKey.set(r.key_id, n + 1)
      ids.push(r.id)
    }
    return ids.length ? this.txLease.immediate(ids, o.owner, o.now, o.now + o.leaseMs) : []
  }
  async release(id: string, owner: string) { this.s.release.run(id, owner) }
  async settle(id: string, owner: string, o: DeliveryOutcome) {
    return this.s.settle.run({ id, owner, status: o.status, event: o.event, lastStatus: o.lastStatus, lastError: o.lastError, at: o.at, nextAt: o.nextAt }).changes === 1
  }
  async list(keyId: string, o: { limit: number; jobId?: string; status?: string }) {
    const j = o.jobId ?? null
    const st = o.status ?? null
    return this.s.list.all(keyId, j, j, st, st, o.limit).map(toDelivery)
  }
  async get(id: string) {
    const r = this.s.get.get(id)
    return r ? toDelivery(r) : null
  }
  async purge(before: number) {
    this.s.purgeDeliveries.run(before)
    this.s.purgeSubs.run(before)
  }
  async replay(id: string, keyId: string, now: number, maxReplays = DEFAULT_MAX_REPLAYS) {
    if (this.s.replay.run({ id, keyId, now, max: maxReplays }).changes !== 1) {
      const d = await this.get(id)
      if (d && d.keyId === keyId && d.status !== 'held') throw new ReplayLimitError(id, d.replays)
      return null
    }
    return this.get(id)
  }
}
