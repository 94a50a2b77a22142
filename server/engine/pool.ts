/**
 * The engine pool: piscina threads running thread.ts (size = LUCENT_WORKERS, the jobs processed at once),
 * spoken to in the typed protocol of protocol.ts. The one place that starts engine threads; photo jobs and
 * video frame batches alike go through it, so the gateway's event loop never runs engine code.
 *
 * Threads run the same form of the server as this module: compiled (dist/engine/pool.js, production: `npm start`
 * and `bin/lucent.js` on a fresh build) starts dist/engine/thread.js with the process's own node flags; the
 * TypeScript sources (tests, development) start thread.ts with tsx's loader in the threads' execArgv unless the
 * process was itself started with it (`node --import tsx`), so `bin/lucent.js` (tsx registered in-process), the
 * tests and cluster primaries all start working threads.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { Config } from '../config.js'
import type { EngineInfo, EngineOptions, EnhanceOptions, FramesOptions } from './addon.js'
import { engineSettings } from './options.js'
import type { EngineTask, EnhanceReply, ForgetReply, FramesReply, InitReply, InterpReply, InterpTask, ReplyTo, SegmentReply, SegmentTask, ThreadData, ToMain, ToThread } from './protocol.js'

/** piscina's rejection of the task whose thread exited (made in the main thread, so its properties survive), or the
 *  pool's own error for it when it has one (`code: 'engine_thread_died'`). */
export function isThreadDeath(e: unknown): boolean {
  const x = e as { code?: unknown; message?: unknown } | null
  return x?.code === 'engine_thread_died' || (typeof x?.message === 'string' && /^worker exited with code/.test(x.message))
}

/** Is tsx's loader among these node flags (`--import tsx`, `--import=tsx`, or its resolved file URL)? */
function hasTsx(argv: string[]): boolean {
  return argv.some((a, i) => {
    const m = /^--(?:import|loader)(?:=(.*))?$/.exec(a)
    const value = m ? m[1] ?? argv[i + 1] ?? '' : ''
    return /(^|\/)tsx(\/|$)/.test(value)
  })
}

export function threadExecArgv(argv = process.execArgv): string[] {
  return hasTsx(argv) ? argv : [...argv, '--import', import.meta.resolve('tsx')]
}

/** This module compiled to JavaScript (dist/engine/pool.js), not the TypeScript source through tsx. */
const compiled = import.meta.url.endsWith('.js')

/** A buffer's bytes as a Uint8Array that owns its whole ArrayBuffer (transferable without detaching others). */
function transferable(b: Buffer): Uint8Array {
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? new Uint8Array(b.buffer, 0, b.byteLength) : new Uint8Array(b)
}

/** The engine as /healthz, /readyz and the cluster broadcast report it. */
export interface EngineState {
  state: 'starting' | 'ready' | 'error'
  /** The engine's info where this process (or its cluster primary) runs jobs; the role on a gateway. */
  info?: EngineInfo | { role: Config['role'] }
  models?: string[]
  error?: string
}

export interface EngineCall {
  /** Aborts the task inside its thread (the engine stops at its next tile; the thread stays alive). */
  signal?: AbortSignal
  onProgress?: (pct: number) => void
}

export class EnginePool {
  private readonly pool: Piscina
  /** Tasks running now: close() aborts them (a thread cannot terminate while a native call runs). */
  private readonly inFlight = new Set<{ abort: () => void; done: Promise<void> }>()

  constructor(options: EngineOptions & { workers: number }) {
    const { workers, ...init } = options
    // unset options stay absent: the addon applies its own defaults; the engine, GPU and CPU settings of the
    // environment go along as options (the crates read no environment: options.ts)
    const data: ThreadData = { ...engineSettings(process.env), modelDir: init.modelDir }
    if (init.backend) data.backend = init.backend
    if (init.adapter) data.adapter = init.adapter
    if (init.threads) data.threads = init.threads
    if (init.tile) data.tile = init.tile
    this.pool = new Piscina({
      filename: new URL(compiled ? './thread.js' : './thread.ts', import.meta.url).href,
      minThreads: 1,
      maxThreads: workers,
      concurrentTasksPerWorker: 1,
      idleTimeout: 60_000,
      execArgv: compiled ? process.execArgv : threadExecArgv(),
      workerData: data,
    })
  }

  /** Loads the addon and the engine in a thread; reports the engine info and model names. */
  init(): Promise<InitReply> {
    return this.pool.run({ op: 'init' } satisfies EngineTask)
  }

  /** Frees the network loaded from `path` (an own model removed by the operator); the engine is one per process,
   *  so one thread answers for all. */
  forgetNetwork(path: string): Promise<ForgetReply> {
    return this.pool.run({ op: 'forget', path } satisfies EngineTask)
  }

  /** A photo: decode, run the model's pipeline, encode (the addon's enhance()). The input is transferred. */
  enhance(input: Buffer, options: EnhanceOptions, call: EngineCall = {}): Promise<EnhanceReply> {
    return this.call((port) => ({ op: 'enhance', input: transferable(input), port, options }), call)
  }

  /** Video: `count` packed RGB24 frames through a video model (the addon's enhanceFrames()). The frame
   *  buffer is transferred to the thread (unusable afterwards). */
  enhanceFrames(frames: Buffer, options: Omit<FramesOptions, 'faceState'> & { faceState?: Uint8Array }, call: EngineCall = {}): Promise<FramesReply> {
    return this.call((port) => ({ op: 'frames', input: transferable(frames), port, options }), call)
  }

  /** Video frame-rate conversion: one output frame per position (`i + t` between frames i and i + 1 of this
   *  batch), RIFE v4.6, scene cuts copied (the addon's interpolateFrames). The frame buffer is transferred. */
  interpolateFrames(frames: Buffer, options: InterpTask['options'], call: EngineCall = {}): Promise<InterpReply> {
    return this.call((port) => ({ op: 'interp', input: transferable(frames), port, options }), call)
  }

  /** Background removal of one photo (the addon's segment()): the matted RGBA image and the grey mask. The input is
   *  transferred. */
  segment(input: Buffer, options: SegmentTask['options'], call: EngineCall = {}): Promise<SegmentReply> {
    return this.call((port) => ({ op: 'segment', input: transferable(input), port, options }), call)
  }

  private async call<T extends Extract<EngineTask, { port: unknown }>>(make: (port: MessagePort) => T, call: EngineCall): Promise<ReplyTo<T>> {
    const { port1, port2 } = new MessageChannel()
    const task = make(port2)
    if (call.onProgress) {
      const onProgress = call.onProgress
      port1.on('message', (m: ToMain) => { if (m.t === 'progress') onProgress(m.pct) })
      port1.unref()
    }
    const abort = () => port1.postMessage({ t: 'abort' } satisfies ToThread)
    if (call.signal?.aborted) abort()
    else call.signal?.addEventListener('abort', abort, { once: true })
    const run: Promise<ReplyTo<T>> = this.pool.run(task, { transferList: [port2, task.input.buffer as ArrayBuffer] })
    const entry = { abort, done: run.then(() => {}, () => {}) }
    this.inFlight.add(entry)
    try {
      return await run
    } finally {
      this.inFlight.delete(entry)
      call.signal?.removeEventListener('abort', abort)
      port1.close()
    }
  }

  async close(): Promise<void> {
    // Abort the running tasks first (they stop at the next tile) and give them a moment to return.
    const running = [...this.inFlight]
    for (const f of running) f.abort()
    if (running.length) await Promise.race([Promise.all(running.map((f) => f.done)), new Promise((r) => setTimeout(r, 10_000).unref())])
    await this.pool.destroy()
  }
}
