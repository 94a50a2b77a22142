/** GET /api/models (server/routes/models.ts): every model of the catalog, prices as server/pricing.ts charges, in /docs. */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { build, createKey, addonBuilt, tempDir, modelDir } from '../helper.js'
import { missingNetworks, runnableBy } from '../../server/models/installed.js'
import { AVAILABILITY_MS } from '../../server/routes/models.js'
import { loadManifest } from '../../server/models/manifest.js'
import { PHOTO_MODELS, VIDEO_MODELS, readCatalog } from '../../server/catalog.js'
import { loadPrices, photoPrice, videoPrice, type Prices } from '../../server/pricing.js'

const DEFAULT_PRICES = loadPrices()
import { modelsData } from '../../server/routes/models.js'

interface Entry {
  name: string; kind: 'photo' | 'video'; family: string; scale: number; family_scales: number[]; category: string; aliases: string[]
  description: string; available: boolean
  price: { unit: string; tiers: Array<{ below_mp?: number | null; coins?: number; name?: string; max_short_side?: number | null; coins_per_second?: number }>; fps_over_30_factor?: number; minimum_coins?: number }
  limits: { max_input_mp: number | null; max_output_mp: number; dpi?: boolean; min_seconds?: number; max_seconds?: number }
}

/** The rule a client applies to the answer's photo table (documented in the route's schema). */
function photoFromTable(e: Entry, outPx: number): number {
  const mp = outPx / 1e6
  for (const tier of e.price.tiers) if (tier.below_mp === null || mp < tier.below_mp!) return tier.coins!
  return e.price.tiers[e.price.tiers.length - 1].coins!
}
/** ... and to a video table. */
function videoFromTable(e: Entry, w: number, h: number, fps: number, seconds: number): number {
  const short = Math.min(w, h)
  const tier = e.price.tiers.find((x) => x.max_short_side === null || short <= x.max_short_side!)!
  const perSec = tier.coins_per_second! * (fps > 30 ? e.price.fps_over_30_factor! : 1)
  return Math.max(e.price.minimum_coins!, Math.ceil(perSec * seconds))
}

const OUT_PIXELS = [64 * 64, 1e6, 7_999_999, 8e6, 11.9e6, 12e6, 30e6, 47.9e6, 48e6, 100e6, 108e6, 200e6, 216e6, 300e6, 500e6]
const VIDEO_SIZES: Array<[number, number]> = [[640, 360], [1280, 720], [720, 1280], [1920, 1080], [1920, 1081], [2560, 1440], [3840, 2160], [4096, 2161], [7680, 4320]]

function checkPrices(t: Test, models: Entry[], prices: Prices) {
  let n = 0
  for (const e of models) {
    if (e.kind === 'photo') {
      const m = PHOTO_MODELS.get(e.name)!
      for (const px of OUT_PIXELS) {
        n++
        if (photoFromTable(e, px) !== photoPrice(prices, m.priceClass, px)) t.fail(`${e.name} at ${px} px: ${photoFromTable(e, px)} != ${photoPrice(prices, m.priceClass, px)}`)
      }
    } else {
      const m = VIDEO_MODELS.get(e.name)!
      for (const [w, h] of VIDEO_SIZES) {
        for (const fps of [24, 30, 50]) {
          for (const s of [0.5, 7.55, 60]) {
            n++
            const want = videoPrice(prices, m.priceClass, w, h, fps, s)
            if (videoFromTable(e, w, h, fps, s) !== want) t.fail(`${e.name} ${w}x${h}@${fps} ${s}s: ${videoFromTable(e, w, h, fps, s)} != ${want}`)
          }
        }
      }
    }
  }
  t.pass(`${n} prices computed from the answer's tables equal server/pricing.ts`)
}

/** The catalog's entries of an answer (the background-removal models, kind segmentation, follow them: test/jobs/segmentation.ts). */
const catalogOnly = (models: Array<Entry | { kind: 'segmentation' }>): Entry[] => models.filter((m): m is Entry => m.kind !== 'segmentation')

