/**
 * The Rust crates read no environment at run time (issue 24): every engine, GPU, CPU and codec setting reaches
 * them as a typed option (the addon's init options, filled by the server from server/settings.ts:
 * server/engine/options.ts). This gate fails when a file under native/<crate>/src calls std::env::var / var_os
 * (or a helper of the `env_flag("...")` kind) for a `LUCENT_*` name. Not counted: build.rs (build time),
 * examples/ and tests/ (build and test knobs), compile-time `env!` / `option_env!`, and the `lucent-native`
 * binary (native/cli), whose main is its process boundary and maps the environment to options there.
 * Other variables (XDG_CACHE_HOME, HOME for the default cache folder; NODEVICE_SELECT / XDG_RUNTIME_DIR for Mesa's
 * device-select layer) are not Lucent settings and are not counted.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { repoRoot } from '../helper.js'

const native = path.join(repoRoot, 'native')
const rel = (p: string) => path.relative(repoRoot, p)
/** The binary crate whose main maps the environment to options (its process boundary). */
const BOUNDARY = new Set(['cli'])

function rsFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? rsFiles(p) : e.name.endsWith('.rs') && e.name !== 'build.rs' ? [p] : []
  })
}

/** Comments out; string literals stay (the names are in them). */
const uncommented = (src: string) => src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '')

/** `LUCENT_*` names read from the environment at run time in one file's text: `env::var("LUCENT_GPU_F32")`,
 *  `var_os("LUCENT_GPU_F32")`, `env_flag("LUCENT_GPU_F32")` and other `*env*("LUCENT_GPU_F32")` helpers; never `env!` / `option_env!`. */
export function runtimeEnvReads(src: string): string[] {
  const re = /(?<![!\w])(?:[\w:]*::)?(var|var_os|[a-z_]*env[a-z_]*)\(\s*"(LUCENT_[A-Z0-9_]+)"/g
  return [...uncommented(src).matchAll(re)].map((m) => m[2])
}

t.test('the detector finds the read forms and ignores compile-time and commented ones', async (t) => {
  t.same(runtimeEnvReads('let a = std::env::var("LUCENT_GPU_F32");'), ['LUCENT_GPU_F32'])
  t.same(runtimeEnvReads('let a = env::var_os( "LUCENT_CPU_PROFILE").is_some();'), ['LUCENT_CPU_PROFILE'])
  t.same(runtimeEnvReads('if env_flag("LUCENT_GPU_PIPELINE") {}'), ['LUCENT_GPU_PIPELINE'])
  t.same(runtimeEnvReads('use std::env::var; var("LUCENT_BACKEND")'), ['LUCENT_BACKEND'])
  t.same(runtimeEnvReads('const K: &str = env!("LUCENT_CPU_KERNELS"); let o = option_env!("LUCENT_ADAPTER");'), [])
  t.same(runtimeEnvReads('// std::env::var("LUCENT_ADAPTER")\n/* var("LUCENT_GPU_COOP") */'), [])
  t.same(runtimeEnvReads('std::env::var_os("XDG_CACHE_HOME")'), [], 'not a Lucent setting')
})

t.test('no native/*/src file reads a LUCENT_* variable at run time (the cli binary maps them at main)', async (t) => {
  const crates = fs.readdirSync(native, { withFileTypes: true })
    .filter((e) => e.isDirectory() && fs.existsSync(path.join(native, e.name, 'Cargo.toml')))
    .map((e) => e.name)
  t.ok(crates.length >= 6, `crates found (${crates.join(', ')})`)
  const reads: string[] = []
  let scanned = 0
  for (const c of crates) {
    if (BOUNDARY.has(c)) continue
    for (const f of rsFiles(path.join(native, c, 'src'))) {
      scanned++
      for (const n of runtimeEnvReads(fs.readFileSync(f, 'utf8'))) reads.push(`${rel(f)}: ${n}`)
    }
  }
  t.ok(scanned > 50, `scanned ${scanned} files`)
  t.same(reads, [], 'pass these as options (EngineOptions / GpuOptions / CpuOptions / CodecOptions), not through the environment')
})

t.test('the cli binary reads its LUCENT_* settings at main only (src/env.rs and src/main.rs)', async (t) => {
  const files = rsFiles(path.join(native, 'cli', 'src'))
  const outside = files.filter((f) => !/[/\\](env|main)\.rs$/.test(f) && runtimeEnvReads(fs.readFileSync(f, 'utf8')).length)
  t.same(outside.map(rel), [])
})
