/**
 * Writes docs/configuration.md from the settings schema (server/settings.ts) and the "Build and test knobs" table of
 * docs/contributing.md (between its markers). `--check`: writes nothing, exits 1 when either file differs from what
 * the schema generates (test/config/schema.ts runs the same check).
 *
 *   node --import tsx scripts/gen-config-doc.ts [--check]
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { configurationMarkdown, withKnobs } from '../server/settings.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const check = process.argv.includes('--check')
const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '')
const files = [
  [path.join(root, 'docs/configuration.md'), configurationMarkdown()],
  [path.join(root, 'docs/contributing.md'), withKnobs(read(path.join(root, 'docs/contributing.md')) || '# Contributing\n')],
] as const
let stale = 0
for (const [file, want] of files) {
  if (read(file) === want) continue
  stale++
  if (check) console.error(`${path.relative(root, file)} is out of date: run node --import tsx scripts/gen-config-doc.ts`)
  else { fs.mkdirSync(path.dirname(file), { recursive: true }); fs.writeFileSync(file, want); console.log(`wrote ${path.relative(root, file)}`) }
}
if (check && stale) process.exit(1)
