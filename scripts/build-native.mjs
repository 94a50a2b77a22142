#!/usr/bin/env node
// Builds the native addon (napi cdylib) and the `lucent-native` bench binary in release mode and
// installs the addon as native/node/lucent.<platform>-<arch>.node. Runs on `npm ci` / `npm install`
// (the package's install hook) and as `npm run build:native`.
// LUCENT_SKIP_NATIVE_BUILD=1 skips it (e.g. when a prebuilt .node is supplied). Then fetches the
// catalog's model files (below).
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
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
  const build = spawnSync('cargo', ['build', '--release', '-p', 'lucent-node', '-p', 'lucent-cli'], { cwd: root, stdio: 'inherit' })
  if (build.status !== 0) process.exit(build.status ?? 1)
  const copy = spawnSync(process.execPath, [path.join(root, 'native/node/build.js')], { cwd: root, stdio: 'inherit' })
  if (copy.status !== 0) process.exit(copy.status ?? 1)
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
