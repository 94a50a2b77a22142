/**
 * Checks of a callback URL when it is given (submission `callback_url`, `lucent keys create|update --webhook`):
 * at most 2048 characters, no credentials, and the one rule of every user-named outbound request
 * (server/fetch/policy.ts: http(s), an allowed port, not a private address, resolving within the DNS time limit;
 * hosts in LUCENT_FETCH_ALLOW exempt). Delivery checks again on every connection (server/fetch/post.ts), so a
 * name that later resolves to a private address is refused then.
 * Answers: a private address -> 'private' (110400021); anything else refused -> 'invalid' (110400020).
 */
import { checkPublicUrl, FetchError, type OutboundRules } from '../fetch/index.js'

export type CallbackCheck = { ok: true; url: string } | { ok: false; reason: 'invalid' | 'private'; detail: string }

/** `rules`: the allow-list (LUCENT_FETCH_ALLOW) alone (this process's outbound settings), or with the settings. */
export async function checkCallbackUrl(raw: string, rules: OutboundRules | readonly string[]): Promise<CallbackCheck> {
  const bad = (detail: string): CallbackCheck => ({ ok: false, reason: 'invalid', detail })
  if (raw.length > 2048) return bad('callback_url is longer than 2048 characters')
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    return bad('callback_url is not a URL')
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return bad('callback_url must be http or https')
  if (u.username || u.password) return bad('callback_url must not carry credentials')
  try {
    await checkPublicUrl(u.href, rules)
  } catch (e) {
    if (!(e instanceof FetchError)) throw e
    if (e.reason === 'blocked_address') return { ok: false, reason: 'private', detail: `callback_url: ${e.message} (a private address)` }
    return bad(`callback_url: ${e.message}`)
  }
  return { ok: true, url: u.href }
}
