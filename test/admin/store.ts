/**
 * The admin's store (server/store/audit*.ts) on SQLite and PostgreSQL: a change and its audit row together, coins
 * never below 0 even when two store handles (two gateways) adjust and debit one key at once, reads by page.
 * PostgreSQL runs on a fresh database (scripts/services.sh; locally skipped without it, CI fails).
 */
import t from 'tap'
import path from 'node:path'
import crypto from 'node:crypto'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import type { Store } from '../../server/store/types.js'
import { tempDir } from '../helper.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'

interface Test { teardown(fn: () => unknown): void }

const backends: Array<{ name: string; open(t: Test): Promise<Store[] | { skip: string }> }> = [
  {
    name: 'sqlite',
    async open(t) {
      const file = path.join(await tempDir(t), 'lucent.db')
      const s = [new SqliteStore(file), new SqliteStore(file)]
      t.teardown(() => Promise.all(s.map((x) => x.close())))
      return s
    },
  },
  {
    name: 'postgres',
    async open(t) {
      const env = await requireServices(t)
      if ('skip' in env) return env
      const url = await freshDatabase(t, env.LUCENT_DATABASE_URL)
      const s = await Promise.all([PgStore.open(url, { max: 8 }), PgStore.open(url, { max: 8 })])
      t.teardown(() => Promise.all(s.map((x) => x.close())))
      return s
    },
  },
]

const who = { actor: 'admin:ops', requestId: 'r1' }
const newKey = (coins: number) => {
  const id = `k_${crypto.randomBytes(6).toString('hex')}`
  return { id, hash: crypto.createHash('sha256').update(id).digest('hex'), coins, trial: 0, expiresAt: null, rate: null }
}

for (const b of backends) {
  t.test(b.name, async (t) => {
    const stores = await b.open(t)
    if ('skip' in stores) return t.plan(0, stores.skip)
    const [s, s2] = stores

    const k = newKey(100)
    const c = await s.audit.createKey(k, who, 'sale')
    t.match(c.key, { id: k.id, coins: 100 })
    t.match(c.audit, { action: 'key.create', actor: 'admin:ops', requestId: 'r1', keyId: k.id, delta: 100, reason: 'sale', before: null, after: { coins: 100 } })
    t.match(await s.ledger(k.id), [{ kind: 'grant', delta: 100 }], 'the grant row as store.createKey writes it')
    await t.rejects(s.audit.createKey(k, who, null), 'the same id again fails')
    t.equal((await s.audit.list({ keyId: k.id, limit: 10 })).length, 1, '... and leaves no audit row')

    const up = await s.audit.updateKey(k.id, { revoked: true, rate: 2 }, who, 'abuse')
    t.match(up, { before: { revoked: false, rate: null }, after: { revoked: true, rate: 2 }, audit: { action: 'key.update', before: { revoked: false }, after: { revoked: true, rate: 2 } } })
    t.equal((await s.audit.updateKey(k.id, { revoked: true }, who, null))!.audit, null, 'no change, no row')
    t.equal(await s.audit.updateKey('k_nope', { revoked: true }, who, null), null)

    const neg = await s.audit.adjustCoins(k.id, -101, 'adjust', 'x', who)
    t.same(neg, { ok: false, reason: 'negative', balance: 100 })
    t.same(await s.audit.adjustCoins('k_nope', 5, 'topup', 'x', who), { ok: false, reason: 'no_key' })

    // two handles at once: adjustments and debits never take the balance below 0, each applied one has its rows
    const ops = Array.from({ length: 30 }, (_, i) => i % 3 === 2
      ? s2.debitAndCreateJob({ id: `j_${i}_${k.id}`, keyId: k.id, kind: 'photo', model: 'general_2x', coins: 10, originalKey: 'o/x', params: {} }).then((r) => r.ok)
      : (i % 2 ? s : s2).audit.adjustCoins(k.id, -10, 'adjust', `take ${i}`, who).then((r) => r.ok))
    const applied = (await Promise.all(ops)).filter(Boolean).length
    t.equal(applied, 10, 'exactly the coins there were')
    t.equal((await s.findKey(k.id))!.coins, 0)
    const adjusts = (await s.ledger(k.id)).filter((r) => r.kind === 'adjust')
    t.equal((await s.audit.list({ keyId: k.id, limit: 100 })).filter((a) => a.action === 'coins.adjust').length, adjusts.length, 'one audit row per applied adjustment')
    t.ok((await s.ledger(k.id)).every((r) => r.balanceAfter >= 0))

    const top = await s.audit.adjustCoins(k.id, 7, 'topup', 'invoice', who)
    if (!top.ok) throw new Error('topup refused')
    t.match(top, { key: { coins: 7 }, ledger: { kind: 'topup', delta: 7, balanceAfter: 7, reason: 'invoice' }, audit: { action: 'coins.topup', delta: 7, before: { coins: 0 }, after: { coins: 7, ledger_id: top.ledger.id } } })

    // pages, newest first
    const all = await s.audit.list({ keyId: k.id, limit: 1000 })
    const page = await s.audit.list({ keyId: k.id, limit: 2, beforeId: all[1].id })
    t.same(page.map((a) => a.id), all.slice(2, 4).map((a) => a.id))
    const led = await s.audit.ledgerPage(k.id, 3)
    t.equal(led[0].kind, 'topup')
    t.same((await s.audit.ledgerPage(k.id, 1, led[0].id)).map((r) => r.id), [led[1].id])
    t.match(await s.audit.jobCounts(k.id), { CONVERTING: 10 - adjusts.length, COMPLETED: 0, ERROR: 0 })
    const sums: Record<string, number> = {}
    for (const r of await s.ledger(k.id)) sums[r.kind] = (sums[r.kind] ?? 0) + r.delta
    t.same(await s.audit.ledgerSums(k.id), { grant: 0, topup: 0, adjust: 0, debit: 0, refund: 0, trial: 0, trial_refund: 0, ...sums }, 'the sums by kind')
    t.match(sums, { grant: 100, topup: 7 })
    const rec = await s.audit.record({ actor: 'cli', requestId: null, action: 'quotas.set', keyId: k.id, before: { overrides: {} }, after: { overrides: { maxJobsInFlight: 1 } }, delta: null, reason: null })
    t.match((await s2.audit.list({ limit: 1 }))[0], { id: rec.id, actor: 'cli', after: { overrides: { maxJobsInFlight: 1 } } })
  })
}
