// Safe fetching of user-supplied URLs (SSRF guard). What may be contacted is decided by ./policy.ts (the one
// rule for every outbound request a user names: scheme, address, port, DNS time limit).
//
// - Every hop of a redirect chain is re-validated (scheme, host, IP-literal address, port: policy.parseTarget).
// - Host names are resolved inside the connection's own `lookup` (policy.makeLookup), so the address that is
//   checked is the address that is connected to (no DNS-rebinding window between check and connect).
// - IP-literal hosts never reach `lookup` (Node's net and undici skip it), so parseTarget checks them per hop.
// - Body size is capped while streaming; Content-Length above the cap is refused before reading the body.
// - Every request runs on its own short-lived undici Agent which is destroyed afterwards, on success and on
//   every failure path, so no socket outlives the call.

import fs from 'node:fs'
import { Transform, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Agent, request } from 'undici'
import { BlockedLookupError, FetchError, compileRules, makeLookup, parseTarget, type Outbound, type OutboundSettings } from './policy.js'

export { isBlockedAddress } from './address.js'
export { FetchError, checkPublicUrl, normalizeHost, parseTarget, makeLookup, compileRules, type FetchErrorReason, type Outbound, type OutboundRules } from './policy.js'

/** A fetch's limits; the optional outbound settings default to this process's environment (policy.ts). */
export interface FetchPolicy extends Partial<OutboundSettings> {
  /** Host names or IP literals (exact, case-insensitive) that may be fetched although private, on any port. */
  allow: readonly string[]
  maxBytes: number
  connectTimeoutMs: number
  headersTimeoutMs: number
  /** Idle time allowed between two body chunks. */
  bodyTimeoutMs: number
  maxRedirects: number
  /** Optional overall deadline for the whole call (all hops, headers and body). */
  totalTimeoutMs?: number
}

const REDIRECT_CODES = new Set([301, 302, 303, 307, 308])
const USER_AGENT = 'lucent-fetch/0.1'

function findCause(e: unknown, pred: (x: any) => boolean): any {
  let cur: any = e
  for (let i = 0; i < 8 && cur != null; i++) {
    if (pred(cur)) return cur
    cur = cur.cause
  }
  return undefined
}

export function mapError(e: unknown): FetchError {
  if (e instanceof FetchError) return e
  const fe = findCause(e, (x) => x instanceof FetchError)
  if (fe) return fe
  if (findCause(e, (x) => x instanceof BlockedLookupError)) {
    return new FetchError('blocked_address', findCause(e, (x) => x instanceof BlockedLookupError).message, { cause: e })
  }
  const code: string | undefined = findCause(e, (x) => typeof x?.code === 'string')?.code
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'ETIMEDOUT':
    case 'ETIMEOUT':
      return new FetchError('timeout', (e as Error).message, { cause: e })
    case 'ERR_INVALID_URL':
    case 'UND_ERR_INVALID_ARG':
      return new FetchError('invalid_url', (e as Error).message, { cause: e })
  }
  const msg = e instanceof Error ? e.message : String(e)
  return new FetchError('network', msg || code || 'network error', { cause: e })
}

interface Opened {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: NodeJS.ReadableStream & { destroy(err?: Error): void }
  finalUrl: string
}

/** Drops a response body: swallow the abort error it emits, release the socket. */
export function discard(body: { on(ev: 'error', fn: () => void): unknown; destroy(): unknown }): void {
  body.on('error', () => {})
  body.destroy()
}

function header(h: Opened['headers'], name: string): string | null {
  const v = h[name]
  if (v === undefined) return null
  return Array.isArray(v) ? (v[0] ?? null) : v
}

async function open(rawUrl: string, policy: FetchPolicy, agent: Agent, o: Outbound, signal: AbortSignal): Promise<Opened> {
  let url = parseTarget(rawUrl, undefined, o)
  for (let hop = 0; ; hop++) {
    const res = await request(url.origin + url.pathname + url.search, {
      method: 'GET',
      dispatcher: agent,
      signal,
      headers: { 'user-agent': USER_AGENT, accept: '*/*', 'accept-encoding': 'identity' },
    })
    const headers = res.headers as Opened['headers']
    const location = header(headers, 'location')
    if (REDIRECT_CODES.has(res.statusCode) && location !== null) {
      discard(res.body)
      if (hop >= policy.maxRedirects) {
        throw new FetchError('too_many_redirects', `more than ${policy.maxRedirects} redirects`)
      }
      url = parseTarget(location, url, o)
      continue
    }
    if (res.statusCode < 200 || res.statusCode > 299) {
      discard(res.body)
      throw new FetchError('http_status', `HTTP ${res.statusCode} from ${url.host}`, { status: res.statusCode })
    }
    const len = header(headers, 'content-length')
    if (len !== null && /^\s*\d+\s*$/.test(len) && Number(len) > policy.maxBytes) {
      discard(res.body)
      throw new FetchError('too_large', `Content-Length ${len.trim()} exceeds ${policy.maxBytes} bytes`)
    }
    const final = new URL(url.href)
    final.hash = ''
    final.username = ''
    final.password = ''
    return { statusCode: res.statusCode, headers, body: res.body as unknown as Opened['body'], finalUrl: final.href }
  }
}