t.test('every catalog model with kind, scale, limits and the prices in force; no key needed', async (t) => {
  const app = await build(t)
  const r = await app.inject({ method: 'GET', url: '/api/models' })
  t.equal(r.statusCode, 200)
  const body = r.json()
  t.equal(body.code, 200)
  t.equal(body.message, 'OK')
  const models = catalogOnly(body.data.models)
  t.same(models.filter((m) => m.kind === 'photo').map((m) => m.name).sort(), [...PHOTO_MODELS.keys()].sort(), 'every photo model of api.md')
  t.same(models.filter((m) => m.kind === 'video').map((m) => m.name).sort(), [...VIDEO_MODELS.keys()].sort(), 'every video model of api.md')
  for (const e of models) {
    const m = e.kind === 'photo' ? PHOTO_MODELS.get(e.name)! : VIDEO_MODELS.get(e.name)!
    t.equal(e.scale, m.scale, `${e.name} scale`)
    if (e.name !== 'frame_interpolation') t.match(e.name, new RegExp(`_${e.scale}x$`), `${e.name}: the name's suffix is its scale`)
    t.ok(e.family && e.description && !e.description.includes('\n'), `${e.name}: family and a one-line description`)
    if (e.kind === 'photo') {
      const pm = PHOTO_MODELS.get(e.name)!
      t.equal(e.category, pm.priceClass)
      t.same(e.limits, { max_input_mp: pm.limits.maxInMP, max_output_mp: pm.limits.maxOutMP, dpi: pm.category === 'enhance' }, `${e.name} limits`)
      t.equal(e.price.unit, 'output_megapixels')
    } else {
      t.equal(e.category, VIDEO_MODELS.get(e.name)!.priceClass)
      t.match(e.limits, { max_input_mp: null, max_output_mp: 36, min_seconds: 0.5, max_seconds: 3600 })
      t.equal(e.price.unit, 'output_second')
    }
  }
  t.same(models.find((m) => m.name === 'general_2x')!.family_scales, [2, 4], 'the family of general_2x')
  t.same(models.find((m) => m.name === 'generative_1x' && m.kind === 'photo')!.family_scales, [1, 2, 4])
  t.same(models.find((m) => m.name === 'generative_1x' && m.kind === 'video')!.family_scales, [1], 'per kind')
  t.same(models.find((m) => m.name === 'sharpen_denoise_1x')!.family_scales, [1])
  t.same(models.find((m) => m.name === 'sharpen_denoise_1x')!.aliases, ['sharpen_denoise'])
  t.same(models.find((m) => m.name === 'detail_denoise_1x')!.aliases, ['detail_denoise'])
  t.equal(models.find((m) => m.name === 'face_2x')!.family, 'Face Clear')
  t.equal(models.find((m) => m.name === 'ultrahd_restore_2x')!.family, 'Ultra HD')
  t.ok(body.data.formats.photo.includes('jpg') && body.data.formats.video_output.includes('mp4') && body.data.formats.video_input.includes('mkv'))
  checkPrices(t, models, DEFAULT_PRICES)
  // the compat.md examples, spelled out
  const face = models.find((m) => m.name === 'face_2x')!
  t.equal(photoFromTable(face, 192 * 192), 10)
  t.equal(photoFromTable(face, 5000 * 5000), 70)
  const gen = models.find((m) => m.name === 'generative_1x' && m.kind === 'video')!
  t.equal(videoFromTable(gen, 1920, 1080, 24, 10), 300, 'premium video: 2 x 15 coins/s at 1080p')

  // public, with or without a key; conditional GET
  const { key } = await createKey(app)
  const keyed = await app.inject({ method: 'GET', url: '/api/models', headers: { apikey: key } })
  t.equal(keyed.body, r.body)
  t.ok(r.headers.etag)
  const again = await app.inject({ method: 'GET', url: '/api/models', headers: { 'if-none-match': r.headers.etag as string } })
  t.equal(again.statusCode, 304)
  t.equal(again.body, '')
})

t.test("the engine's catalog: every entry listed with its description and availability", { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const app = await build(t)
  const models = catalogOnly((await app.inject({ method: 'GET', url: '/api/models' })).json().data.models)
  const addon = createRequire(import.meta.url)('@lucent/native') as { catalog(): Array<{ name: string; kind: string; scale: number; description: string; available: boolean }> }
  const engine = addon.catalog()
  t.ok(engine.length >= 24)
  const missing = await missingNetworks(modelDir, readCatalog().flatMap((m) => m.networks))
  for (const c of engine) {
    const e = models.find((m) => m.name === c.name && m.kind === c.kind)
    if (!e) {
      t.fail(`${c.kind} ${c.name} missing`)
      continue
    }
    t.equal(e.scale, c.scale, `${c.name} scale agrees with the engine`)
    t.equal(e.description, c.description)
    const files = readCatalog().find((m) => m.name === c.name && m.kind === c.kind)!.networks.every((n) => !missing.includes(n))
    t.equal(e.available, c.available && files, `${c.name}: available where the engine runs it and its files are here`)
  }
  t.equal(models.length, engine.length, 'nothing listed that the engine does not know')
})

