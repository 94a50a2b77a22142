/** Work queue of job ids. In-process today (memory.ts); BullMQ/Redis later, same interface. */
export type JobHandler = (jobId: string) => Promise<void>

export interface Queue {
  /** Reserves a place for a job about to be submitted; false when the queue is at its bound. */
  tryReserve(): boolean
  /** Gives back a reservation that will not be used (the submission failed). */
  release(): void
  /** Adds a job. With `reserved`, consumes a reservation; with `force` (crash recovery), ignores the bound. */
  enqueue(jobId: string, opts?: { reserved?: boolean; force?: boolean }): Promise<void>
  /** Starts consuming with `handler`, at most `concurrency` jobs at once. */
  process(handler: JobHandler): void
  pause(): void
  resume(): void
  stats(): { waiting: number; running: number; reserved: number; max: number }
  /** Stops starting jobs; resolves when running handlers have finished. */
  close(): Promise<void>
}