export async function withAgent<T>(policy: FetchPolicy, fn: (agent: Agent, o: Outbound, signal: AbortSignal) => Promise<T>): Promise<T> {
  const o = compileRules(policy)
  const agent = new Agent({
    connect: { timeout: policy.connectTimeoutMs, lookup: makeLookup(o) as any },
    headersTimeout: policy.headersTimeoutMs,
    bodyTimeout: policy.bodyTimeoutMs,
    connections: 1,
    pipelining: 1,
  })
  const ac = new AbortController()
  let timer: NodeJS.Timeout | undefined
  if (policy.totalTimeoutMs !== undefined && policy.totalTimeoutMs > 0) {
    timer = setTimeout(() => ac.abort(new FetchError('timeout', `no complete answer within ${policy.totalTimeoutMs} ms`)), policy.totalTimeoutMs)
  }
  try {
    return await fn(agent, o, ac.signal)
  } catch (e) {
    if (localErrors.has(e as object)) throw e // a local file-system error, not the remote side's fault
    if (ac.signal.aborted && ac.signal.reason instanceof FetchError) throw ac.signal.reason
    throw mapError(e)
  } finally {
    if (timer) clearTimeout(timer)
    await agent.destroy().catch(() => {})
  }
}

/** Fetches `url` into memory under `policy`. Throws FetchError. */
export async function safeFetch(url: string, policy: FetchPolicy): Promise<{ body: Buffer; contentType: string | null; finalUrl: string }> {
  return withAgent(policy, async (agent, o, signal) => {
    const res = await open(url, policy, agent, o, signal)
    const chunks: Buffer[] = []
    let total = 0
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        total += chunk.length
        if (total > policy.maxBytes) throw new FetchError('too_large', `body exceeds ${policy.maxBytes} bytes`)
        chunks.push(chunk)
      }
    } catch (e) {
      discard(res.body)
      throw e
    }
    return { body: Buffer.concat(chunks, total), contentType: header(res.headers, 'content-type'), finalUrl: res.finalUrl }
  })
}

/** Errors of the local destination file: passed through unchanged (not FetchError). */
const localErrors = new WeakSet<object>()

class ByteLimit extends Transform {
  bytes = 0
  constructor(private readonly max: number) {
    super()
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length
    if (this.bytes > this.max) cb(new FetchError('too_large', `body exceeds ${this.max} bytes`))
    else cb(null, chunk)
  }
}

/**
 * Streams `url` into the file `dest` under `policy`; a partial file is removed on failure. Throws FetchError,
 * except for errors of the destination file itself (ENOENT, ENOSPC, EACCES...), which are thrown unchanged.
 */
export async function safeFetchToFile(url: string, dest: string, policy: FetchPolicy): Promise<{ bytes: number; contentType: string | null; finalUrl: string }> {
  return withAgent(policy, async (agent, o, signal) => {
    // Open the destination first: a bad path fails before any network traffic.
    let handle: fs.promises.FileHandle
    try {
      handle = await fs.promises.open(dest, 'w')
    } catch (e) {
      if (e && typeof e === 'object') localErrors.add(e)
      throw e
    }
    const file = fs.createWriteStream('', { fd: handle as unknown as number, autoClose: true })
    // pipeline() also destroys the file stream with the remote side's errors: mark only real fs errors.
    file.on('error', (e: NodeJS.ErrnoException) => {
      if (typeof e?.syscall === 'string') localErrors.add(e)
    })
    let res: Opened
    try {
      res = await open(url, policy, agent, o, signal)
    } catch (e) {
      file.destroy()
      await fs.promises.rm(dest, { force: true }).catch(() => {})
      throw e
    }
    const limit = new ByteLimit(policy.maxBytes)
    try {
      await pipeline(res.body, limit, file)
    } catch (e) {
      discard(res.body)
      await fs.promises.rm(dest, { force: true }).catch(() => {})
      throw e
    }
    return { bytes: limit.bytes, contentType: header(res.headers, 'content-type'), finalUrl: res.finalUrl }
  })
}
