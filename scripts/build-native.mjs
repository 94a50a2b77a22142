#!/usr/bin/env node
// Builds the native addon (napi cdylib) and the `lucent-native` bench binary in release mode and
// installs the addon as native/node/lucent.<platform>-<arch>.node. Runs on `npm ci` / `npm install`
// (the package's install hook) and as `npm run build:native`.
// LUCENT_SKIP_NATIVE_BUILD=1 skips it (e.g. when a prebuilt .node is supplied).
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
if (process.env.LUCENT_SKIP_NATIVE_BUILD === '1') {
  console.log('lucent: LUCENT_SKIP_NATIVE_BUILD=1, not building the native addon')
  process.exit(0)
}
const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' })
if (cargo.status !== 0) {
  console.error(
    'lucent: cargo (Rust) is needed to build the native engine. Install it with rustup ' +
      '(https://rustup.rs), plus libheif-dev and pkg-config for HEIF, then run `npm run build:native`.',
  )
  process.exit(1)
}
const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-node', '-p', 'lucent-cli'], {
  cwd: root,
  stdio: 'inherit',
})
if (build.status !== 0) process.exit(build.status ?? 1)
const copy = spawnSync(process.execPath, [path.join(root, 'native/node/build.js')], { cwd: root, stdio: 'inherit' })
process.exit(copy.status ?? 1)
