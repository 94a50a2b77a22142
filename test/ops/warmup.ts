/**
 * LUCENT_WARMUP_MODELS (docs/observability.md): the named models run one small enhance each once the engine has
 * loaded and before /readyz answers 200; a model that cannot warm up keeps the process not ready.
 */
import t from 'tap'
import { build, addonBuilt, waitFor } from '../helper.js'

const skip = !addonBuilt && 'native addon not built'

t.test('ready only after the named models ran once', { skip }, async (t) => {
  const app = await build(t, { LUCENT_WARMUP_MODELS: 'general_2x,general_4x', LUCENT_METRICS_PUBLIC: '1' })
  const seen: Array<{ status: number; warmup: unknown; engine: unknown }> = []
  await waitFor(async () => {
    const r = await app.inject({ method: 'GET', url: '/readyz' })
    const d = r.json().data
    seen.push({ status: r.statusCode, warmup: d.checks.warmup, engine: d.checks.engine })
    return r.statusCode === 200
  }, 180_000, 5)
  t.equal(seen[0].warmup, false, 'not warmed up at first')
  t.ok(seen.every((s) => s.status !== 200 || s.warmup === true), 'never ready before the warm-up is done')
  const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json().data
  t.match(ready.warmup, { state: 'done', done: ['general_2x', 'general_4x'] })
  const m = (await app.inject({ method: 'GET', url: '/metrics' })).body
  for (const model of ['general_2x', 'general_4x']) {
    t.match(m, new RegExp(`^lucent_model_warmup_seconds\\{model="${model}"\\} [0-9.e-]+$`, 'm'), `${model}: warm-up time`)
    t.match(m, new RegExp(`^lucent_engine_call_seconds_count\\{op="enhance",model="${model}",outcome="ok"\\} 1$`, 'm'), `${model}: the engine ran it, no job submitted`)
  }
})

t.test('a model that cannot warm up keeps the process not ready', { skip }, async (t) => {
  const app = await build(t, { LUCENT_WARMUP_MODELS: 'no_such_model', LUCENT_METRICS_PUBLIC: '1' })
  const d = await waitFor(async () => {
    const r = await app.inject({ method: 'GET', url: '/readyz' })
    const data = r.json().data
    return data.warmup?.state === 'error' && { status: r.statusCode, data }
  }, 180_000, 20)
  t.equal(d.status, 503)
  t.equal(d.data.checks.engine, true, 'the engine itself loaded')
  t.equal(d.data.checks.warmup, false)
  t.match(d.data.warmup.error, /no_such_model/)
  // without the details (public port, default): only not ready
  const app2 = await build(t, { LUCENT_WARMUP_MODELS: 'no_such_model' })
  const r2 = await waitFor(async () => {
    await new Promise((r) => setTimeout(r, 20))
    return app2.lucent.engine.state === 'ready' && (await app2.inject({ method: 'GET', url: '/readyz' }))
  }, 180_000, 20)
  t.equal(r2.statusCode, 503)
  t.same(Object.keys(r2.json().data).sort(), ['role', 'status'])
})
