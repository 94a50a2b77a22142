/** API key authentication (sha256 hash lookup, constant-time compare, short cache) and per-key token bucket. */
import crypto from 'node:crypto'
import { ApiError } from './errors.js'
import type { ApiKey } from './store/types.js'

export function hashKey(key: string): string {
  return crypto.createHash('sha256').update(key).digest('hex')
}

/** A new high-entropy API key (shown once) with its stored id and hash. */
export function newApiKey(): { key: string; id: string; hash: string } {
  const key = `lk_${crypto.randomBytes(32).toString('base64url')}`
  return { key, id: `k_${crypto.randomBytes(6).toString('hex')}`, hash: hashKey(key) }
}

interface Cached { key: ApiKey | null; hashBuf: Buffer | null; until: number }


export class Authenticator {
  private cache = new Map<string, Cached>()

  constructor(private readonly lookup: (hash: string) => ApiKey | null | Promise<ApiKey | null>, private readonly ttlMs: number) {}

  /** Returns the key for the header value, or throws the spec error. */
  async authenticate(header: string | string[] | undefined, now = Date.now()): Promise<ApiKey> {
    const value = Array.isArray(header) ? header[0] : header
    if (!value) throw new ApiError(110400000)
    // Only the sha256 of the presented key is used for lookup and cache (never the key itself).
    const hash = hashKey(value.trim())
    let c = this.cache.get(hash)
    if (!c || c.until < now) {
      const key = await this.lookup(hash)
      c = { key, hashBuf: key ? Buffer.from(key.hash, 'hex') : null, until: now + this.ttlMs }
      if (this.ttlMs > 0) {
        if (this.cache.size > 10_000) this.cache.clear()
        this.cache.set(hash, c)
      }
      // constant-time comparison of the stored hash with the presented key's hash
      if (c.hashBuf && !crypto.timingSafeEqual(c.hashBuf, Buffer.from(hash, 'hex'))) c = { ...c, key: null }
    }
    const key = c!.key
    if (!key || key.revoked) throw new ApiError(110400000)
    if (key.expiresAt !== null && key.expiresAt <= now) throw new ApiError(100401000)
    return key
  }

  forget(): void { this.cache.clear() }
}

interface Bucket { tokens: number; last: number }

export class RateLimiter {
  private buckets = new Map<string, Bucket>()

  constructor(private readonly burst: number, private readonly perSec: number) {}

  /** Takes one token; throws 100429000 with Retry-After (seconds) when the bucket is empty. */
  take(keyId: string, keyRate: number | null, now = Date.now()): void {
    const rate = keyRate ?? this.perSec
    const burst = Math.max(this.burst, Math.ceil(rate))
    let b = this.buckets.get(keyId)
    if (!b) {
      b = { tokens: burst, last: now }
      this.buckets.set(keyId, b)
    } else {
      b.tokens = Math.min(burst, b.tokens + ((now - b.last) / 1000) * rate)
      b.last = now
    }
    if (b.tokens >= 1) {
      b.tokens -= 1
      return
    }
    const wait = rate > 0 ? Math.max(1, Math.ceil((1 - b.tokens) / rate)) : 60
    throw new ApiError(100429000, { headers: { 'retry-after': String(wait) } })
  }
}
