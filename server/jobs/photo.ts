/** The photo job runner: original from storage -> engine (pool.enhance) -> result in storage -> completed. */
import type { FastifyBaseLogger } from 'fastify'
import { engineErrorCode } from '../errors.js'
import { contentTypeFor, photoResultExt } from '../media/formats.js'
import type { EnginePool } from '../engine/pool.js'
import type { MediaStorage } from '../storage/types.js'
import { settleAborted, type Run } from './lifecycle.js'
import type { PhotoJob } from './params.js'
import { deliveryFor, type OutputPutter } from './output-put.js'
import { ownNetwork, type OwnModels } from '../own-models/registry.js'

export interface PhotoRunnerDeps {
  storage: MediaStorage
  /** The engine pool (a fake one in the runners' unit tests). */
  pool: Pick<EnginePool, 'enhance'>
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  /** Extension: the PUT of a result to a job's output_put_url (server/jobs/output-put.ts); absent: not done. */
  outputPut?: OutputPutter
  /** The operator's own models (bring your own model); absent: catalog models only. */
  ownModels?: Pick<OwnModels, 'network'>
}

export async function runPhoto(d: PhotoRunnerDeps, run: Run<PhotoJob>): Promise<void> {
  const { job } = run
  const original = await d.storage.get(job.originalKey)
  if (!original) return void await run.fail(engineErrorCode('storage'), 'original file is missing')
  const p = job.params
  const own = await ownNetwork(d, run, 'photo')
  if (!own) return
  const out = await d.pool.enhance(original.data, {
    model: job.model, format: p.format, exif: p.exif, dpi: p.dpi ?? undefined,
    ...(own.network ? { network: own.network } : {}),
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
  if (await run.complete(key, deliveryFor(d, job, key, data))) d.log.info({ job: job.id, ms: out.ms, width: out.width, height: out.height }, 'job completed')
}
