/** Webhooks on PostgreSQL (see ./webhooks.ts): the migration appended to the store's, and the queries. Claims
 *  use FOR UPDATE SKIP LOCKED: gateways and workers on several hosts lease disjoint deliveries. */
import type pg from 'pg'
import { DEFAULT_MAX_REPLAYS, ReplayLimitError, eventsColumn, parseEvents, toDelivery, type DeliveryOutcome, type DeliveryRow, type KeyWebhook, type WebhookStore, type WebhookSub } from './webhooks.js'

/** One migration (appended to the store's list). The trigger puts a job's final event into the outbox in the
 *  transaction that ends the job. */
export const WEBHOOK_MIGRATION_PG = `
  CREATE TABLE webhook_keys (
    key_id TEXT PRIMARY KEY REFERENCES keys(id),
    url TEXT,
    secret TEXT,
    updated_at BIGINT NOT NULL
  );
  CREATE TABLE webhook_subs (
    job_id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    event TEXT NOT NULL,
    events TEXT NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at BIGINT,
    lease_owner TEXT,
    lease_until BIGINT,
    last_status INTEGER,
    last_error TEXT,
    last_at BIGINT,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT,
    retry_from BIGINT NOT NULL
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_at);
  CREATE INDEX webhook_deliveries_key ON webhook_deliveries(key_id, created_at);
  CREATE INDEX webhook_deliveries_job ON webhook_deliveries(job_id);
  CREATE FUNCTION webhook_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
    SELECT 'msg_' || NEW.id || '_end', s.key_id, NEW.id, CASE NEW.status WHEN 'COMPLETED' THEN 'job.completed' ELSE 'job.failed' END,
      s.events, s.url, 'pending', 0, NEW.updated_at, NEW.updated_at, NEW.updated_at
    FROM webhook_subs s
    WHERE s.job_id = NEW.id AND CASE NEW.status
      WHEN 'COMPLETED' THEN strpos(s.events, ',job.completed,') > 0
      ELSE strpos(s.events, ',job.failed,') > 0 OR strpos(s.events, ',job.canceled,') > 0 END
    ON CONFLICT (id) DO NOTHING;
    RETURN NULL;
  END $$;
  CREATE TRIGGER webhook_job_ended AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (OLD.status = 'CONVERTING' AND NEW.status IN ('COMPLETED', 'ERROR')) EXECUTE FUNCTION webhook_job_ended();
`

/** The next migration (appended after WEBHOOK_MIGRATION_PG in the store's list): held subscriptions (a job's
 *  events wait until its submission has answered) and bounded replays (./webhooks.ts). */
export const WEBHOOK_MIGRATION_PG_2 = `
  ALTER TABLE webhook_subs ADD COLUMN held BOOLEAN NOT NULL DEFAULT false;
  ALTER TABLE webhook_deliveries ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE webhook_deliveries ADD COLUMN replay_pending BOOLEAN NOT NULL DEFAULT false;
  CREATE OR REPLACE FUNCTION webhook_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
    SELECT 'msg_' || NEW.id || '_end', s.key_id, NEW.id, CASE NEW.status WHEN 'COMPLETED' THEN 'job.completed' ELSE 'job.failed' END,
      s.events, s.url, CASE WHEN s.held THEN 'held' ELSE 'pending' END, 0, NEW.updated_at, NEW.updated_at, NEW.updated_at
    FROM webhook_subs s
    WHERE s.job_id = NEW.id AND CASE NEW.status
      WHEN 'COMPLETED' THEN strpos(s.events, ',job.completed,') > 0
      ELSE strpos(s.events, ',job.failed,') > 0 OR strpos(s.events, ',job.canceled,') > 0 END
    ON CONFLICT (id) DO NOTHING;
    RETURN NULL;
  END $$;
`

export class PgWebhooks implements WebhookStore {
  constructor(private readonly pool: pg.Pool) {}

  async keyWebhook(keyId: string): Promise<KeyWebhook> {
    const r = await this.pool.query<KeyWebhook>('SELECT url, secret FROM webhook_keys WHERE key_id = $1', [keyId])
    return r.rows[0] ?? { url: null, secret: null }
  }

  async setKeyWebhook(keyId: string, o: { url?: string | null; secret?: string }): Promise<KeyWebhook> {
    const r = await this.pool.query<KeyWebhook>(`INSERT INTO webhook_keys (key_id, url, secret, updated_at) VALUES ($1, $2, $3, $6)
      ON CONFLICT (key_id) DO UPDATE SET url = CASE WHEN $4 THEN EXCLUDED.url ELSE webhook_keys.url END,
        secret = CASE WHEN $5 THEN EXCLUDED.secret ELSE webhook_keys.secret END, updated_at = EXCLUDED.updated_at
      RETURNING url, secret`, [keyId, o.url ?? null, o.secret ?? null, o.url !== undefined, o.secret !== undefined, Date.now()])
    return r.rows[0]
  }

  async subscribe(jobId: string, keyId: string, sub: WebhookSub, opts: { held?: boolean } = {}): Promise<void> {
    await this.pool.query(`INSERT INTO webhook_subs (job_id, key_id, url, events, created_at, held) VALUES ($1, $2, $3, $4, $5, $6)
      ON CONFLICT (job_id) DO UPDATE SET url = EXCLUDED.url, events = EXCLUDED.events, held = EXCLUDED.held`,
    [jobId, keyId, sub.url, eventsColumn(sub.events), Date.now(), opts.held === true])
  }

