/**
 * GPU adapter selection by index (LUCENT_ADAPTER=#N, the addon's `adapter: '#N'`; native/gpu/src/select.rs): on
 * this machine's only Vulkan device, lavapipe (Mesa's CPU adapter), #0 opens it and `info()` names it with its
 * index; an index out of range, or one naming a CPU adapter without gpuAllowCpu (LUCENT_GPU_ALLOW_CPU), fails with
 * gpu_unavailable (a configuration error, 100500005, at the API) instead of falling back to the CPU backend; a
 * malformed one with invalid_argument. `adapters()` / `lucent adapters` list the indexes. Each init is its own
 * process (the engine is process-wide).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { build, repoRoot, modelDir, waitFor } from '../helper.js'
import { engineErrorCode } from '../../server/errors.js'

const built = fs.readdirSync(path.join(repoRoot, 'native/node')).some((f) => f.endsWith('.node'))

/** `code` in a fresh node process with the addon as `a`; its last stdout line as JSON. */
function inChild(code: string) {
  const script = `const a = require('@lucent/native'); try { console.log(JSON.stringify(${code})) } catch (e) { console.log(JSON.stringify({ error: e.code, message: e.message })) }`
  const r = spawnSync(process.execPath, ['-e', script], { cwd: repoRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME }, encoding: 'utf8', timeout: 120_000 })
  if (r.status !== 0) throw new Error(r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').pop()!)
}
const initIn = (options: object) => inChild(`a.init(${JSON.stringify({ modelDir, ...options })})`)

interface Entry { index: number; name: string; backend: string; deviceType: string }

const listed: Entry[] = built ? inChild('a.adapters()') : []
const lavapipe = listed.find((a) => a.deviceType === 'cpu')
const skip = !built ? 'native addon not built' : !lavapipe ? `no CPU Vulkan adapter (lavapipe) here: ${JSON.stringify(listed)}` : false

t.test('adapters(): every adapter with its index, in enumeration order', { skip }, async (t) => {
  t.ok(listed.length >= 1)
  t.same(listed.map((a) => a.index), listed.map((_, i) => i), 'indexes 0..n-1')
  t.match(lavapipe, { name: /llvmpipe|lavapipe|swiftshader/i, deviceType: 'cpu' })
  t.same(inChild('a.adapters()'), listed, 'the same order in another process')
})

t.test('#N opens that adapter and info() says which', { skip }, async (t) => {
  const n = lavapipe!.index
  const info = initIn({ backend: 'gpu', adapter: `#${n}` })
  t.match(info, { backend: 'gpu' })
  t.ok(info.adapter.startsWith(lavapipe!.name) && info.adapter.endsWith(`#${n}`), `info().adapter: ${info.adapter}`)
  const auto = initIn({ adapter: `#${n}`, gpuAllowCpu: true })
  t.match(auto, { backend: 'gpu', adapter: new RegExp(`#${n}$`) }, 'auto with LUCENT_GPU_ALLOW_CPU=1: the same adapter')
  t.ok(initIn({ adapter: ` #${n} `, backend: 'gpu' }).adapter.endsWith(`#${n}`), 'spaces around it are ignored')
})

t.test('an index out of range, or a CPU adapter not allowed: gpu_unavailable, never a silent CPU fallback', { skip }, async (t) => {
  const past = listed.length
  const out = initIn({ backend: 'gpu', adapter: `#${past}` })
  t.match(out, { error: 'gpu_unavailable', message: new RegExp(`#${past} out of range: ${past} adapter`) })
  t.match(out.message, `#${lavapipe!.index} ${lavapipe!.name}`, 'the message lists the adapters with their indexes')
  t.match(initIn({ adapter: `#${past}`, gpuAllowCpu: true }), { error: 'gpu_unavailable' }, 'backend auto too: no fall back to the CPU backend')
  const cpu = initIn({ adapter: `#${lavapipe!.index}` })
  t.match(cpu, { error: 'gpu_unavailable', message: /CPU adapter.*LUCENT_GPU_ALLOW_CPU=1/ }, 'auto without gpuAllowCpu: a CPU adapter is refused')
  t.match(initIn({ adapter: '#1e3', backend: 'gpu' }), { error: 'invalid_argument' }, 'a malformed index')
  t.match(initIn({ adapter: '#-1', backend: 'gpu' }), { error: 'invalid_argument' })
  t.match(initIn({ adapter: `#${'9'.repeat(30)}`, backend: 'gpu' }), { error: 'invalid_argument' }, 'an index past usize')
  t.match(initIn({ backend: 'cpu', adapter: `#${past}` }), { backend: 'cpu' }, 'backend cpu ignores the adapter')
  t.equal(engineErrorCode('gpu_unavailable'), 100500005, 'the API maps it once: Configuration error')
})

t.test('the service: LUCENT_ADAPTER=#N out of range keeps the worker unhealthy with the code; #0 runs on it', { skip }, async (t) => {
  const bad = await build(t, { LUCENT_ADAPTER: `#${listed.length}`, LUCENT_BACKEND: 'gpu', LUCENT_METRICS_PUBLIC: '1' })
  const h = await waitFor(async () => { const r = await bad.inject({ url: '/healthz' }); return r.json().status === 'error' && r }, 60_000, 100)
  t.equal(h.statusCode, 503)
  t.match(h.json().detail, /^gpu_unavailable: adapter #\d+ out of range/)
  // backend gpu (a CPU adapter allowed); the pool takes the LUCENT_GPU_* options from the process environment
  const good = await build(t, { LUCENT_ADAPTER: `#${lavapipe!.index}`, LUCENT_BACKEND: 'gpu', LUCENT_METRICS_PUBLIC: '1' })
  await waitFor(async () => (await good.inject({ url: '/healthz' })).statusCode === 200, 120_000, 100)
  const m = (await good.inject({ url: '/metrics' })).body
  t.match(m, new RegExp(`^lucent_engine_info\\{backend="gpu",adapter="[^"]*#${lavapipe!.index}"`, 'm'), 'the engine info names the adapter with its index')
})

t.test('lucent adapters prints the list with the indexes', { skip }, async (t) => {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'bin/lucent.js'), 'adapters', '--json'], { cwd: repoRoot, encoding: 'utf8', timeout: 120_000, env: { ...process.env, LUCENT_DEV: '1' } })
  t.equal(r.status, 0, r.stderr)
  t.same(JSON.parse(r.stdout), listed)
  const plain = spawnSync(process.execPath, [path.join(repoRoot, 'bin/lucent.js'), 'adapters'], { cwd: repoRoot, encoding: 'utf8', timeout: 120_000, env: { ...process.env, LUCENT_DEV: '1' } })
  t.match(plain.stdout, new RegExp(`^#${lavapipe!.index}  .*\\[cpu\\]$`, 'm'))
})
