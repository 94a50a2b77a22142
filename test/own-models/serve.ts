/**
 * Bring your own model, end to end on SQLite + local storage (the scale-out deployment: test/own-models/scaleout.ts):
 * `addModel` (what `lucent models add` runs) stores a community model, the API serves it by name (photo and
 * video), GET /api/models lists it, the price class prices it, `removeModel` takes it away from a running app
 * within its refresh interval; refusals store nothing; hostile inputs (a catalog name, a pickle that calls
 * posix.system, a model removed while its job waits) are answered with the API's codes, never a crash or lost coins.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { build, createKey, balance, post, png, inputServer, addonBuilt, waitFor, repoRoot, modelDir } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { addModel, removeModel } from '../../server/own-models/admin.js'
import { OwnModels, type Release } from '../../server/own-models/registry.js'
import { zipStored } from '../support/zip.js'
import { loadAddon } from '../../server/engine/addon.js'
import { hasFfmpeg, makeVideo } from '../support/enhance-cli.js'
import type { FastifyInstance } from 'fastify'
import { adminDeps } from '../support/own-models.js'

const skip = !addonBuilt && 'native addon not built'
const goldens = path.join(repoRoot, 'native/models/tests/goldens')
const COMPACT_X4 = path.join(goldens, 'compact_x4_nf16_nc2.0.pth')
const UNSHUFFLE_X2 = path.join(goldens, 'esrgan_unshuffle2_x2_nf8_nb1.0.pth')

const deps = adminDeps

async function done(app: FastifyInstance, key: string, jobId: string) {
  return waitFor(async () => {
    const d = (await post(app, '/api/task-status', key, { job_id: jobId })).json().data
    return d.status !== 'CONVERTING' && d
  }, 300_000, 100)
}

async function fetchResult(app: FastifyInstance, resUrl: string) {
  const u = new URL(resUrl)
  return (await app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
}

t.test('an added model is served by name: photo job, price class, /api/models, then removed', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '200' })
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  const before = await app.inject({ method: 'GET', url: '/api/models' })

  // not there yet: the catalog's answer for an unknown model
  const early = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_4x', img_url: srv.put('a.png', png(40, 30)), extension: '.png' })
  t.equal(early.statusCode, 400)
  t.equal(early.json().error_code, 110400005)

  const m = await addModel(deps(app), COMPACT_X4, { name: 'tiny_4x', kind: 'both', description: 'a tiny Compact' })
  t.match(m, { name: 'tiny_4x', architecture: 'Compact', format: 'pytorch', scale: 4, multiple: 1, photoPriceClass: 'enhance', videoPriceClass: 'standard' })
  t.match(m.sha256, /^[0-9a-f]{64}$/)
  t.ok((await app.lucent.storage.get(m.fileKey))?.data.equals(fs.readFileSync(COMPACT_X4)), 'the weights are in media storage')

  // within the refresh interval the running app lists and serves it
  const listed = await waitFor(async () => {
    const r = await app.inject({ method: 'GET', url: '/api/models' })
    return r.json().data.models.find((x: { name: string }) => x.name === 'tiny_4x') ? r : null
  }, 10_000, 50)
  const entries = listed.json().data.models.filter((x: { name: string }) => x.name === 'tiny_4x')
  t.same(entries.map((e: { kind: string }) => e.kind), ['photo', 'video'])
  t.match(entries[0], { family: 'tiny_4x', scale: 4, family_scales: [4], category: 'enhance', description: 'a tiny Compact', available: true, own: { architecture: 'Compact', format: 'pytorch', sha256: m.sha256 } })
  t.not(listed.headers.etag, before.headers.etag, 'a new ETag once the list changed')
  const catalogOnly = before.json().data.models
  t.same(listed.json().data.models.slice(0, catalogOnly.length), catalogOnly, "the catalog's entries are unchanged, in front")
  t.notOk(catalogOnly.some((x: { own?: unknown }) => 'own' in x), 'catalog entries carry no `own` field')

  // a photo through it: 40x30 -> 160x120, priced as the catalog's enhance models (general_4x: same output, same coins)
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_4x', img_url: srv.put('b.png', png(40, 30)), extension: '.png' })
  t.equal(r.statusCode, 200, r.body)
  const ref = await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.put('c.png', png(40, 30)), extension: '.png' })
  t.equal(r.json().data.consume_coins, ref.json().data.consume_coins, 'the enhance price class: the price of general_4x')
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  t.match(sniff(await fetchResult(app, d.res_url)), { kind: 'image', format: 'png', width: 160, height: 120 })
  await done(app, key, ref.json().data.job_id)

  // the output-size extension: one scale in the family, resampled to what was asked
  const sized = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_4x', img_url: srv.put('d.png', png(40, 30)), extension: '.jpg', target_width: 100 })
  t.equal(sized.statusCode, 200, sized.body)
  const ds = await done(app, key, sized.json().data.job_id)
  t.equal(ds.status, 'COMPLETED')
  t.match(sniff(await fetchResult(app, ds.res_url)), { format: 'jpeg', width: 100, height: 75 })

  // removed: gone from the list and refused for new jobs within the refresh interval; the weights are deleted
  await removeModel(deps(app), 'tiny_4x')
  t.equal(await app.lucent.storage.get(m.fileKey), null, 'weights deleted (no other entry used them)')
  // jobs accepted before this process saw the removal: run from the local copy (COMPLETED), or, once the runner saw
  // it, ERROR 110400005 with every coin back
  const late: string[] = []
  await waitFor(async () => {
    const x = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_4x', img_url: srv.put('e.png', png(8, 8)), extension: '.png' })
    if (x.statusCode === 200) late.push(x.json().data.job_id)
    return x.json().error_code === 110400005
  }, 10_000, 50)
  const after = await app.inject({ method: 'GET', url: '/api/models' })
  t.same(after.json().data.models, catalogOnly)
  let failed = 0
  for (const j of late) {
    const x = await done(app, key, j)
    if (x.status === 'ERROR') {
      failed++
      t.equal(x.error_code, 110400005)
      t.ok((await app.lucent.store.ledger(id)).some((e) => e.kind === 'refund' && e.jobId === j), 'refunded')
    } else t.equal(x.status, 'COMPLETED')
  }
  const ledger = await app.lucent.store.ledger(id)
  t.equal(ledger.filter((e) => e.kind === 'refund').length, failed, 'only those refunded')
  const sum = (k: string) => ledger.filter((e) => e.kind === k).reduce((n, e) => n + e.delta, 0)
  t.equal(await balance(app, id), 1000 + sum('debit') + sum('refund'))
})

t.test('a removed model is released after the job timeout: the engine forgets its network, the local copy goes', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '100', LUCENT_JOB_TIMEOUT_MS: '4000' })
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000, rate: 100000 })
  const released: Release[] = []
  app.lucent.ownModels.onRelease((r) => released.push(r))
  const keep = await addModel(deps(app), COMPACT_X4, { name: 'keep_4x', kind: 'photo' })
  const gone = await addModel(deps(app), UNSHUFFLE_X2, { name: 'gone_2x', kind: 'photo' })
  await app.lucent.ownModels.refresh()
  for (const name of ['keep_4x', 'gone_2x']) {
    const r = await post(app, '/api/photo-enhancer', key, { model_name: name, img_url: srv.put(`${name}.png`, png(16, 12)), extension: '.png' })
    t.equal(r.statusCode, 200, r.body)
    t.equal((await done(app, key, r.json().data.job_id)).status, 'COMPLETED')
  }
  const cache = path.join(app.lucent.config.dataDir, 'own-models')
  const [keepFile, goneFile] = [keep, gone].map((m) => path.join(cache, `${m.sha256}.pth`))
  t.ok(fs.existsSync(keepFile) && fs.existsSync(goneFile), 'each model has its local copy')

  const t0 = Date.now()
  await removeModel(deps(app), 'gone_2x')
  await waitFor(async () => released.length > 0, 60_000, 50)
  t.ok(Date.now() - t0 >= 3900, 'kept for the job timeout (jobs handed the path may still load it)')
  t.same(released, [{ name: 'gone_2x', sha256: gone.sha256, files: [goneFile], forgotten: true }], 'the engine had it loaded and dropped it')
  t.notOk(fs.existsSync(goneFile), 'local copy deleted')
  t.ok(fs.existsSync(keepFile), "the other model's copy stays")
  const addon = loadAddon()
  t.equal(addon.forgetNetwork(goneFile), false, 'the engine no longer holds the removed network')
  t.equal(addon.forgetNetwork(keepFile), true, 'a registered model stays loaded (forgetNetwork reports what it held)')
  // the kept model still runs (loaded again); the removed one is refused
  const again = await post(app, '/api/photo-enhancer', key, { model_name: 'keep_4x', img_url: srv.put('again.png', png(16, 12)), extension: '.png' })
  t.equal((await done(app, key, again.json().data.job_id)).status, 'COMPLETED')
  t.equal((await post(app, '/api/photo-enhancer', key, { model_name: 'gone_2x', img_url: srv.put('x.png', png(16, 12)), extension: '.png' })).json().error_code, 110400005)

  // a registry opened on a cache with a copy nobody uses any more (left by an earlier run) deletes it at its first refresh
  const orphan = path.join(cache, `${'ab'.repeat(32)}.safetensors`)
  const notes = path.join(cache, 'notes.txt')
  fs.writeFileSync(orphan, 'x')
  fs.writeFileSync(notes, 'an operator file')
  const fresh = new OwnModels(app.lucent.store.ownModels, app.lucent.storage, { cacheDir: cache, refreshMs: 0 })
  await fresh.refresh()
  t.notOk(fs.existsSync(orphan), 'the orphan copy is swept')
  t.ok(fs.existsSync(keepFile) && fs.existsSync(notes), 'registered copies and other files stay')
})

t.test('a pixel-unshuffle model runs on sides that are no multiple of its factor', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const m = await addModel(deps(app), UNSHUFFLE_X2, { name: 'unshuffle_2x', kind: 'photo', priceClass: 'generative' })
  t.match(m, { architecture: 'ESRGAN', scale: 2, multiple: 2, photoPriceClass: 'generative', videoPriceClass: null })
  await app.lucent.ownModels.refresh()
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'unshuffle_2x', img_url: srv.put('odd.png', png(33, 17)), extension: '.png' })
  t.equal(r.statusCode, 200, r.body)
  const gen = await post(app, '/api/photo-enhancer', key, { model_name: 'generative_2x', img_url: srv.put('odd2.png', png(33, 17)), extension: '.png' })
  t.equal(r.json().data.consume_coins, gen.json().data.consume_coins, 'priced as the generative class')
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  t.match(sniff(await fetchResult(app, d.res_url)), { width: 66, height: 34 })
  // a photo-only model is not a video model
  const v = await post(app, '/api/video-enhancer', key, { model_name: 'unshuffle_2x', video_url: srv.put('v.mp4', Buffer.alloc(10)), resolution: [64, 64] })
  t.equal(v.json().error_code, 110400005)
  await done(app, key, gen.json().data.job_id)
})

t.test('an ncnn pair (.param + .bin) is added and served; its scale comes from the smoke run', { skip }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const dir = fs.mkdtempSync(path.join(repoRoot, 'data', 'own-ncnn-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  for (const ext of ['param', 'bin']) fs.copyFileSync(path.join(modelDir, `sr/realesr-animevideov3-x2.${ext}`), path.join(dir, `anime.${ext}`))
  const m = await addModel(deps(app), path.join(dir, 'anime.param'), { kind: 'photo' })
  t.match(m, { name: 'anime', architecture: 'ncnn', format: 'ncnn', scale: 2 })
  t.match(m.fileKey, new RegExp(`^m/own/${m.sha256}\\.[0-9a-f]{12}\\.param$`), "named by identity and by this add")
  const binKey = m.fileKey.replace(/\.param$/, '.bin')
  t.ok(await app.lucent.storage.get(binKey), 'the .bin beside the .param in storage')
  // the .bin missing: refused, nothing stored
  fs.copyFileSync(path.join(dir, 'anime.param'), path.join(dir, 'lonely.param'))
  await t.rejects(addModel(deps(app), path.join(dir, 'lonely.param'), {}), { message: /lonely\.bin/ })
  await app.lucent.ownModels.refresh()
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'anime', img_url: srv.put('n.png', png(20, 12)), extension: '.png' })
  t.equal(r.statusCode, 200, r.body)
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  t.match(sniff(await fetchResult(app, d.res_url)), { width: 40, height: 24 })
  await removeModel(deps(app), 'anime')
  t.equal(await app.lucent.storage.get(m.fileKey), null, 'both files deleted')
  t.equal(await app.lucent.storage.get(binKey), null)
})

t.test('a video through an own model', { skip: skip || (!hasFfmpeg && 'ffmpeg missing') }, async (t) => {
  const app = await build(t)
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 100000 })
  await addModel(deps(app), COMPACT_X4, { name: 'tiny_v4', kind: 'video', priceClass: 'premium' })
  await app.lucent.ownModels.refresh()
  const dir = fs.mkdtempSync(path.join(repoRoot, 'data', 'own-video-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  makeVideo(path.join(dir, 'in.mp4'), 32, 24, 1)
  const body = { model_name: 'tiny_v4', video_url: srv.put('in.mp4', fs.readFileSync(path.join(dir, 'in.mp4'))), resolution: [128, 96] }
  const r = await post(app, '/api/video-enhancer', key, body)
  t.equal(r.statusCode, 200, r.body)
  const premium = await post(app, '/api/video-enhancer', key, { ...body, model_name: 'ultrahd_restore_2x' })
  t.equal(r.json().data.consume_coins, premium.json().data.consume_coins, 'priced as the premium class')
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'COMPLETED', JSON.stringify(d))
  const out = path.join(dir, 'out.mp4')
  fs.writeFileSync(out, await fetchResult(app, d.res_url))
  const { execFileSync } = await import('node:child_process')
  const probe = execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'csv=p=0', out]).toString().trim()
  t.equal(probe, '128,96')
  await done(app, key, premium.json().data.job_id)
})

t.test('refusals store nothing; hostile files and names are answered, not run', { skip }, async (t) => {
  const app = await build(t)
  const dd = deps(app)
  const dir = fs.mkdtempSync(path.join(repoRoot, 'data', 'own-bad-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const objects = () => fs.readdirSync(path.join(app.lucent.config.dataDir, 'objects'), { recursive: true }).length
  const n0 = fs.existsSync(path.join(app.lucent.config.dataDir, 'objects')) ? objects() : 0

  // a catalog name or alias
  for (const name of ['general_4x', 'sharpen_denoise', 'frame_interpolation']) {
    await t.rejects(addModel(dd, COMPACT_X4, { name }), { message: /catalog model/ }, name)
  }
  // a pickle that calls posix.system: refused by the reader, nothing run
  const marker = path.join(dir, 'pwned')
  const cmd = Buffer.from(`touch ${marker}`, 'latin1')
  const len = Buffer.alloc(4)
  len.writeUInt32LE(cmd.length)
  const evil = path.join(dir, 'evil.pth')
  const pkl = Buffer.concat([Buffer.from('\x80\x02cposix\nsystem\nX', 'latin1'), len, cmd, Buffer.from('\x85R.', 'latin1')])
  fs.writeFileSync(evil, zipStored([['archive/data.pkl', pkl], ['archive/version', Buffer.from('3\n')]]))
  await t.rejects(addModel(dd, evil, { name: 'evil' }), { message: /posix\.system/ })
  t.notOk(fs.existsSync(marker), 'nothing in the file ran')
  // not a model at all; a missing file; a bad name; a price class of the wrong kind
  const junk = path.join(dir, 'junk.pth')
  fs.writeFileSync(junk, 'not a model')
  await t.rejects(addModel(dd, junk, { name: 'junk' }), { message: /not a PyTorch/ })
  await t.rejects(addModel(dd, path.join(dir, 'absent.pth'), {}), { message: /no such file/ })
  const usage = (p: Promise<unknown>) => p.then(() => 0, (e: { exitCode?: number }) => e.exitCode)
  t.equal(await usage(addModel(dd, COMPACT_X4, { name: '../etc' })), 2, 'a name that is no API name')
  t.equal(await usage(addModel(dd, COMPACT_X4, { name: 'x', kind: 'photo', priceClass: 'premium' })), 2, 'a video class for a photo model')
  t.equal(await usage(addModel(dd, COMPACT_X4, { name: 'x', kind: 'video', priceClass: 'interp' })), 2, 'interp is no class for an own model')
  t.same(await app.lucent.store.ownModels.list(), [], 'no entry stored')
  t.equal(fs.existsSync(path.join(app.lucent.config.dataDir, 'objects')) ? objects() : 0, n0, 'no object stored')

  // the same name twice: the second is refused, the first kept
  await addModel(dd, COMPACT_X4, { name: 'twice' })
  await t.rejects(addModel(dd, UNSHUFFLE_X2, { name: 'twice' }), { message: /exists/ })
  t.same((await app.lucent.store.ownModels.list()).map((m) => m.architecture), ['Compact'])
  await t.rejects(removeModel(dd, 'general_2x'), { message: /catalog model/ })
  await t.rejects(removeModel(dd, 'nope'), { message: /no own model/ })
})

t.test('a model removed while its job waits: the job ends in ERROR 110400005, all coins back', { skip }, async (t) => {
  // one engine slot, held by a first job, so the second waits in the queue while its model is removed
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_OWN_MODELS_REFRESH_MS: '0' })
  const srv = await inputServer(t)
  const { key, id } = await createKey(app, { coins: 1000 })
  await addModel(deps(app), COMPACT_X4, { name: 'short_lived' })
  await app.lucent.ownModels.refresh()
  const busy = await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: srv.shared('photos/ADE_val_00000114.jpg'), extension: '.png' })
  t.equal(busy.statusCode, 200, busy.body)
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'short_lived', img_url: srv.put('w.png', png(16, 16)), extension: '.png' })
  t.equal(r.statusCode, 200, r.body)
  const coins = r.json().data.consume_coins
  await removeModel(deps(app), 'short_lived')
  await app.lucent.ownModels.refresh()
  const d = await done(app, key, r.json().data.job_id)
  t.equal(d.status, 'ERROR', JSON.stringify(d))
  t.equal(d.error_code, 110400005)
  const refund = (await app.lucent.store.ledger(id)).find((e) => e.kind === 'refund' && e.jobId === r.json().data.job_id)
  t.equal(refund?.delta, coins, 'all coins back')
  await done(app, key, busy.json().data.job_id)
  t.ok(await balance(app, id) > 0)
})
