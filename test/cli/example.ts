/** examples/enhance-folder.mjs (docs/cli.md, "Using the addon as a library") runs as documented, on the CPU backend. */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { repoRoot, modelDir, tempDir } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { makePhoto, skipEngine } from '../support/enhance-cli.js'

t.test('examples/enhance-folder.mjs', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-example-')
  makePhoto(path.join(dir, 'in', 'a.png'), 40, 24)
  makePhoto(path.join(dir, 'in', 'b.jpg'), 32, 32, 5)
  fs.writeFileSync(path.join(dir, 'in', 'broken.jpg'), 'not a jpeg')
  const out = path.join(dir, 'out')
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'examples/enhance-folder.mjs'), path.join(dir, 'in'), out, 'general_2x', 'webp'],
    { cwd: repoRoot, env: { ...process.env, LUCENT_MODEL_DIR: modelDir, LUCENT_BACKEND: 'cpu' } })
  const stdout = r.stdout.toString()
  t.equal(r.status, 1, `a refused photo makes the exit status 1\n${r.stderr}`)
  t.match(stdout, /^engine cpu \(cpu\); general_2x: x2, /m)
  t.match(stdout, /^a\.png: 40x24 png -> 80x48 webp in \d+ ms$/m)
  t.match(stdout, /^b\.jpg: 32x32 jpg -> 64x64 webp in \d+ ms$/m)
  t.match(stdout, /^broken\.jpg: failed: unsupported_format: /m)
  t.match(sniff(fs.readFileSync(path.join(out, 'a.webp'))), { format: 'webp', width: 80, height: 48 })
  t.same(fs.readdirSync(out).sort(), ['a.webp', 'b.webp'])
})
