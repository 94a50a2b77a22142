#!/usr/bin/env node
// Builds the native addon, the `@lucent/native` package in native/node, and the `lucent-native`
// bench binary, in release mode. Runs on `npm ci` / `npm install` (the package's install hook) and as
// `npm run build:native`. The addon is built by `napi build` (@napi-rs/cli): it compiles the
// lucent-node crate, writes native/node/lucent.<platform>.node (e.g. lucent.linux-x64-gnu.node) and
// regenerates native/node/index.js (loader) and index.d.ts (types) from the Rust #[napi] items.
// `require('@lucent/native')` (a `file:native/node` dependency) then loads that binary.
// One cargo invocation builds both crates (`-p lucent-node -p lucent-cli`): the dependency graph is compiled
// once, with one set of features. (It used to be two: `napi build` passes `--target <host triple>`, so its
// output goes to target/<triple>/release, and a second plain `cargo build -p lucent-cli` compiled every
// dependency again into target/release.) The binary is then copied to target/release/lucent-native, where
// `lucent bench` / `lucent native` look for it.
// LUCENT_SKIP_NATIVE_BUILD=1 skips it (e.g. when the prebuilt @lucent/native-<platform> package is
// installed instead). Then fetches the catalog's model files (below).
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pkgDir = path.join(root, 'native', 'node')

function run(cmd, args, cwd = root) {
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

/** The napi CLI's entry script, or null when dev dependencies were not installed. */
function napiCli() {
  try {
    const req = createRequire(path.join(root, 'package.json'))
    const manifest = req.resolve('@napi-rs/cli/package.json')
    const { bin } = JSON.parse(readFileSync(manifest, 'utf8'))
    return path.join(path.dirname(manifest), typeof bin === 'string' ? bin : bin.napi)
  } catch {
    return null
  }
}

/** napi-rs's platform suffix of the binary the generated index.js loads (lucent.<suffix>.node). */
function platformSuffix() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  return platform === 'win32' ? `win32-${arch}-msvc` : `${platform}-${arch}`
}

/** The host's Rust target triple (`rustc -vV`'s host line): the directory `napi build --target` writes to. */
function hostTriple() {
  const r = spawnSync('rustc', ['-vV'], { encoding: 'utf8' })
  const m = /^host: (\S+)$/m.exec(r.stdout ?? '')
  if (!m) {
    console.error('lucent: `rustc -vV` did not name the host triple')
    process.exit(1)
  }
  return m[1]
}

/** Copies under a temp name, then renames: a running process holding the old file is not disturbed. */
function installCopy(src, dst) {
  mkdirSync(path.dirname(dst), { recursive: true })
  copyFileSync(src, dst + '.tmp')
  renameSync(dst + '.tmp', dst)
}

function buildNative() {
  if (process.env.LUCENT_SKIP_NATIVE_BUILD === '1') {
    console.log('lucent: LUCENT_SKIP_NATIVE_BUILD=1, not building the native addon')
    return
  }
  const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' })
  if (cargo.status !== 0) {
    console.error(
      'lucent: cargo (Rust) is needed to build the native engine. Install it with rustup ' +
        '(https://rustup.rs), plus libheif-dev and pkg-config for HEIF, then run `npm run build:native`.',
    )
    process.exit(1)
  }
  const cli = napiCli()
  const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
  const exe = process.platform === 'win32' ? 'lucent-native.exe' : 'lucent-native'
  if (cli) {
    // `napi build` runs `cargo build --package lucent-node --target <triple> --release` plus the arguments
    // after `--`: lucent-cli joins the same invocation, its binary lands in target/<triple>/release.
    run(
      process.execPath,
      [cli, 'build', '--platform', '--release', '--package', 'lucent-node', '--js', 'index.js', '--dts', 'index.d.ts', '--', '-p', 'lucent-cli'],
      pkgDir,
    )
    const triple = hostTriple()
    installCopy(path.join(targetDir, triple, 'release', exe), path.join(targetDir, 'release', exe))
  } else {
    // An install without dev dependencies (`npm ci --omit=dev`): the same binary built by cargo alone,
    // under the name the committed (generated) index.js loads.
    run('cargo', ['build', '--release', '-p', 'lucent-node', '-p', 'lucent-cli'])
    const lib = { darwin: 'liblucent_node.dylib', win32: 'lucent_node.dll' }[process.platform] ?? 'liblucent_node.so'
    const dst = path.join(pkgDir, `lucent.${platformSuffix()}.node`)
    installCopy(path.join(targetDir, 'release', lib), dst)
    console.log(`lucent: @napi-rs/cli not installed; built the addon with cargo into ${dst}`)
  }
  if (!existsSync(path.join(pkgDir, `lucent.${platformSuffix()}.node`))) {
    console.error(`lucent: the addon build did not produce native/node/lucent.${platformSuffix()}.node`)
    process.exit(1)
  }
}
buildNative()

// Model files the catalog needs (models/required.json), so that `npm ci && npm start` serves: fetched once,
// here, from LUCENT_MODEL_MIRROR or upstream, sha256-checked (never at request time). Best effort: an
// offline install still succeeds, and `lucent serve` then names the missing files and the command to run.
// LUCENT_SKIP_MODEL_FETCH=1 skips it.
if (process.env.LUCENT_SKIP_MODEL_FETCH !== '1') {
  const fetch = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'server/cli.ts'), 'models', 'fetch'], {
    cwd: root,
    stdio: 'inherit',
    timeout: 20 * 60_000,
  })
  if (fetch.status !== 0) {
    console.warn('lucent: model files could not all be fetched now; run `npx lucent models fetch` before `npm start`.')
  }
}
process.exit(0)
