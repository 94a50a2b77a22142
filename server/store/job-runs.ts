/**
 * The run log: which process (runner) is running which job now, so that a process that dies charges its crash
 * only where it can be known (issue 29 hole 6; the attempts policy in server/jobs/lifecycle.ts start()). SQLite and
 * PostgreSQL: the schema and the queries of both are here (the pattern of ./own-models.ts).
 *
 * One row per job while a run of it is live: `runner` (a random id of the process's JobLifecycle) and when it
 * started. A run that ends in its process (completed, failed, canceled, released, handed back) deletes its row. A
 * process that dies (SIGKILL, a native crash, the OOM killer) leaves the rows of every run it had: the jobs that
 * were running together when it died. The next start of one of them (another process, or this one restarted)
 * settles that whole group at once: each row loses its runner and records `suspects`, how many runs the dead
 * process had. Then, for the job being started:
 *   suspects = 1   it ran alone: the crash is its own and uses one of its attempts (as before);
 *   suspects > 1   any of them may have caused it: the attempt is given back (the run is not counted), at most
 *                  `maxForgiven` times per job (a job that keeps crashing its process in company is charged from
 *                  then on, so no poison job loops for ever).
 * What cannot be known: which of several jobs in a process that died caused it (a native crash takes every thread
 * with it; nothing is written after). A process whose queue lock was lost while it still ran (BullMQ stalled
 * check) looks like a dead one: its jobs are forgiven rather than charged (the lenient side).
 * A run released by its process's shutdown (SIGTERM: the run stopped, the job handed back) is not a crash of the
 * job: release() marks its row (no runner, suspects 0) and the next start does not count it, without using the
 * job's forgiven allowance (a shutdown is the operator's, never the input's).
 * Rows of a dead process whose jobs never start again (canceled meanwhile) are purged after PURGE_MS.
 */
import type Database from 'better-sqlite3'
import type pg from 'pg'

/** How a run starts, as begin() found it. */
export interface RunStart {
  /** The job's attempts after this start (the counter LUCENT_JOB_MAX_ATTEMPTS bounds). */
  attempt: number
  /** The previous run of the job was cut by its process dying (`suspects`: the runs it had), or by its shutdown
   *  (`suspects` 0); null: it was not, or this is the first run. */
  interrupted: null | { suspects: number; forgiven: boolean }
}

export interface RunLog {
  /** A run of `jobId` by `runner` starts: settles an interrupted previous run (see the header), counts the attempt
   *  unless forgiven (at most `maxForgiven` per job), records the run. One transaction. */
  begin(jobId: string, runner: string, maxForgiven: number): Promise<RunStart>
  /** The run ended in its process: its row goes. */
  end(jobId: string, runner: string): Promise<void>
  /** The run was released by its process's shutdown: its next start is not counted. */
  release(jobId: string, runner: string): Promise<void>
}

/** Rows older than this are purged (a dead process's runs of jobs that never started again). */
export const PURGE_MS = 7 * 24 * 3600 * 1000

export const JOB_RUNS_SCHEMA_SQLITE = `
CREATE TABLE IF NOT EXISTS job_runs (
  job_id TEXT PRIMARY KEY,
  runner TEXT,
  started_at INTEGER NOT NULL,
  suspects INTEGER,
  forgiven INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS job_runs_runner ON job_runs(runner);
`

/** Applied by PgStore at open, under its migration lock (idempotent). */
export const JOB_RUNS_SCHEMA_PG = `
CREATE TABLE IF NOT EXISTS job_runs (
  job_id TEXT PRIMARY KEY,
  runner TEXT,
  started_at BIGINT NOT NULL,
  suspects INTEGER,
  forgiven INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS job_runs_runner ON job_runs(runner);
`

interface Row { runner: string | null; suspects: number | null; forgiven: number }

/** The decision of begin(), shared by both stores: `prev` is the job's row as it is after any settlement. */
function decide(prev: Row | undefined, maxForgiven: number) {
  const before = prev?.forgiven ?? 0
  const suspects = prev && prev.runner === null ? prev.suspects : null
  if (suspects === 0) return { interrupted: { suspects, forgiven: true }, forgiven: before }   // a shutdown
  const interrupted = suspects !== null ? { suspects, forgiven: suspects > 1 && before < maxForgiven } : null
  return { interrupted, forgiven: before + (interrupted?.forgiven ? 1 : 0) }
}

export class SqliteRuns implements RunLog {
  private readonly txBegin: Database.Transaction<(jobId: string, runner: string, maxForgiven: number) => RunStart>
  private readonly del: Database.Statement<[string, string]>
  private readonly rel: Database.Statement<[string, string]>

