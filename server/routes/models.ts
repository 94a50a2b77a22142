/**
 * GET /api/models: the catalog as clients see it (every photo and video model of api.md: kind, family, scale,
 * price table, limits, a one-line description, whether this deployment can run it) plus the accepted formats;
 * the background-removal models (kind `segmentation`, server/segmentation.ts: u2netp, u2net) follow the catalog's.
 *
 * Public (no Apikey): it says nothing that /docs and docs/ do not (names, limits, the price tables in
 * force), and the playground shows it before a key is entered. The answer is built once per process (prices
 * are loaded at start), again when the operator's own models change or a model's `available` changes, and
 * revalidated with an ETag. The operator's own models (bring your own model, server/own-models/) follow the
 * catalog's, each with an `own` field.
 *
 * `available`: the engine's catalog can run the model AND some live worker holds its network files
 * (server/models/installed.ts: the workers' `missing` lists, read at most every AVAILABILITY_MS). An optional
 * model whose files were never fetched (DAT-light: `lucent models fetch --all`) says false, not true.
 *
 * Sources: models/catalog.json (generated from native/engine/src/catalog.rs: names, families, aliases, scales,
 * price classes, limits, descriptions, availability), the accepted formats (server/media/formats.ts) and the
 * price tables in force (server/pricing.ts photoTable / videoTable, LUCENT_PRICES included: the shape the
 * rules of server/price-rules.ts read, here and in the playground).
 */
import crypto from 'node:crypto'
import { Type, type Static } from 'typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { readCatalog, type CatalogModel } from '../catalog.js'
import { asCatalogModels } from '../own-models/registry.js'
import type { OwnModel } from '../store/own-models.js'
import { photoExtensions, videoInputExtensions, videoOutputExtensions } from '../media/formats.js'
import { photoTable, segmentationTable, videoTable, type Prices } from '../pricing.js'
import { SEG_MODELS } from '../segmentation.js'
import { INTERP_LIMITS } from '../video/interp.js'
import { ok } from '../context.js'
import { Envelope } from './schemas.js'

const PhotoPrice = Type.Object({
  unit: Type.Literal('output_megapixels'),
  tiers: Type.Array(Type.Object({
    below_mp: Type.Union([Type.Number(), Type.Null()], { description: 'exclusive upper bound of the output size in megapixels; null = no bound' }),
    coins: Type.Integer(),
  }), { description: 'ascending; the first tier whose bound the output is below sets the price' }),
})
const VideoPrice = Type.Object({
  unit: Type.Literal('output_second'),
  tiers: Type.Array(Type.Object({
    name: Type.String({ examples: ['1080p'] }),
    max_short_side: Type.Union([Type.Integer(), Type.Null()], { description: "inclusive bound of the output's short side in px; null = no bound" }),
    coins_per_second: Type.Number({ description: 'at <= 30 fps, this model (premium factor applied)' }),
  })),
  fps_over_30_factor: Type.Number({ description: 'multiplies coins_per_second above 30 fps' }),
  fps_over_60_factor: Type.Number({ description: 'multiplies coins_per_second above 60 fps of interpolated output (fps / slowmo), instead of fps_over_30_factor' }),
  minimum_coins: Type.Integer(),
})
const SegmentationPrice = Type.Object({
  unit: Type.Literal('input_megapixels'),
  tiers: Type.Array(Type.Object({
    below_mp: Type.Union([Type.Number(), Type.Null()], { description: "exclusive upper bound of the input's size in megapixels (EXIF orientation applied); null = no bound" }),
    coins: Type.Integer(),
  }), { description: 'coins per image, ascending; the first tier whose bound the input is below sets the price' }),
}, { description: 'background removal (kind segmentation)' })
const ModelEntry = Type.Object({
  name: Type.String(),
  kind: Type.Union([Type.Literal('photo'), Type.Literal('video'), Type.Literal('segmentation')], { description: 'segmentation: POST /api/image-segmentation (model_name)' }),
  family: Type.String({ description: "api.md's family name" }),
  scale: Type.Integer({ description: 'output side = input side x scale (video: the usual resolution is input x scale)' }),
  family_scales: Type.Array(Type.Integer(), { description: "the scales of this model's family, ascending (photos: the output-size extension, target_width / target_height / scale, runs the next one at or above the size asked for, then resamples)" }),
  category: Type.String({ description: 'photo: enhance | generative_portrait | generative; video: standard | premium | interp' }),
  aliases: Type.Array(Type.String()),
  description: Type.String(),
  available: Type.Boolean({ description: "false: accepted by the API, but no worker can run it now (the engine's catalog cannot, or its model files are not installed: the job ends in ERROR, refunded)" }),
  price: Type.Union([PhotoPrice, VideoPrice, SegmentationPrice]),
  own: Type.Optional(Type.Object({
    architecture: Type.String({ description: "spandrel's architecture id (ESRGAN, Compact, SPAN, PLKSR ...) or ncnn" }),
    format: Type.String({ description: 'pytorch, pytorch-legacy, safetensors, onnx or ncnn' }),
    sha256: Type.String(),
  }, { description: "Extension: present on the operator's own models (`lucent models add`), absent on the catalog's" })),
  limits: Type.Object({
    max_input_mp: Type.Union([Type.Number(), Type.Null()], { description: 'null = no limit' }),
    max_output_mp: Type.Number(),
    dpi: Type.Optional(Type.Boolean({ description: 'photo: DPI metadata honoured' })),
    min_seconds: Type.Optional(Type.Number()),
    max_seconds: Type.Optional(Type.Number()),
    interpolation: Type.Optional(Type.Object({
      max_fps: Type.Number(), max_fps_factor: Type.Number({ description: 'frames made per source second, at most this x the source rate' }),
      slowmo: Type.Array(Type.Integer()), gif_max_fps: Type.Number(),
    }, { description: 'video: the fps / slowmo request fields (README "Frame interpolation")' })),
  }),
})
export const ModelsData = Type.Object({
  models: Type.Array(ModelEntry),
  formats: Type.Object({
    photo: Type.Array(Type.String(), { description: 'photo input and output extensions' }),
    video_input: Type.Array(Type.String()),
    video_output: Type.Array(Type.String()),
  }),
})
export type ModelsAnswer = Static<typeof ModelsData>

