/**
 * Work queue of job ids: in-process (memory.ts), BullMQ on Redis (bullmq.ts), or an embedded cluster's primary
 * reached over IPC (server/cluster.ts IpcQueue). Jobs themselves are durable in the Store; a queue holds ids.
 */
export type JobHandler = (jobId: string) => Promise<void>

export interface Queue {
  /** Reserves a place for a job about to be submitted; false when the queue is at its bound. */
  tryReserve(): boolean
  /** Gives back a reservation that will not be used (the submission failed). */
  release(): void
  /** Adds a job. With `reserved`, consumes a reservation; with `force` (crash recovery), ignores the bound. */
  enqueue(jobId: string, opts?: { reserved?: boolean; force?: boolean }): Promise<void>
  /** Takes a waiting job out of the queue (cancel); false when it is not waiting here (running, or unknown). */
  remove(jobId: string): Promise<boolean>
  /** Shared queues that give up on a job by themselves (BullMQ: attempts or stalls exhausted) call `fn`. */
  onGiveUp?(fn: (jobId: string, reason: string) => Promise<unknown>): void
  /** Starts consuming with `handler`, at most `concurrency` jobs at once. */
  process(handler: JobHandler): void
  pause(): void
  resume(): void
  stats(): { waiting: number; running: number; reserved: number; max: number }
  /** Stops starting jobs; resolves when running handlers have finished. */
  close(): Promise<void>
}
