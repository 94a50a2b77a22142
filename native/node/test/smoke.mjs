// Smoke test of the addon itself (node --test native/node/test/smoke.mjs), CPU backend.
// Needs the addon built (npm run build:native: `napi build` in native/node) and
// ../shared/models + ../shared/data next to the repo; skips cleanly without them.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(here, '../../..')
const modelDir = process.env.LUCENT_MODEL_DIR || path.resolve(repo, '../shared/models')
const photos = path.resolve(repo, '../shared/data/photos')
const skip = !existsSync(path.join(modelDir, 'sr/realesr-general-x4v3.param')) || !existsSync(photos)
  ? 'shared models/data absent' : false

const lucent = skip ? null : require('../index.js')

test('init, info, catalog', { skip }, () => {
  const info = lucent.init({ modelDir, backend: 'cpu' })
  assert.equal(info.backend, 'cpu')
  assert.equal(info.adapter, 'cpu')
  // A second init returns the same engine, whatever it asks for.
  assert.deepEqual(lucent.init({ modelDir: '/nonexistent', backend: 'gpu' }), info)
  assert.deepEqual(lucent.info(), info)
  const cat = lucent.catalog()
  const g4 = cat.find((m) => m.name === 'general_4x' && m.kind === 'photo')
  assert.equal(g4.scale, 4)
  assert.equal(g4.category, 'enhance')
  assert.deepEqual(g4.networks, ['sr/realesr-general-x4v3'])
  assert.equal(g4.available, true)
  assert.equal(cat.find((m) => m.name === 'generative_4x').category, 'generative')
  // Face models run the face pipeline (base net + RetinaFace + face net): available.
  assert.equal(cat.find((m) => m.name === 'face_2x').available, true)
  assert.ok(cat.some((m) => m.kind === 'video' && m.name === 'general_restore_2x'))
})

test('probe', { skip }, () => {
  const p = lucent.probe(readFileSync(path.join(photos, 'tree_alpha_16bit.png')))
  assert.deepEqual(p, { format: 'png', width: 342, height: 256, channels: 4, bitDepth: 16 })
  assert.throws(() => lucent.probe(Buffer.from('hello')), (e) => e.code === 'unsupported_format')
})

test('enhance general_4x on a real image', { skip }, async () => {
  lucent.init({ modelDir, backend: 'cpu' })
  const input = readFileSync(path.join(photos, '0014.jpg')) // 179 x 179
  const seen = []
  const out = await lucent.enhance(input, { model: 'general_4x', format: '.png' }, undefined, (p) => seen.push(p))
  assert.equal(out.width, 716)
  assert.equal(out.height, 716)
  assert.equal(out.format, 'png')
  const p = lucent.probe(out.data)
  assert.equal(p.width, 716)
  assert.equal(p.height, 716)
  assert.equal(p.format, 'png')
  assert.ok(out.ms > 0)
  // Progress arrives asynchronously; give the queue a tick.
  await new Promise((r) => setImmediate(r))
  assert.ok(seen.length > 0 && seen.every((v) => v >= 0 && v <= 100), JSON.stringify(seen))
})

test('error codes: unknown model, corrupt bytes, abort', { skip }, async () => {
  lucent.init({ modelDir, backend: 'cpu' })
  const good = readFileSync(path.join(photos, '0030.jpg'))
  await assert.rejects(lucent.enhance(good, { model: 'nope_4x', format: 'png' }), (e) => e instanceof Error && e.code === 'unknown_model')
  // A video-only name is not a photo model.
  await assert.rejects(lucent.enhance(good, { model: 'face_soft_2x', format: 'png' }), (e) => e.code === 'unknown_model')
  const png = readFileSync(path.join(photos, '00003.png'))
  await assert.rejects(lucent.enhance(png.subarray(0, png.length >> 1), { model: 'general_4x', format: 'png' }), (e) => e.code === 'decode_failed')
  // Already aborted.
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(lucent.enhance(good, { model: 'general_4x', format: 'png' }, ac.signal), (e) => e.code === 'aborted')
  // Aborted while running (generative_4x on 220x220 takes far longer than 50 ms on a CPU).
  const ac2 = new AbortController()
  const t0 = Date.now()
  const p = lucent.enhance(good, { model: 'generative_4x', format: 'png' }, ac2.signal)
  setTimeout(() => ac2.abort(), 50)
  await assert.rejects(p, (e) => e.code === 'aborted')
  assert.ok(Date.now() - t0 < 30000, 'abort took too long')
})

test('enhanceFrames', { skip }, async () => {
  lucent.init({ modelDir, backend: 'cpu' })
  const w = 16, h = 12
  const frames = Buffer.alloc(w * h * 3 * 2)
  for (let i = 0; i < frames.length; i++) frames[i] = (i * 7) & 255
  const out = await lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 2 })
  assert.equal(out.width, 32)
  assert.equal(out.height, 24)
  assert.equal(out.data.length, 32 * 24 * 3 * 2)
  await assert.rejects(lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 3 }), (e) => e.code === 'invalid_argument')
})

test('worker threads share the one engine', { skip }, async () => {
  const info = lucent.init({ modelDir, backend: 'cpu' })
  const { Worker } = await import('node:worker_threads')
  const src = `
    const { parentPort, workerData } = require('node:worker_threads')
    const l = require(workerData.addon)
    const info = l.info()
    const frames = Buffer.alloc(8 * 8 * 3, 128)
    l.enhanceFrames(frames, { model: 'general_restore_2x', width: 8, height: 8, count: 1 })
      .then((o) => parentPort.postMessage({ info, w: o.width }), (e) => parentPort.postMessage({ err: e.code }))
  `
  const w = new Worker(src, { eval: true, workerData: { addon: path.resolve(here, '../index.js') } })
  const msg = await new Promise((res, rej) => { w.once('message', res); w.once('error', rej) })
  await w.terminate()
  assert.deepEqual(msg, { info, w: 16 })
})
