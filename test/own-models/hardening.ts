/**
 * Own models, hardened (issue 29, item 10), on SQLite + local storage:
 *   - identity: each file hashed on its own, so two ncnn pairs whose concatenations are equal are two identities, and a
 *     local copy whose bytes moved across the .param/.bin boundary is not taken for the model;
 *   - pinning: a job records the identity it was priced with; the model removed and re-added under the same name with
 *     other weights while the job waits: the job fails (110400005) with every coin back instead of running the new
 *     network at the old price; re-added with the same weights it runs;
 *   - races, driven step by step (hooks on storage and on the engine's forget, an injected clock; no sleeps decide the
 *     order): an add of the same weights interleaved with a remove keeps the added entry's weights; a release under
 *     way never deletes a copy handed to a job of a re-added model; a copy stays until the job timeout has passed
 *     since its LAST hand-out (remove, re-add, hand-out, remove), not since the first removal;
 *   - the store (SQLite and PostgreSQL): two adds of one name at once, one wins; a remove says in its transaction
 *     whether another row names its objects (rows from before per-add keys).
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { build, createKey, balance, post, png, inputServer, addonBuilt, waitFor, repoRoot, modelDir, tempDir } from '../helper.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'
import { SqliteStore } from '../../server/store/sqlite.js'
import { PgStore } from '../../server/store/postgres.js'
import { OWN_MODELS_SCHEMA_SQLITE, type OwnModel } from '../../server/store/own-models.js'
import Database from 'better-sqlite3'
import { addModel, removeModel } from '../../server/own-models/admin.js'
import { OwnModels, modelIdentity, type OwnModelsOptions, type Release } from '../../server/own-models/registry.js'
import type { MediaStorage } from '../../server/storage/types.js'
import type { FastifyInstance } from 'fastify'
import { adminDeps } from '../support/own-models.js'

const skip = !addonBuilt && 'native addon not built'
const goldens = path.join(repoRoot, 'native/models/tests/goldens')
const COMPACT_X4 = path.join(goldens, 'compact_x4_nf16_nc2.0.pth')
const UNSHUFFLE_X2 = path.join(goldens, 'esrgan_unshuffle2_x2_nf8_nb1.0.pth')
const sha = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex')

const deps = adminDeps

async function done(app: FastifyInstance, key: string, jobId: string) {
  return waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: jobId })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000, 50)
}

/** A registry of the test's own (driven directly), on a cache directory of its own unless `o.cacheDir` is given. */
function registry(app: FastifyInstance, t: { teardown(fn: () => unknown): void }, o: Partial<OwnModelsOptions> = {}) {
  const cacheDir = o.cacheDir ?? fs.mkdtempSync(path.join(app.lucent.config.dataDir, 'own-cache-'))
  const reg = new OwnModels(app.lucent.store.ownModels, app.lucent.storage, { refreshMs: 0, ...o, cacheDir })
  t.teardown(() => reg.stop())
  return reg
}

