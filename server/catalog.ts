/**
 * The model catalog as the gateway sees it: API model names, families, aliases, scales, price classes, limits
 * and which model is frame interpolation, built from `models/catalog.json`, the view generated from
 * `native/engine/src/catalog.rs` (the only source;
 * `LUCENT_WRITE_CATALOG=1 cargo test -p lucent-engine --test catalog_models catalog_json` rewrites it).
 * A new plain super-resolution model therefore needs no edit here: its price class names its price table
 * (server/pricing.ts) and its limits come with it.
 *
 * `fromAddon()` is the ONE place that maps the addon's `catalog()` entries (camelCase, napi-rs) to this
 * file's shape (snake_case); test/catalog.ts asserts that both describe the same models.
 */
import fs from 'node:fs'
import path from 'node:path'
import { Type, type Static } from 'typebox'
import { Compile } from 'typebox/compile'
import { MODELS_META_DIR } from './config.js'

const Common = {
  name: Type.String({ minLength: 1 }),
  /** api.md's family name ("General Enhance"): the models of one family (and kind) differ only by scale. */
  family: Type.String({ minLength: 1 }),
  aliases: Type.Array(Type.String()),
  scale: Type.Integer({ minimum: 1 }),
  category: Type.Enum(['enhance', 'generative']),
  description: Type.String(),
  networks: Type.Array(Type.String()),
  pipeline: Type.String(),
  /** Frame interpolation (the engine's interp pipeline): no per-frame enhancement; needs an fps or slowmo. */
  interpolation: Type.Boolean(),
  available: Type.Boolean(),
  reason: Type.Union([Type.String(), Type.Null()]),
}

export const PhotoPriceClass = Type.Enum(['enhance', 'generative_portrait', 'generative'])
export const VideoPriceClass = Type.Enum(['standard', 'premium', 'interp'])
export type PhotoPriceClass = Static<typeof PhotoPriceClass>
export type VideoPriceClass = Static<typeof VideoPriceClass>

/** One entry of models/catalog.json (fields this side does not know, e.g. `face`, are allowed and ignored). */
export const CatalogModel = Type.Union([
  Type.Object({
    ...Common,
    kind: Type.Literal('photo'),
    price_class: PhotoPriceClass,
    limits: Type.Object({ max_in_mp: Type.Number({ exclusiveMinimum: 0 }), max_out_mp: Type.Number({ exclusiveMinimum: 0 }) }),
  }),
  Type.Object({
    ...Common,
    kind: Type.Literal('video'),
    price_class: VideoPriceClass,
    limits: Type.Object({ max_out_mp: Type.Number({ exclusiveMinimum: 0 }), min_seconds: Type.Number({ minimum: 0 }), max_seconds: Type.Number({ exclusiveMinimum: 0 }) }),
  }),
])
export type CatalogModel = Static<typeof CatalogModel>
const CatalogFile = Type.Object({ note: Type.String(), models: Type.Array(CatalogModel, { minItems: 1 }) })
const checkFile = Compile(CatalogFile)

export const CATALOG_FILE = path.join(MODELS_META_DIR, 'catalog.json')

/** Reads and checks models/catalog.json (a malformed file stops the server at start with the first problem). */
export function readCatalog(file = CATALOG_FILE): CatalogModel[] {
  const json: unknown = JSON.parse(fs.readFileSync(file, 'utf8'))
  if (!checkFile.Check(json)) {
    const e = checkFile.Errors(json)[0]
    throw new Error(`${file}: ${e ? `${e.instancePath || '/'} ${e.message}` : 'not a catalog'}`)
  }
  const seen = new Set<string>()
  for (const m of json.models) {
    for (const n of [m.name, ...m.aliases]) {
      if (seen.has(`${m.kind}:${n}`)) throw new Error(`${file}: ${m.kind} model name ${n} listed twice`)
      seen.add(`${m.kind}:${n}`)
    }
  }
  return json.models
}

type Obj = Record<string, unknown>
const pick = (o: Obj, snake: string, camel: string): unknown => (snake in o ? o[snake] : o[camel])

