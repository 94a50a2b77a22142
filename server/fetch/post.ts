/**
 * POST of a small body to a user-supplied URL under the same rule as fetches (./policy.ts: scheme, port, the
 * address checked is the address connected to; IP literals checked here; private addresses refused unless
 * allow-listed; DNS under its time limit).
 * Redirects are not followed (a 3xx is an answer like any other); the answer's body is read up to
 * `policy.maxBytes` and dropped. Throws FetchError for everything but an HTTP answer.
 */
import { request } from 'undici'
import { discard, parseTarget, withAgent, type FetchPolicy } from './index.js'

export async function safePost(url: string, body: string, headers: Record<string, string>, policy: FetchPolicy, signal?: AbortSignal): Promise<{ status: number }> {
  return withAgent(policy, async (agent, o, own) => {
    const target = parseTarget(url, undefined, o)
    const res = await request(target.href, {
      method: 'POST',
      dispatcher: agent,
      signal: signal ? AbortSignal.any([own, signal]) : own,
      headers: { 'user-agent': 'lucent-webhooks/0.1', 'content-type': 'application/json', ...headers },
      body,
    })
    let total = 0
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        total += chunk.length
        if (total > policy.maxBytes) break
      }
    } finally {
      discard(res.body)
    }
    return { status: res.statusCode }
  })
}
