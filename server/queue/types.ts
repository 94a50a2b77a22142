/**
 * Work queue of job ids: in-process (memory.ts), BullMQ on Redis (bullmq.ts), or an embedded cluster's primary
 * reached over IPC (server/cluster.ts IpcQueue). Jobs themselves are durable in the Store; a queue holds ids.
 *
 * Fair share across API keys: every job is queued under its key, and keys take turns. The in-process queue
 * keeps one FIFO per key served round-robin; BullMQ gives each job a priority from a virtual clock (bullmq.ts).
 * Either way a key with a thousand jobs waiting delays another key's single job by about one job per worker
 * slot, and a key's own jobs keep their order. A key may also hold at most `maxPerKey` of the waiting places
 * (LUCENT_QUEUE_MAX_PER_KEY), so a flooding key cannot fill the queue for everyone else.
 */
/** 'handback': the run stopped without an outcome because this process is stopping (drain): a shared queue puts
 *  the job back in its place without counting a retry (BullMQ: moveToWait), for another worker. */
export type JobHandler = (jobId: string) => Promise<void | 'handback'>

export interface EnqueueOptions {
  /** The API key the job belongs to (fair share and the per-key bound). */
  keyId: string
  /** Consumes a reservation made by reserve(keyId). */
  reserved?: boolean
  /** Crash recovery: ignores both bounds. */
  force?: boolean
}

/** reserve()'s answer: a place is reserved ('ok'), the queue is at its bound ('full': 503), or this key holds
 *  its share of the queue ('key_full': 429). */
export type Reservation = 'ok' | 'full' | 'key_full'

export interface Queue {
  /** A key's share of the waiting places (LUCENT_QUEUE_MAX_PER_KEY). */
  readonly maxPerKey: number
  /** Reserves a place for a job of `keyId` about to be submitted; see Reservation. */
  reserve(keyId: string): Reservation
  /** Gives back a reservation of `keyId` that will not be used (the submission failed). */
  release(keyId: string): void
  /** Adds a job. With `reserved`, consumes a reservation; with `force` (crash recovery), ignores the bounds. */
  enqueue(jobId: string, opts: EnqueueOptions): Promise<void>
  /** Takes a waiting job out of the queue (cancel); false when it is not waiting here (running, or unknown). */
  remove(jobId: string): Promise<boolean>
  /** Shared queues that give up on a job by themselves (BullMQ: attempts or stalls exhausted) call `fn`. */
  onGiveUp?(fn: (jobId: string, reason: string) => Promise<unknown>): void
  /** Starts consuming with `handler`, at most `concurrency` jobs at once. */
  process(handler: JobHandler): void
  pause(): void
  resume(): void
  stats(): { waiting: number; running: number; reserved: number; max: number }
  /** In-process queues: the keys holding at least half their share of the waiting places, with their jobs
   *  waiting (the cluster primary broadcasts them for its HTTP children's per-key bound). */
  heavyKeys?(): Record<string, number>
  /** Stops starting jobs; resolves when running handlers have finished. */
  close(): Promise<void>
}
