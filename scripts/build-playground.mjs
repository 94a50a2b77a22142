#!/usr/bin/env node
// Builds the web playground (playground/) into playground/dist, which server/playground.ts serves:
//   dist/index.html               the page, naming its assets (with SRI hashes)
//   dist/assets/app-<hash>.js     playground/src/main.ts bundled and minified by esbuild (+ .map)
//   dist/assets/style-<hash>.css  playground/src/style.css (+ .map)
//   dist/assets/icon-<hash>.svg
// Content-hashed names, so the server can mark assets immutable. Runs on `npm ci` / `npm install` (the package's
// `prepare` hook), as `npm run build:playground`, and before the tap suites (scripts/test.mjs). Takes well under
// a second. Each file is written to a temp name and renamed (a concurrent build or a running server never sees a
// half-written file); files of older builds are removed after the new index.html is in place.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const src = path.join(root, 'playground')
const dist = path.join(src, 'dist')
const assets = path.join(dist, 'assets')

const hash = (buf) => crypto.createHash('sha256').update(buf).digest('base64url').slice(0, 12)
const sri = (buf) => `sha384-${crypto.createHash('sha384').update(buf).digest('base64')}`

function writeAtomic(file, data) {
  const tmp = `${file}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`
  fs.writeFileSync(tmp, data)
  fs.renameSync(tmp, file)
}

export async function buildPlayground() {
  const t0 = Date.now()
  const r = await esbuild.build({
    entryPoints: { app: path.join(src, 'src/main.ts'), style: path.join(src, 'src/style.css') },
    bundle: true,
    minify: true,
    sourcemap: 'linked',
    format: 'esm',
    target: ['chrome100', 'firefox100', 'safari15.4', 'edge100'],
    entryNames: '[name]-[hash]',
    outdir: assets,
    write: false,
    metafile: true,
    logLevel: 'warning',
    legalComments: 'none',
  })
  fs.mkdirSync(assets, { recursive: true })
  const out = new Map() // entry -> { name, contents }
  for (const f of r.outputFiles) {
    const name = path.basename(f.path)
    writeAtomic(path.join(assets, name), f.contents)
    const m = /^(app|style)-[A-Za-z0-9_-]+\.(js|css)$/.exec(name)
    if (m) out.set(m[1], { name, contents: f.contents })
  }
  const icon = fs.readFileSync(path.join(src, 'src/icon.svg'))
  const iconName = `icon-${hash(icon)}.svg`
  writeAtomic(path.join(assets, iconName), icon)
  const app = out.get('app')
  const style = out.get('style')
  if (!app || !style) throw new Error('build-playground: esbuild produced no app/style bundle')
  const at = (name) => `playground/assets/${name}`
  const html = fs.readFileSync(path.join(src, 'index.html'), 'utf8')
    .replace(/^<!--.*-->\n/m, '')
    .replaceAll('%APP%', at(app.name)).replaceAll('%APP_SRI%', sri(app.contents))
    .replaceAll('%STYLE%', at(style.name)).replaceAll('%STYLE_SRI%', sri(style.contents))
    .replaceAll('%ICON%', at(iconName))
  if (/%[A-Z_]+%/.test(html)) throw new Error(`build-playground: unfilled placeholder ${/%[A-Z_]+%/.exec(html)[0]}`)
  writeAtomic(path.join(dist, 'index.html'), html)
  // drop what older builds left (this build's names are kept; a concurrent build of the same sources has the same)
  const keep = new Set([...r.outputFiles.map((f) => path.basename(f.path)), iconName])
  for (const name of fs.readdirSync(assets)) {
    if (!keep.has(name) && !name.includes('.tmp-')) fs.rmSync(path.join(assets, name), { force: true })
  }
  return { dist, files: [...keep].sort(), ms: Date.now() - t0 }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const b = await buildPlayground()
    console.log(`lucent: playground built in ${b.ms} ms -> ${path.relative(root, b.dist)} (${b.files.join(', ')})`)
  } catch (e) {
    console.error(`lucent: playground build failed: ${e.message}`)
    process.exit(1)
  }
}
