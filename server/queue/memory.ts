/** Bounded in-process queue; concurrency = engine pool size (LUCENT_WORKERS). Jobs are durable in the Store, not here. */
import type { JobHandler, Queue } from './types.js'
import { QueueBound } from './bound.js'

export class MemoryQueue implements Queue {
  private waiting: string[] = []
  private head = 0
  private running = 0
  private paused = false
  private closed = false
  private handler: JobHandler | null = null
  private idle: Array<() => void> = []

  private readonly bound: QueueBound

  constructor(max: number, private readonly concurrency: number) {
    this.bound = new QueueBound(max, () => this.size, () => this.closed)
  }

  private get size() { return this.waiting.length - this.head }

  tryReserve(): boolean { return this.bound.tryReserve() }
  release(): void { this.bound.release() }

  async enqueue(jobId: string, opts: { reserved?: boolean; force?: boolean } = {}): Promise<void> {
    this.bound.admit(opts)
    this.waiting.push(jobId)
    this.pump()
  }

  async remove(jobId: string): Promise<boolean> {
    const i = this.waiting.indexOf(jobId, this.head)
    if (i < 0) return false
    this.waiting.splice(i, 1)
    return true
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
      const id = this.waiting[this.head++]
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.head)
        this.head = 0
      }
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