t.test('identity: each file hashed on its own; bytes moved across the .param/.bin boundary are another model', { skip }, async (t) => {
  const app = await build(t)
  const dir = fs.mkdtempSync(path.join(repoRoot, 'data', 'own-hard-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const param = fs.readFileSync(path.join(modelDir, 'sr/realesr-animevideov3-x2.param'))
  const bin = fs.readFileSync(path.join(modelDir, 'sr/realesr-animevideov3-x2.bin'))
  fs.writeFileSync(path.join(dir, 'a.param'), param)
  fs.writeFileSync(path.join(dir, 'a.bin'), bin)
  const m = await addModel(deps(app), path.join(dir, 'a.param'), { name: 'pair_a', kind: 'photo' })
  t.same(m.fileSha256, [sha(param), sha(bin)], 'both files hashed, each on its own')

  // pair B: the first 16 bytes of the .bin moved to the end of the .param: the same bytes concatenated
  const moved = { param: Buffer.concat([param, bin.subarray(0, 16)]), bin: bin.subarray(16) }
  t.ok(Buffer.concat([moved.param, moved.bin]).equals(Buffer.concat([param, bin])), 'equal concatenations')
  const idB = modelIdentity('ncnn', [sha(moved.param), sha(moved.bin)])
  t.not(m.sha256, idB, 'two identities')
  t.not(m.sha256, sha(Buffer.concat([param, bin])), 'the identity is not the hash of the concatenation')
  t.equal(m.sha256, sha(`${sha(param)}:${sha(bin)}`), "sha256 of '<param sha256>:<bin sha256>'")

  // a local copy whose bytes moved across the boundary (same concatenation) is not handed to a job: it is replaced
  const reg = registry(app, t)
  await reg.refresh()
  const stem = (await reg.network('pair_a', 'photo'))!.path
  fs.writeFileSync(`${stem}.param`, moved.param)
  fs.writeFileSync(`${stem}.bin`, moved.bin)
  // a process started afterwards on the same cache (nothing fetched in it yet)
  const fresh = registry(app, t, { cacheDir: path.dirname(stem) })
  await fresh.refresh()
  const again = (await fresh.network('pair_a', 'photo'))!.path
  t.ok(fs.readFileSync(`${again}.param`).equals(param) && fs.readFileSync(`${again}.bin`).equals(bin), 'the tampered copy was replaced from storage')

  // the stored row and the JSON keys: the old ones kept, fileSha256 added
  const [row] = await app.lucent.store.ownModels.list()
  t.same(Object.keys(row!).sort(), ['architecture', 'createdAt', 'description', 'fileKey', 'fileSha256', 'format', 'info', 'kind', 'multiple', 'name',
    'photoPriceClass', 'scale', 'sha256', 'size', 'videoPriceClass'])
})

t.test('a row stored before per-file hashes still reads and runs (read-time rule)', { skip }, async (t) => {
  const app = await build(t)
  const dir = fs.mkdtempSync(path.join(repoRoot, 'data', 'own-hard-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const param = fs.readFileSync(path.join(modelDir, 'sr/realesr-animevideov3-x2.param'))
  const bin = fs.readFileSync(path.join(modelDir, 'sr/realesr-animevideov3-x2.bin'))
  // what an older version stored: sha256 of the concatenation, content-addressed keys, no file_sha256
  const old = sha(Buffer.concat([param, bin]))
  await app.lucent.storage.put(`m/own/${old}.param`, param, 'application/octet-stream')
  await app.lucent.storage.put(`m/own/${old}.bin`, bin, 'application/octet-stream')
  const db = (app.lucent.store as unknown as { db: import('better-sqlite3').Database }).db
  db.prepare(`INSERT INTO own_models (name, kind, photo_price_class, video_price_class, description, architecture, format, scale, multiple, sha256, size, file_key, info, created_at)
    VALUES ('legacy', 'photo', 'enhance', NULL, 'old row', 'ncnn', 'ncnn', 2, 1, ?, ?, ?, '{"params":{},"tags":[],"warnings":[]}', 1)`).run(old, param.length + bin.length, `m/own/${old}.param`)
  db.prepare('UPDATE own_models_version SET v = v + 1 WHERE id = 1').run()
  const [row] = await app.lucent.store.ownModels.list()
  t.match(row, { name: 'legacy', sha256: old, fileSha256: null })
  const reg = registry(app, t)
  await reg.refresh()
  const stem = (await reg.network('legacy', 'photo'))!.path
  t.ok(fs.readFileSync(`${stem}.bin`).equals(bin), 'verified against the concatenation hash it was stored with')
  await removeModel(deps(app), 'legacy')
  t.equal(await app.lucent.storage.get(`m/own/${old}.bin`), null, 'its weights deleted')
})

t.test('pinned: re-added with other weights while the job waits, the job fails with every coin back', { skip }, async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_OWN_MODELS_REFRESH_MS: '0' })
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  const swapped = await addModel(deps(app), COMPACT_X4, { name: 'swap', kind: 'photo' })
  await addModel(deps(app), COMPACT_X4, { name: 'same', kind: 'photo' })
  await app.lucent.ownModels.refresh()

  // the queue held: both jobs wait while their models are removed and re-added
  app.lucent.queue.pause()
  const a = await post(app, '/api/photo-enhancer', key, { model_name: 'swap', img_url: srv.put('a.png', png(24, 16)), extension: '.png' })
  t.equal(a.statusCode, 200, a.body)
  const b = await post(app, '/api/photo-enhancer', key, { model_name: 'same', img_url: srv.put('b.png', png(24, 16)), extension: '.png' })
  t.equal(b.statusCode, 200, b.body)
  const coins = a.json().data.consume_coins
  t.ok(coins > 0)

  await removeModel(deps(app), 'swap')
  const other = await addModel(deps(app), UNSHUFFLE_X2, { name: 'swap', kind: 'photo', priceClass: 'generative' })
  t.not(other.sha256, swapped.sha256)
  await removeModel(deps(app), 'same')
  await addModel(deps(app), COMPACT_X4, { name: 'same', kind: 'photo' })
  await app.lucent.ownModels.refresh()
  app.lucent.queue.resume()

  const da = await done(app, key, a.json().data.job_id)
  t.equal(da.status, 'ERROR', 'not run on the new network at the old price')
  t.equal(da.error_code, 110400005)
  const refund = (await app.lucent.store.ledger(id)).find((e) => e.jobId === a.json().data.job_id && e.kind === 'refund')
  t.equal(refund?.delta, coins, 'every coin back')
  t.match(refund?.reason, /110400005/)
  // the same weights re-added: the same identity, the job runs (from the new entry's objects: the old ones are gone)
  const db = await done(app, key, b.json().data.job_id)
  t.equal(db.status, 'COMPLETED', JSON.stringify(db))

  // a new job on the new network is priced as its new class, and runs it
  const c = await post(app, '/api/photo-enhancer', key, { model_name: 'swap', img_url: srv.put('c.png', png(24, 16)), extension: '.png' })
  const gen = await post(app, '/api/photo-enhancer', key, { model_name: 'generative_2x', img_url: srv.put('g.png', png(24, 16)), extension: '.png' })
  t.equal(c.json().data.consume_coins, gen.json().data.consume_coins)
  t.equal((await done(app, key, c.json().data.job_id)).status, 'COMPLETED')
  await done(app, key, gen.json().data.job_id)
  const ledger = await app.lucent.store.ledger(id)
  t.equal(await balance(app, id), 1000 + ledger.filter((e) => e.kind === 'debit' || e.kind === 'refund').reduce((n, e) => n + e.delta, 0))
})

t.test('race: an add of the same weights interleaved with a remove keeps the added entry runnable', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '0' })
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  await addModel(deps(app), COMPACT_X4, { name: 'first', kind: 'photo' })
  // the add's first storage call on its weights completes, then the remove of the other entry runs to its end, then
  // the add goes on (a CLI add and a CLI remove on two terminals)
  const real = app.lucent.storage
  let hooked = false
  const hook = async () => {
    if (hooked) return
    hooked = true
    await removeModel(deps(app), 'first')
  }
  const racing = new Proxy(real, {
    get(target, prop) {
      if (prop === 'get') {
        return async (k: string) => {
          const r = await target.get(k)
          if (k.startsWith('m/own/')) await hook()
          return r
        }
      }
      if (prop === 'put') {
        return async (...args: Parameters<MediaStorage['put']>) => {
          const r = await target.put(...args)
          if (args[0].startsWith('m/own/')) await hook()
          return r
        }
      }
      const v = Reflect.get(target, prop, target) as unknown
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  const second = await addModel(deps(app, racing), COMPACT_X4, { name: 'second', kind: 'photo' })
  t.ok(hooked, 'the remove ran in the middle of the add')
  t.same((await app.lucent.store.ownModels.list()).map((m) => m.name), ['second'])
  t.ok((await real.get(second.fileKey))?.data.equals(fs.readFileSync(COMPACT_X4)), "the added entry's weights are in storage")
  await app.lucent.ownModels.refresh()
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'second', img_url: srv.put('s.png', png(16, 12)), extension: '.png' })
  t.equal(r.statusCode, 200, r.body)
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
})

