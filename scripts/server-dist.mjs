// Which server code a `lucent` process runs: the compiled JavaScript in dist/ (scripts/build-server.mjs, run by
// `npm ci`) or the TypeScript sources through tsx. bin/lucent.js asks `distEntry()`; the build writes the stamp.
//
// The rule: dist/cli.js runs when
//   - LUCENT_DEV is not '1' (LUCENT_DEV=1: always the sources through tsx, for development), and
//   - dist/.build.json holds the fingerprint of the sources as they are now: sha256 over every server/**/*.ts
//     (path and bytes), tsconfig.json and scripts/build-server.mjs. Any edit, added or removed file makes the build
//     stale, and a stale or missing build runs the sources through tsx instead: old code never runs silently.
//     (A deployment that ships dist/ without server/ runs dist/: there is nothing to compare with.)
// Fingerprinting reads ~0.7 MB (a few ms), cheaper than any mtime rule that coarse clocks or `git checkout` fool.
// No dependencies: it runs before anything else is loaded.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** The sources a build compiles, sorted, relative to `base` (server/**\/*.ts). */
export function serverSources(base = root) {
  const dir = path.join(base, 'server')
  const out = []
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name
      if (e.isDirectory()) walk(r)
      else if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(`server/${r}`)
    }
  }
  walk('')
  return out.sort()
}

/** sha256 of the sources and of what decides how they are compiled. */
export function fingerprint(base = root) {
  const h = crypto.createHash('sha256')
  for (const f of [...serverSources(base), 'tsconfig.json', 'scripts/build-server.mjs']) {
    let bytes
    try {
      bytes = fs.readFileSync(path.join(base, f))
    } catch {
      bytes = Buffer.alloc(0)
    }
    h.update(`${f}\0${bytes.length}\0`).update(bytes)
  }
  return h.digest('hex')
}

/** The build's stamp, or null. */
export function readStamp(base = root) {
  try {
    return JSON.parse(fs.readFileSync(path.join(base, 'dist', '.build.json'), 'utf8'))
  } catch {
    return null
  }
}

/**
 * The compiled entry to run (absolute path of dist/cli.js), or null: run server/cli.ts through tsx.
 * `why` (optional object) gets the reason: 'dev' | 'missing' | 'stale' | 'fresh' | 'no-sources' (dist/ shipped alone).
 */
export function distEntry({ base = root, env = process.env, why = {} } = {}) {
  if (env.LUCENT_DEV === '1') return (why.reason = 'dev'), null
  const entry = path.join(base, 'dist', 'cli.js')
  const stamp = readStamp(base)
  if (!stamp || !fs.existsSync(entry)) return (why.reason = 'missing'), null
  // an image that ships dist/ without the sources: nothing to be stale against
  if (!fs.existsSync(path.join(base, 'server'))) return (why.reason = 'no-sources'), entry
  if (stamp.fingerprint !== fingerprint(base)) return (why.reason = 'stale'), null
  why.reason = 'fresh'
  return entry
}
