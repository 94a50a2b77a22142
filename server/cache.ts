/**
 * A bounded map for hot-path memoisation (API keys, signed links, finished jobs' status): the oldest entry
 * goes first (Map insertion order; a hit does not reorder, which would cost a delete + set per request).
 * `max` bounds memory whatever the traffic.
 */
export class BoundedCache<K, V> {
  private readonly map = new Map<K, V>()

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new RangeError('BoundedCache: max must be >= 1')
  }

  get(k: K): V | undefined {
    return this.map.get(k)
  }

  set(k: K, v: V): void {
    this.map.delete(k)
    this.map.set(k, v)
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K)
  }

  delete(k: K): void { this.map.delete(k) }
  clear(): void { this.map.clear() }
  get size(): number { return this.map.size }
}
