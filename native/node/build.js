#!/usr/bin/env node
'use strict'
// Copies the cargo-built cdylib to native/node/lucent.<platform>-<arch>.node.
// Usage: node native/node/build.js [--debug]   (after `cargo build --release -p lucent-node`)
const fs = require('node:fs')
const path = require('node:path')

const profile = process.argv.includes('--debug') ? 'debug' : 'release'
const root = path.resolve(__dirname, '..', '..')
const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
const lib = { linux: 'liblucent_node.so', darwin: 'liblucent_node.dylib', win32: 'lucent_node.dll' }[process.platform] ||
  'liblucent_node.so'
const src = path.join(targetDir, profile, lib)
const dst = path.join(__dirname, `lucent.${process.platform}-${process.arch}.node`)
if (!fs.existsSync(src)) {
  console.error(`${src} not found: run \`cargo build ${profile === 'release' ? '--release ' : ''}-p lucent-node\` first`)
  process.exit(1)
}
// Copy to a temp name then rename, so a running process holding the old file is not disturbed.
const tmp = dst + '.tmp' + process.pid
fs.copyFileSync(src, tmp)
fs.renameSync(tmp, dst)
console.log(`${src} -> ${dst}`)
