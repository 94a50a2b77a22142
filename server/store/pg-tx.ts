/** The one PostgreSQL transaction wrapper of the store's modules: BEGIN, `fn` on one pooled client, COMMIT, or
 *  ROLLBACK and rethrow; the client always goes back to the pool. */
import type pg from 'pg'

export async function pgTx<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect()
  try {
    await c.query('BEGIN')
    const out = await fn(c)
    await c.query('COMMIT')
    return out
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {})
    throw e
  } finally {
    c.release()
  }
}
