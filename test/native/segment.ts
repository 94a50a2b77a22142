/**
 * `segment` of the addon (native/node/src/segment.rs -> the engine's pipelines/segment): background
 * removal with u2netp on a real photo (the subject on a transparent background + the grey mask, at
 * the photo's size), and its errors as the engine's stable codes.
 *
 * Needs the addon built (npm run build:native) and seg/u2netp.onnx in the model dir
 * (`lucent models fetch seg/u2netp`; CI fetches `--all` into data/test-models). Skips without them
 * (and where an older addon has no `segment`), except under CI.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type * as Native from '@lucent/native'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const modelDir = path.resolve(root, process.env.LUCENT_MODEL_DIR ?? 'data/test-models')
const photos = path.resolve(root, '../shared/data/photos')
const built = fs.readdirSync(path.join(root, 'native/node')).some((f) => /^lucent\..+\.node$/.test(f))
const addon = built ? (createRequire(path.join(root, 'package.json'))('@lucent/native') as typeof Native) : null
const skip = !addon ? 'addon not built (npm run build:native)'
  : typeof addon.segment !== 'function' ? 'this addon has no segment (rebuild it)'
  : !fs.existsSync(path.join(modelDir, 'seg/u2netp.onnx')) ? `no seg/u2netp.onnx in ${modelDir} (lucent models fetch seg/u2netp)`
  : !fs.existsSync(photos) ? 'shared data absent' : false
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)
const lucent = addon as typeof Native

t.test('u2netp on a real photo: RGBA and a grey mask at the photo size', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const jpg = fs.readFileSync(path.join(photos, '0014.jpg'))
  const src = lucent.probe(jpg)
  const out = await lucent.segment(jpg, { model: 'u2netp' })
  t.equal(out.format, 'png')
  t.same([out.width, out.height], [src.width, src.height])
  const rgba = lucent.probe(out.data)
  t.same([rgba.format, rgba.width, rgba.height, rgba.channels, rgba.bitDepth], ['png', src.width, src.height, 4, 8], 'matted: RGBA 8-bit')
  const mask = lucent.probe(out.mask)
  t.same([mask.format, mask.width, mask.height, mask.channels, mask.bitDepth], ['png', src.width, src.height, 1, 8], 'mask: grey 8-bit')
  t.equal(out.work, (src.width * src.height) / 1e6, 'work: the photo megapixels')
  t.ok(out.ms >= out.runMs && out.runMs > 0)
  const webp = await lucent.segment(jpg, { model: 'u2netp', format: '.webp' })
  t.equal(webp.format, 'webp')
  t.equal(lucent.probe(webp.data).channels, 4, 'webp keeps the alpha')
})

t.test('bad requests reject with the engine codes', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const jpg = fs.readFileSync(path.join(photos, '0014.jpg'))
  await t.rejects(lucent.segment(jpg, { model: '../sr/realesr-general-x4v3' }), { code: 'unknown_model' }, 'no paths, only the two names')
  await t.rejects(lucent.segment(jpg, { model: 'u2netp', format: 'jpg' }), { code: 'unsupported_format' }, 'jpg has no alpha')
  await t.rejects(lucent.segment(Buffer.from('not an image'), { model: 'u2netp' }), { code: 'unsupported_format' })
  await t.rejects(lucent.segment(jpg, { model: 'u2netp', budget: 0.001 }), { code: 'budget_exceeded' }, 'the meter stops it before the network')
  await t.rejects(lucent.segment(jpg, { model: 'u2netp', budget: -1 }), { code: 'invalid_argument' })
  await t.rejects(lucent.segment(jpg, { model: 'u2netp' }, AbortSignal.abort()), { code: 'aborted' })
})
