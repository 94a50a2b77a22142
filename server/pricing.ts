/**
 * Price tables (coins; 1 coin = 0.001 USD), compat.md defaults, keyed by the catalog's price classes
 * (models/catalog.json `price_class`): a photo class names its table, a video class `premium` applies
 * `premiumFactor`. A deployment overrides any part with a JSON file named by LUCENT_PRICES, same shape as
 * DEFAULT_PRICES (missing keys keep the defaults), e.g.
 *   {"enhance": [[8, 10], [12, 20], [24, 30], [48, 70], [108, 140], [216, 240], [null, 480]]}
 * Photo tables: [upper bound in output megapixels (exclusive; null = no bound), coins] in ascending order.
 * Video: coins per output second by target tier at <= 30 fps; `fpsOver30Factor` above 30 fps, `premiumFactor`
 * for the premium video class (ultrahd_restore / generative), `interpFactor` for frame_interpolation. Frame
 * interpolation (`fps` / `slowmo`, server/video/interp.ts) is priced by its output: the output's seconds (x
 * slowmo) at the output rate, `fpsOver60Factor` instead of `fpsOver30Factor` above 60 fps (frames made by
 * interpolation only: a source above 60 fps, not interpolated, keeps compat.md's 30-60 band price).
 * Background removal (server/segmentation.ts): `segmentation`, [upper bound in upright INPUT megapixels (exclusive;
 * null = no bound), coins per image].
 *
 * The rules themselves live in server/price-rules.ts (pure, shared with the playground), over the tables in the
 * shape GET /api/models publishes; this file loads the tables in force and builds those tables.
 */
import fs from 'node:fs'
import { PhotoPriceClass, type PhotoModel, type VideoPriceClass } from './catalog.js'
import { familyOf } from './jobs/output-size.js'
import {
  photoCoins, photoJobCoins, videoCoins, videoJobCoins, videoNetworkSize, type PhotoPriceTable, type VideoPriceTable,
} from './price-rules.js'

type Tiers = Array<[number | null, number]>
export interface Prices extends Record<PhotoPriceClass, Tiers> {
  video: { '720p': number; '1080p': number; '2k': number; '4k': number; '8k': number }
  fpsOver30Factor: number
  /** Interpolated output above 60 fps (up to 120). */
  fpsOver60Factor: number
  premiumFactor: number
  /** The `interp` video class (frame_interpolation alone). */
  interpFactor: number
  /** Background removal (server/segmentation.ts): [upper bound in upright INPUT megapixels (exclusive), coins]. */
  segmentation: Tiers
}

const DEFAULT_PRICES: Prices = {
  enhance: [[8, 10], [12, 20], [24, 30], [48, 70], [108, 140], [216, 240], [null, 480]],
  generative_portrait: [[8, 20], [12, 30], [24, 40], [null, 60]],
  generative: [[8, 50], [12, 60], [24, 80], [null, 150]],
  video: { '720p': 10, '1080p': 15, '2k': 20, '4k': 25, '8k': 33 },
  fpsOver30Factor: 2,
  fpsOver60Factor: 4,
  premiumFactor: 2,
  interpFactor: 1,
  segmentation: [[4, 5], [12, 10], [24, 15], [null, 20]],
}

export function loadPrices(file?: string): Prices {
  if (!file) return DEFAULT_PRICES
  const o = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Prices>
  const p: Prices = { ...DEFAULT_PRICES, ...o, video: { ...DEFAULT_PRICES.video, ...(o.video ?? {}) } }
  for (const k of [...PhotoPriceClass.enum, 'segmentation'] as const) {
    const t = p[k]
    if (!Array.isArray(t) || t.length === 0 || t.some((r) => !Array.isArray(r) || !(r[0] === null || typeof r[0] === 'number') || !Number.isInteger(r[1]) || r[1] < 0)) {
      throw new Error(`LUCENT_PRICES: ${k} must be [[upperMP|null, coins], ...]`)
    }
  }
  return p
}

