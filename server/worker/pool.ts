/** The piscina pool running engine-worker.js (size = LUCENT_WORKERS). */
import { MessageChannel } from 'node:worker_threads'
import { Piscina } from 'piscina'

export type EngineOutcome =
  | { ok: true; data: Uint8Array; width: number; height: number; format: string; ms: number }
  | { ok: false; error_code: string; message: string }

export type FramesOutcome =
  | { ok: true; data: Uint8Array; width: number; height: number; faceState?: Uint8Array }
  | { ok: false; error_code: string; message: string }

export interface EnhanceTask { model: string; format: string; exif?: boolean; dpi?: number | null }

export class EnginePool {
  private readonly pool: Piscina

  constructor(opts: { workers: number; modelDir: string; threads?: number }) {
    this.pool = new Piscina({
      filename: new URL('./engine-worker.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: opts.workers,
      concurrentTasksPerWorker: 1,
      idleTimeout: 60_000,
      workerData: { modelDir: opts.modelDir, threads: opts.threads },
    })
  }

  /** Loads the addon and the engine in a worker; reports the engine info and model names. */
  async init(): Promise<{ ok: true; info: unknown; models: string[] } | { ok: false; error_code: string; message: string }> {
    return this.pool.run({ op: 'init' })
  }

  async enhance(input: Buffer, t: EnhanceTask, timeoutMs: number, onProgress: (pct: number) => void): Promise<EngineOutcome> {
    const { port1, port2 } = new MessageChannel()
    port1.on('message', (p: number) => onProgress(p))
    port1.unref()
    const owned = input.byteOffset === 0 && input.byteLength === input.buffer.byteLength
    const bytes = owned ? new Uint8Array(input.buffer, 0, input.byteLength) : new Uint8Array(input)
    try {
      return await this.pool.run(
        { op: 'enhance', input: bytes, port: port2, timeoutMs, ...t },
        { transferList: [port2, bytes.buffer as ArrayBuffer] },
      )
    } finally {
      port1.close()
    }
  }

  /** Video: `count` packed RGB24 frames through a video catalog model (engine enhanceFrames). The frame
   *  buffer is transferred to the worker (it must own its ArrayBuffer; it is unusable afterwards). */
  async enhanceFrames(frames: Buffer, t: { model: string; width: number; height: number; count: number; faceState?: Uint8Array }, timeoutMs: number,
    signal?: AbortSignal): Promise<FramesOutcome> {
    const owned = frames.byteOffset === 0 && frames.byteLength === frames.buffer.byteLength
    const bytes = owned ? new Uint8Array(frames.buffer, 0, frames.byteLength) : new Uint8Array(frames)
    // `signal` cancels the running batch inside the worker (a message on a port; the worker stays alive).
    const { port1, port2 } = new MessageChannel()
    const onAbort = () => port1.postMessage('abort')
    if (signal?.aborted) onAbort()
    else signal?.addEventListener('abort', onAbort, { once: true })
    const run = this.pool.run({ op: 'frames', input: bytes, port: port2, timeoutMs, ...t }, { transferList: [bytes.buffer as ArrayBuffer, port2] })
    const entry = { cancel: onAbort, done: run.then(() => {}, () => {}) }
    this.framesInFlight.add(entry)
    try {
      return await run
    } finally {
      this.framesInFlight.delete(entry)
      signal?.removeEventListener('abort', onAbort)
      port1.close()
    }
  }

  private readonly framesInFlight = new Set<{ cancel: () => void; done: Promise<void> }>()

  async close(): Promise<void> {
    // A worker cannot terminate while a native call runs: cancel the running frame batches first (they stop
    // at the next tile) and give them a moment to return.
    const running = [...this.framesInFlight]
    for (const f of running) f.cancel()
    if (running.length) await Promise.race([Promise.all(running.map((f) => f.done)), new Promise((r) => setTimeout(r, 10_000).unref())])
    await this.pool.destroy()
  }
}
