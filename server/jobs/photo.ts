/** The photo job runner: original from storage -> engine (pool.enhance, within the job's work budget:
 *  server/jobs/budget.ts) -> result in storage -> completed. A job the engine's meter stops fails with 110400015. */
import type { FastifyBaseLogger } from 'fastify'
import { engineErrorCode } from '../errors.js'
import { contentTypeFor, photoResultExt } from '../media/formats.js'
import type { EnginePool } from '../engine/pool.js'
import type { MediaStorage } from '../storage/types.js'
import { settleAborted, type Run } from './lifecycle.js'
import type { PhotoJob } from './params.js'
import { deliveryFor, type OutputPutter } from './output-put.js'
import { ownNetwork, type OwnModels } from '../own-models/registry.js'
import { catalogBudgetModel, photoBudget, type BudgetModel } from './budget.js'

export interface PhotoRunnerDeps {
  storage: MediaStorage
  /** The engine pool (a fake one in the runners' unit tests). */
  pool: Pick<EnginePool, 'enhance'>
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  /** Extension: the PUT of a result to a job's output_put_url (server/jobs/output-put.ts); absent: not done. */
  outputPut?: OutputPutter
  /** The operator's own models (bring your own model; `photo` gives an own model's scale for its budget);
   *  absent: catalog models only. */
  ownModels?: Pick<OwnModels, 'network'> & Partial<Pick<OwnModels, 'photo'>>
}

/** The budget facts of the model a job runs: the catalog's, else the operator's own model (no faces). */
function budgetModel(d: PhotoRunnerDeps, name: string): BudgetModel | undefined {
  const own = catalogBudgetModel(name) ? undefined : d.ownModels?.photo?.(name)
  return catalogBudgetModel(name) ?? (own ? { scale: own.scale, faces: false } : undefined)
}

export async function runPhoto(d: PhotoRunnerDeps, run: Run<PhotoJob>): Promise<void> {
  const { job } = run
  const original = await d.storage.get(job.originalKey)
  if (!original) return void await run.fail(engineErrorCode('storage'), 'original file is missing')
  const p = job.params
  const own = await ownNetwork(d, run, 'photo')
  if (!own) return
  // The work its price covers (server/jobs/budget.ts); a model unknown here runs unmetered (it cannot be priced).
  const bm = budgetModel(d, job.model)
  const budget = bm ? photoBudget(p, bm) : undefined
  const out = await d.pool.enhance(original.data, {
    model: job.model, format: p.format, exif: p.exif, dpi: p.dpi ?? undefined,
    ...(own.network ? { network: own.network } : {}),
    ...(budget !== undefined ? { budget } : {}),
    // Extension: an output size of its own (server/jobs/output-size.ts)
    ...(p.target?.width !== undefined ? { targetWidth: p.target.width } : {}),
    ...(p.target?.height !== undefined ? { targetHeight: p.target.height } : {}),
  },
    { signal: run.signal, onProgress: (pct) => void run.progress(pct) })
  if (run.stopped || (!out.ok && run.signal.aborted)) return settleAborted(run)
  if (!out.ok) return void await run.fail(engineErrorCode(out.error_code), out.message)
  const ext = photoResultExt(p.format)
  const key = `r/${job.id}.${ext}`
  const data = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength)
  await d.storage.put(key, data, contentTypeFor(ext))
  // Extension: also into the caller's bucket, after the run (server/jobs/output-put.ts); never fails the job.
  if (await run.complete(key, deliveryFor(d, job, key, data))) d.log.info({ job: job.id, ms: out.ms, width: out.width, height: out.height, work: out.work, budget }, 'job completed')
}
