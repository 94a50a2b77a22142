/**
 * THE price rules, as pure functions of the price tables GET /api/models publishes (server/routes/models.ts
 * `price`): the gateway charges with them (server/pricing.ts builds the tables in force from DEFAULT_PRICES /
 * LUCENT_PRICES and calls these) and the playground quotes with them (playground/src/price.ts, bundled by
 * scripts/build-playground.mjs). No Node imports: this file is type-checked and bundled for the browser too.
 *
 * - Photo: coins by output megapixels, the first tier whose (exclusive) bound the output is below, else the last
 *   tier; a job is charged the larger of the output asked for and the networks' own output ([`photoJobCoins`]).
 * - Video: coins per output second by the output's short side (inclusive bounds; the class factor, premium or
 *   interp, is already in `coins_per_second`), x `fps_over_30_factor` above 30 fps, or x `fps_over_60_factor`
 *   above 60 fps of interpolated output; rounded up, never below `minimum_coins`.
 */

/** A photo model's price table (GET /api/models `price` of a photo model; `unit` is not read). */
export interface PhotoPriceTable {
  tiers: ReadonlyArray<{ below_mp: number | null; coins: number }>
}

/** A video model's price table (GET /api/models `price` of a video model; `unit` is not read). */
export interface VideoPriceTable {
  tiers: ReadonlyArray<{ name: string; max_short_side: number | null; coins_per_second: number }>
  fps_over_30_factor: number
  fps_over_60_factor: number
  minimum_coins: number
}

/** Scales within this of each other are the same (as server/jobs/output-size.ts variantFor rounds). */
const EPS = 1e-9

/** Coins for a photo output of `outPixels` pixels: the first tier it is below, else the last tier. */
export function photoCoins(table: PhotoPriceTable, outPixels: number): number {
  const mp = outPixels / 1e6
  for (const t of table.tiers) if (t.below_mp === null || mp < t.below_mp) return t.coins
  return table.tiers[table.tiers.length - 1].coins
}

/**
 * A photo job's coins, from the upright input, the scales of the model's family (GET /api/models
 * `family_scales`), the scale of the member that runs and the output asked for: the output's megapixels, but
 * never less than the networks' own output. The charged pixels are the larger of
 * - the output asked for (`output`; undefined: the model's own, input x scale), and
 * - the network's native output: upright input pixels x s^2, where s is the scale of the family member at or
 *   below the scale asked for (the larger of output side / input side, both sides), the smallest member when
 *   the request is below all of them, and never above the member that runs. Every network of a model's chain
 *   (a face model's whole-picture base, its face crops) works within that output.
 * So a request at or above a model's own size (the commercial API, `scale` >= the family's smallest) costs
 * what its output costs; shrinking the output (`target_width: 1`, `scale: 0.01`) or squeezing one side costs
 * at least the native output of the model that does the work.
 */
export function photoJobCoins(
  table: PhotoPriceTable, familyScales: readonly number[], runScale: number,
  input: { width: number; height: number }, output?: { width: number; height: number },
): number {
  const inPx = input.width * input.height
  const want = output ? Math.max(output.width / input.width, output.height / input.height) : runScale
  const scales = [...familyScales].sort((a, b) => a - b).filter((s) => s <= runScale + EPS)
  const s = [...scales].reverse().find((x) => x <= want + EPS) ?? scales[0] ?? runScale
  const asked = output ? output.width * output.height : inPx * runScale * runScale
  return photoCoins(table, Math.max(asked, inPx * s * s))
}

/** The tier of a video output of width x height (by its short side) and its coins per second at <= 30 fps. */
export function videoRate(table: VideoPriceTable, width: number, height: number): { tier: string; perSecond: number } {
  const short = Math.min(width, height)
  const t = table.tiers.find((x) => x.max_short_side === null || short <= x.max_short_side) ?? table.tiers[table.tiers.length - 1]
  return { tier: t.name, perSecond: t.coins_per_second }
}

/** Coins for `seconds` of video output of width x height at `fps` (`interpolated`: the frames are made by
 *  interpolation, which prices above 60 fps by `fps_over_60_factor`). */
export function videoCoins(table: VideoPriceTable, width: number, height: number, fps: number, seconds: number, interpolated = false): number {
  let perSec = videoRate(table, width, height).perSecond
  if (interpolated && fps > 60) perSec *= table.fps_over_60_factor
  else if (fps > 30) perSec *= table.fps_over_30_factor
  return Math.max(table.minimum_coins, Math.ceil(perSec * seconds))
}

/**
 * A video job's coins (the video counterpart of photoJobCoins): per output second, by the tier of the output asked
 * for (`resolution`), as compat.md prices it. The network enhances every frame at its own size (the upright input
 * x the model's scale) before ffmpeg fits it into `resolution`, so a `resolution` smaller than the input itself (a
 * request that shrinks the video: no enhancer's client needs the network for that) is priced at the tier of the
 * network's own output. Any `resolution` at or above the input's short side keeps compat.md's price exactly: the
 * contract's answers stay byte-compatible (see docs/api.md "Money policy" for the gap this leaves).
 */
export function videoJobCoins(
  table: VideoPriceTable, scale: number, input: { width: number; height: number },
  resolution: readonly [number, number], fps: number, seconds: number, interpolated = false,
): number {
  const [w, h] = resolution
  const shrinks = Math.min(w, h) < Math.min(input.width, input.height)
  const [pw, ph] = shrinks ? [input.width * scale, input.height * scale] : [w, h]
  return videoCoins(table, pw, ph, fps, seconds, interpolated)
}
