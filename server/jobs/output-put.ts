/**
 * Delivery of a result to the caller's storage (an API extension): a submission's `output_put_url`, a
 * pre-signed PUT URL of S3, GCS or Azure (SAS), gets the result with an HTTP PUT once it is stored, through the
 * SSRF-safe client (server/fetch/put.ts: private addresses refused unless in LUCENT_FETCH_ALLOW; checked at
 * submission too). Tries: LUCENT_OUTPUT_PUT_ATTEMPTS, waiting LUCENT_OUTPUT_PUT_BACKOFF_MS, then twice as long
 * each time; retried when no answer came (network, timeout), or on 408, 429 and 5xx; any other answer is final.
 *
 * The PUT runs before the job is marked COMPLETED, so a COMPLETED job's `output_put` is final: `delivered`, or
 * `failed` with the last answer and why. A failed PUT never fails the job: the result stays at `res_url`.
 * State per job in the store (`output_puts`), shown by task-status as `output_put`.
 */
import { FetchError } from '../fetch/index.js'
import { checkPublicUrl, safePut, type PutBody } from '../fetch/put.js'
import { ApiError } from '../errors.js'
import type { Config } from '../config.js'
import type { OutputPutState, Store } from '../store/types.js'

export type OutputPutAnswer = { status: OutputPutState['status']; http_status: number | null; attempts: number; error: string | null }

/** The task-status field for a stored state. */
export const outputPutAnswer = (s: OutputPutState): OutputPutAnswer =>
  ({ status: s.status, http_status: s.httpStatus, attempts: s.attempts, error: s.error })

/** Submission check: an http(s) URL whose host is not private (unless allow-listed) -> else 100400001. */
export async function checkOutputPutUrl(url: string, allow: string[]): Promise<void> {
  try {
    await checkPublicUrl(url, allow)
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
  config: Pick<Config, 'fetchAllow' | 'outputPut'>
}

/** `data`: the result's bytes (photo) or its local file (video, streamed on each try). */
export type OutputPutter = (jobId: string, url: string, data: PutBody, contentType: string, signal?: AbortSignal) => Promise<OutputPutState>

/** PUTs `data` to `url` with the retry rule above, recording each step; resolves with the final state. */
export function outputPutter(d: OutputPutDeps): OutputPutter {
  const { attempts: max, backoffMs, timeoutMs } = d.config.outputPut
  const policy = { allow: d.config.fetchAllow, connectTimeoutMs: Math.min(10_000, timeoutMs), headersTimeoutMs: timeoutMs, totalTimeoutMs: timeoutMs }
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