t.test('race: a release under way never deletes the copy handed to a job of the re-added model', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '0' })
  let forgetCalled!: () => void
  const forgetting = new Promise<void>((r) => { forgetCalled = r })
  let letForget!: (v: boolean) => void
  const reg = registry(app, t, {
    releaseAfterMs: 0,
    forget: () => {
      forgetCalled()
      return new Promise<boolean>((r) => { letForget = r })
    },
  })
  const released: Release[] = []
  reg.onRelease((r) => released.push(r))
  await addModel(deps(app), COMPACT_X4, { name: 'r1', kind: 'photo' })
  await reg.refresh()
  const first = (await reg.network('r1', 'photo'))!.path
  t.ok(fs.existsSync(first))

  // removed: the release starts and stops inside the engine's forget ...
  await removeModel(deps(app), 'r1')
  await reg.refresh()
  await forgetting
  // ... while the same weights are added again and a job asks for them
  await addModel(deps(app), COMPACT_X4, { name: 'r1', kind: 'photo' })
  await reg.refresh()
  const handed = reg.network('r1', 'photo')
  await new Promise((r) => setImmediate(r))
  letForget(true)
  const path2 = (await handed)!.path
  t.equal(path2, first, 'the same local copy (named by identity)')
  await new Promise((r) => setImmediate(r))
  t.ok(fs.existsSync(path2) && fs.readFileSync(path2).equals(fs.readFileSync(COMPACT_X4)), 'the file the job was handed is there')
})

