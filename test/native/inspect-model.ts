/**
 * `inspectModel` of the addon (native/node/src/models.rs, lucent_models): PyTorch and safetensors
 * files from native/models/tests/goldens (small random models made by scripts/byom-goldens.py) are
 * described as spandrel describes them; hostile or damaged files throw with code `model_invalid`.
 *
 * Needs the addon built (npm run build:native).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type * as Native from '@lucent/native'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const goldens = path.join(root, 'native/models/tests/goldens')
const built = fs.readdirSync(path.join(root, 'native/node')).some((f) => /^lucent\..+\.node$/.test(f))
const skip = built ? false : 'addon not built (npm run build:native)'
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)
const lucent = skip ? (null as unknown as typeof Native) : (createRequire(path.join(root, 'package.json'))('@lucent/native') as typeof Native)

interface GoldenFile {
  file: string
  format: string
  spandrel: { architecture: string; scale: number; in_channels: number; out_channels: number; tags: string[] }
}
const index = JSON.parse(fs.readFileSync(path.join(goldens, 'index.json'), 'utf8')) as { configs: { files: GoldenFile[] }[] }

t.test('every golden file is described as spandrel describes it', { skip }, async (t) => {
  const formats = { zip: 'pytorch', legacy: 'pytorch-legacy', safetensors: 'safetensors' } as Record<string, string>
  for (const f of index.configs.flatMap((c) => c.files)) {
    const m = lucent.inspectModel(fs.readFileSync(path.join(goldens, f.file)), f.file)
    t.equal(m.architecture, f.spandrel.architecture, `${f.file} architecture`)
    t.equal(m.format, formats[f.format], `${f.file} format`)
    t.equal(m.scale, f.spandrel.scale, `${f.file} scale`)
    t.equal(m.inChannels, f.spandrel.in_channels, `${f.file} in channels`)
    t.equal(m.outChannels, f.spandrel.out_channels, `${f.file} out channels`)
    t.same(m.tags, f.spandrel.tags, `${f.file} tags`)
  }
})

t.test('hostile and damaged files throw model_invalid', { skip }, async (t) => {
  const pth = fs.readFileSync(path.join(goldens, 'compact_x4_nf16_nc2.0.pth'))
  const cases: [string, Buffer, RegExp][] = [
    ['truncated.pth', pth.subarray(0, pth.length >> 1), /truncated/],
    ['text.pth', Buffer.from('hello'), /not a PyTorch/],
    ['big.safetensors', Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 1, 0, 0]), Buffer.from('{}')]), /header/],
  ]
  for (const [name, bytes, re] of cases) {
    t.throws(() => lucent.inspectModel(bytes, name), { code: 'model_invalid', message: re }, name)
  }
})
