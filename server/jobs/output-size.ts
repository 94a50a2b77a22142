/**
 * Any output size for photos (an API extension): `target_width` and/or `target_height`, or a fractional
 * `scale`, on POST /api/photo-enhancer. The model family of `model_name` (the catalog's `family`: general_2x ->
 * General Enhance) runs at the next scale it has at or above the one asked for (scale 3 -> general_4x; above
 * its largest: the largest),
 * then the engine resamples its output to the size asked for (native/engine/src/resample.rs: Lanczos3, area
 * averaging when shrinking 3x or more). Limits follow the output size; the price is the larger of the output and
 * the networks' own output (server/pricing.ts photoJobPrice), so a smaller output than the model's costs no less.
 *
 * Sizes are of the upright image: the route passes the upright sides (server/media/orientation.ts uprightSize:
 * every format's EXIF orientation 5..8, a HEIF's irot), as the engine turns the pixels upright before it
 * resamples; `orientation` turns stored sides here instead (an EXIF orientation 5..8 swaps them). One side alone keeps the aspect ratio, rounded as the engine rounds
 * (native/engine/src/photo.rs `target_size`): the engine gets that one side and derives the other, so the
 * picture is never stretched, whatever the format's metadata.
 */
import { ApiError } from '../errors.js'
import { PHOTO_MODELS, type PhotoModel } from '../catalog.js'

/** The engine's bound on an output side (native/engine/src/photo.rs MAX_TARGET_SIDE). */
export const MAX_TARGET_SIDE = 65535
/** Largest `scale` accepted. */
export const MAX_SCALE = 16

export interface SizeRequest { target_width?: number; target_height?: number; scale?: number }

export interface OutputSize {
  /** The family member that runs. */
  model: PhotoModel
  width: number
  height: number
  /** The sides the engine is given (one side alone: the engine keeps the aspect ratio). */
  target: { width?: number; height?: number }
}

/** Whether a submission asks for a size of its own (else the model's scale, as before: nothing changes). */
export const asksForSize = (b: SizeRequest): boolean =>
  b.target_width !== undefined || b.target_height !== undefined || b.scale !== undefined

/** The family members of a photo model (the catalog's `family`), by ascending scale. */
export function familyOf(model: PhotoModel, models: ReadonlyMap<string, PhotoModel> = PHOTO_MODELS): PhotoModel[] {
  return [...models.values()].filter((m) => m.family === model.family).sort((a, b) => a.scale - b.scale)
}

/** The member with the smallest scale >= `scale` (within rounding), else the largest. */
export function variantFor(model: PhotoModel, scale: number, models?: ReadonlyMap<string, PhotoModel>): PhotoModel {
  const fam = familyOf(model, models)
  return fam.find((m) => m.scale >= scale - 1e-9) ?? fam[fam.length - 1] ?? model
}

/** EXIF orientations that swap width and height. */
const swaps = (orientation: number | undefined) => orientation !== undefined && orientation >= 5 && orientation <= 8

/**
 * The output size, the model that runs and what the engine is told, for an input of `w` x `h` as stored (and
 * its EXIF orientation, when known). Throws the API's errors: both a scale and a target (100403000), a side
 * or a size over the model's limits (110400010), an input over the model's limit (110400009).
 */
export function outputSize(b: SizeRequest, model: PhotoModel, w: number, h: number, orientation?: number, models?: ReadonlyMap<string, PhotoModel>): OutputSize {
  if (b.scale !== undefined && (b.target_width !== undefined || b.target_height !== undefined)) {
    throw new ApiError(100403000, { detail: 'give either scale or target_width/target_height, not both' })
  }
  const [uw, uh] = swaps(orientation) ? [h, w] : [w, h]
  let target: OutputSize['target']
  let want: number
  if (b.scale !== undefined) {
    target = { width: Math.max(1, Math.round(uw * b.scale)) }
    want = b.scale
  } else {
    target = { width: b.target_width, height: b.target_height }
    if (target.width === undefined) delete target.width
    if (target.height === undefined) delete target.height
    want = Math.max(target.width !== undefined ? target.width / uw : 0, target.height !== undefined ? target.height / uh : 0)
  }
  const m = variantFor(model, want, models)
  const [ow, oh] = [uw * m.scale, uh * m.scale] // the model's own output, upright
  // The engine's rounding (photo.rs target_size): the other side from the model output's aspect ratio.
  const keep = (side: number, num: number, den: number) => Math.max(1, Math.round((side * num) / den))
  const width = target.width ?? keep(target.height!, ow, oh)
  const height = target.height ?? keep(target.width!, oh, ow)
  if (w * h > m.limits.maxInMP * 1e6) throw new ApiError(110400009)
  if (ow * oh > m.limits.maxOutMP * 1e6 || width * height > m.limits.maxOutMP * 1e6 || width > MAX_TARGET_SIDE || height > MAX_TARGET_SIDE) {
    throw new ApiError(110400010)
  }
  return { model: m, width, height, target }
}
