/**
 * The bound every Queue implementation shares: the jobs waiting (`depth()`, exact in process, last known for a
 * shared queue) plus the places reserved by submissions in progress stay under `max`.
 */
export class QueueBound {
  reserved = 0

  constructor(readonly max: number, private readonly depth: () => number, private readonly closed: () => boolean) {}

  /** Reserves a place for a job about to be submitted; false when at the bound (or closed). */
  tryReserve(): boolean {
    if (this.closed() || this.depth() + this.reserved >= this.max) return false
    this.reserved++
    return true
  }

  release(): void {
    if (this.reserved > 0) this.reserved--
  }

  /** Before adding a job: consumes its reservation, or (neither reserved nor forced) checks the bound. */
  admit(opts: { reserved?: boolean; force?: boolean }): void {
    if (opts.reserved) this.release()
    else if (!opts.force && this.depth() + this.reserved >= this.max) throw new Error('queue full')
  }
}
