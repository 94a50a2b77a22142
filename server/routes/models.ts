/**
 * GET /api/models: the catalog as clients see it (every photo and video model of api.md: kind, family, scale,
 * price table, limits, a one-line description, whether this deployment can run it) plus the accepted formats.
 *
 * Public (no Apikey): it says nothing that /docs and the README do not (names, limits, the price tables in
 * force), and the playground shows it before a key is entered. The answer is built once per process (prices
 * are loaded at start) and revalidated with an ETag.
 *
 * Sources: names, scales, categories, limits and formats from server/catalog.ts; prices from server/pricing.ts
 * (the tables in force, LUCENT_PRICES included); descriptions and availability from the engine's catalog
 * (native/engine/src/catalog.rs through the addon's catalog()).
 */
import crypto from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Type, type Static } from 'typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import {
  PHOTO_ALIASES, PHOTO_EXTENSIONS, PHOTO_LIMITS, PHOTO_MODELS, VIDEO_INPUT_EXTENSIONS, VIDEO_MAX_OUT_MP, VIDEO_MAX_SECONDS,
  VIDEO_MIN_SECONDS, VIDEO_MODELS, VIDEO_OUTPUT_EXTENSIONS,
} from '../catalog.js'
import { VIDEO_TIERS, type Prices } from '../pricing.js'
import { ok } from '../context.js'
import { Envelope } from './schemas.js'

/** api.md's family names ("Photo model names" / "Video model names" tables), by model name without the scale. */
const FAMILIES: Record<'photo' | 'video', Record<string, string>> = {
  photo: {
    face: 'Face Clear', face_v2: 'Face Natural', general: 'General Enhance', high_fidelity: 'High Fidelity',
    sharpen_denoise: 'Sharp Denoise', detail_denoise: 'Detail Denoise', generative_portrait: 'Generative Portrait',
    generative: 'Generative Enhance',
  },
  video: {
    face_soft: 'Face Soft', portrait_restore: 'Portrait Restore', general_restore: 'General Restore',
    ultrahd_restore: 'Ultra HD', generative: 'Generative',
  },
}

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
  minimum_coins: Type.Integer(),
})
const ModelEntry = Type.Object({
  name: Type.String(),
  kind: Type.Union([Type.Literal('photo'), Type.Literal('video')]),
  family: Type.String({ description: "api.md's family name" }),
  scale: Type.Integer({ description: 'output side = input side x scale (video: the usual resolution is input x scale)' }),
  category: Type.String({ description: 'photo: enhance | generative_portrait | generative; video: standard | premium' }),
  aliases: Type.Array(Type.String()),
  description: Type.String(),
  available: Type.Boolean({ description: "false: accepted by the API, but the engine's catalog says it cannot run here (the job ends in ERROR, refunded)" }),
  price: Type.Union([PhotoPrice, VideoPrice]),
  limits: Type.Object({
    max_input_mp: Type.Union([Type.Number(), Type.Null()], { description: 'null = no limit' }),
    max_output_mp: Type.Number(),
    dpi: Type.Optional(Type.Boolean({ description: 'photo: DPI metadata honoured' })),
    min_seconds: Type.Optional(Type.Number()),
    max_seconds: Type.Optional(Type.Number()),
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

interface EngineEntry { name: string; kind: 'photo' | 'video'; description: string; available: boolean }

/** The engine's catalog (descriptions, availability); empty when the addon cannot be loaded here. */
export function engineCatalog(): EngineEntry[] {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
  try {
    const addon = createRequire(import.meta.url)(path.join(root, 'native', 'node')) as { catalog(): EngineEntry[] }
    return addon.catalog()
  } catch {
    return []
  }
}

const family = (kind: 'photo' | 'video', name: string) => FAMILIES[kind][name.replace(/_\d+x$/, '')] ?? name

/** The answer's data for the price tables in force and the engine's catalog. */
export function modelsData(prices: Prices, engine: EngineEntry[] = engineCatalog()): ModelsAnswer {
  const known = new Map(engine.map((e) => [`${e.kind}:${e.name}`, e]))
  const described = (kind: 'photo' | 'video', name: string, scale: number) => {
    const e = known.get(`${kind}:${name}`)
    // not in the engine's catalog here (addon not loadable on this gateway host): the API accepts it; workers decide
    return { description: e?.description ?? `${family(kind, name)} ${scale}x`, available: e ? e.available : true }
  }
  const photo = [...PHOTO_MODELS.values()].map((m) => ({
    name: m.name, kind: 'photo' as const, family: family('photo', m.name), scale: m.scale, category: m.category,
    aliases: Object.keys(PHOTO_ALIASES).filter((a) => PHOTO_ALIASES[a] === m.name),
    ...described('photo', m.name, m.scale),
    price: { unit: 'output_megapixels' as const, tiers: prices[m.category].map(([below, coins]) => ({ below_mp: below, coins })) },
    limits: { max_input_mp: PHOTO_LIMITS[m.category].maxInMP, max_output_mp: PHOTO_LIMITS[m.category].maxOutMP, dpi: m.category === 'enhance' },
  }))
  const video = [...VIDEO_MODELS.values()].map((m) => {
    const factor = m.tier === 'premium' ? prices.premiumFactor : 1
    return {
      name: m.name, kind: 'video' as const, family: family('video', m.name), scale: m.scale, category: m.tier, aliases: [],
      ...described('video', m.name, m.scale),
      price: {
        unit: 'output_second' as const,
        tiers: VIDEO_TIERS.map(([tier, max]) => ({ name: tier, max_short_side: max, coins_per_second: prices.video[tier] * factor })),
        fps_over_30_factor: prices.fpsOver30Factor,
        minimum_coins: 1,
      },
      limits: { max_input_mp: null, max_output_mp: VIDEO_MAX_OUT_MP, min_seconds: VIDEO_MIN_SECONDS, max_seconds: VIDEO_MAX_SECONDS },
    }
  })
  return {
    models: [...photo, ...video],
    formats: {
      photo: Object.keys(PHOTO_EXTENSIONS),
      video_input: [...VIDEO_INPUT_EXTENSIONS],
      video_output: [...VIDEO_OUTPUT_EXTENSIONS],
    },
  }
}

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const body = ok(modelsData(app.lucent.prices))
  const etag = `"${crypto.hash('sha256', JSON.stringify(body), 'base64url').slice(0, 27)}"`
  app.get('/api/models', {
    config: { public: true },
    schema: {
      tags: ['catalog'], summary: 'Every model: kind, scale, price table, limits, description (no key needed)',
      security: [], response: { 200: Envelope(ModelsData), 304: Type.Null() },
    },
  }, async (req, reply) => {
    reply.header('etag', etag).header('cache-control', 'no-cache')
    if (req.headers['if-none-match'] === etag) return reply.code(304).send(null)
    return body
  })
}

export default routes
