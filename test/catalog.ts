/**
 * The one catalog: models/catalog.json (generated from native/engine/src/catalog.rs) is what the gateway's
 * maps are built from (server/catalog.ts), the built addon's `catalog()` describes the same models (compared
 * through the ONE mapping function `fromAddon`), and prices follow a model's price class.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import {
  CATALOG_FILE, PHOTO_MODEL_NAMES, VIDEO_MODEL_NAMES, catalogMaps, fromAddon, photoModel, readCatalog, videoModel, type CatalogModel,
} from '../server/catalog.js'
import { loadPrices, photoPrice, videoPrice } from '../server/pricing.js'
import { addonBuilt } from './helper.js'

const FIELDS = ['name', 'family', 'kind', 'aliases', 'scale', 'category', 'price_class', 'limits', 'description', 'networks', 'pipeline', 'interpolation', 'available', 'reason'] as const

t.test('the API names, in API order, as the request schemas list them', async (t) => {
  t.same(PHOTO_MODEL_NAMES, [
    'face_2x', 'face_4x', 'face_v2_2x', 'face_v2_4x', 'general_2x', 'general_4x', 'high_fidelity_2x', 'high_fidelity_4x',
    'high_fidelity_v2_2x', 'high_fidelity_v2_4x', 'sharpen_denoise_1x', 'detail_denoise_1x', 'generative_portrait_1x', 'generative_portrait_2x', 'generative_portrait_4x',
    'generative_1x', 'generative_2x', 'generative_4x', 'sharpen_denoise', 'detail_denoise',
  ])
  t.same(VIDEO_MODEL_NAMES, ['face_soft_2x', 'portrait_restore_1x', 'portrait_restore_2x', 'general_restore_1x', 'general_restore_2x',
    'general_restore_4x', 'ultrahd_restore_2x', 'generative_1x', 'frame_interpolation'])
  t.equal(photoModel('detail_denoise')?.name, 'detail_denoise_1x', 'aliases resolve to the catalog name')
  t.equal(photoModel('general_restore_2x'), undefined, 'a video name is not a photo model')
  t.equal(videoModel('general_4x'), undefined)
})

t.test('scales, price classes and limits (api.md Limits, compat.md prices)', async (t) => {
  t.same(photoModel('face_2x'), { name: 'face_2x', family: 'Face Clear', scale: 2, category: 'enhance', priceClass: 'enhance', limits: { maxInMP: 70, maxOutMP: 432 } })
  t.same(photoModel('generative_portrait_4x'), { name: 'generative_portrait_4x', family: 'Generative Portrait', scale: 4, category: 'generative', priceClass: 'generative_portrait', limits: { maxInMP: 34, maxOutMP: 34 } })
  t.match(photoModel('generative_1x'), { scale: 1, category: 'generative', priceClass: 'generative', limits: { maxInMP: 34, maxOutMP: 34 } })
  t.match(photoModel('sharpen_denoise_1x'), { scale: 1, priceClass: 'enhance' })
  for (const name of VIDEO_MODEL_NAMES) {
    t.match(videoModel(name), { limits: { maxOutMP: 36, minSeconds: 0.5, maxSeconds: 3600 } }, `${name} limits`)
    const cls = name === 'ultrahd_restore_2x' || name === 'generative_1x' ? 'premium' : name === 'frame_interpolation' ? 'interp' : 'standard'
    t.equal(videoModel(name)!.priceClass, cls, `${name} price class`)
    t.equal(videoModel(name)!.interpolation, name === 'frame_interpolation', `${name}: interpolation`)
  }
})

t.test('models/catalog.json: the contract shape, pretty-printed with a trailing newline', async (t) => {
  const text = fs.readFileSync(CATALOG_FILE, 'utf8')
  const json = JSON.parse(text)
  t.equal(text, JSON.stringify(json, null, 2) + '\n')
  t.match(json.note, /generated from native\/engine\/src\/catalog\.rs/)
  for (const m of json.models) for (const f of FIELDS) t.ok(f in m, `${m.kind} ${m.name}: ${f}`)
  const bad = path.join(t.testdir({ 'c.json': JSON.stringify({ note: '', models: [{ ...json.models[0], price_class: 'gold' }] }) }), 'c.json')
  t.throws(() => readCatalog(bad), /c\.json: \/models\/0/, 'an unknown price class stops the server with the place it is at')
  const dup = path.join(t.testdir({ 'd.json': JSON.stringify({ note: '', models: [json.models[0], { ...json.models[1], aliases: [json.models[0].name] }] }) }), 'd.json')
  t.throws(() => readCatalog(dup), /listed twice/)
})

t.test('a new plain SR model needs no code: its price class names its table, its limits come with it', async (t) => {
  const models = readCatalog()
  const general = models.find((m) => m.name === 'general_4x')!
  const extra: CatalogModel = { ...general, name: 'plain_3x', scale: 3, aliases: ['plain'], networks: ['sr/some-x3'] }
  const maps = catalogMaps([...models, extra])
  const m = maps.photoModel('plain')!
  t.same(m, { name: 'plain_3x', family: 'General Enhance', scale: 3, category: 'enhance', priceClass: 'enhance', limits: { maxInMP: 70, maxOutMP: 432 } })
  t.ok(maps.PHOTO_MODEL_NAMES.includes('plain_3x') && maps.PHOTO_MODEL_NAMES.includes('plain'))
  const prices = loadPrices()
  t.equal(photoPrice(prices, m.priceClass, 100 * 100 * 9), 10, 'enhance table, under 8 MP')
  t.equal(photoPrice(prices, 'generative_portrait', 9e6), 30)
  t.equal(videoPrice(prices, 'premium', 1280, 720, 25, 2), 40, '720p tier x premium factor')
  t.equal(videoPrice(prices, 'standard', 1280, 720, 60, 2), 40, '720p tier x fps over 30')
})

t.test('fromAddon: the one mapping of the addon entry (camelCase or snake_case) to the file shape', async (t) => {
  t.same(fromAddon({ name: 'x', kind: 'photo', priceClass: 'enhance', limits: { maxInMp: 70, maxOutMp: 432 }, available: true }),
    { name: 'x', family: undefined, kind: 'photo', aliases: undefined, scale: undefined, category: undefined, price_class: 'enhance', limits: { max_in_mp: 70, max_out_mp: 432 },
      description: undefined, networks: undefined, pipeline: undefined, interpolation: undefined, available: true, reason: null })
  t.match(fromAddon({ name: 'v', kind: 'video', price_class: 'premium', limits: { max_out_mp: 36, minSeconds: 0.5, max_seconds: 3600 }, reason: 'r' }),
    { price_class: 'premium', limits: { max_out_mp: 36, min_seconds: 0.5, max_seconds: 3600 }, reason: 'r' })
})

t.test("the built addon's catalog() and models/catalog.json describe the same models", { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const addon = createRequire(import.meta.url)('@lucent/native') as typeof import('@lucent/native')
  const file = readCatalog()
  const built = addon.catalog().map(fromAddon)
  t.same(built.map((m) => `${m.kind}:${m.name}`), file.map((m) => `${m.kind}:${m.name}`), 'same models, same order')
  const missing = new Set<string>()
  for (const [i, m] of file.entries()) {
    const b = built[i] as Record<string, unknown>
    for (const f of FIELDS) {
      if (b[f] === undefined) {
        missing.add(f)
        continue
      }
      t.same(b[f], m[f], `${m.kind} ${m.name}: ${f}`)
    }
  }
  // The core fields every addon build returns; the others (aliases, price class, limits) are compared as soon as
  // the addon returns them (contracts.md: the generated napi declarations carry every field of the file).
  for (const f of ['name', 'kind', 'scale', 'category', 'description', 'networks', 'pipeline', 'available'] as const) t.notOk(missing.has(f), `addon returns ${f}`)
  if (missing.size) t.comment(`fields this addon build does not return yet: ${[...missing].join(', ')}`)
})
