/**
 * THE price rules, as pure functions of the price tables GET /api/models publishes (server/routes/models.ts
 * `price`): the gateway charges with them (server/pricing.ts builds the tables in force from DEFAULT_PRICES /
 * LUCENT_PRICES and calls these) and the playground quotes with them (playground/src/price.ts, bundled by
 * scripts/build-playground.mjs). No Node imports: this file is type-checked and bundled for the browser too.
 *
 * - Photo: coins by output megapixels, the first tier whose (exclusive) bound the output is below, else the last
 *   tier; a job is charged the larger of the output asked for and the networks' own output ([`photoJobCoins`]).
 * - Video: coins per output second by the output's tier (inclusive bounds; the class factor, premium or
 *   interp, is already in `coins_per_second`), x `fps_over_30_factor` above 30 fps, or x `fps_over_60_factor`
 *   above 60 fps of interpolated output; rounded up, never below `minimum_coins`.
 *   The tier is the larger of the short side's tier and the megapixel rule's: a tier whose short side bound is S
 *   holds at most S x S x 21/9 pixels (the widest ordinary aspect, 21:9, priced by its short side alone; a
 *   7680x720 panorama, 5.5 MP, is priced at the 4K tier, not at 720p) ([`videoRate`]).
 * - The work a video price covers (issue 29): the model's network never outputs more per frame than the priced
 *   tier holds (its short side bound and its pixels; the last tier: the model's per-frame megapixel limit): the
 *   frames are scaled down before the network where needed ([`videoNetworkSize`]); and every frame through the
 *   model's network costs at least 1/30 of the tier's coins per second, after a slack of 10 % + 2 frames
 *   ([`videoJobCoins`] `netFrames`): a source above 60 fps, a packet flood, or interpolation that runs many
 *   source frames through the network pays for those frames. Honest files at up to 60 fps never reach it.
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

/** Pixels a tier of short-side bound `side` holds (the megapixel rule): side x side x 21 / 9; null: no bound. */
export function tierPixels(side: number | null): number | null {
  return side === null ? null : (side * side * 21) / 9
}

/** The tier a video output of width x height is priced at: the first tier that holds both its short side and its
 *  pixels (the megapixel rule, `tierPixels`), else the last. */
export function videoTier(table: VideoPriceTable, width: number, height: number): VideoPriceTable['tiers'][number] {
  const short = Math.min(width, height)
  const px = width * height
  const fits = (x: VideoPriceTable['tiers'][number]) => x.max_short_side === null || (short <= x.max_short_side && px <= tierPixels(x.max_short_side)! + EPS)
  return table.tiers.find(fits) ?? table.tiers[table.tiers.length - 1]
}

/** The tier of a video output of width x height (short side and megapixel rule) and its coins per second at <= 30 fps. */
export function videoRate(table: VideoPriceTable, width: number, height: number): { tier: string; perSecond: number } {
  const t = videoTier(table, width, height)
  return { tier: t.name, perSecond: t.coins_per_second }
}

/** Frames through the model's network a price covers without the per-frame floor: 10 % + this many. */
export const FRAME_SLACK = { ratio: 0.1, frames: 2 } as const

/** The per-frame floor: coins for `netFrames` frames through the network at `perSecond` (1/30 of it per frame,
 *  after the slack). */
export function frameFloorCoins(perSecond: number, netFrames: number): number {
  const charged = Math.max(0, netFrames - FRAME_SLACK.frames) / (1 + FRAME_SLACK.ratio)
  return Math.ceil((perSecond * charged) / 30)
}

/** Coins for `seconds` of video output of width x height at `fps` (`interpolated`: the frames are made by
 *  interpolation, which prices above 60 fps by `fps_over_60_factor`). */
export function videoCoins(table: VideoPriceTable, width: number, height: number, fps: number, seconds: number, interpolated = false): number {
  let perSec = videoRate(table, width, height).perSecond
  if (interpolated && fps > 60) perSec *= table.fps_over_60_factor
  else if (fps > 30) perSec *= table.fps_over_30_factor
  return Math.max(table.minimum_coins, Math.ceil(perSec * seconds))
}

/** The box a video job is priced by: `resolution`, or the network's own output (the upright input x the model's
 *  scale) when `resolution` shrinks the input (a short side below the input's). */
export function videoPricedBox(scale: number, input: { width: number; height: number }, resolution: readonly [number, number]): [number, number] {
  const [w, h] = resolution
  const shrinks = Math.min(w, h) < Math.min(input.width, input.height)
  return shrinks ? [input.width * scale, input.height * scale] : [w, h]
}

/**
 * A video job's coins (the video counterpart of photoJobCoins): per output second, by the tier of the output asked
 * for (`resolution`), as compat.md prices it; a `resolution` smaller than the input itself (a request that shrinks
 * the video) is priced at the tier of the network's own output (`videoPricedBox`). Any `resolution` at or above the
 * input's short side keeps compat.md's price (16:9 .. 21:9 and narrower aspects: the megapixel rule of `videoRate`
 * does not move them). The network never outputs more per frame than that tier holds (`videoNetworkSize`), and
 * `netFrames` (the frames through the model's network, counted in the file) are charged at least the per-frame
 * floor (`frameFloorCoins`).
 */
export function videoJobCoins(
  table: VideoPriceTable, scale: number, input: { width: number; height: number },
  resolution: readonly [number, number], fps: number, seconds: number, interpolated = false, netFrames = 0,
): number {
  const [pw, ph] = videoPricedBox(scale, input, resolution)
  const floor = netFrames > 0 ? frameFloorCoins(videoRate(table, pw, ph).perSecond, netFrames) : 0
  return Math.max(videoCoins(table, pw, ph, fps, seconds, interpolated), floor)
}

/**
 * The network's input and output size per frame for a video priced by `videoPricedBox`: the upright input, scaled
 * down (aspect kept, even sides) when the network's output (input x scale) would exceed what the priced tier holds:
 * its short side bound and its pixels (`tierPixels`); the last tier (no bound): `maxOutMP`. Never scaled up.
 */
export function videoNetworkSize(
  table: VideoPriceTable, scale: number, input: { width: number; height: number }, resolution: readonly [number, number], maxOutMP: number,
): { input: { width: number; height: number }; output: { width: number; height: number }; tier: string } {
  const [pw, ph] = videoPricedBox(scale, input, resolution)
  const t = videoTier(table, pw, ph)
  const maxShort = t.max_short_side ?? Infinity
  const maxPx = Math.min(tierPixels(t.max_short_side) ?? Infinity, maxOutMP * 1e6)
  const { width: W, height: H } = input
  const f = Math.min(1, maxShort / (Math.min(W, H) * scale), Math.sqrt(maxPx / (W * H * scale * scale)))
  const even = (x: number) => Math.max(2, Math.floor(x / 2) * 2)
  const nin = f >= 1 - EPS ? { width: W, height: H } : { width: even(W * f), height: even(H * f) }
  return { input: nin, output: { width: nin.width * scale, height: nin.height * scale }, tier: t.name }
}