  async arm(jobId: string): Promise<void> {
    // the subscription first: an event written after it is pending, one written before it is released below
    await this.pool.query('UPDATE webhook_subs SET held = false WHERE job_id = $1', [jobId])
    await this.pool.query("UPDATE webhook_deliveries SET status = 'pending' WHERE job_id = $1 AND status = 'held'", [jobId])
  }

  async unsubscribe(jobId: string): Promise<void> {
    await this.pool.query('DELETE FROM webhook_subs WHERE job_id = $1', [jobId])
    await this.pool.query('DELETE FROM webhook_deliveries WHERE job_id = $1', [jobId])
  }

  async subscription(jobId: string) {
    const r = await this.pool.query<{ key_id: string; url: string; events: string; held: boolean }>('SELECT key_id, url, events, held FROM webhook_subs WHERE job_id = $1', [jobId])
    const s = r.rows[0]
    return s ? { keyId: s.key_id, url: s.url, events: parseEvents(s.events), held: s.held === true } : null
  }

  async addDelivery(d: Parameters<WebhookStore['addDelivery']>[0]): Promise<boolean> {
    const r = await this.pool.query(`INSERT INTO webhook_deliveries (id, key_id, job_id, event, events, url, status, attempts, next_at, created_at, retry_from)
      VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $7) ON CONFLICT (id) DO NOTHING`, [d.id, d.keyId, d.jobId, d.event, eventsColumn(d.events), d.url, d.at])
    return r.rowCount === 1
  }

  async claim(o: Parameters<WebhookStore['claim']>[0]) {
    // SKIP LOCKED: concurrent claimers (other processes, other hosts) never wait on nor take the same rows
    const r = await this.pool.query<DeliveryRow>(`WITH due AS (
        SELECT id, key_id, next_at FROM webhook_deliveries
        WHERE status = 'pending' AND next_at <= $1 AND (lease_until IS NULL OR lease_until < $1) AND NOT (key_id = ANY($2::text[]))
        ORDER BY next_at, id LIMIT $3::int * 8 FOR UPDATE SKIP LOCKED
      ), ranked AS (
        SELECT id, next_at, ROW_NUMBER() OVER (PARTITION BY key_id ORDER BY next_at, id) AS rn FROM due
      )
      UPDATE webhook_deliveries w SET lease_owner = $4, lease_until = $5
      FROM (SELECT id FROM ranked WHERE rn <= $6 ORDER BY next_at, id LIMIT $3::int) c
      WHERE w.id = c.id RETURNING w.*`, [o.now, o.excludeKeys, o.limit, o.owner, o.now + o.leaseMs, o.perKey])
    return r.rows.map(toDelivery).sort((a, b) => (a.nextAt ?? 0) - (b.nextAt ?? 0))
  }

  async release(id: string, owner: string): Promise<void> {
    await this.pool.query('UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL, replay_pending = false WHERE id = $1 AND lease_owner = $2', [id, owner])
  }

  async settle(id: string, owner: string, o: DeliveryOutcome): Promise<boolean> {
    // a replay asked for during the attempt: due again now, whatever the attempt's outcome
    const r = await this.pool.query(`UPDATE webhook_deliveries SET status = CASE WHEN replay_pending THEN 'pending' ELSE $3 END, event = $4,
        attempts = attempts + 1, last_status = $5, last_error = $6, last_at = $7, next_at = CASE WHEN replay_pending THEN $7 ELSE $8::bigint END,
        delivered_at = CASE WHEN $3 = 'delivered' THEN $7 ELSE delivered_at END, replay_pending = false, lease_owner = NULL, lease_until = NULL
      WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`, [id, owner, o.status, o.event, o.lastStatus, o.lastError, o.at, o.nextAt])
    return r.rowCount === 1
  }

  async list(keyId: string, o: { limit: number; jobId?: string; status?: string }) {
    const r = await this.pool.query<DeliveryRow>(`SELECT * FROM webhook_deliveries WHERE key_id = $1 AND ($2::text IS NULL OR job_id = $2)
      AND ($3::text IS NULL OR status = $3) AND status <> 'held' ORDER BY created_at DESC, id DESC LIMIT $4`, [keyId, o.jobId ?? null, o.status ?? null, o.limit])
    return r.rows.map(toDelivery)
  }

  async get(id: string) {
    const r = await this.pool.query<DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1', [id])
    return r.rows[0] ? toDelivery(r.rows[0]) : null
  }

  async purge(before: number): Promise<void> {
    await this.pool.query("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND COALESCE(last_at, created_at) < $1", [before])
    await this.pool.query("DELETE FROM webhook_subs s WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id AND j.status = 'CONVERTING')", [before])
  }

  async replay(id: string, keyId: string, now: number, maxReplays = DEFAULT_MAX_REPLAYS) {
    // in flight (leased): only remembered, applied by settle; else due now. Both: a new retry window, one more replay.
    const r = await this.pool.query<DeliveryRow>(`UPDATE webhook_deliveries SET replays = replays + 1, retry_from = $3,
        replay_pending = COALESCE(lease_owner IS NOT NULL AND lease_until >= $3, false),
        status = CASE WHEN lease_owner IS NOT NULL AND lease_until >= $3 THEN status ELSE 'pending' END,
        next_at = CASE WHEN lease_owner IS NOT NULL AND lease_until >= $3 THEN next_at ELSE $3 END
      WHERE id = $1 AND key_id = $2 AND status <> 'held' AND replays < $4 RETURNING *`, [id, keyId, now, maxReplays])
    if (r.rows[0]) return toDelivery(r.rows[0])
    const d = await this.get(id)
    if (d && d.keyId === keyId && d.status !== 'held') throw new ReplayLimitError(id, d.replays)
    return null
  }
}