/** A photo price class's table in the shape GET /api/models publishes (server/price-rules.ts PhotoPriceTable). */
export function photoTable(prices: Prices, priceClass: PhotoPriceClass): { unit: 'output_megapixels'; tiers: Array<PhotoPriceTable['tiers'][number]> } {
  return { unit: 'output_megapixels', tiers: prices[priceClass].map(([below, coins]) => ({ below_mp: below, coins })) }
}

/** The background-removal table in the shape GET /api/models publishes (tiers by the upright input's megapixels). */
export function segmentationTable(prices: Prices): { unit: 'input_megapixels'; tiers: Array<PhotoPriceTable['tiers'][number]> } {
  return { unit: 'input_megapixels', tiers: prices.segmentation.map(([below, coins]) => ({ below_mp: below, coins })) }
}

/** Video price tiers by the output's short side (inclusive upper bound in px; null = no bound), ascending. */
export const VIDEO_TIERS: ReadonlyArray<readonly [keyof Prices['video'], number | null]> = [
  ['720p', 720], ['1080p', 1080], ['2k', 1440], ['4k', 2160], ['8k', null],
]

/** A video price class's table in the shape GET /api/models publishes (the class factor applied per second). */
export function videoTable(prices: Prices, priceClass: VideoPriceClass): VideoPriceTable & { unit: 'output_second'; tiers: Array<VideoPriceTable['tiers'][number]> } {
  const factor = priceClass === 'premium' ? prices.premiumFactor : priceClass === 'interp' ? prices.interpFactor : 1
  return {
    unit: 'output_second',
    tiers: VIDEO_TIERS.map(([tier, max]) => ({ name: tier, max_short_side: max, coins_per_second: prices.video[tier] * factor })),
    fps_over_30_factor: prices.fpsOver30Factor,
    fps_over_60_factor: prices.fpsOver60Factor,
    minimum_coins: 1,
  }
}

// The gateway's charges: the tables in force through the one set of rules (server/price-rules.ts).

export function photoPrice(prices: Prices, priceClass: PhotoPriceClass, outPixels: number): number {
  return photoCoins(photoTable(prices, priceClass), outPixels)
}

/**
 * The ONE place that decides a photo job's price (server/price-rules.ts photoJobCoins), from the upright input
 * (server/media/orientation.ts uprightSize), the model that runs (its family's scales) and the output asked for:
 * the output's megapixels, but never less than the networks' own output.
 */
export function photoJobPrice(
  prices: Prices, run: PhotoModel, input: { width: number; height: number }, output?: { width: number; height: number },
  models?: ReadonlyMap<string, PhotoModel>,
): number {
  return photoJobCoins(photoTable(prices, run.priceClass), familyOf(run, models).map((m) => m.scale), run.scale, input, output)
}

/**
 * A video job's price (server/price-rules.ts videoJobCoins): per output second, by the tier of `resolution`, or of
 * the network's own output when `resolution` shrinks the input; `netFrames` (frames through the model's network)
 * at least the per-frame floor. The video plan (server/video/plan.ts) is the one caller that charges.
 */
export function videoJobPrice(
  prices: Prices, model: { scale: number; priceClass: VideoPriceClass }, input: { width: number; height: number },
  resolution: readonly [number, number], fps: number, seconds: number, interpolated = false, netFrames = 0,
): number {
  return videoJobCoins(videoTable(prices, model.priceClass), model.scale, input, resolution, fps, seconds, interpolated, netFrames)
}

/** The network's input / output size per frame the price covers (server/price-rules.ts videoNetworkSize). */
export function videoNetwork(
  prices: Prices, model: { scale: number; priceClass: VideoPriceClass; limits: { maxOutMP: number } }, input: { width: number; height: number },
  resolution: readonly [number, number],
): ReturnType<typeof videoNetworkSize> {
  return videoNetworkSize(videoTable(prices, model.priceClass), model.scale, input, resolution, model.limits.maxOutMP)
}

/** Coins for `seconds` of output at `fps` (`interpolated`: the frames are made by interpolation, which
 *  prices above 60 fps by `fpsOver60Factor`). */
export function videoPrice(prices: Prices, priceClass: VideoPriceClass, width: number, height: number, fps: number, seconds: number, interpolated = false): number {
  return videoCoins(videoTable(prices, priceClass), width, height, fps, seconds, interpolated)
}
