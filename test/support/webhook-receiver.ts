/** A real webhook receiver for the tests: an HTTP server on 127.0.0.1 that verifies every request's Standard
 *  Webhooks signature with the `standardwebhooks` package (independent of server/webhooks/signing.ts), records
 *  it, and answers what the test asks per path (a status, or a status sequence, or never: a hanging receiver). */
import http from 'node:http'
import { Webhook } from 'standardwebhooks'

export interface Received {
  path: string
  id: string
  timestamp: number
  verified: boolean
  body: { type: string; timestamp: string; data: Record<string, unknown> }
  at: number
}

interface T { teardown(fn: () => unknown): void }

export async function receiver(t: T, secretOf: (path: string) => string | undefined) {
  const got: Received[] = []
  /** Per path: answers in order (the last repeats); 0 = never answer. Default 200. */
  const answers = new Map<string, number[]>()
  const hanging = new Set<http.ServerResponse>()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname
      const raw = Buffer.concat(chunks).toString('utf8')
      const headers = { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) }
      let verified = false
      const secret = secretOf(path)
      if (secret) {
        try {
          new Webhook(secret).verify(raw, headers)
          verified = true
        } catch { /* recorded as unverified */ }
      }
      got.push({ path, id: headers['webhook-id'], timestamp: Number(headers['webhook-timestamp']), verified, body: JSON.parse(raw), at: Date.now() })
      const seq = answers.get(path) ?? [200]
      const status = seq.length > 1 ? seq.shift()! : seq[0]
      if (status === 0) {
        hanging.add(res)
        return
      }
      res.writeHead(status, { 'content-type': 'text/plain' }).end('ok')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => {
    for (const res of hanging) res.destroy()
    server.closeAllConnections()
    server.close(() => r())
  }))
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  return {
    base, got, answers,
    url: (path: string, seq?: number[]) => {
      if (seq) answers.set(path, [...seq])
      return `${base}${path}`
    },
    on: (path: string) => got.filter((g) => g.path === path),
  }
}
