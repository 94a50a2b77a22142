/**
 * Verification of Lucent's webhooks, signed in the Standard Webhooks scheme: headers `webhook-id`,
 * `webhook-timestamp` (seconds) and `webhook-signature` (space-separated `v1,<base64>` entries), each an
 * HMAC-SHA256 of `<id>.<timestamp>.<raw body>` keyed with the secret's bytes (`whsec_<base64>`).
 */
import crypto from 'node:crypto'

export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'WebhookVerificationError'
  }
}

/** Header lookup over a plain object (any case), a Fetch `Headers`, or Node's IncomingHttpHeaders. */
type HeaderSource = Headers | Record<string, string | string[] | undefined>

function header(h: HeaderSource, name: string): string | undefined {
  if (typeof (h as Headers).get === 'function') return (h as Headers).get(name) ?? undefined
  const rec = h as Record<string, string | string[] | undefined>
  const k = Object.keys(rec).find((x) => x.toLowerCase() === name)
  const v = k === undefined ? undefined : rec[k]
  return Array.isArray(v) ? v[0] : v
}

/** The key bytes of a `whsec_<base64>` secret (a bare base64 secret is accepted too). */
export function webhookKey(secret: string): Buffer {
  const b64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret
  const key = Buffer.from(b64, 'base64')
  if (key.length === 0) throw new WebhookVerificationError('empty webhook secret')
  return key
}

/** `v1,<base64>` for a message (what the server sends; useful to test receivers). */
export function signWebhook(secret: string, id: string, timestamp: number | string, body: string | Uint8Array): string {
  const mac = crypto.createHmac('sha256', webhookKey(secret))
  mac.update(`${id}.${timestamp}.`)
  mac.update(body)
  return `v1,${mac.digest('base64')}`
}

export interface VerifyOptions {
  /** Largest allowed distance between the timestamp and now, in seconds (default 300). */
  toleranceSeconds?: number
  /** Now, in ms (tests). */
  now?: number
}

/**
 * Checks a webhook request and returns its parsed JSON body. `body` must be the raw body as received (a
 * re-serialised object would not match). Throws WebhookVerificationError when a header is missing, the
 * timestamp is outside the tolerance (replays), or no `v1` signature matches.
 */
export function verifyWebhook<T = unknown>(secret: string, headers: HeaderSource, body: string | Uint8Array, o: VerifyOptions = {}): T {
  const id = header(headers, 'webhook-id')
  const ts = header(headers, 'webhook-timestamp')
  const sigs = header(headers, 'webhook-signature')
  if (!id || !ts || !sigs) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature header')
  if (!/^\d+$/.test(ts)) throw new WebhookVerificationError('webhook-timestamp is not a number of seconds')
  const tolerance = o.toleranceSeconds ?? 300
  const now = Math.floor((o.now ?? Date.now()) / 1000)
  if (Math.abs(now - Number(ts)) > tolerance) throw new WebhookVerificationError('webhook-timestamp outside the tolerance')
  const want = Buffer.from(signWebhook(secret, id, ts, body).slice(3), 'base64')
  const ok = sigs.split(' ').some((s) => {
    const [version, sig] = s.split(',', 2)
    if (version !== 'v1' || !sig) return false
    const got = Buffer.from(sig, 'base64')
    return got.length === want.length && crypto.timingSafeEqual(got, want)
  })
  if (!ok) throw new WebhookVerificationError('no matching signature')
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8')
  return JSON.parse(text) as T
}
