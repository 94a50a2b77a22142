/**
 * The engine settings of server/settings.ts as the native addon's typed `init` options. The Rust crates read no
 * environment: every engine, GPU, CPU and codec setting reaches them through here (the pool's threads,
 * pool.ts, and `lucent enhance`, server/enhance/engine.ts). Values are read as the crates used to read them:
 * a string setting the addon would refuse (an unknown `LUCENT_GPU_COOP`, `LUCENT_CPU_ISA` ...) is left out, so the
 * engine keeps its default, as before; numbers and flags are lenient in the schema.
 */
import { readSetting } from '../settings.js'
import type { EngineOptions } from './addon.js'

type Env = NodeJS.ProcessEnv
/** The options settings give (everything but modelDir, backend, adapter, threads and tile, which the callers own). */
export type EngineSettings = Omit<EngineOptions, 'modelDir' | 'backend' | 'adapter' | 'threads' | 'tile'>

const text = (env: Env, name: string) => readSetting(env, name) as string | undefined
const flag = (env: Env, name: string) => readSetting(env, name) as boolean
const num = (env: Env, name: string) => readSetting(env, name) as number | undefined

/** `LUCENT_GPU_COOP`: 0/false/off, 1/true/on, emulate; anything else auto (left out). */
function coop(v: string | undefined): EngineOptions['gpuCoop'] {
  const l = v?.toLowerCase()
  if (l === undefined) return undefined
  if (['0', 'false', 'off'].includes(l)) return 'off'
  if (['1', 'true', 'on'].includes(l)) return 'on'
  return l === 'emulate' ? 'emulate' : undefined
}

/** `LUCENT_GPU_TUNE`: 0/off/false, 1/on/true, a side >= 8 px; anything else auto (left out). */
function tune(v: string | undefined): Pick<EngineOptions, 'gpuTune' | 'gpuTuneSide'> {
  const l = v?.toLowerCase()
  if (l === undefined) return {}
  if (['0', 'off', 'false'].includes(l)) return { gpuTune: 'off' }
  if (['1', 'on', 'true'].includes(l)) return { gpuTune: 'on' }
  return /^\d+$/.test(l) && Number(l) >= 8 && Number(l) <= 0xffffffff ? { gpuTuneSide: Number(l) } : {}
}

/** `LUCENT_CPU_ISA`: scalar, avx2, avx512 (and the crate's aliases); an unknown level is left out with a warning. */
function isa(v: string | undefined): EngineOptions['cpuIsa'] {
  const l = v?.toLowerCase()
  if (l === undefined) return undefined
  if (['scalar', 'none', 'generic'].includes(l)) return 'scalar'
  if (['avx2', 'avx2+fma', 'fma'].includes(l)) return 'avx2'
  if (['avx512', 'avx512f', 'avx-512'].includes(l)) return 'avx512'
  process.emitWarning(`LUCENT_CPU_ISA=${v}: unknown (scalar, avx2, avx512), using the best this CPU runs`)
  return undefined
}

/** `LUCENT_CPU_WINOGRAD`: 0 im2col, 1 Winograd, anything else measured (left out). */
function winograd(v: string | undefined): EngineOptions['cpuWinograd'] {
  return v === '0' ? 'im2col' : v === '1' ? 'winograd' : undefined
}

/** `LUCENT_CPU_PRECISION`: fp32, bf16, int8, auto; an unknown value is left out (auto) with a warning. */
function precision(v: string | undefined): EngineOptions['cpuPrecision'] {
  const l = v?.toLowerCase()
  if (l === undefined) return undefined
  if (l === 'fp32' || l === 'bf16' || l === 'int8' || l === 'auto') return l
  process.emitWarning(`LUCENT_CPU_PRECISION=${v}: unknown (fp32, bf16, int8, auto), using auto`)
  return undefined
}

/** The addon options of the engine settings in `env`; unset settings are absent (the addon's defaults hold). */
export function engineSettings(env: Env = process.env): EngineSettings {
  const o: EngineSettings = {
    gpuAllowCpu: flag(env, 'LUCENT_GPU_ALLOW_CPU'),
    gpuF32: flag(env, 'LUCENT_GPU_F32'),
    gpuF16Math: flag(env, 'LUCENT_GPU_F16_MATH'),
    gpuProfile: flag(env, 'LUCENT_GPU_PROFILE'),
    gpuPipeline: flag(env, 'LUCENT_GPU_PIPELINE'),
    gpuConv: text(env, 'LUCENT_GPU_CONV'),
    gpuCoop: coop(text(env, 'LUCENT_GPU_COOP')),
    ...tune(text(env, 'LUCENT_GPU_TUNE')),
    gpuTimeoutS: num(env, 'LUCENT_GPU_TIMEOUT_S'),
    cpuIsa: isa(text(env, 'LUCENT_CPU_ISA')),
    cpuWinograd: winograd(text(env, 'LUCENT_CPU_WINOGRAD')),
    cpuPrecision: precision(text(env, 'LUCENT_CPU_PRECISION')),
    cpuWinoChunk: num(env, 'LUCENT_CPU_WINO_CHUNK'),
    cpuKeepTransforms: flag(env, 'LUCENT_CPU_KEEP_TRANSFORMS'),
    cpuProfile: flag(env, 'LUCENT_CPU_PROFILE'),
    heifPreset: text(env, 'LUCENT_HEIF_PRESET'),
    faceProfile: flag(env, 'LUCENT_FACE_PROFILE'),
  }
  // an empty cache path means "no file": blank is unset for readSetting, so these two read the raw value
  for (const [name, key] of [['LUCENT_GPU_TUNE_CACHE', 'gpuTuneCache'], ['LUCENT_CPU_CALIBRATION_CACHE', 'cpuCalibrationCache']] as const) {
    const raw = env[name]
    if (raw !== undefined) o[key] = raw.trim() === '' ? '' : text(env, name)
  }
  if (o.gpuTimeoutS !== undefined) o.gpuTimeoutS = Math.max(1, Math.min(0xffffffff, Math.round(o.gpuTimeoutS)))
  if (o.cpuWinoChunk !== undefined) o.cpuWinoChunk = Math.max(1, Math.min(0xffffffff, Math.round(o.cpuWinoChunk)))
  for (const k of Object.keys(o) as Array<keyof EngineSettings>) if (o[k] === undefined) delete o[k]
  return o
}