/**
 * The addon's `catalog()` entry (napi-rs camelCase: priceClass, limits.maxInMp ...; snake_case accepted too)
 * in the shape of models/catalog.json. A field the addon does not return stays undefined (compared only
 * where present); an absent `reason` is null, as in the file.
 */
export function fromAddon(entry: object): Partial<CatalogModel> {
  const e = entry as Obj
  const lim = pick(e, 'limits', 'limits') as Obj | undefined
  const limits = lim === undefined ? undefined : Object.fromEntries(
    [['max_in_mp', 'maxInMp'], ['max_out_mp', 'maxOutMp'], ['min_seconds', 'minSeconds'], ['max_seconds', 'maxSeconds']]
      .map(([s, c]) => [s, pick(lim, s, c)] as const).filter(([, v]) => v !== undefined),
  )
  const out: Obj = {
    name: e.name, family: e.family, kind: e.kind, aliases: e.aliases, scale: e.scale, category: e.category,
    price_class: pick(e, 'price_class', 'priceClass'), limits,
    description: e.description, networks: e.networks, pipeline: e.pipeline, interpolation: e.interpolation, available: e.available, reason: e.reason ?? null,
  }
  return out as Partial<CatalogModel>
}

// --- the gateway's maps -------------------------------------------------------------------------------------

export interface PhotoModel {
  name: string
  /** api.md's family name: the output-size extension runs another scale of the same family (jobs/output-size.ts). */
  family: string
  scale: number
  /** Engine category: 'enhance' models honour DPI (api.md), generative ones ignore it. */
  category: 'enhance' | 'generative'
  priceClass: PhotoPriceClass
  limits: { maxInMP: number; maxOutMP: number }
}

export interface VideoModel {
  name: string
  family: string
  scale: number
  /** Frame interpolation (frame_interpolation): no per-frame enhancement; a job needs `fps` or `slowmo`. */
  interpolation: boolean
  priceClass: VideoPriceClass
  limits: { maxOutMP: number; minSeconds: number; maxSeconds: number }
}

/** The gateway's lookups over a list of catalog models (the module's exports are those of models/catalog.json). */
export function catalogMaps(models: CatalogModel[]) {
  const photo = new Map<string, PhotoModel>()
  const video = new Map<string, VideoModel>()
  const photoAliases = new Map<string, string>()
  const videoAliases = new Map<string, string>()
  for (const m of models) {
    if (m.kind === 'photo') {
      photo.set(m.name, { name: m.name, family: m.family, scale: m.scale, category: m.category, priceClass: m.price_class, limits: { maxInMP: m.limits.max_in_mp, maxOutMP: m.limits.max_out_mp } })
      for (const a of m.aliases) photoAliases.set(a, m.name)
    } else {
      video.set(m.name, { name: m.name, family: m.family, scale: m.scale, interpolation: m.interpolation, priceClass: m.price_class, limits: { maxOutMP: m.limits.max_out_mp, minSeconds: m.limits.min_seconds, maxSeconds: m.limits.max_seconds } })
      for (const a of m.aliases) videoAliases.set(a, m.name)
    }
  }
  return {
    PHOTO_MODELS: photo as ReadonlyMap<string, PhotoModel>,
    /** Every accepted photo model_name: the catalog's names, then their aliases (the request schema's enum). */
    PHOTO_MODEL_NAMES: [...photo.keys(), ...photoAliases.keys()],
    /** A photo model by name or alias. */
    photoModel: (name: string): PhotoModel | undefined => photo.get(photoAliases.get(name) ?? name),
    VIDEO_MODELS: video as ReadonlyMap<string, VideoModel>,
    /** Every accepted video model_name: the catalog's names, then their aliases. */
    VIDEO_MODEL_NAMES: [...video.keys(), ...videoAliases.keys()],
    /** A video model by name or alias. */
    videoModel: (name: string): VideoModel | undefined => video.get(videoAliases.get(name) ?? name),
  }
}

export const { PHOTO_MODELS, PHOTO_MODEL_NAMES, photoModel, VIDEO_MODELS, VIDEO_MODEL_NAMES, videoModel } = catalogMaps(readCatalog())
