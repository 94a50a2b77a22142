/** API key authentication (sha256 hash lookup, constant-time compare, short cache) and per-key token bucket. */
import crypto from 'node:crypto'
import { ApiError } from './errors.js'
import type { ApiKey } from './store/types.js'
import { BoundedCache } from './cache.js'

export function hashKey(key: string): string {
  return crypto.hash('sha256', key, 'hex')
}

/** A new high-entropy API key (shown once) with its stored id and hash. */
export function newApiKey(): { key: string; id: string; hash: string } {
  const key = `lk_${crypto.randomBytes(32).toString('base64url')}`
  return { key, id: `k_${crypto.randomBytes(6).toString('hex')}`, hash: hashKey(key) }
}

interface Cached { key: ApiKey | null; until: number }

export class Authenticator {
  private cache = new BoundedCache<string, Cached>(10_000)

  constructor(private readonly lookup: (hash: string) => ApiKey | null | Promise<ApiKey | null>, private readonly ttlMs: number) {}

  /**
   * The key for the header value, or throws the spec error. Synchronous when the key is cached or the store's
   * lookup is (SQLite); a Promise only when an asynchronous store (PostgreSQL) has to be asked.
   */
  authenticate(header: string | string[] | undefined, now = Date.now()): ApiKey | Promise<ApiKey> {
    const value = Array.isArray(header) ? header[0] : header
    if (!value) throw new ApiError(110400000)
    // Only the sha256 of the presented key is used for lookup and cache (never the key itself).
    const hash = hashKey(value.trim())
    const c = this.cache.get(hash)
    if (c && c.until >= now) return valid(c.key, now)
    const found = this.lookup(hash)
    return found instanceof Promise ? found.then((k) => this.remember(hash, k, now)) : this.remember(hash, found, now)
  }

  private remember(hash: string, found: ApiKey | null, now: number): ApiKey {
    // constant-time comparison of the stored hash with the presented key's hash
    const key = found && crypto.timingSafeEqual(Buffer.from(found.hash, 'hex'), Buffer.from(hash, 'hex')) ? found : null
    if (this.ttlMs > 0) this.cache.set(hash, { key, until: now + this.ttlMs })
    return valid(key, now)
  }

  forget(): void { this.cache.clear() }
}

function valid(key: ApiKey | null, now: number): ApiKey {
  if (!key || key.revoked) throw new ApiError(110400000)
  if (key.expiresAt !== null && key.expiresAt <= now) throw new ApiError(100401000)
  return key
}

interface Bucket { tokens: number; last: number }

export class RateLimiter {
  private buckets = new BoundedCache<string, Bucket>(100_000)

  constructor(private readonly burst: number, private readonly perSec: number) {}

  /** Takes one token; throws 100429000 with Retry-After (seconds) when the bucket is empty. */
  take(keyId: string, keyRate: number | null, now = Date.now()): void {
    const g = this.grant(keyId, keyRate, 1, now)
    if (g.granted < 1) throw rateLimited(g.retryAfter)
  }

  /**
   * Takes up to `want` tokens at once (what is there, rounded down); `retryAfter` (seconds) says when one more
   * token will be there. The embedded cluster's HTTP processes lease tokens this way (server/cluster.ts).
   */
  grant(keyId: string, keyRate: number | null, want: number, now = Date.now()): { granted: number; retryAfter: number } {
    const rate = keyRate ?? this.perSec
    const burst = Math.max(this.burst, Math.ceil(rate))
    let b = this.buckets.get(keyId)
    if (!b) {
      b = { tokens: burst, last: now }
      this.buckets.set(keyId, b)
    } else {
      b.tokens = Math.min(burst, b.tokens + (Math.max(0, now - b.last) / 1000) * rate)
      b.last = now
    }
    const granted = Math.max(0, Math.min(Math.floor(want), Math.floor(b.tokens)))
    b.tokens -= granted
    const retryAfter = b.tokens >= 1 ? 0 : rate > 0 ? Math.max(1, Math.ceil((1 - b.tokens) / rate)) : 60
    return { granted, retryAfter }
  }
}

export function rateLimited(retryAfter: number): ApiError {
  return new ApiError(100429000, { headers: { 'retry-after': String(Math.max(1, retryAfter)) } })
}