  constructor(db: Database.Database) {
    db.exec(JOB_RUNS_SCHEMA_SQLITE)
    const prev = db.prepare<[string], Row>('SELECT runner, suspects, forgiven FROM job_runs WHERE job_id = ?')
    const count = db.prepare<[string], { n: number }>('SELECT COUNT(*) AS n FROM job_runs WHERE runner = ?')
    const settle = db.prepare('UPDATE job_runs SET suspects = ?, runner = NULL WHERE runner = ?')
    const attempt = db.prepare<[number, number, string], { attempts: number }>('UPDATE jobs SET attempts = attempts + ?, updated_at = ? WHERE id = ? RETURNING attempts')
    const put = db.prepare(`INSERT INTO job_runs (job_id, runner, started_at, suspects, forgiven) VALUES (?, ?, ?, NULL, ?)
      ON CONFLICT (job_id) DO UPDATE SET runner = excluded.runner, started_at = excluded.started_at, suspects = NULL, forgiven = excluded.forgiven`)
    const purge = db.prepare('DELETE FROM job_runs WHERE started_at < ?')
    this.del = db.prepare('DELETE FROM job_runs WHERE job_id = ? AND (runner = ? OR runner IS NULL)')
    this.rel = db.prepare('UPDATE job_runs SET runner = NULL, suspects = 0 WHERE job_id = ? AND runner = ?')
    this.txBegin = db.transaction((jobId: string, runner: string, maxForgiven: number): RunStart => {
      const now = Date.now()
      let p = prev.get(jobId)
      if (p?.runner && p.runner !== runner) {
        settle.run(count.get(p.runner)!.n, p.runner)
        p = prev.get(jobId)
      }
      const d = decide(p, maxForgiven)
      const n = attempt.get(d.interrupted?.forgiven ? 0 : 1, now, jobId)?.attempts ?? 0
      put.run(jobId, runner, now, d.forgiven)
      purge.run(now - PURGE_MS)
      return { attempt: n, interrupted: d.interrupted }
    })
  }

  async begin(jobId: string, runner: string, maxForgiven: number) { return this.txBegin.immediate(jobId, runner, maxForgiven) }
  async end(jobId: string, runner: string) { this.del.run(jobId, runner) }
  async release(jobId: string, runner: string) { this.rel.run(jobId, runner) }
}

export class PgRuns implements RunLog {
  constructor(private readonly pool: pg.Pool) {}

  async begin(jobId: string, runner: string, maxForgiven: number): Promise<RunStart> {
    const c = await this.pool.connect()
    try {
      await c.query('BEGIN')
      const now = Date.now()
      // the job's row first: starts of one job are serialised (the run log's rows follow it)
      const j = await c.query<{ attempts: number }>('SELECT attempts FROM jobs WHERE id = $1 FOR UPDATE', [jobId])
      const read = async () => (await c.query<Row>('SELECT runner, suspects, forgiven FROM job_runs WHERE job_id = $1', [jobId])).rows[0]
      let p = await read()
      if (p?.runner && p.runner !== runner) {
        // one settlement per dead runner, serialised on it; a start that waited finds it done when it reads again
        await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`job_runs:${p.runner}`])
        p = await read()
        if (p?.runner && p.runner !== runner) {
          const n = await c.query<{ n: string }>('SELECT COUNT(*) AS n FROM job_runs WHERE runner = $1', [p.runner])
          await c.query('UPDATE job_runs SET suspects = $1, runner = NULL WHERE runner = $2', [Number(n.rows[0]!.n), p.runner])
          p = await read()
        }
      }
      const d = decide(p, maxForgiven)
      let attempt = 0
      if (j.rows[0]) {
        const r = await c.query<{ attempts: number }>('UPDATE jobs SET attempts = attempts + $1, updated_at = $2 WHERE id = $3 RETURNING attempts',
          [d.interrupted?.forgiven ? 0 : 1, now, jobId])
        attempt = Number(r.rows[0]!.attempts)
      }
      await c.query(`INSERT INTO job_runs (job_id, runner, started_at, suspects, forgiven) VALUES ($1, $2, $3, NULL, $4)
        ON CONFLICT (job_id) DO UPDATE SET runner = excluded.runner, started_at = excluded.started_at, suspects = NULL, forgiven = excluded.forgiven`,
      [jobId, runner, now, d.forgiven])
      await c.query('DELETE FROM job_runs WHERE started_at < $1', [now - PURGE_MS])
      await c.query('COMMIT')
      return { attempt, interrupted: d.interrupted }
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {})
      throw e
    } finally {
      c.release()
    }
  }

  async end(jobId: string, runner: string) {
    await this.pool.query('DELETE FROM job_runs WHERE job_id = $1 AND (runner = $2 OR runner IS NULL)', [jobId, runner])
  }

  async release(jobId: string, runner: string) {
    await this.pool.query('UPDATE job_runs SET runner = NULL, suspects = 0 WHERE job_id = $1 AND runner = $2', [jobId, runner])
  }
}
