/**
 * Delivery of a result to the caller's storage (an API extension): a submission's `output_put_url`, a
 * pre-signed PUT URL of S3, GCS or Azure (SAS), gets the result with an HTTP PUT once it is stored, through the
 * SSRF-safe client (server/fetch/put.ts: private addresses refused unless in LUCENT_FETCH_ALLOW; checked at
 * submission too). Tries: LUCENT_OUTPUT_PUT_ATTEMPTS, waiting LUCENT_OUTPUT_PUT_BACKOFF_MS, then twice as long
 * each time; retried when no answer came (network, timeout), or on 408, 429 and 5xx; any other answer is final.
 *
 * The PUT runs after the result is recorded in the store and before the job is marked COMPLETED, so a COMPLETED
 * job's `output_put` is final: `delivered`, or `failed` with the last answer and why. A failed PUT never fails
 * the job: the result stays at `res_url`. State per job in the store (`output_puts`), shown by task-status as
 * `output_put`. The PUT runs outside the engine's slots (server/jobs/lifecycle.ts: the run has ended, the
 * lifecycle delivers) under one total deadline, LUCENT_OUTPUT_PUT_DEADLINE_MS, over all tries; once the result
 * is recorded the job cannot be canceled or refunded (server/jobs/refund.ts).
 */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { FetchError } from '../fetch/index.js'
import { checkPublicUrl, safePut, type PutBody } from '../fetch/put.js'
import { outboundRules } from '../fetch/policy.js'
import { ApiError } from '../errors.js'
import type { Config } from '../config.js'
import type { OutputPutState, Store } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import { contentTypeFor } from '../media/formats.js'
import type { Deliver } from './lifecycle.js'
import type { TypedJob } from './params.js'

export type OutputPutAnswer = { status: OutputPutState['status']; http_status: number | null; attempts: number; error: string | null }

/** The task-status field for a stored state. */
export const outputPutAnswer = (s: OutputPutState): OutputPutAnswer =>
  ({ status: s.status, http_status: s.httpStatus, attempts: s.attempts, error: s.error })

/** Submission check: an http(s) URL whose host is not private (unless allow-listed), on an allowed port, that
 *  resolves in time (server/fetch/policy.ts) -> else 100400001. */
export async function checkOutputPutUrl(url: string, config: Pick<Config, 'fetchAllow' | 'outbound'>): Promise<void> {
  try {
    await checkPublicUrl(url, outboundRules(config))
  } catch (e) {
    if (e instanceof FetchError) throw new ApiError(100400001, { detail: `output_put_url: ${e.message}` })
    throw e
  }
}

/** Headers a provider needs on a pre-signed PUT: Azure's Put Blob wants the blob type (a SAS URL: sv + sig). */
export function providerHeaders(url: string): Record<string, string> {
  const q = new URL(url).searchParams
  return q.has('sv') && q.has('sig') ? { 'x-ms-blob-type': 'BlockBlob' } : {}
}

const retryable = (status: number) => status === 408 || status === 429 || status >= 500

const sleep = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve) => {
  if (signal?.aborted) return resolve()
  const t = setTimeout(done, ms)
  function done() {
    clearTimeout(t)
    signal?.removeEventListener('abort', done)
    resolve()
  }
  signal?.addEventListener('abort', done, { once: true })
})

export interface OutputPutDeps {
  store: Pick<Store, 'setOutputPut'>
  config: Pick<Config, 'fetchAllow'> & Partial<Pick<Config, 'outbound'>> & { outputPut: Pick<Config['outputPut'], 'attempts' | 'backoffMs' | 'timeoutMs'> }
}

/** `data`: the result's bytes (photo) or its local file (video, streamed on each try). */
export type OutputPutter = (jobId: string, url: string, data: PutBody, contentType: string, signal?: AbortSignal) => Promise<OutputPutState>

