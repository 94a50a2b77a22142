/**
 * Bring your own model: the operator's registered networks, one row each, in the job store (SQLite and PostgreSQL:
 * the schema and the queries of both are here). The weights themselves live in media storage under
 * `fileKey` (server/own-models/), so every worker of a scale-out deployment can fetch them.
 */
import type Database from 'better-sqlite3'
import type pg from 'pg'

export type OwnModelKind = 'photo' | 'video' | 'both'

export interface OwnModel {
  /** The API model_name (never a catalog name or alias). */
  name: string
  kind: OwnModelKind
  /** Photo price class (server/pricing.ts), when kind is photo or both. */
  photoPriceClass: string | null
  /** Video price class, when kind is video or both. */
  videoPriceClass: string | null
  description: string
  /** spandrel's architecture id ('ESRGAN', 'Compact', 'SPAN', 'PLKSR' ...) or 'ncnn'. */
  architecture: string
  /** 'pytorch', 'pytorch-legacy', 'safetensors' or 'ncnn'. */
  format: string
  scale: number
  /** Input sides are padded to a multiple of this per tile (pixel-unshuffle, attention windows). */
  multiple: number
  /** sha256 (hex) of the weights (ncnn: of the .param bytes then the .bin bytes). */
  sha256: string
  /** Bytes of the weights (ncnn: both files). */
  size: number
  /** Media storage key of the weights (ncnn: of the .param; the .bin is beside it). */
  fileKey: string
  /** What the inspection found: hyperparameters, tags, warnings (JSON-able). */
  info: { params: Record<string, string>; tags: string[]; warnings: string[] }
  createdAt: number
}

export interface OwnModelStore {
  list(): Promise<OwnModel[]>
  /** Adds the row; false when the name is taken. */
  add(m: OwnModel): Promise<boolean>
  /** Removes and returns the row (null: no such model). */
  remove(name: string): Promise<OwnModel | null>
  /** A number that changes whenever the table changes (cheap to poll: the registry refreshes on it). */
  version(): Promise<string>
}

interface Row {
  name: string; kind: OwnModelKind; photo_price_class: string | null; video_price_class: string | null; description: string
  architecture: string; format: string; scale: number; multiple: number; sha256: string; size: number; file_key: string
  info: string; created_at: number
}
const COLUMNS = 'name, kind, photo_price_class, video_price_class, description, architecture, format, scale, multiple, sha256, size, file_key, info, created_at'
const toModel = (r: Row): OwnModel => ({
  name: r.name, kind: r.kind, photoPriceClass: r.photo_price_class, videoPriceClass: r.video_price_class, description: r.description,
  architecture: r.architecture, format: r.format, scale: Number(r.scale), multiple: Number(r.multiple), sha256: r.sha256, size: Number(r.size),
  fileKey: r.file_key, info: JSON.parse(r.info) as OwnModel['info'], createdAt: Number(r.created_at),
})
const values = (m: OwnModel) => [m.name, m.kind, m.photoPriceClass, m.videoPriceClass, m.description, m.architecture, m.format, m.scale,
  m.multiple, m.sha256, m.size, m.fileKey, JSON.stringify(m.info), m.createdAt]

const TABLE = (int: string) => `
CREATE TABLE IF NOT EXISTS own_models (
  name TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  photo_price_class TEXT,
  video_price_class TEXT,
  description TEXT NOT NULL,
  architecture TEXT NOT NULL,
  format TEXT NOT NULL,
  scale INTEGER NOT NULL,
  multiple INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  size ${int} NOT NULL,
  file_key TEXT NOT NULL,
  info TEXT NOT NULL,
  created_at ${int} NOT NULL
);
CREATE TABLE IF NOT EXISTS own_models_version (id INTEGER PRIMARY KEY, v ${int} NOT NULL);
INSERT INTO own_models_version (id, v) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
`
export const OWN_MODELS_SCHEMA_SQLITE = TABLE('INTEGER')
/** One PostgreSQL migration (appended to the store's list). */
export const OWN_MODELS_MIGRATION_PG = TABLE('BIGINT')

export class SqliteOwnModels implements OwnModelStore {
  constructor(private readonly db: Database.Database) {}
  async list() {
    return this.db.prepare<[], Row>(`SELECT ${COLUMNS} FROM own_models ORDER BY name`).all().map(toModel)
  }
  async add(m: OwnModel) {
    return this.db.transaction(() => {
      const r = this.db.prepare(`INSERT INTO own_models (${COLUMNS}) VALUES (${values(m).map(() => '?').join(', ')}) ON CONFLICT (name) DO NOTHING`).run(...values(m))
      if (r.changes) this.db.prepare('UPDATE own_models_version SET v = v + 1 WHERE id = 1').run()
      return r.changes === 1
    }).immediate()
  }
  async remove(name: string) {
    return this.db.transaction(() => {
      const r = this.db.prepare<[string], Row>(`DELETE FROM own_models WHERE name = ? RETURNING ${COLUMNS}`).get(name)
      if (r) this.db.prepare('UPDATE own_models_version SET v = v + 1 WHERE id = 1').run()
      return r ? toModel(r) : null
    }).immediate()
  }
  async version() {
    return String(this.db.prepare<[], { v: number }>('SELECT v FROM own_models_version WHERE id = 1').get()?.v ?? 0)
  }
}

export class PgOwnModels implements OwnModelStore {
  constructor(private readonly pool: pg.Pool) {}
  async list() {
    return (await this.pool.query<Row>(`SELECT ${COLUMNS} FROM own_models ORDER BY name`)).rows.map(toModel)
  }
  async add(m: OwnModel) {
    const c = await this.pool.connect()
    try {
      await c.query('BEGIN')
      const r = await c.query(`INSERT INTO own_models (${COLUMNS}) VALUES (${values(m).map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT (name) DO NOTHING`, values(m))
      if (r.rowCount) await c.query('UPDATE own_models_version SET v = v + 1 WHERE id = 1')
      await c.query('COMMIT')
      return r.rowCount === 1
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {})
      throw e
    } finally {
      c.release()
    }
  }
  async remove(name: string) {
    const c = await this.pool.connect()
    try {
      await c.query('BEGIN')
      const r = await c.query<Row>(`DELETE FROM own_models WHERE name = $1 RETURNING ${COLUMNS}`, [name])
      if (r.rowCount) await c.query('UPDATE own_models_version SET v = v + 1 WHERE id = 1')
      await c.query('COMMIT')
      return r.rows[0] ? toModel(r.rows[0]) : null
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {})
      throw e
    } finally {
      c.release()
    }
  }
  async version() {
    return String((await this.pool.query<{ v: number }>('SELECT v FROM own_models_version WHERE id = 1')).rows[0]?.v ?? 0)
  }
}
