/**
 * The work budget of a job (issue 29, "a work meter with a budget"): the ONE formula from a job's price basis to
 * the work units the engine may spend on it. The engine counts its work per call (native/core Cancel's meter,
 * native/engine pipelines) and stops a call whose next network run would pass its `budget` with the engine code
 * `budget_exceeded` (-> error_code 110400015), before that network runs.
 *
 * Work units are megapixels of output delivered by each network run, at the output's scale:
 * - the base (whole-picture / whole-frame) network: its output, the input x the model's scale, once per
 *   picture or frame. Tile overlap and a network's internal scale above the model's (a 4x net area-averaged to
 *   2x) are the engine's own cost, fixed per model, and do not count (the margin below therefore need not cover
 *   them: the overlap alone is 1.2x to 2.1x of the output at the CPU backend's 256 px tiles, by model and picture size,
 *   native/engine/tests/meter.rs `measure_face_share_and_tile_overlap`);
 * - a face model's face network: each restored face's crop region at the output's scale. The engine restores at
 *   most MAX_FACES faces per picture / frame, the largest first, and only while their regions together stay
 *   within FACE_ALLOWANCE x the picture's output (native/engine/src/pipelines/face/mod.rs `chosen_faces`);
 * - RIFE: each interpolated frame's megapixels (copies and scene cuts are free).
 *
 * Budget = the priced output megapixels x (1 + FACE_ALLOWANCE for a face model) x BUDGET_MARGIN. An honest job
 * spends at most the priced output x (1 + FACE_ALLOWANCE): the margin is slack for rounding only, and a job
 * whose decoded input is larger than the one it was priced for, or a pipeline that would do more work than its
 * rule, stops instead of working for free.
 */
import { photoModel, readCatalog } from '../catalog.js'
import type { PhotoParams } from './params.js'

/** Share of a picture's output the faces' crops may add (= FACE_ALLOWANCE in native/engine/src/pipelines/face/mod.rs). */
export const FACE_ALLOWANCE = 2.0
/** Faces restored per picture / frame at most, the largest first (= MAX_FACES in the face module). */
export const MAX_FACES = 16
/** Slack over the work a priced job needs (rounding of face regions; nothing the engine does grows with it). */
export const BUDGET_MARGIN = 1.1

/** The facts of the model that runs which the budget needs: its scale and whether it restores faces. */
export interface BudgetModel { scale: number; faces: boolean }

/** A catalog photo model's budget facts (undefined: not a catalog model, e.g. an own model). */
export function catalogBudgetModel(name: string): BudgetModel | undefined {
  const m = photoModel(name)
  return m ? { scale: m.scale, faces: usesFaces('photo', m.name) } : undefined
}

/** The catalog's face-pipeline models (photo: face_*, face_v2_*, generative_portrait_*; video: face_soft_2x,
 *  portrait_restore_*), as `kind:name`. */
const FACE_MODELS: ReadonlySet<string> = new Set(readCatalog().filter((m) => m.pipeline === 'face').map((m) => `${m.kind}:${m.name}`))

/** Whether model `name` (its canonical catalog name) of `kind` restores faces (draws the face allowance). */
export function usesFaces(kind: 'photo' | 'video', name: string): boolean {
  return FACE_MODELS.has(`${kind}:${name}`)
}

const units = (px: number, faces: boolean): number => (px / 1e6) * (faces ? 1 + FACE_ALLOWANCE : 1) * BUDGET_MARGIN

/**
 * A photo job's budget in work units: its price basis (server/price-rules.ts photoJobCoins: the larger of the
 * output asked for and the networks' own output) taken at the member that runs (`model`: input x its scale,
 * which the gateway chose for that price), x the face allowance for a face model, x the margin.
 */
export function photoBudget(params: Pick<PhotoParams, 'input' | 'output'>, model: BudgetModel): number {
  const inPx = params.input.width * params.input.height
  const outPx = Math.max(params.output.width * params.output.height, inPx * model.scale * model.scale)
  return units(outPx, model.faces)
}

/** A batch (or a whole video) of `frames` frames through a video model whose networks make `outW` x `outH`
 *  frames (the priced network output), `faces`: a face model. */
export function framesBudget(frames: number, outW: number, outH: number, faces = false): number {
  return units(frames * outW * outH, faces)
}

/** `frames` interpolated frames of `w` x `h` made by RIFE. */
export function interpBudget(frames: number, w: number, h: number): number {
  return units(frames * w * h, false)
}
