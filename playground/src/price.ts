/**
 * Price and limit checks from GET /api/models' tables, computed by the gateway's own rules: server/price-rules.ts
 * (pure, bundled into this page by scripts/build-playground.mjs), over the tables the answer carries. The page
 * shows this before submission; the charge the API answers (`consume_coins`) is shown after.
 */
import type { CatalogModel, PhotoPrice, SegmentationPrice, VideoPrice } from './api.js'
import { photoCoins, photoJobCoins, videoCoins, videoRate } from '../../server/price-rules.js'

export interface Quote { coins: number | null; text: string; problem: string | null }

const mp = (px: number) => px / 1e6
/** `lo–hi` of a price table's tiers (the quote before the picture's size is known). */
const coinRange = (tiers: { coins: number }[]) => `${Math.min(...tiers.map((t) => t.coins))}–${Math.max(...tiers.map((t) => t.coins))}`
const fmtMp = (px: number) => `${mp(px) < 0.1 ? mp(px).toFixed(3) : mp(px).toFixed(1)} MP`

export function photoQuote(m: CatalogModel, width: number | null, height: number | null): Quote {
  const price = m.price as PhotoPrice
  if (!width || !height) {
    return { coins: null, text: `${coinRange(price.tiers)} coins by output size (this browser cannot read the picture's size; the charge is shown after submission)`, problem: null }
  }
  const inPx = width * height
  const outW = width * m.scale
  const outH = height * m.scale
  const outPx = outW * outH
  let problem: string | null = null
  if (m.limits.max_input_mp !== null && mp(inPx) > m.limits.max_input_mp) problem = `The input (${fmtMp(inPx)}) is over this model's limit of ${m.limits.max_input_mp} MP.`
  else if (mp(outPx) > m.limits.max_output_mp) problem = `The output (${fmtMp(outPx)}) would be over this model's limit of ${m.limits.max_output_mp} MP.`
  const coins = photoJobCoins(price, m.family_scales, m.scale, { width, height })
  return { coins, text: `${coins} coins: output ${outW} × ${outH} (${fmtMp(outPx)})`, problem }
}

export function videoQuote(m: CatalogModel, outW: number, outH: number, seconds: number | null, interp: { fps?: number; slowmo?: number } = {}): Quote {
  const price = m.price as VideoPrice
  if (!outW || !outH) return { coins: null, text: 'Enter the output resolution to see the price.', problem: 'Enter the output width and height.' }
  // the price class of interpolation alone: an interpolation model (the catalog's `interpolation`)
  if (m.category === 'interp' && !interp.fps && !interp.slowmo) {
    return { coins: null, text: 'Choose a frame rate or slow motion to see the price.', problem: 'Frame interpolation needs a frame rate or slow motion.' }
  }
  if (interp.fps || interp.slowmo) {
    // priced by the output's frames at its rate (x2 above 30 fps, x4 above 60): the server computes it from the source's rate
    return { coins: null, text: 'Interpolated output is priced by its frames at the output rate; the charge is shown after submission', problem: null }
  }
  const { tier, perSecond } = videoRate(price, outW, outH)
  let problem: string | null = null
  if (mp(outW * outH) > m.limits.max_output_mp) problem = `The output (${fmtMp(outW * outH)} per frame) is over the limit of ${m.limits.max_output_mp} MP.`
  else if (seconds !== null && m.limits.min_seconds !== undefined && m.limits.max_seconds !== undefined
    && (seconds < m.limits.min_seconds || seconds > m.limits.max_seconds)) {
    problem = `The video lasts ${seconds.toFixed(1)} s; ${m.limits.min_seconds} s to ${m.limits.max_seconds / 3600} h are accepted.`
  }
  const rate = `${perSecond} coins per second at ${tier} up to 30 fps (${perSecond * price.fps_over_30_factor} above)`
  if (seconds === null) return { coins: null, text: `${rate}; the charge is shown after submission`, problem }
  const coins = videoCoins(price, outW, outH, 30, seconds)
  return { coins, text: `about ${coins} coins for ${seconds.toFixed(1)} s: ${rate}`, problem }
}

/** Background removal: the tier of the input's megapixels (the browser shows the picture upright, as the server prices it). */
export function segmentationQuote(m: CatalogModel, width: number | null, height: number | null): Quote {
  const price = m.price as SegmentationPrice
  if (!width || !height) {
    return { coins: null, text: `${coinRange(price.tiers)} coins by input size (this browser cannot read the picture's size; the charge is shown after submission)`, problem: null }
  }
  const inPx = width * height
  const problem = m.limits.max_input_mp !== null && mp(inPx) > m.limits.max_input_mp
    ? `The input (${fmtMp(inPx)}) is over this model's limit of ${m.limits.max_input_mp} MP.` : null
  const coins = photoCoins(price, inPx)
  return { coins, text: `${coins} coins: input ${width} × ${height} (${fmtMp(inPx)})`, problem }
}
