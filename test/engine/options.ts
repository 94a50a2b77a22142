/**
 * The engine settings reach the native addon as typed init options (server/engine/options.ts), and through them
 * the backend: the crates read no environment (issue 24). Each addon run is its own process (the engine is
 * process-wide and initialised once).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { repoRoot } from '../helper.js'
import { engineSettings } from '../../server/engine/options.js'

const built = fs.readdirSync(path.join(repoRoot, 'native/node')).some((f) => f.endsWith('.node'))

t.test('engineSettings maps each LUCENT_* engine setting to its addon option, leniently as the crates did', async (t) => {
  const defaults = engineSettings({})
  t.same(defaults, {
    gpuAllowCpu: false, gpuF32: false, gpuF16Math: false, gpuProfile: false, gpuPipeline: false, cpuWinoChunk: 64,
    cpuKeepTransforms: true, cpuProfile: false, heifPreset: 'ultrafast', faceProfile: false,
  }, 'unset: the documented defaults, nothing else')
  t.match(engineSettings({
    LUCENT_GPU_ALLOW_CPU: '1', LUCENT_GPU_F32: 'true', LUCENT_GPU_CONV: 'rb:8,4', LUCENT_GPU_COOP: 'emulate', LUCENT_GPU_TUNE: '64',
    LUCENT_GPU_TUNE_CACHE: '', LUCENT_GPU_TIMEOUT_S: '90', LUCENT_CPU_ISA: 'AVX2', LUCENT_CPU_WINOGRAD: '0', LUCENT_CPU_WINO_CHUNK: '16',
    LUCENT_CPU_KEEP_TRANSFORMS: '0', LUCENT_CPU_PROFILE: '1', LUCENT_CPU_CALIBRATION_CACHE: '/tmp/cal.tsv', LUCENT_HEIF_PRESET: 'fast',
    LUCENT_FACE_PROFILE: '1', LUCENT_CPU_PRECISION: 'BF16',
  }), {
    gpuAllowCpu: true, gpuF32: true, gpuConv: 'rb:8,4', gpuCoop: 'emulate', gpuTuneSide: 64, gpuTuneCache: '', gpuTimeoutS: 90,
    cpuIsa: 'avx2', cpuWinograd: 'im2col', cpuWinoChunk: 16, cpuKeepTransforms: false, cpuProfile: true,
    cpuCalibrationCache: '/tmp/cal.tsv', heifPreset: 'fast', faceProfile: true, cpuPrecision: 'bf16',
  })
  t.match(engineSettings({ LUCENT_GPU_COOP: '0', LUCENT_GPU_TUNE: 'off', LUCENT_CPU_WINOGRAD: '1' }), { gpuCoop: 'off', gpuTune: 'off', cpuWinograd: 'winograd' })
  // values the crates ignored stay ignored (the engine keeps its default), never an error at start
  const odd = engineSettings({ LUCENT_GPU_COOP: 'whatever', LUCENT_GPU_TUNE: '4', LUCENT_GPU_TIMEOUT_S: 'x', LUCENT_CPU_WINOGRAD: 'maybe' })
  t.notOk('gpuCoop' in odd || 'gpuTune' in odd || 'gpuTuneSide' in odd || 'gpuTimeoutS' in odd || 'cpuWinograd' in odd, JSON.stringify(odd))
})

/** init() in a fresh node process with `options` (JSON); its info, or { error: code }. */
function initIn(options: object, env: NodeJS.ProcessEnv = {}) {
  const script = `const a = require('@lucent/native'); try { console.log(JSON.stringify(a.init(${JSON.stringify(options)}))) } catch (e) { console.log(JSON.stringify({ error: e.code, message: e.message })) }`
  const r = spawnSync(process.execPath, ['-e', script], { cwd: repoRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, encoding: 'utf8', timeout: 120_000 })
  if (r.status !== 0) throw new Error(r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').pop()!)
}

t.test('an option reaches the CPU backend: cpuIsa and threads come back in info; the environment does not', { skip: !built && 'native addon not built' }, async (t) => {
  const modelDir = path.join(repoRoot, 'data/test-models')
  const scalar = initIn({ ...engineSettings({ LUCENT_CPU_ISA: 'scalar' }), modelDir, backend: 'cpu', threads: 1 })
  t.match(scalar, { backend: 'cpu', cpuIsa: 'scalar', threads: 1 })
  const best = initIn({ modelDir, backend: 'cpu', threads: 2 }, { LUCENT_CPU_ISA: 'scalar' })
  t.equal(best.threads, 2)
  const plain = initIn({ modelDir, backend: 'cpu', threads: 2 })
  t.comment(`this CPU's best level: ${plain.cpuIsa}`)
  t.equal(best.cpuIsa, plain.cpuIsa, 'LUCENT_CPU_ISA in the addon process environment is not read')
  t.match(initIn({ modelDir, backend: 'cpu', cpuIsa: 'sse9' }), { error: 'invalid_argument' }, 'an unknown level is refused with its code')
  t.match(initIn({ modelDir, backend: 'cpu', gpuCoop: 'sometimes' }), { error: 'invalid_argument' })
  // cpuPrecision: what runs comes back in info (bf16 with its kernel, or fp32 and why); unknown: refused
  const bf16 = initIn({ modelDir, backend: 'cpu', threads: 1, cpuPrecision: 'bf16' })
  t.match(bf16.cpuPrecision, /^(bf16 \((amx-bf16|avx512bf16)\)|fp32 \(bf16 requested, no bf16 unit: .+\))/, bf16.cpuPrecision)
  t.match(initIn({ modelDir, backend: 'cpu', threads: 1, cpuPrecision: 'int8' }).cpuPrecision, /^(int8 \((amx-int8|avx512vnni)\)|fp32 \(int8 requested, no int8 unit: .+\))/)
  t.match(initIn({ modelDir, backend: 'cpu', cpuPrecision: 'fp8' }), { error: 'invalid_argument' })
})
