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
 */
import fs from 'node:fs'
import { PhotoPriceClass, type VideoPriceClass } from './catalog.js'

type Tiers = Array<[number | null, number]>
export interface Prices extends Record<PhotoPriceClass, Tiers> {
  video: { '720p': number; '1080p': number; '2k': number; '4k': number; '8k': number }
  fpsOver30Factor: number
  /** Interpolated output above 60 fps (up to 120). */
  fpsOver60Factor: number
  premiumFactor: number
  /** The `interp` video class (frame_interpolation alone). */
  interpFactor: number
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
}

export function loadPrices(file?: string): Prices {
  if (!file) return DEFAULT_PRICES
  const o = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Prices>
  const p: Prices = { ...DEFAULT_PRICES, ...o, video: { ...DEFAULT_PRICES.video, ...(o.video ?? {}) } }
  for (const k of PhotoPriceClass.enum) {
    const t = p[k]
    if (!Array.isArray(t) || t.length === 0 || t.some((r) => !Array.isArray(r) || !(r[0] === null || typeof r[0] === 'number') || !Number.isInteger(r[1]) || r[1] < 0)) {
      throw new Error(`LUCENT_PRICES: ${k} must be [[upperMP|null, coins], ...]`)
    }
  }
  return p
}

export function photoPrice(prices: Prices, priceClass: PhotoPriceClass, outPixels: number): number {
  const mp = outPixels / 1e6
  const table = prices[priceClass]
  for (const [upper, coins] of table) if (upper === null || mp < upper) return coins
  return table[table.length - 1][1]
}

/** Video price tiers by the output's short side (inclusive upper bound in px; null = no bound), ascending. */
export const VIDEO_TIERS: ReadonlyArray<readonly [keyof Prices['video'], number | null]> = [
  ['720p', 720], ['1080p', 1080], ['2k', 1440], ['4k', 2160], ['8k', null],
]

export function videoTier(width: number, height: number): keyof Prices['video'] {
  const short = Math.min(width, height)
  for (const [tier, max] of VIDEO_TIERS) if (max === null || short <= max) return tier
  return '8k'
}

/** Coins for `seconds` of output at `fps` (`interpolated`: the frames are made by interpolation, which
 *  prices above 60 fps by `fpsOver60Factor`). */
export function videoPrice(prices: Prices, priceClass: VideoPriceClass, width: number, height: number, fps: number, seconds: number, interpolated = false): number {
  let perSec = prices.video[videoTier(width, height)]
  if (interpolated && fps > 60) perSec *= prices.fpsOver60Factor
  else if (fps > 30) perSec *= prices.fpsOver30Factor
  if (priceClass === 'premium') perSec *= prices.premiumFactor
  if (priceClass === 'interp') perSec *= prices.interpFactor
  return Math.max(1, Math.ceil(perSec * seconds))
}
