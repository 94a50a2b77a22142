/** The background-removal job runner (POST /api/image-segmentation, server/segmentation.ts): original from storage
 *  -> engine (pool.segment, within the job's work budget) -> the matted image (the job's result), the mask
 *  (return_type mask / all) and a thumbnail (all) in storage -> completed. The thumbnail is the matted image scaled
 *  down by ffmpeg (the tool the server already runs for images in videos; the addon has no resample-only call).
 *  Progress: the engine's stages (decode 5, network 10..60, refinement 75, encodes 85..95) as task-status `progress`,
 *  like a photo job's; 100 on completion. Extension: `output_put_url` gets the matted image (the job's result) as the
 *  photo route's result is delivered (server/jobs/output-put.ts: after it is recorded, before COMPLETED). */
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { FastifyBaseLogger } from 'fastify'
import { engineErrorCode } from '../errors.js'
import { contentTypeFor } from '../media/formats.js'
import type { EnginePool } from '../engine/pool.js'
import type { MediaStorage } from '../storage/types.js'
import { settleAborted, type Run } from './lifecycle.js'
import { deliveryFor, type OutputPutter } from './output-put.js'
import type { SegmentJob } from './params.js'
import { THUMBNAIL_SIDE, segBudget, segKeys } from '../segmentation.js'

const run$ = promisify(execFile)

export interface SegmentRunnerDeps {
  storage: MediaStorage
  /** The engine pool (optional for the runners' fake pools, which run no segmentation). */
  pool: Partial<Pick<EnginePool, 'segment'>>
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  /** ffmpeg (LUCENT_FFMPEG) and a temporary directory, for the thumbnail. */
  video: { ffmpeg: string; tmpDir?: string }
  /** Extension: the PUT of the matted image to a job's output_put_url (server/jobs/output-put.ts); absent: not done. */
  outputPut?: OutputPutter
}

/** The sides of a thumbnail of a `w` x `h` image: long side THUMBNAIL_SIDE at most, aspect kept, never enlarged. */
export function thumbnailSize(w: number, h: number): { width: number; height: number } {
  const f = Math.min(1, THUMBNAIL_SIDE / Math.max(w, h))
  return { width: Math.max(1, Math.round(w * f)), height: Math.max(1, Math.round(h * f)) }
}

/** A PNG thumbnail (alpha kept) of an encoded image, scaled by ffmpeg (area averaging). */
async function thumbnail(ffmpeg: string, tmpDir: string, image: Buffer, ext: string, w: number, h: number): Promise<Buffer> {
  const base = path.join(tmpDir, `thumb-${crypto.randomBytes(8).toString('hex')}`)
  const src = `${base}.in.${ext}`
  const out = `${base}.thumb.png` // never the input's name (a PNG result: ffmpeg refuses to write over its input)
  const t = thumbnailSize(w, h)
  try {
    await fsp.mkdir(tmpDir, { recursive: true })
    await fsp.writeFile(src, image)
    await run$(ffmpeg, ['-v', 'error', '-nostdin', '-y', '-i', src, '-vf', `scale=${t.width}:${t.height}:flags=area,format=rgba`, '-frames:v', '1', out], { timeout: 60_000 })
    return await fsp.readFile(out)
  } finally {
    await Promise.all([fsp.rm(src, { force: true }), fsp.rm(out, { force: true })])
  }
}

const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength)

export async function runSegment(d: SegmentRunnerDeps, run: Run<SegmentJob>): Promise<void> {
  const { job } = run
  const p = job.params
  if (!d.pool.segment) return void await run.fail(engineErrorCode('internal'), 'this engine pool runs no segmentation')
  const original = await d.storage.get(job.originalKey)
  if (!original) return void await run.fail(engineErrorCode('storage'), 'original file is missing')
  const budget = segBudget(p.upright.width, p.upright.height)
  const out = await d.pool.segment(original.data, { model: job.model, format: p.format, budget },
    { signal: run.signal, onProgress: (pct) => void run.progress(pct) })
  if (run.stopped || (!out.ok && run.signal.aborted)) return settleAborted(run)
  if (!out.ok) return void await run.fail(engineErrorCode(out.error_code), out.message)
  const keys = segKeys(job.id, p.return_type, p.ext)
  const data = buf(out.data)
  if (p.return_type !== 'matted') await d.storage.put(keys.mask, buf(out.mask), 'image/png')
  if (p.return_type === 'all') {
    let thumb: Buffer
    try {
      thumb = await thumbnail(d.video.ffmpeg, d.video.tmpDir ?? os.tmpdir(), data, p.ext, out.width, out.height)
    } catch (e) {
      return void await run.fail(engineErrorCode('encode_failed'), `thumbnail: ${String((e as Error)?.message ?? e).slice(0, 300)}`)
    }
    await d.storage.put(keys.thumbnail, thumb, 'image/png')
  }
  await d.storage.put(keys.result, data, contentTypeFor(p.ext))
  if (await run.complete(keys.result, deliveryFor(d, job, keys.result, data))) d.log.info({ job: job.id, ms: out.ms, width: out.width, height: out.height, work: out.work, budget }, 'job completed')
}
