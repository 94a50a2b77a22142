/**
 * Per-key token bucket shared by every gateway (Redis). Same contract as the in-process RateLimiter in
 * server/auth.ts: `take(keyId, keyRate)` takes one token or throws 100429000 with Retry-After; burst =
 * max(LUCENT_RATE_BURST, ceil(rate)). The bucket update is one Lua script (atomic) on Redis' own clock, so
 * gateways with skewed clocks share one consistent bucket. Buckets expire once they would be full again.
 */
import { Redis } from 'ioredis'
import { ApiError } from '../errors.js'

// KEYS[1] bucket; ARGV: rate (tokens/s), burst. Returns {allowed 0/1, tokens*1000 after}.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'last')
local tokens = tonumber(b[1])
local last = tonumber(b[2])
if tokens == nil then
  tokens = burst
else
  tokens = math.min(burst, tokens + ((now - last) / 1000) * rate)
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'last', tostring(now))
local ttl = 60000
if rate > 0 then ttl = math.ceil((burst - tokens) / rate * 1000) + 1000 end
redis.call('PEXPIRE', KEYS[1], ttl)
return {allowed, math.floor(tokens * 1000)}
`

export class RedisRateLimiter {
  readonly redis: Redis
  private sha: string | null = null

  constructor(redisUrl: string, private readonly burst: number, private readonly perSec: number, private readonly prefix = 'lucent:rl:') {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: 2 })
    this.redis.on('error', () => {})
  }

  private async run(key: string, rate: number, burst: number): Promise<[number, number]> {
    if (this.sha) {
      try {
        return await this.redis.evalsha(this.sha, 1, key, rate, burst) as [number, number]
      } catch (e) {
        if (!String((e as Error).message).includes('NOSCRIPT')) throw e
      }
    }
    this.sha = await this.redis.script('LOAD', SCRIPT) as string
    return await this.redis.evalsha(this.sha, 1, key, rate, burst) as [number, number]
  }

  async take(keyId: string, keyRate: number | null): Promise<void> {
    const rate = keyRate ?? this.perSec
    const burst = Math.max(this.burst, Math.ceil(rate))
    let r: [number, number]
    try {
      r = await this.run(this.prefix + keyId, rate, burst)
    } catch (e) {
      throw new ApiError(100500002, { detail: `rate limit store: ${(e as Error).message}` })
    }
    if (r[0] === 1) return
    const tokens = r[1] / 1000
    const wait = rate > 0 ? Math.max(1, Math.ceil((1 - tokens) / rate)) : 60
    throw new ApiError(100429000, { headers: { 'retry-after': String(wait) } })
  }

  async close(): Promise<void> {
    this.redis.disconnect()
  }
}
