/**
 * The bounds every Queue implementation shares: the jobs waiting (`depth()`, exact in process, last known for a
 * shared queue) plus the places reserved by submissions in progress stay under `max`; and for each key, its
 * jobs waiting (`depthOf(key)`) plus its reservations stay under `maxPerKey` (LUCENT_QUEUE_MAX_PER_KEY).
 */
import type { Reservation } from './types.js'

/** The per-key share when LUCENT_QUEUE_MAX_PER_KEY is unset: half the queue (at least one place). */
export const defaultMaxPerKey = (max: number) => Math.max(1, Math.ceil(max / 2))

export class QueueBound {
  reserved = 0
  private readonly byKey = new Map<string, number>()
  readonly maxPerKey: number

  constructor(
    readonly max: number,
    private readonly depth: () => number,
    private readonly closed: () => boolean,
    private readonly depthOf: (keyId: string) => number = () => 0,
    maxPerKey?: number | null,
  ) {
    this.maxPerKey = maxPerKey ?? defaultMaxPerKey(max)
  }

  /** Places reserved by `keyId`'s submissions in progress. */
  reservedOf(keyId: string): number { return this.byKey.get(keyId) ?? 0 }

  private check(keyId: string): Reservation {
    if (this.closed() || this.depth() + this.reserved >= this.max) return 'full'
    if (this.depthOf(keyId) + this.reservedOf(keyId) >= this.maxPerKey) return 'key_full'
    return 'ok'
  }

  /** Reserves a place for a job of `keyId` about to be submitted. */
  reserve(keyId: string): Reservation {
    const r = this.check(keyId)
    if (r !== 'ok') return r
    this.reserved++
    this.byKey.set(keyId, this.reservedOf(keyId) + 1)
    return r
  }

  release(keyId: string): void {
    if (this.reserved > 0) this.reserved--
    const n = this.reservedOf(keyId)
    if (n > 1) this.byKey.set(keyId, n - 1)
    else this.byKey.delete(keyId)
  }

  /** Before adding a job: consumes its reservation, or (neither reserved nor forced) checks the bounds. */
  admit(opts: { keyId: string; reserved?: boolean; force?: boolean }): void {
    if (opts.reserved) this.release(opts.keyId)
    else if (!opts.force) {
      const r = this.check(opts.keyId)
      if (r === 'full') throw new Error('queue full')
      if (r === 'key_full') throw new Error('queue share of this key full')
    }
  }
}
