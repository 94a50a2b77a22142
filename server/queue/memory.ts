/**
 * Bounded in-process queue; concurrency = engine pool size (LUCENT_WORKERS). Jobs are durable in the Store, not
 * here. Fair share: one FIFO per API key, keys served round-robin (a key that gets a job started goes to the
 * back of the ring; a key with nothing waiting leaves it, and joins at the back when it queues again). So a
 * key's job waits behind at most one job of each other key with jobs waiting, however many they queued.
 */
import type { EnqueueOptions, JobHandler, Queue, Reservation } from './types.js'
import { QueueBound } from './bound.js'

/** A FIFO of strings with O(1) push and shift (amortized). */
class Fifo {
  private items: string[] = []
  private head = 0

  get size(): number { return this.items.length - this.head }
  push(s: string): void { this.items.push(s) }

  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined
    const s = this.items[this.head++]
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return s
  }

  /** Removes the first `s`; false when absent. */
  delete(s: string): boolean {
    const i = this.items.indexOf(s, this.head)
    if (i < 0) return false
    this.items.splice(i, 1)
    return true
  }
}

export class MemoryQueue implements Queue {
  /** Jobs waiting, per key. */
  private readonly perKey = new Map<string, Fifo>()
  /** Keys with jobs waiting, in turn order (a key may appear in `ring` only while it has a FIFO in perKey). */
  private readonly ring = new Fifo()
  /** Job id -> its key, for the jobs waiting. */
  private readonly keyOf = new Map<string, string>()
  private running = 0
  private paused = false
  private closed = false
  private handler: JobHandler | null = null
  private idle: Array<() => void> = []

  private readonly bound: QueueBound

  /** `maxPerKey`: a key's share of the waiting places (default: half of `max`). */
  constructor(max: number, private readonly concurrency: number, maxPerKey?: number | null) {
    this.bound = new QueueBound(max, () => this.size, () => this.closed, (k) => this.waitingOf(k), maxPerKey)
  }

  private get size() { return this.keyOf.size }

  /** Jobs of `keyId` waiting. */
  waitingOf(keyId: string): number { return this.perKey.get(keyId)?.size ?? 0 }

  heavyKeys(): Record<string, number> {
    const min = Math.max(1, Math.floor(this.bound.maxPerKey / 2))
    const out: Record<string, number> = {}
    for (const [k, q] of this.perKey) if (q.size >= min) out[k] = q.size
    return out
  }

  get maxPerKey(): number { return this.bound.maxPerKey }
  reserve(keyId: string): Reservation { return this.bound.reserve(keyId) }
  release(keyId: string): void { this.bound.release(keyId) }

  async enqueue(jobId: string, opts: EnqueueOptions): Promise<void> {
    this.bound.admit(opts)
    if (this.keyOf.has(jobId)) return // already waiting (recovery may queue a job twice)
    this.keyOf.set(jobId, opts.keyId)
    let q = this.perKey.get(opts.keyId)
    if (!q) {
      this.perKey.set(opts.keyId, (q = new Fifo()))
      this.ring.push(opts.keyId)
    }
    q.push(jobId)
    this.pump()
  }

  async remove(jobId: string): Promise<boolean> {
    const k = this.keyOf.get(jobId)
    if (k === undefined) return false
    const q = this.perKey.get(k)
    if (!q?.delete(jobId)) return false
    this.keyOf.delete(jobId)
    if (q.size === 0) {
      this.perKey.delete(k)
      this.ring.delete(k)
    }
    return true
  }

  /** The next job in turn: the first key of the ring gives its oldest job and goes to the back. */
  private next(): string | undefined {
    const k = this.ring.shift()
    if (k === undefined) return undefined
    const q = this.perKey.get(k)!
    const id = q.shift()!
    this.keyOf.delete(id)
    if (q.size > 0) this.ring.push(k)
    else this.perKey.delete(k)
    return id
  }

  process(handler: JobHandler): void {
    this.handler = handler
    this.pump()
  }

  pause(): void { this.paused = true }
  resume(): void {
    this.paused = false
    this.pump()
  }

  stats() { return { waiting: this.size, running: this.running, reserved: this.bound.reserved, max: this.bound.max } }

  private pump(): void {
    while (this.handler && !this.paused && !this.closed && this.running < this.concurrency && this.size > 0) {
      const id = this.next()!
      this.running++
      this.handler(id).catch(() => {}).finally(() => {
        this.running--
        if (this.running === 0) for (const f of this.idle.splice(0)) f()
        this.pump()
      })
    }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.running === 0) return
    await new Promise<void>((resolve) => this.idle.push(resolve))
  }
}