t.test('LUCENT_PRICES tables are what the answer shows', async (t) => {
  const dir = await tempDir(t)
  const file = path.join(dir, 'prices.json')
  const custom = { enhance: [[4, 5], [null, 99]], generative: [[10, 1], [20, 2]], video: { '1080p': 100 }, fpsOver30Factor: 3, premiumFactor: 5 }
  fs.writeFileSync(file, JSON.stringify(custom))
  const app = await build(t, { LUCENT_PRICES: file })
  const models = catalogOnly((await app.inject({ method: 'GET', url: '/api/models' })).json().data.models)
  t.same(models.find((m) => m.name === 'general_4x')!.price.tiers, [{ below_mp: 4, coins: 5 }, { below_mp: null, coins: 99 }])
  checkPrices(t, models, app.lucent.prices)
  t.equal(photoFromTable(models.find((m) => m.name === 'generative_4x')!, 50e6), 2, 'beyond the last bound: the last tier')
  t.equal(models.find((m) => m.name === 'ultrahd_restore_2x')!.price.tiers.find((x) => x.name === '1080p')!.coins_per_second, 500)
})

t.test('in /docs', async (t) => {
  const app = await build(t)
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  const op = doc.paths['/api/models']?.get
  t.ok(op, 'GET /api/models documented')
  t.same(op.security, [], 'documented as needing no key')
  const schema = op.responses['200'].content['application/json'].schema
  t.ok(schema.properties.data.properties.models.items.properties.price, 'the model schema is documented')
  t.notOk(doc.paths['/'], 'the playground page is not an API path')
})

t.test('built from the catalog it is given: availability and descriptions pass through', async (t) => {
  const data = modelsData(DEFAULT_PRICES)
  t.equal(data.models.length, PHOTO_MODELS.size + VIDEO_MODELS.size, 'models/catalog.json by default')
  const [first, ...rest] = readCatalog()
  const some = modelsData(DEFAULT_PRICES, [{ ...first, description: 'd', available: false, reason: 'r' }, ...rest])
  t.equal(some.models[0].available, false)
  t.equal(some.models[0].description, 'd')
})

t.test('available: false for a model whose files were never fetched, true once they are (a worker holds them)', async (t) => {
  // a model directory like a plain `lucent models fetch` leaves it: every file but DAT-light's (optional)
  const dir = await tempDir(t)
  const optional = (p: string) => p.startsWith('sr/dat-light/')
  for (const e of loadManifest()) {
    if (optional(e.path) || !fs.existsSync(path.join(modelDir, e.path))) continue
    fs.mkdirSync(path.dirname(path.join(dir, e.path)), { recursive: true })
    fs.symlinkSync(path.join(modelDir, e.path), path.join(dir, e.path))
  }
  const app = await build(t, { LUCENT_MODEL_DIR: dir })
  const get = async () => catalogOnly((await app.inject({ method: 'GET', url: '/api/models' })).json().data.models)
  const before = await get()
  const dat = before.filter((m) => /^high_fidelity_v2_/.test(m.name))
  t.equal(dat.length, 2)
  t.same(dat.map((m) => m.available), [false, false], 'DAT-light never fetched: not available')
  const catalog = readCatalog()
  const here = new Set(catalog.filter((m) => m.networks.every((n) => loadManifest().filter((e) => e.model === n).every((e) => fs.existsSync(path.join(modelDir, e.path))))).map((m) => `${m.kind}/${m.name}`))
  for (const m of before.filter((x) => !/^high_fidelity_v2_/.test(x.name))) {
    const c = catalog.find((x) => x.name === m.name && x.kind === m.kind)!
    t.equal(m.available, c.available && here.has(`${m.kind}/${m.name}`), `${m.kind} ${m.name}`)
  }
  if (!fs.existsSync(path.join(modelDir, 'sr/dat-light/DAT_light_x2.pth'))) return
  // the operator fetches them while the server runs: the next check (and the next answer after the cache) says so
  for (const e of loadManifest().filter((x) => optional(x.path))) {
    fs.mkdirSync(path.dirname(path.join(dir, e.path)), { recursive: true })
    fs.symlinkSync(path.join(modelDir, e.path), path.join(dir, e.path))
  }
  await app.lucent.installed!.refresh()
  await new Promise((r) => setTimeout(r, AVAILABILITY_MS + 100))
  const after = await get()
  t.same(after.filter((m) => /^high_fidelity_v2_/.test(m.name)).map((m) => m.available), [true, true], 'available once fetched')
})

t.test('runnableBy: some live worker lacks none of the networks; a worker that publishes nothing is taken to hold all', async (t) => {
  t.equal(runnableBy(['a'], []), false, 'no worker: nothing runs')
  t.equal(runnableBy(['a', 'b'], [{ missing: ['b'] }]), false)
  t.equal(runnableBy(['a', 'b'], [{ missing: ['b'] }, { missing: ['c'] }]), true, 'the second worker holds both')
  t.equal(runnableBy(['a'], [{ missing: null }]), true)
  t.equal(runnableBy(['a'], [{}]), true, 'an older worker (no list)')
  const dir = await tempDir(t)
  t.same(await missingNetworks(dir, ['sr/realesr-general-x4v3', 'not/in-the-manifest']), ['sr/realesr-general-x4v3'], 'an empty directory lacks a known network; an unknown one is not checked')
})