t.test('a copy stays until the job timeout after its last hand-out: remove, re-add, hand-out, remove', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '0' })
  // the registry's clock is the test's: the release timers (20 ms) fire freely, the decisions read this clock
  let clock = Date.now()
  const TIMEOUT = 20
  const reg = registry(app, t, { releaseAfterMs: TIMEOUT, now: () => clock })
  const released: Release[] = []
  reg.onRelease((r) => released.push(r))
  await addModel(deps(app), COMPACT_X4, { name: 'k', kind: 'photo' })
  await reg.refresh()
  const file = (await reg.network('k', 'photo'))!.path

  await removeModel(deps(app), 'k')
  await reg.refresh()
  clock += TIMEOUT - 5
  await addModel(deps(app), COMPACT_X4, { name: 'k', kind: 'photo' })
  await reg.refresh()
  await reg.network('k', 'photo') // a job handed the copy, TIMEOUT - 5 after the first removal
  await removeModel(deps(app), 'k')
  await reg.refresh()
  clock += 10 // past the first removal's deadline, within the job's
  await new Promise((r) => setTimeout(r, 10 * TIMEOUT))
  t.same(released, [], 'not released: a job handed it may still run')
  t.ok(fs.existsSync(file))

  clock += TIMEOUT
  await waitFor(async () => released.length > 0, 10_000, 5)
  t.notOk(fs.existsSync(file), 'released once the job timeout passed since the last hand-out')
  t.equal(released.length, 1)
})

for (const backend of ['sqlite', 'postgres'] as const) {
  t.test(`the store (${backend}): one add of a name wins; a remove says whether its objects are shared`, async (t) => {
    let store: SqliteStore | PgStore
    if (backend === 'sqlite') {
      // a database made before file_sha256 (the table as it was), with a row in it: opened, the column is added
      const file = path.join(await tempDir(t), 'own.db')
      const before = new Database(file)
      before.exec(OWN_MODELS_SCHEMA_SQLITE)
      before.prepare(`INSERT INTO own_models (name, kind, photo_price_class, video_price_class, description, architecture, format, scale, multiple, sha256, size, file_key, info, created_at)
        VALUES ('older', 'photo', 'enhance', NULL, '', 'ncnn', 'ncnn', 2, 1, ?, 1, 'm/own/o.param', '{"params":{},"tags":[],"warnings":[]}', 1)`).run('cd'.repeat(32))
      t.notOk(before.prepare('PRAGMA table_info(own_models)').all().some((c) => (c as { name: string }).name === 'file_sha256'))
      before.close()
      store = new SqliteStore(file)
      t.match(await store.ownModels.remove('older'), { name: 'older', sha256: 'cd'.repeat(32), fileSha256: null, fileKeyShared: false }, 'the old row reads')
    } else {
      const svc = await requireServices(t)
      if ('skip' in svc) {
        t.plan(0, svc.skip)
        return
      }
      store = await PgStore.open(await freshDatabase(t, svc.LUCENT_DATABASE_URL), { max: 4 })
    }
    t.teardown(() => store.close())
    const own = store.ownModels
    const entry = (name: string, fileKey: string, fileSha256: string[] | null): OwnModel => ({
      name, kind: 'photo', photoPriceClass: 'enhance', videoPriceClass: null, description: name, architecture: 'Compact', format: 'pytorch',
      scale: 4, multiple: 1, sha256: 'ab'.repeat(32), fileSha256, size: 10, fileKey, info: { params: {}, tags: [], warnings: [] }, createdAt: 1,
    })
    const wins = await Promise.all([own.add(entry('dup', 'm/own/k1.pth', ['ab'.repeat(32)])), own.add(entry('dup', 'm/own/k2.pth', ['ab'.repeat(32)]))])
    t.same(wins.filter(Boolean).length, 1, 'one of two adds of the same name')
    t.equal((await own.list()).length, 1)
    const winner = (await own.list())[0]!
    t.equal(winner.fileKey, wins[0] ? 'm/own/k1.pth' : 'm/own/k2.pth', 'the row of the add that won')

    // two rows naming one object (as content-addressed keys did), one of them without per-file hashes
    t.ok(await own.add(entry('old_a', 'm/own/shared.pth', null)))
    t.ok(await own.add(entry('old_b', 'm/own/shared.pth', ['ab'.repeat(32)])))
    t.same((await own.list()).find((m) => m.name === 'old_a')?.fileSha256, ['ab'.repeat(32)], 'an old one-file row: its file hash is its sha256')
    t.match(await own.remove('old_a'), { name: 'old_a', fileKeyShared: true })
    t.match(await own.remove('old_b'), { name: 'old_b', fileKeyShared: false })
    t.match(await own.remove('dup'), { name: 'dup', fileKeyShared: false })
    t.equal(await own.remove('dup'), null)
  })
}
