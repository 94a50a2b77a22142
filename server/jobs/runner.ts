/**
 * Runs one delivered job: lifecycle.start() -> the photo, video or segmentation runner (photo.ts, video.ts, segment.ts) -> the run
 * settled through the lifecycle (completed, failed, released). The queue calls the function makeRunner()
 * returns once per delivery of a job id. A job whose result is already stored (its delivery to output_put_url
 * was cut by a shutdown or crash) is not run again: its result is delivered and the job completes.
 *
 * An engine thread that dies under a job (piscina rejects only the task that ran on it: the other threads and their
 * jobs go on) is a crash of that job alone: its run is released and the job queued again (in-process queue; a shared
 * queue retries it as any thrown run), so that crash uses one of ITS attempts (LUCENT_JOB_MAX_ATTEMPTS, counted by
 * lifecycle start(); over them: ERROR 100500006, refunded in full). A whole process that dies is settled by the run
 * log at the next start (server/store/job-runs.ts).
 */
import { deliveryFor } from './output-put.js'
import { isThreadDeath } from '../engine/pool.js'
import { settleAborted, type JobLifecycle, type Run } from './lifecycle.js'
import type { PhotoJob, SegmentJob, VideoJob } from './params.js'
import { runPhoto, type PhotoRunnerDeps } from './photo.js'
import { runVideo, type VideoRunnerDeps } from './video.js'
import { runSegment, type SegmentRunnerDeps } from './segment.js'
import { runObserved } from '../observability/run.js'

export type RunnerDeps = PhotoRunnerDeps & VideoRunnerDeps & SegmentRunnerDeps & {
  jobs: JobLifecycle
  /** Shared queue (BullMQ): true = hand an unexpected exception of this attempt back to the queue, which
   *  retries it with backoff, instead of failing the job now. Engine failures (deterministic) always fail. */
  retry?: (e: unknown, attempt: number) => boolean
}

/** How a delivery ended: nothing to run, the job ended (completed / failed / canceled), or its run was
 *  released at shutdown (the job stays CONVERTING: a shared queue hands it to another worker). */
export type RunOutcome = 'none' | 'ended' | 'released'


const isPhoto = (r: Run): r is Run<PhotoJob> => r.job.kind === 'photo'
const isVideo = (r: Run): r is Run<VideoJob> => r.job.kind === 'video'
const isSegment = (r: Run): r is Run<SegmentJob> => r.job.kind === 'segment'

export function makeRunner(d: RunnerDeps): (jobId: string) => Promise<RunOutcome> {
  return async function run(jobId) {
    const r = await d.jobs.start(jobId)
    if (!r) return 'none'
    // in the job's context: its request id on every log line, its spans (observability/run.ts)
    return runObserved(r, d.log, async (): Promise<RunOutcome> => {
      try {
        if (r.job.resultKey) {
          const key = r.job.resultKey
          await r.complete(key, deliveryFor({ ...d, tmpDir: d.video.tmpDir }, r.job, key))
        } else if (isPhoto(r)) await runPhoto(d, r)
        else if (isVideo(r)) await runVideo(d, r)
        else if (isSegment(r)) await runSegment(d, r)
      } catch (e) {
        if (r.signal.aborted) await settleAborted(r)
        else if (!d.retry && isThreadDeath(e)) {
          d.log.warn({ job: r.job.id, attempt: r.attempt, err: e }, 'the engine thread running the job died: the job is queued again')
          r.release('retry')
          await d.jobs.requeue(r.job.id)
        } else if (d.retry?.(e, r.attempt)) {
          r.release('retry')
          throw e
        } else await r.fail(100500000, String((e as Error)?.message ?? e))
      }
      // every path above settles the run; should one not, the job goes back to the queue rather than hang
      if (!r.ended) r.release('shutdown')
      return r.state === 'released' ? 'released' : 'ended'
    })
  }
}
