/**
 * Checks of a callback URL when it is given (submission `callback_url`, `lucent keys create|update --webhook`):
 * http(s), no credentials, at most 2048 characters, and not a private address (an IP literal, or a name that
 * resolves only to private addresses), unless its host is in LUCENT_FETCH_ALLOW. Delivery checks again on every
 * connection (server/fetch/post.ts), so a name that later resolves to a private address is refused then.
 */
import dns from 'node:dns/promises'
import net from 'node:net'
import { isBlockedAddress, normalizeHost } from '../fetch/index.js'

export type CallbackCheck = { ok: true; url: string } | { ok: false; reason: 'invalid' | 'private'; detail: string }

export async function checkCallbackUrl(raw: string, allow: readonly string[], lookupTimeoutMs = 5000): Promise<CallbackCheck> {
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
  const host = normalizeHost(u.hostname)
  if (!host) return bad('callback_url has no host')
  if (new Set(allow.map(normalizeHost)).has(host)) return { ok: true, url: u.href }
  const priv = (detail: string): CallbackCheck => ({ ok: false, reason: 'private', detail })
  if (net.isIP(host) !== 0) return isBlockedAddress(host) ? priv(`callback_url points at the private address ${host}`) : { ok: true, url: u.href }
  let addrs: string[]
  try {
    const timeout = new Promise<never>((_, rej) => setTimeout(() => rej(new Error('timeout')), lookupTimeoutMs).unref())
    addrs = (await Promise.race([dns.lookup(host, { all: true }), timeout])).map((a) => a.address)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOTFOUND' || code === 'ENODATA') return bad(`callback_url host ${host} does not resolve`)
    return { ok: true, url: u.href } // a transient DNS failure: delivery checks (and retries) later
  }
  if (addrs.length > 0 && addrs.every((a) => isBlockedAddress(a))) return priv(`callback_url host ${host} resolves to private addresses only (${addrs.join(', ')})`)
  return { ok: true, url: u.href }
}
