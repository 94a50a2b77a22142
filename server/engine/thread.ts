/**
 * One engine thread of the piscina pool (pool.ts): loads the addon once per thread (the addon shares one
 * engine per process) and runs the tasks of protocol.ts. TypeScript, loaded through tsx like the rest of the
 * server (the pool starts its threads with tsx's loader). Expected failures are returned as
 * `{ ok: false, error_code, message }` with the addon's stable code.
 */
import { workerData } from 'node:worker_threads'
import { move, transferableSymbol, valueSymbol } from 'piscina'
import { isEngineErrorCode } from '../errors.js'
import { loadAddon, type Addon } from './addon.js'
import type { EngineTask, Failure, Replies, ThreadData, ToMain, ToThread } from './protocol.js'
import type { MessagePort } from 'node:worker_threads'

let addon: Addon | null = null

function engine(): Addon {
  if (!addon) {
    const a = loadAddon()
    a.init(workerData as ThreadData)
    addon = a
  }
  return addon
}

function failure(e: unknown): Failure {
  const code = (e as { code?: unknown } | null)?.code
  return { ok: false, error_code: isEngineErrorCode(code) ? code : 'internal', message: String((e as Error)?.message ?? e).slice(0, 500) }
}

/** An AbortSignal fired by the pool's `{ t: 'abort' }` on the task's port. */
function abortOn(port: MessagePort): AbortSignal {
  const ac = new AbortController()
  port.on('message', (m: ToThread) => { if (m.t === 'abort') ac.abort() })
  return ac.signal
}

/**
 * The addon's result buffers are external memory, which cannot be transferred: one copy into a JS-owned
 * buffer, which then moves to the main thread without another copy. (piscina's move() on a plain object
 * would try to transfer the object itself: the Transferable wrapper sends the object with only the buffer
 * in the transfer list.)
 */
function moved<T extends { data: Uint8Array }>(reply: T): T {
  return move({ [transferableSymbol]: reply.data.buffer, [valueSymbol]: reply }) as unknown as T
}

function owned(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.byteLength)
  out.set(data)
  return out
}

const handlers: { [K in EngineTask['op']]: (task: Extract<EngineTask, { op: K }>) => Promise<Replies[K]> } = {
  async init() {
    const a = engine()
    return { ok: true, info: a.info(), models: a.catalog().map((c) => c.name) }
  },

  async enhance(task) {
    const a = engine()
    const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
    let last = -1
    const r = await a.enhance(input, task.options, abortOn(task.port), (pct) => {
      const p = Math.floor(pct)
      if (p !== last) {
        last = p
        task.port.postMessage({ t: 'progress', pct: p } satisfies ToMain)
      }
    })
    return moved({ ok: true as const, data: owned(r.data), width: r.width, height: r.height, format: r.format, ms: r.ms, work: r.work })
  },

  // Video: one batch of RGB24 frames (server/jobs/video.ts drives the whole video through these calls).
  async frames(task) {
    const a = engine()
    const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
    const { faceState, ...rest } = task.options
    // Face-aware video models: the engine's face-box tracker state, carried from batch to batch.
    const r = await a.enhanceFrames(input, faceState ? { ...rest, faceState: Buffer.from(faceState) } : rest, abortOn(task.port))
    return moved({ ok: true as const, data: owned(r.data), width: r.width, height: r.height, faceState: r.faceState ? new Uint8Array(r.faceState) : undefined, work: r.work })
  },

  // Video frame-rate conversion: one batch (server/jobs/video.ts + server/video/interp.ts plan the positions).
  async interp(task) {
    const a = engine()
    const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
    const r = await a.interpolateFrames(input, task.options, abortOn(task.port))
    return moved({ ok: true as const, data: owned(r.data), width: r.width, height: r.height, count: r.count, cuts: r.cuts, work: r.work })
  },

  // Background removal (server/jobs/segment.ts): two result buffers, both moved back.
  async segment(task) {
    const a = engine()
    const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
    const r = await a.segment(input, task.options, abortOn(task.port), (pct) => task.port.postMessage({ t: 'progress', pct } satisfies ToMain))
    const reply = { ok: true as const, data: owned(r.data), mask: owned(r.mask), width: r.width, height: r.height, format: r.format, ms: r.ms, work: r.work }
    return move({ [transferableSymbol]: [reply.data.buffer, reply.mask.buffer], [valueSymbol]: reply }) as unknown as typeof reply
  },

  async forget(task) {
    return { ok: true, forgotten: engine().forgetNetwork(task.path) }
  },
}

export default async function run(task: EngineTask): Promise<Replies[EngineTask['op']]> {
  const handler = handlers[task.op] as (t: EngineTask) => Promise<Replies[EngineTask['op']]>
  if (!handler) return { ok: false, error_code: 'invalid_argument', message: `unknown op ${(task as { op: unknown }).op}` }
  try {
    return await handler(task)
  } catch (e) {
    return failure(e)
  } finally {
    if ('port' in task) task.port.close()
  }
}
