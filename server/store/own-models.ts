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
  /** The entry's identity (hex): sha256 of the weights; ncnn: sha256 of '<param sha256>:<bin sha256>' (rows older than
   *  `fileSha256`: of the .param bytes then the .bin bytes). Jobs are pinned to it (server/own-models/registry.ts). */
  sha256: string
  /** sha256 (hex) of each file, in `fileKey` order (ncnn: .param, .bin); null: an ncnn row older than this field. */
  fileSha256: string[] | null
  /** Bytes of the weights (ncnn: both files). */
  size: number
  /** Media storage key of the weights (ncnn: of the .param; the .bin is beside it); one of its own per add (never
   *  shared with another entry, so a remove deletes exactly its own objects; rows from before may share one). */
  fileKey: string
  /** What the inspection found: hyperparameters, tags, warnings (JSON-able). */
  info: { params: Record<string, string>; tags: string[]; warnings: string[] }
  createdAt: number
}

/** A removed row, and whether another row still names its `fileKey` (then its weights must stay). */
export type RemovedOwnModel = OwnModel & { fileKeyShared: boolean }

export interface OwnModelStore {
  list(): Promise<OwnModel[]>
  /** Adds the row; false when the name is taken (the name is the primary key: one transaction decides). */
  add(m: OwnModel): Promise<boolean>
  /** Removes and returns the row (null: no such model), in one transaction with the check of its fileKey's other users. */
  remove(name: string): Promise<RemovedOwnModel | null>
  /** A number that changes whenever the table changes (cheap to poll: the registry refreshes on it). */
  version(): Promise<string>
}

interface Row {
  name: string; kind: OwnModelKind; photo_price_class: string | null; video_price_class: string | null; description: string
  architecture: string; format: string; scale: number; multiple: number; sha256: string; size: number; file_key: string
  info: string; created_at: number; file_sha256: string | null
}
const COLUMNS = 'name, kind, photo_price_class, video_price_class, description, architecture, format, scale, multiple, sha256, size, file_key, info, created_at, file_sha256'
/** `file_sha256`: the files' hashes joined by ':' (NULL: a row older than the column; see the header). */
function fileHashes(r: Row): string[] | null {
  if (r.file_sha256) return r.file_sha256.split(':')
  return r.format === 'ncnn' ? null : [r.sha256]
}
const toModel = (r: Row): OwnModel => ({
  name: r.name, kind: r.kind, photoPriceClass: r.photo_price_class, videoPriceClass: r.video_price_class, description: r.description,
  architecture: r.architecture, format: r.format, scale: Number(r.scale), multiple: Number(r.multiple), sha256: r.sha256,
  fileSha256: fileHashes(r), size: Number(r.size), fileKey: r.file_key, info: JSON.parse(r.info) as OwnModel['info'], createdAt: Number(r.created_at),
})
const values = (m: OwnModel) => [m.name, m.kind, m.photoPriceClass, m.videoPriceClass, m.description, m.architecture, m.format, m.scale,
  m.multiple, m.sha256, m.size, m.fileKey, JSON.stringify(m.info), m.createdAt, m.fileSha256 ? m.fileSha256.join(':') : null]

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
/** The second: each file's sha256 (NULL on older rows). */
export const OWN_MODELS_MIGRATION_PG_2 = 'ALTER TABLE own_models ADD COLUMN IF NOT EXISTS file_sha256 TEXT;'

/** SQLite: the `file_sha256` column on a database made before it (run at open, after OWN_MODELS_SCHEMA_SQLITE). */
function addFileHashColumn(db: Database.Database): void {
  db.transaction(() => {
    const cols = db.prepare<[], { name: string }>('PRAGMA table_info(own_models)').all()
    if (!cols.some((c) => c.name === 'file_sha256')) db.exec('ALTER TABLE own_models ADD COLUMN file_sha256 TEXT')
  }).immediate()
}

export class SqliteOwnModels implements OwnModelStore {
  constructor(private readonly db: Database.Database) {
    addFileHashColumn(db)
  }
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
      if (!r) return null
      this.db.prepare('UPDATE own_models_version SET v = v + 1 WHERE id = 1').run()
      const shared = this.db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM own_models WHERE file_key = ?').get(r.file_key)!.n > 0
      return { ...toModel(r), fileKeyShared: shared }
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
      const row = r.rows[0]
      let shared = false
      if (row) {
        await c.query('UPDATE own_models_version SET v = v + 1 WHERE id = 1')
        // the version row is locked by the update above: a concurrent add or remove waits for this transaction
        shared = (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM own_models WHERE file_key = $1', [row.file_key])).rows[0]!.n > 0
      }
      await c.query('COMMIT')
      return row ? { ...toModel(row), fileKeyShared: shared } : null
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
