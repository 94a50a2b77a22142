/**
 * The ONE error table: every spec error code (HTTP status + message), and the ONE place that maps other
 * failure vocabularies (engine codes from native/node, fetch reasons from server/fetch) to API error codes.
 *
 * Choices the spec leaves open (documented here):
 * - missing or ill-typed request fields, malformed JSON body -> 100403000 "Invalid request parameters"
 * - unknown route, unsupported Content-Type, body too large  -> 100400002 "Bad request"
 * - the work queue at its bound (LUCENT_QUEUE_MAX)           -> HTTP 503 + Retry-After, error_code 100500007
 * - signed links/uploads with a bad signature, a wrong Content-Type or past expiry -> HTTP 403, 100403001
 * - fetched bytes that are not a supported image (photo)     -> 110400007; not a usable video -> 110400008
 * - ffprobe missing                                          -> 100500005 "Configuration error"
 * Extension codes (not in api.md; docs/api.md):
 * - 110400014: the error_code of a job canceled by POST /api/task-cancel (status ERROR, reason "canceled")
 * - 110400015: a job stopped by the engine's work meter (engine code budget_exceeded): its work passed the budget its
 *   price covers (server/jobs/budget.ts; HTTP 400)
 * - 110409000: task-cancel of a job that has already finished (HTTP 409)
 * - 110409001: an Idempotency-Key reused with another request body (HTTP 409)
 * - webhooks (extension): a callback_url that is not an http(s) URL or does not resolve -> 110400020; one that
 *   points at a private address (not in LUCENT_FETCH_ALLOW) -> 110400021; a callback for a key without a
 *   signing secret -> 110400022; an unknown (or another key's) delivery id -> 110400023
 */
import type { EngineErrorCode } from './engine/addon.js'

interface ErrorDef { status: number; message: string }

export const ERRORS = {
  100400000: { status: 400, message: 'No access' },
  100400001: { status: 400, message: 'Invalid URL' },
  100400002: { status: 400, message: 'Bad request' },
  100401000: { status: 401, message: 'Token is expired' },
  100403000: { status: 403, message: 'Invalid request parameters' },
  100403001: { status: 403, message: 'Access denied' },
  100403002: { status: 403, message: 'No permission to access the resource' },
  100429000: { status: 429, message: 'Too many requests, try again later' },
  100500000: { status: 500, message: 'Internal error' },
  100500001: { status: 500, message: 'Database error' },
  100500002: { status: 500, message: 'Cache error' },
  100500003: { status: 500, message: 'Failed to create file' },
  100500004: { status: 500, message: 'Signature verification failed' },
  100500005: { status: 500, message: 'Configuration error' },
  100500006: { status: 500, message: 'Unknown error' },
  100500007: { status: 500, message: 'Operation timeout' },
  110400000: { status: 400, message: 'api_key is not valid' },
  110400002: { status: 400, message: 'The task does not exist' },
  110400003: { status: 400, message: 'The task failed, please try again' },
  110400005: { status: 400, message: 'The model is not supported' },
  110400007: { status: 400, message: 'The extension is not valid' },
  110400008: { status: 400, message: 'The video URL is not valid' },
  110400009: { status: 400, message: 'The input resolution is over limit' },
  110400010: { status: 400, message: 'The target resolution is over limit' },
  110400011: { status: 400, message: 'The video duration is over limit' },
  110400014: { status: 400, message: 'The task was canceled' },
  // the work meter (extension; server/jobs/budget.ts)
  110400015: { status: 400, message: 'The job exceeded the work its price covers' },
  // webhooks (extension; server/webhooks/)
  110400020: { status: 400, message: 'The callback URL is not valid' },
  110400021: { status: 400, message: 'The callback URL points at a private address' },
  110400022: { status: 400, message: 'The key has no webhook secret' },
  110400023: { status: 400, message: 'The webhook delivery does not exist' },
  110402000: { status: 402, message: 'The coins are not enough' },
  110402001: { status: 402, message: 'The coins are not enough' },
  110402004: { status: 402, message: 'The Demo try times exceeded' },
  110409000: { status: 409, message: 'The task has already finished' },
  110409001: { status: 409, message: 'The Idempotency-Key was used with another request' },
} as const satisfies Record<number, ErrorDef>

export type ErrorCode = keyof typeof ERRORS

/** The error_code of a canceled job (task-status: status ERROR, reason "canceled"). */
export const CANCELED_CODE: ErrorCode = 110400014

/** The code used when the work queue is full (answered with HTTP 503 + Retry-After). */
export const QUEUE_FULL_CODE: ErrorCode = 100500007

export class ApiError extends Error {
  readonly errorCode: ErrorCode
  readonly status: number
  readonly detail?: string
  readonly headers?: Record<string, string>
  /** Shown to the client as the body's extra `detail` field (only errors of new request fields set it, so
   *  the answers of old requests stay as they were). */
  readonly hint?: string
  constructor(code: ErrorCode, opts: { detail?: string; status?: number; headers?: Record<string, string>; hint?: string } = {}) {
    super(opts.detail ?? ERRORS[code].message)
    this.name = 'ApiError'
    this.errorCode = code
    this.status = opts.status ?? ERRORS[code].status
    this.detail = opts.detail
    this.headers = opts.headers
    this.hint = opts.hint
  }
}

/** Error body with all four fields every known client reads. `message` is the spec text. */
export function errorBody(code: ErrorCode, hint?: string) {
  const message = ERRORS[code].message
  return hint === undefined ? { error_code: code, message, code, msg: message } : { error_code: code, message, code, msg: message, detail: hint }
}

/** The addon's stable engine codes (native/core/src/error.rs, `EngineErrorCode` of @lucent/native) -> the API's
 *  error_code stored on an ERROR job. Typed over every engine code: a new one does not compile until mapped. */
const ENGINE_CODES: Record<EngineErrorCode, ErrorCode> = {
  unsupported_format: 110400007,
  image_too_large: 110400009,
  decode_failed: 100400002,
  encode_failed: 100500003,
  gpu_unavailable: 100500005,
  device_lost: 100500000,
  model_missing: 100500005,
  model_invalid: 100500005,
  unknown_model: 110400005,
  invalid_argument: 100403000,
  aborted: 100500007,
  budget_exceeded: 110400015,
  internal: 100500000,
}

/** Job failures of the gateway side (not engine codes), in the same vocabulary. */
const JOB_FAILURES = {
  timeout: 100500007,
  storage: 100500003,
  crashed: 100500006,
} as const satisfies Record<string, ErrorCode>
export type JobFailure = keyof typeof JOB_FAILURES

export function isEngineErrorCode(code: unknown): code is EngineErrorCode {
  return typeof code === 'string' && Object.hasOwn(ENGINE_CODES, code)
}

export function engineErrorCode(code: EngineErrorCode | JobFailure | string | undefined | null): ErrorCode {
  if (isEngineErrorCode(code)) return ENGINE_CODES[code]
  return (code && Object.hasOwn(JOB_FAILURES, code) && JOB_FAILURES[code as JobFailure]) || 100500006
}

/** server/fetch FetchError reasons -> error_code, per media kind. */
export function fetchErrorCode(reason: string, kind: 'photo' | 'video'): ErrorCode {
  if (kind === 'video') return 110400008
  if (reason === 'too_large') return 110400009
  return 100400001
}
