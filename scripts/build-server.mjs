#!/usr/bin/env node
// Compiles the server (server/**/*.ts) to JavaScript in dist/, which production runs: `npm start`, the `lucent`
// bin (bin/lucent.js) and the engine threads (server/engine/pool.ts starts dist/engine/thread.js from a compiled
// pool). One file per source, same tree (server/engine/pool.ts -> dist/engine/pool.js), so the paths the server
// finds relative to its own files (`..` = the repository: models/, playground/dist, package.json) are the same;
// npm packages stay where they are (not bundled), except typebox: its ~700 ES modules (a third of a second and more
// at every start) are bundled once into dist/vendor/ and the compiled files import that. esbuild, type annotations
// stripped only: `npx tsc` checks types.
//
// Runs on `npm ci` / `npm install` (the package's `prepare` hook), as `npm run build:server`, and before the tap
// suites (scripts/test.mjs). Takes about a second. Writes into a temp folder and swaps it in (a running server
// never sees a half-written dist/), then dist/.build.json with the sources' fingerprint (scripts/server-dist.mjs):
// bin/lucent.js runs dist/ only while that fingerprint matches the sources, else the sources through tsx.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'
import { fingerprint, root, serverSources } from './server-dist.mjs'

const dist = path.join(root, 'dist')
const serverDir = path.join(root, 'server')

/** Packages bundled into dist/vendor/ (one module graph: entries share chunks): import specifier -> file. */
const VENDOR = { typebox: 'typebox.js', 'typebox/compile': 'typebox-compile.js' }

/** Every import stays an import (one output file per source); the vendored packages point into dist/vendor/. */
const keepImports = {
  name: 'lucent-keep-imports',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined
      const vendored = VENDOR[args.path]
      if (!vendored) return { path: args.path, external: true }
      let rel = path.relative(path.dirname(path.relative(serverDir, args.importer)), path.join('vendor', vendored)).split(path.sep).join('/')
      if (!rel.startsWith('.')) rel = `./${rel}`
      return { path: rel, external: true }
    })
  },
}

function swapIn(tmp) {
  const old = path.join(root, 'node_modules', '.cache', `lucent-dist-old-${process.pid}-${Date.now()}`)
  for (let i = 0; ; i++) {
    try {
      if (fs.existsSync(dist)) fs.renameSync(dist, old)
      fs.renameSync(tmp, dist)
      break
    } catch (e) {
      // a concurrent build swapped between our two renames: try again
      if (i >= 5) throw e
    }
  }
  fs.rmSync(old, { recursive: true, force: true })
}

export async function buildServer() {
  const t0 = Date.now()
  const cache = path.join(root, 'node_modules', '.cache')
  fs.mkdirSync(cache, { recursive: true })
  // the sources may change while we compile (an editor saving): the fingerprint is taken before and after
  for (let attempt = 0; attempt < 3; attempt++) {
    const before = fingerprint()
    const sources = serverSources()
    const tmp = fs.mkdtempSync(path.join(cache, 'lucent-dist-'))
    fs.chmodSync(tmp, 0o755) // mkdtemp makes it 0700: dist/ is read by the service's user
    try {
      const common = { format: 'esm', platform: 'node', target: 'node20', sourcemap: 'linked', logLevel: 'warning', absWorkingDir: root }
      await esbuild.build({
        ...common,
        entryPoints: sources.map((f) => path.join(root, f)),
        outbase: serverDir,
        outdir: tmp,
        bundle: true, // resolution only: keepImports leaves every import external
        plugins: [keepImports],
      })
      await esbuild.build({
        ...common,
        entryPoints: Object.fromEntries(Object.entries(VENDOR).map(([spec, file]) => [file.replace(/\.js$/, ''), spec])),
        outdir: path.join(tmp, 'vendor'),
        bundle: true,
        splitting: true,
        chunkNames: 'chunk-[hash]',
        legalComments: 'linked',
      })
      if (fingerprint() !== before) continue
      const stamp = { fingerprint: before, files: sources.length, builtAt: new Date().toISOString(), esbuild: esbuild.version, node: process.version }
      fs.writeFileSync(path.join(tmp, '.build.json'), JSON.stringify(stamp, null, 2) + '\n')
      swapIn(tmp)
      return { dist, files: sources.length, ms: Date.now() - t0 }
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  }
  throw new Error('the sources kept changing during the build')
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const b = await buildServer()
    console.log(`lucent: server built in ${b.ms} ms -> ${path.relative(root, b.dist)}/ (${b.files} files)`)
  } catch (e) {
    console.error(`lucent: server build failed: ${e.message}`)
    process.exit(1)
  }
}