/** PUTs `data` to `url` with the retry rule above, recording each step; resolves with the final state. */
export function outputPutter(d: OutputPutDeps): OutputPutter {
  const { attempts: max, backoffMs, timeoutMs } = d.config.outputPut
  const policy = { ...d.config.outbound, allow: d.config.fetchAllow, connectTimeoutMs: Math.min(10_000, timeoutMs), headersTimeoutMs: timeoutMs, totalTimeoutMs: timeoutMs }
  return async (jobId, url, data, contentType, signal) => {
    let state: OutputPutState = { status: 'pending', httpStatus: null, attempts: 0, error: null }
    await d.store.setOutputPut(jobId, state)
    const headers = { 'content-type': contentType, ...providerHeaders(url) }
    for (let attempt = 1; attempt <= max; attempt++) {
      let again = false
      try {
        const r = await safePut(url, data, headers, policy, signal)
        if (r.status >= 200 && r.status <= 299) {
          state = { status: 'delivered', httpStatus: r.status, attempts: attempt, error: null }
        } else {
          again = retryable(r.status)
          state = { status: 'failed', httpStatus: r.status, attempts: attempt, error: `HTTP ${r.status}${r.text ? `: ${r.text.replace(/\s+/g, ' ').slice(0, 200)}` : ''}` }
        }
      } catch (e) {
        const fe = e instanceof FetchError ? e : new FetchError('network', String((e as Error)?.message ?? e))
        again = fe.reason === 'timeout' || fe.reason === 'network'
        state = { status: 'failed', httpStatus: null, attempts: attempt, error: `${fe.reason}: ${fe.message}` }
      }
      if (state.status === 'delivered' || !again || attempt === max || signal?.aborted) break
      await d.store.setOutputPut(jobId, { ...state, status: 'pending' })
      await sleep(backoffMs * 2 ** (attempt - 1), signal)
      if (signal?.aborted) break
    }
    await d.store.setOutputPut(jobId, state)
    return state
  }
}

export interface DeliveryDeps {
  storage: Pick<MediaStorage, 'get' | 'stream' | 'localPath'>
  outputPut?: OutputPutter
  log: { warn(o: object, msg: string): void }
  /** Where a result that storage cannot hand out as a file is copied for the PUT (S3 video); default the OS's. */
  tmpDir?: string
}

/** The delivery of `job`'s stored result (`resultKey`) to its output_put_url, for run.complete(); undefined
 *  when the job names none. `local`: the result as this process still has it (photo bytes, the encoded video
 *  file); else (a delivery resumed after a restart) it is read from storage. `cleanup` runs when it is over. */
export function deliveryFor(d: DeliveryDeps, job: TypedJob, resultKey: string, local?: PutBody, cleanup?: () => Promise<unknown>): Deliver | undefined {
  const url = job.params.output_put_url
  if (!url || !d.outputPut) return undefined
  const put = d.outputPut
  const type = contentTypeFor(path.extname(resultKey).slice(1))
  return async (signal) => {
    let tmp: string | null = null
    try {
      let body = local
      if (!body) {
        const file = d.storage.localPath(resultKey)
        if (file) body = { file, size: (await fsp.stat(file)).size }
        else if (job.kind !== 'video') body = (await d.storage.get(resultKey))?.data // a photo, a matted image
        else {
          const obj = await d.storage.stream(resultKey)
          if (obj) {
            const dir = d.tmpDir ?? os.tmpdir()
            await fsp.mkdir(dir, { recursive: true })
            tmp = path.join(dir, `lucent-put-${job.id}-${process.pid}`)
            await pipeline(obj.stream, fs.createWriteStream(tmp), { signal })
            body = { file: tmp, size: (await fsp.stat(tmp)).size }
          }
        }
      }
      if (!body) throw new Error(`result ${resultKey} is missing`)
      const state = await put(job.id, url, body, type, signal)
      if (state.status !== 'delivered') d.log.warn({ job: job.id, output_put: state }, 'output_put_url: not delivered; the result stays at res_url')
    } finally {
      if (tmp) await fsp.rm(tmp, { force: true })
      await cleanup?.()
    }
  }
}
