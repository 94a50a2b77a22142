/**
 * A bounded map for hot-path memoisation (API keys, signed links, finished jobs' status): Map insertion order
 * is the eviction order; a hit refreshes the entry. `max` bounds memory whatever the traffic.
 */
export class BoundedCache<K, V> {
  private readonly map = new Map<K, V>()

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new RangeError('BoundedCache: max must be >= 1')
  }

  get(k: K): V | undefined {
    const v = this.map.get(k)
    if (v !== undefined) {
      this.map.delete(k)
      this.map.set(k, v)
    }
    return v
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
