/**
 * The engine pool as the metrics and traces see it: `instrumentPool` wraps one pool's calls (init, enhance,
 * enhanceFrames, interpolateFrames) to time them (lucent_engine_init_seconds, lucent_engine_info,
 * lucent_engine_call_seconds) and, when tracing is on, to give each call an `engine.<op>` span under the job run's
 * span (the run's context: server/observability/context.ts). The addon reports no per-phase times (decode /
 * network / encode), so a photo's call is one span and one observation: decode + network + encode.
 */
import type { EnginePool } from '../engine/pool.js'
import type { Metrics } from '../metrics.js'
import { currentObs } from './context.js'
import { tracing } from './tracing.js'

const instrumented = new WeakSet<EnginePool>()

type Reply = { ok: boolean; error_code?: string }

export function instrumentPool(pool: EnginePool, metrics: Metrics): void {
  if (instrumented.has(pool)) return
  instrumented.add(pool)
  const init = pool.init.bind(pool)
  pool.init = async () => {
    const t0 = performance.now()
    const r = await init()
    if (r.ok) metrics.engineLoaded(r.info, (performance.now() - t0) / 1000)
    return r
  }
  const timed = <A extends unknown[], R extends Reply>(op: string, model: (a: A) => string, f: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
    const t0 = performance.now()
    const m = model(a)
    const span = tracing()?.span(`engine.${op}`, { parent: currentObs()?.traceparent, attrs: { 'lucent.model': m } })
    let outcome = 'error'
    try {
      const r = await f(...a)
      outcome = r.ok ? 'ok' : (r.error_code ?? 'error')
      span?.set({ 'lucent.outcome': outcome })
      span?.end(r.ok ? undefined : outcome)
      return r
    } catch (e) {
      span?.end(e)
      throw e
    } finally {
      metrics.engineCall.observe({ op, model: m, outcome }, (performance.now() - t0) / 1000)
    }
  }
  pool.enhance = timed('enhance', (a) => a[1].model, pool.enhance.bind(pool))
  pool.enhanceFrames = timed('frames', (a) => String((a[1] as { model?: unknown }).model ?? ''), pool.enhanceFrames.bind(pool))
  pool.interpolateFrames = timed('interp', () => 'rife', pool.interpolateFrames.bind(pool))
}
