// Uploads to user-supplied URLs (pre-signed PUT URLs of S3, GCS, Azure), under the same rule as the fetches of
// index.ts (./policy.ts): http/https only, the port policy, IP literals checked here, host names checked in the
// connection's own lookup (the checked address is the one connected to) under the DNS time limit, a
// short-lived undici Agent per call. Redirects are not followed (a pre-signed URL names its object; a redirect
// of a PUT would have to resend the body).

import fs from 'node:fs'
import { Agent, request } from 'undici'
import { FetchError, compileRules, makeLookup, mapError, parseTarget } from './index.js'
import type { OutboundSettings } from './policy.js'

/** The submission check of a user-named URL: ./policy.ts (one rule for img_url, callback_url, output_put_url).
 *  `checkPublicUrl(raw, allowList)` uses this process's outbound settings; pass `{ allow, ...config.outbound }`
 *  for a configuration's own. */
export { checkPublicUrl } from './policy.js'

export interface PutPolicy extends Partial<OutboundSettings> {
  /** Host names or IP literals (exact, case-insensitive) that may be reached although private, on any port. */
  allow: readonly string[]
  connectTimeoutMs: number
  headersTimeoutMs: number
  /** Overall deadline of one PUT (connect, body, answer). */
  totalTimeoutMs: number
}

/** What is PUT: bytes in memory, or a local file (streamed; a video result). */
export type PutBody = Buffer | { file: string; size: number }

/** One PUT of `body` to `url` (`abort`: the job stopped). Resolves with the answer's status (any status) and the start of its body;
 *  throws FetchError when no answer came (blocked address, network, timeout). */
export async function safePut(url: string, body: PutBody, headers: Record<string, string>, policy: PutPolicy, abort?: AbortSignal): Promise<{ status: number; text: string }> {
  const o = compileRules(policy)
  const target = parseTarget(url, undefined, o)
  const agent = new Agent({
    connect: { timeout: policy.connectTimeoutMs, lookup: makeLookup(o) as any },
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
