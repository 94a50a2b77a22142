/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a per-key secret `whsec_<base64 of 24 random
 * bytes>`; each request carries `webhook-id`, `webhook-timestamp` (unix seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body" keyed by the decoded secret>`.
 * Hand-written (a dozen lines of node:crypto) rather than the `standardwebhooks` package, which the tests use to
 * verify these signatures independently.
 */
import crypto from 'node:crypto'

const PREFIX = 'whsec_'

export function newWebhookSecret(): string {
  return PREFIX + crypto.randomBytes(24).toString('base64')
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64')
}

export function signature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${crypto.createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/** The three Standard Webhooks headers of one attempt (timestamp: now). */
export function webhookHeaders(secret: string, id: string, body: string, nowMs = Date.now()): Record<string, string> {
  const ts = Math.floor(nowMs / 1000)
  return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signature(secret, id, ts, body) }
}