/** The answer's data for the price tables in force and the catalog (models/catalog.json by default). */
export function modelsData(prices: Prices, catalog: CatalogModel[] = readCatalog(), own: OwnModel[] = []): ModelsAnswer {
  const scalesOf = (m: CatalogModel) =>
    [...new Set(catalog.filter((o) => o.kind === m.kind && o.family === m.family).map((o) => o.scale))].sort((a, b) => a - b)
  const common = (m: CatalogModel) => ({
    name: m.name, kind: m.kind, family: m.family, scale: m.scale, family_scales: scalesOf(m), category: m.price_class,
    aliases: [...m.aliases], description: m.description, available: m.available,
  })
  const models: ModelsAnswer['models'] = catalog.map((m) => {
    if (m.kind === 'photo') {
      return {
        ...common(m),
        price: photoTable(prices, m.price_class),
        limits: { max_input_mp: m.limits.max_in_mp, max_output_mp: m.limits.max_out_mp, dpi: m.category === 'enhance' },
      }
    }
    return {
      ...common(m),
      price: videoTable(prices, m.price_class),
      limits: {
        max_input_mp: null, max_output_mp: m.limits.max_out_mp, min_seconds: m.limits.min_seconds, max_seconds: m.limits.max_seconds,
        interpolation: { max_fps: INTERP_LIMITS.maxFps, max_fps_factor: INTERP_LIMITS.maxFactor, slowmo: [...INTERP_LIMITS.slowmo], gif_max_fps: INTERP_LIMITS.gifMaxFps },
      },
    }
  })
  // the operator's own models after the catalog's (an own model is its own family, of one scale)
  for (const o of own) {
    for (const m of asCatalogModels(o)) {
      const [entry] = modelsData(prices, [m]).models
      models.push({ ...entry!, own: { architecture: o.architecture, format: o.format, sha256: o.sha256 } })
    }
  }
  return {
    models,
    formats: { photo: [...photoExtensions], video_input: [...videoInputExtensions], video_output: [...videoOutputExtensions] },
  }
}

/** The background-removal models (server/segmentation.ts; not catalog entries), listed after the catalog's models
 *  (before the operator's own);
 *  `available(network)`: some live worker holds the network's file. */
export function segmentationEntries(prices: Prices, available: (network: string) => boolean): ModelsAnswer['models'] {
  return SEG_MODELS.map((m) => ({
    name: m.name, kind: 'segmentation' as const, family: 'Background Removal', scale: 1, family_scales: [1], category: 'segmentation',
    aliases: [], description: m.description, available: available(m.network), price: segmentationTable(prices),
    limits: { max_input_mp: m.limits.maxInMP, max_output_mp: m.limits.maxInMP },
  }))
}

export { AVAILABILITY_MS } from '../models/installed.js'

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const catalog = readCatalog()
  let built = ''
  let body = ok(modelsData(app.lucent.prices, catalog))
  let etag = ''
  // rebuilt when the operator's own models change (server/own-models/registry.ts generation) or availability does
  const current = async () => {
    const own = app.lucent.ownModels
    // `available` false where no live worker holds the model's networks (unknown: the catalog's word stands)
    const holds = await app.lucent.workerNetworks.check()
    const segAvailable = (n: string) => holds([n]) !== false
    const cat = catalog.map((m) => (m.available && holds(m.networks) === false ? { ...m, available: false } : m))
    const segMissing = SEG_MODELS.filter((m) => !segAvailable(m.network)).map((m) => m.name)
    const key = `${own.generation}:${cat.filter((m) => !m.available).map((m) => `${m.kind}/${m.name}`).join(',')}:${segMissing.join(',')}`
    if (built !== key) {
      const data = modelsData(app.lucent.prices, cat, own.list())
      // the catalog's models, the segmentation models, then the operator's own
      const seg = segmentationEntries(app.lucent.prices, segAvailable)
      body = ok({ ...data, models: [...data.models.slice(0, cat.length), ...seg, ...data.models.slice(cat.length)] })
      etag = `"${crypto.hash('sha256', JSON.stringify(body), 'base64url').slice(0, 27)}"`
      built = key
    }
    return { body, etag }
  }
  app.get('/api/models', {
    config: { public: true },
    schema: {
      tags: ['catalog'], summary: 'Every model: kind, scale, price table, limits, description (no key needed)',
      security: [], response: { 200: Envelope(ModelsData), 304: Type.Null() },
    },
  }, async (req, reply) => {
    const { body, etag } = await current()
    reply.header('etag', etag).header('cache-control', 'no-cache')
    if (req.headers['if-none-match'] === etag) return reply.code(304).send(null)
    return body
  })
}

export default routes
