/**
 * Bring your own model as ONNX: an SR network exported to ONNX (native/models/tests/onnx/compact_x4.onnx, the same
 * weights as the PyTorch golden compact_x4_nf16_nc2.0.pth: scripts/onnx-goldens.py) is added like the PyTorch file
 * (`addModel`, what `lucent models add` runs), listed with `format: onnx`, priced by its class, and serves the same
 * pixels as the PyTorch one on the same photo. A graph with an op the engine does not map is refused, nothing stored.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { build, createKey, post, png, inputServer, addonBuilt, waitFor, jobEnded, repoRoot, tempDir } from '../helper.js'
import { addModel } from '../../server/own-models/admin.js'
import { loadAddon } from '../../server/engine/addon.js'
import type { FastifyInstance } from 'fastify'
import { adminDeps } from '../support/own-models.js'

const root = path.join(repoRoot, 'native/models/tests')
const ONNX = path.join(root, 'onnx/compact_x4.onnx')
const PTH = path.join(root, 'goldens/compact_x4_nf16_nc2.0.pth')
const addon = addonBuilt ? loadAddon() as unknown as { inspectModel?: (b: Buffer, name: string) => { format?: string } } : null
const onnxRead = (() => {
  try { return addon?.inspectModel?.(fs.readFileSync(ONNX), 'compact_x4.onnx')?.format === 'onnx' } catch { return false }
})()
const skip = !addonBuilt ? 'native addon not built' : !onnxRead ? 'the built addon does not read ONNX (npm run build:native)' : false
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)

const deps = adminDeps

async function result(app: FastifyInstance, key: string, jobId: string): Promise<Buffer> {
  const d = await jobEnded(app, key, jobId)
  if (d.status !== 'COMPLETED') throw new Error(JSON.stringify(d))
  const u = new URL(d.res_url)
  return (await app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
}

t.test('an ONNX export is added, listed and served like its PyTorch original (same pixels)', { skip }, async (t) => {
  const app = await build(t, { LUCENT_OWN_MODELS_REFRESH_MS: '200' })
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 1000 })
  const o = await addModel(deps(app), ONNX, { name: 'tiny_onnx', kind: 'photo' })
  t.match(o, { name: 'tiny_onnx', format: 'onnx', scale: 4, photoPriceClass: 'enhance', fileKey: /\.onnx$/ })
  await addModel(deps(app), PTH, { name: 'tiny_pth', kind: 'photo' })
  const listed = await waitFor(async () => {
    const r = (await app.inject({ method: 'GET', url: '/api/models' })).json().data.models as Array<{ name: string; own?: { format: string } }>
    return r.find((x) => x.name === 'tiny_onnx') && r
  }, 10_000, 100)
  t.match(listed.find((x) => x.name === 'tiny_onnx'), { available: true, own: { format: 'onnx' } })
  const photo = png(40, 30)
  const a = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_onnx', img_url: srv.put('a.png', photo), extension: '.png' })
  const b = await post(app, '/api/photo-enhancer', key, { model_name: 'tiny_pth', img_url: srv.put('b.png', photo), extension: '.png' })
  t.equal(a.statusCode, 200, a.body)
  t.equal(a.json().data.consume_coins, b.json().data.consume_coins, 'the same price')
  const [ra, rb] = [await result(app, key, a.json().data.job_id), await result(app, key, b.json().data.job_id)]
  t.ok(ra.length > 100, 'a PNG')
  t.ok(ra.equals(rb), 'the same bytes as the PyTorch original (the ONNX graph maps onto the same network)')
})

t.test('an ONNX graph with an op the engine does not map: refused by name, nothing stored', { skip }, async (t) => {
  const app = await build(t)
  const dir = await tempDir(t)
  // the ops golden with its first node's op renamed to one the reader does not map (same length: the protobuf
  // stays valid)
  const bytes = fs.readFileSync(path.join(root, 'onnx/ops.onnx'))
  const at = bytes.indexOf(Buffer.from('Conv'))
  t.ok(at > 0)
  Buffer.from('Cxnv').copy(bytes, at)
  fs.writeFileSync(path.join(dir, 'odd.onnx'), bytes)
  await t.rejects(addModel(deps(app), path.join(dir, 'odd.onnx'), { name: 'odd' }), { message: /Cxnv/ })
  t.same(await app.lucent.store.ownModels.list(), [], 'nothing stored')
})
