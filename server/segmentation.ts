/**
 * Background removal (POST /api/image-segmentation, issue 31) as the gateway sees it: the two U²-Net models the
 * engine runs by name (native/engine/src/pipelines/segment: `u2netp`, `u2net`, the network files seg/<name>.onnx),
 * their limits, the outputs a request can ask for (`return_type`), where a job's files are stored, the work budget
 * and the price rule (coins per image by upright INPUT megapixels, the `segmentation` table of server/pricing.ts).
 *
 * These models are not in models/catalog.json (its reader, server/catalog.ts, and the engine's catalog know
 * photo and video models only; segmentation takes no scale, family or output size): GET /api/models lists them
 * from here with `kind: "segmentation"` (server/routes/models.ts).
 */
import { BUDGET_MARGIN } from './jobs/budget.js'
import type { PhotoPriceTable } from './price-rules.js'
import { photoCoins } from './price-rules.js'

export interface SegModel {
  name: 'u2netp' | 'u2net'
  /** The network stem (models/manifest.tsv `model` column; GET /api/models `available` checks it). */
  network: string
  description: string
  limits: { maxInMP: number }
}

/** The models, the small one first (the one every deployment and test has: `lucent models fetch` gets it). */
export const SEG_MODELS: readonly SegModel[] = [
  { name: 'u2netp', network: 'seg/u2netp', description: 'Background removal, U²-Net small (4.6 MB), edges refined at full resolution', limits: { maxInMP: 70 } },
  { name: 'u2net', network: 'seg/u2net', description: 'Background removal, U²-Net full (176 MB, optional: lucent models fetch seg/u2net)', limits: { maxInMP: 70 } },
]

export const segModel = (name: string): SegModel | undefined => SEG_MODELS.find((m) => m.name === name)


export const RETURN_TYPES = ['matted', 'mask', 'all'] as const
export type ReturnType = (typeof RETURN_TYPES)[number]

/** Output formats that hold alpha (the engine refuses jpg / bmp with `unsupported_format`). */
export const SEG_OUTPUT_FORMATS: ReadonlySet<string> = new Set(['png', 'webp', 'tiff', 'tga', 'heif'])

/** The thumbnail's long side (px) for `return_type: "all"`; never larger than the image. */
export const THUMBNAIL_SIDE = 256

/**
 * Where a segmentation job's files are stored: `seg/<job id>/subject.<return_type>.<ext>` (the matted image: the job's
 * result, `res_url`), `seg/<job id>/mask.png`, `seg/<job id>/thumbnail.png`. The return type is in the result key
 * so that task-status (server/jobs/status.ts) names the extra links from the job's row alone.
 */
export const segKeys = (id: string, rt: ReturnType, ext: string) =>
  ({ result: `seg/${id}/subject.${rt}.${ext}`, mask: `seg/${id}/mask.png`, thumbnail: `seg/${id}/thumbnail.png` })

/** The extra links of a segmentation job's result key (null for any other key: photo and video results are `r/`). */
export function segLinks(resultKey: string): { mask: string | null; thumbnail: string | null } | null {
  const m = /^seg\/([0-9a-f]+)\/subject\.(matted|mask|all)\.[a-z0-9]+$/.exec(resultKey)
  if (!m) return null
  const k = segKeys(m[1], m[2] as ReturnType, 'png')
  return { mask: m[2] === 'matted' ? null : k.mask, thumbnail: m[2] === 'all' ? k.thumbnail : null }
}

/** The work the engine may spend on a segmentation of an upright `width` x `height` photo (its meter charges the
 *  decoded photo's megapixels once, before the network runs). */
export const segBudget = (width: number, height: number): number => ((width * height) / 1e6) * BUDGET_MARGIN

/** A segmentation's coins: the table's tier of the upright input's megapixels. */
export const segCoins = (table: PhotoPriceTable, width: number, height: number): number => photoCoins(table, width * height)
