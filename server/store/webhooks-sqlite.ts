/** Webhooks on SQLite (see ./webhooks.ts): the schema block appended to the store's, and the queries. */
import type Database from 'better-sqlite3'
import { eventsColumn, parseEvents, toDelivery, type Delivery, type DeliveryOutcome, type DeliveryRow, type KeyWebhook, type WebhookStore, type WebhookSub } from './webhooks.js'

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
  created_at INTEGER NOT NULL
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
  retry_from INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries(status, next_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_key ON webhook_deliveries(key_id, created_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_job ON webhook_deliveries(job_id);
CREATE TRIGGER IF NOT EXISTS webhook_job_ended AFTER UPDATE OF status ON jobs
WHEN OLD.status = 'CONVERTING' AND NEW.status IN ('COMPLETED', 'ERROR')
BEGIN
  INSERT OR IGNORE INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
  SELECT 'msg_' || NEW.id || '_end', s.key_id, NEW.id, CASE NEW.status WHEN 'COMPLETED' THEN 'job.completed' ELSE 'job.failed' END,
    s.events, s.url, 'pending', 0, NEW.updated_at, NEW.updated_at, NEW.updated_at
  FROM webhook_subs s
  WHERE s.job_id = NEW.id AND CASE NEW.status
    WHEN 'COMPLETED' THEN instr(s.events, ',job.completed,') > 0
    ELSE instr(s.events, ',job.failed,') > 0 OR instr(s.events, ',job.canceled,') > 0 END;
END;
`

export class SqliteWebhooks implements WebhookStore {
  private s
  private txClaim: Database.Transaction<(o: Parameters<WebhookStore['claim']>[0]) => Delivery[]>

  constructor(db: Database.Database) {
    this.s = {
      key: db.prepare<[string], KeyWebhook>('SELECT url, secret FROM webhook_keys WHERE key_id = ?'),
      upsertKey: db.prepare(`INSERT INTO webhook_keys (key_id, url, secret, updated_at) VALUES (@keyId, @url, @secret, @now)
        ON CONFLICT (key_id) DO UPDATE SET url = CASE WHEN @setUrl THEN @url ELSE url END,
          secret = CASE WHEN @setSecret THEN @secret ELSE secret END, updated_at = @now`),
      sub: db.prepare('INSERT OR REPLACE INTO webhook_subs (job_id, key_id, url, events, created_at) VALUES (?, ?, ?, ?, ?)'),
      unsub: db.prepare('DELETE FROM webhook_subs WHERE job_id = ?'),
      unsubDeliveries: db.prepare('DELETE FROM webhook_deliveries WHERE job_id = ?'),
      getSub: db.prepare<[string], { key_id: string; url: string; events: string }>('SELECT key_id, url, events FROM webhook_subs WHERE job_id = ?'),
      add: db.prepare(`INSERT OR IGNORE INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
        VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)`),
      due: db.prepare<[number, number, string, number, number], DeliveryRow>(`SELECT * FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY key_id ORDER BY next_at, id) AS rn FROM webhook_deliveries
          WHERE status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?)
            AND key_id NOT IN (SELECT value FROM json_each(?))
        ) WHERE rn <= ? ORDER BY next_at, id LIMIT ?`),
      anyDue: db.prepare<[number, number], { one: number }>(`SELECT 1 AS one FROM webhook_deliveries
        WHERE status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?) LIMIT 1`),
      lease: db.prepare('UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ? WHERE id = ?'),
      release: db.prepare('UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?'),
      settle: db.prepare(`UPDATE webhook_deliveries SET status = @status, event = @event, attempts = attempts + 1, last_status = @lastStatus,
          last_error = @lastError, last_at = @at, next_at = @nextAt, delivered_at = CASE WHEN @status = 'delivered' THEN @at ELSE delivered_at END,
          lease_owner = NULL, lease_until = NULL
        WHERE id = @id AND lease_owner = @owner AND status = 'pending'`),
      list: db.prepare<[string, string | null, string | null, string | null, string | null, number], DeliveryRow>(`SELECT * FROM webhook_deliveries
        WHERE key_id = ? AND (? IS NULL OR job_id = ?) AND (? IS NULL OR status = ?) ORDER BY created_at DESC, id DESC LIMIT ?`),
      get: db.prepare<[string], DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = ?'),
      purgeDeliveries: db.prepare("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND COALESCE(last_at, created_at) < ?"),
      purgeSubs: db.prepare("DELETE FROM webhook_subs WHERE created_at < ? AND job_id NOT IN (SELECT id FROM jobs WHERE status = 'CONVERTING')"),
      replay: db.prepare(`UPDATE webhook_deliveries SET status = 'pending', next_at = @now, retry_from = @now
        WHERE id = @id AND key_id = @keyId`),
    }
    const s = this.s
    this.txClaim = db.transaction((o) => {
      const rows = s.due.all(o.now, o.now, JSON.stringify(o.excludeKeys), o.perKey, o.limit)
      for (const r of rows) s.lease.run(o.owner, o.now + o.leaseMs, r.id)
      return rows.map(toDelivery)
    })
  }

  async keyWebhook(keyId: string): Promise<KeyWebhook> { return this.s.key.get(keyId) ?? { url: null, secret: null } }
  async setKeyWebhook(keyId: string, o: { url?: string | null; secret?: string }): Promise<KeyWebhook> {
    this.s.upsertKey.run({ keyId, url: o.url ?? null, secret: o.secret ?? null, setUrl: o.url !== undefined ? 1 : 0, setSecret: o.secret !== undefined ? 1 : 0, now: Date.now() })
    return this.keyWebhook(keyId)
  }
  async subscribe(jobId: string, keyId: string, sub: WebhookSub) { this.s.sub.run(jobId, keyId, sub.url, eventsColumn(sub.events), Date.now()) }
  async unsubscribe(jobId: string) {
    this.s.unsub.run(jobId)
    this.s.unsubDeliveries.run(jobId)
  }
  async subscription(jobId: string) {
    const r = this.s.getSub.get(jobId)
    return r ? { keyId: r.key_id, url: r.url, events: parseEvents(r.events) } : null
  }
  async addDelivery(d: Parameters<WebhookStore['addDelivery']>[0]) {
    return this.s.add.run(d.id, d.keyId, d.jobId, d.event, eventsColumn(d.events), d.url, d.at, d.at, d.at).changes === 1
  }
  async claim(o: Parameters<WebhookStore['claim']>[0]) {
    // a plain read first: an idle poll takes no write lock
    return this.s.anyDue.get(o.now, o.now) ? this.txClaim.immediate(o) : []
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
  async replay(id: string, keyId: string, now: number) {
    if (this.s.replay.run({ id, keyId, now }).changes !== 1) return null
    return this.get(id)
  }
}
