// Uploads to user-supplied URLs (pre-signed PUT URLs of S3, GCS, Azure), under the same SSRF rules as the
// fetches of index.ts: http/https only, IP literals checked here, host names checked in the connection's own
// lookup (the checked address is the one connected to), a short-lived undici Agent per call. Redirects are
// not followed (a pre-signed URL names its object; a redirect of a PUT would have to resend the body).

import dns from 'node:dns/promises'
import fs from 'node:fs'
import net from 'node:net'
import { Agent, request } from 'undici'
import { FetchError, isBlockedAddress, makeLookup, mapError, normalizeHost, parseTarget } from './index.js'

export interface PutPolicy {
  /** Host names or IP literals (exact, case-insensitive) that may be reached although private. */
  allow: string[]
  connectTimeoutMs: number
  headersTimeoutMs: number
  /** Overall deadline of one PUT (connect, body, answer). */
  totalTimeoutMs: number
}

/**
 * Checks a URL before it is accepted (at submission): scheme, host, and every address the host resolves to
 * (all blocked -> `blocked_address`; a host that does not resolve -> `invalid_url`). The connection is checked
 * again when it is made (DNS answers may change in between).
 */
export async function checkPublicUrl(raw: string, allowList: string[]): Promise<URL> {
  const allow = new Set(allowList.map(normalizeHost))
  const url = parseTarget(raw, undefined, allow)
  const host = normalizeHost(url.hostname)
  if (net.isIP(host) !== 0 || allow.has(host)) return url
  let addrs: Array<{ address: string }>
  try {
    addrs = await dns.lookup(host, { all: true })
  } catch (e) {
    throw new FetchError('invalid_url', `${host} does not resolve`, { cause: e })
  }
  if (addrs.length === 0 || addrs.every((a) => isBlockedAddress(a.address))) {
    throw new FetchError('blocked_address', `${host} resolves to a blocked address (${addrs.map((a) => a.address).join(', ')})`)
  }
  return url
}

/** What is PUT: bytes in memory, or a local file (streamed; a video result). */
export type PutBody = Buffer | { file: string; size: number }

/** One PUT of `body` to `url` (`abort`: the job stopped). Resolves with the answer's status (any status) and the start of its body;
 *  throws FetchError when no answer came (blocked address, network, timeout). */
export async function safePut(url: string, body: PutBody, headers: Record<string, string>, policy: PutPolicy, abort?: AbortSignal): Promise<{ status: number; text: string }> {
  const allow = new Set(policy.allow.map(normalizeHost))
  const target = parseTarget(url, undefined, allow)
  const agent = new Agent({
    connect: { timeout: policy.connectTimeoutMs, lookup: makeLookup(allow) as any },
    headersTimeout: policy.headersTimeoutMs,
    bodyTimeout: policy.totalTimeoutMs,
    connections: 1,
    pipelining: 0,
  })
  const timeout = AbortSignal.timeout(policy.totalTimeoutMs)
  const signal = abort ? AbortSignal.any([timeout, abort]) : timeout
  try {
    // The URL as given (its query is the signature): not re-serialised beyond what WHATWG URL parsing does.
    const [data, length] = Buffer.isBuffer(body) ? [body, body.length] : [fs.createReadStream(body.file), body.size]
    const res = await request(target.href.replace(/#.*$/, ''), {
      method: 'PUT', dispatcher: agent, signal, body: data,
      headers: { 'user-agent': 'lucent-put/0.1', 'content-length': String(length), ...headers },
    })
    let text = ''
    for await (const chunk of res.body) {
      if (text.length < 500) text += (chunk as Buffer).toString('utf8')
    }
    return { status: res.statusCode, text: text.slice(0, 500) }
  } catch (e) {
    if (abort?.aborted) throw new FetchError('network', 'aborted (the job stopped)', { cause: e })
    if (timeout.aborted) throw new FetchError('timeout', `no answer within ${policy.totalTimeoutMs} ms`, { cause: e })
    throw mapError(e)
  } finally {
    await agent.destroy().catch(() => {})
  }
}
