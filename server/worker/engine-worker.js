// piscina worker: loads the native addon ONCE per thread (the addon shares one engine per process) and runs
// tasks. Expected failures are RETURNED as {ok:false, error_code, message} (engine code string): piscina
// drops custom Error properties across the thread boundary. Plain JS on purpose: no loader needed in threads.
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { workerData } from 'node:worker_threads'
import Piscina from 'piscina'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(import.meta.url)
let addon = null

function engine() {
  if (!addon) {
    const a = require(path.join(repoRoot, 'native', 'node'))
    const opts = { modelDir: workerData.modelDir }
    if (workerData.threads) opts.threads = workerData.threads
    a.init(opts)
    addon = a
  }
  return addon
}

function failure(e) {
  const code = e && typeof e.code === 'string' ? e.code : (e && e.code === 'MODULE_NOT_FOUND' ? 'model_missing' : 'internal')
  return { ok: false, error_code: code, message: String((e && e.message) || e).slice(0, 500) }
}

export default async function run(task) {
  if (task.op === 'init') {
    try {
      const a = engine()
      return { ok: true, info: a.info(), models: a.catalog().map((c) => c.name) }
    } catch (e) {
      return failure(e)
    }
  }
  if (task.op === 'enhance') {
    const port = task.port
    const ac = new AbortController()
    const timer = setTimeout(() => ac.abort(), task.timeoutMs)
    let last = -1
    try {
      const a = engine()
      const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
      const opts = { model: task.model, format: task.format }
      if (task.exif !== undefined) opts.exif = task.exif
      if (task.dpi !== undefined && task.dpi !== null) opts.dpi = task.dpi
      const r = await a.enhance(input, opts, ac.signal, (pct) => {
        const p = Math.floor(pct)
        if (port && p !== last) {
          last = p
          port.postMessage(p)
        }
      })
      // (see the 'frames' op: a plain object cannot be moved, and the addon's external buffer cannot be transferred)
      const owned = new Uint8Array(r.data.byteLength)
      owned.set(r.data)
      return Piscina.move({
        [Piscina.transferableSymbol]: owned.buffer,
        [Piscina.valueSymbol]: { ok: true, data: owned, width: r.width, height: r.height, format: r.format, ms: r.ms },
      })
    } catch (e) {
      if (ac.signal.aborted) return { ok: false, error_code: 'timeout', message: `job exceeded ${task.timeoutMs} ms` }
      return failure(e)
    } finally {
      clearTimeout(timer)
      if (port) port.close()
    }
  }
  if (task.op === 'frames') {
    // Video: one batch of RGB24 frames (server/jobs/video.ts drives the whole video through these calls).
    // Any message on task.port cancels the batch (the engine checks its cancel token between tiles).
    const ac = new AbortController()
    let cancelled = false
    const timer = setTimeout(() => ac.abort(), task.timeoutMs)
    if (task.port) task.port.once('message', () => { cancelled = true; ac.abort() })
    try {
      const a = engine()
      const input = Buffer.from(task.input.buffer, task.input.byteOffset, task.input.byteLength)
      const opts = { model: task.model, width: task.width, height: task.height, count: task.count }
      // Face-aware video models: the engine's face-box tracker state, carried from batch to batch.
      if (task.faceState) opts.faceState = Buffer.from(task.faceState)
      const r = await a.enhanceFrames(input, opts, ac.signal)
      // The addon's buffer is external memory, which cannot be transferred: one copy into a JS-owned
      // buffer, which then moves to the main thread without another copy.
      const out = new Uint8Array(r.data.byteLength)
      out.set(r.data)
      // Piscina.move on a plain object would try to transfer the object itself: a Transferable wrapper
      // sends the result object with only the frame buffer in the transfer list.
      return Piscina.move({
        [Piscina.transferableSymbol]: out.buffer,
        [Piscina.valueSymbol]: { ok: true, data: out, width: r.width, height: r.height, faceState: r.faceState ? new Uint8Array(r.faceState) : undefined },
      })
    } catch (e) {
      if (cancelled) return { ok: false, error_code: 'aborted', message: 'cancelled' }
      if (ac.signal.aborted) return { ok: false, error_code: 'timeout', message: `frame batch exceeded ${task.timeoutMs} ms` }
      return failure(e)
    } finally {
      clearTimeout(timer)
      if (task.port) task.port.close()
    }
  }
  return { ok: false, error_code: 'invalid_argument', message: `unknown op ${task.op}` }
}
