/**
 * The addon `@lucent/native` (native/node) on its own, through the package name, CPU backend: init/info,
 * catalog, probe, enhance (progress, AbortSignal, error codes), enhanceFrames (per-video state), one engine
 * shared by worker threads. Typed by the generated native/node/index.d.ts.
 *
 * Needs the addon built (npm run build:native) and ../shared models + data next to the repository.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { getEventListeners } from 'node:events'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import type * as Native from '@lucent/native'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const modelDir = process.env.LUCENT_MODEL_DIR
  ? path.resolve(root, process.env.LUCENT_MODEL_DIR)
  : fs.existsSync(path.join(root, 'data/test-models/sr/realesr-general-x4v3.bin'))
    ? path.join(root, 'data/test-models')
    : path.resolve(root, '../shared/models')
const photos = path.resolve(root, '../shared/data/photos')
const built = fs.readdirSync(path.join(root, 'native/node')).some((f) => /^lucent\..+\.node$/.test(f))
const skip = !built ? 'addon not built (npm run build:native)'
  : !fs.existsSync(path.join(modelDir, 'sr/realesr-general-x4v3.param')) || !fs.existsSync(photos) ? 'shared models/data absent' : false
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)

type Addon = typeof Native
const lucent = skip ? (null as unknown as Addon) : (createRequire(path.join(root, 'package.json'))('@lucent/native') as Addon)
const photo = (name: string) => fs.readFileSync(path.join(photos, name))

t.test('init, info, catalog', { skip }, async (t) => {
  const info = lucent.init({ modelDir, backend: 'cpu' })
  t.equal(info.backend, 'cpu')
  t.equal(info.adapter, 'cpu')
  // A second init returns the same engine, whatever it asks for.
  t.same(lucent.init({ modelDir: '/nonexistent', backend: 'gpu' }), info)
  t.same(lucent.info(), info)
  const cat = lucent.catalog()
  const g4 = cat.find((m) => m.name === 'general_4x' && m.kind === 'photo')!
  t.equal(g4.scale, 4)
  t.equal(g4.category, 'enhance')
  t.same(g4.networks, ['sr/realesr-general-x4v3'])
  t.equal(g4.available, true)
  t.equal(cat.find((m) => m.name === 'generative_4x')!.category, 'generative')
  // Face models run the face pipeline (base net + RetinaFace + face net): available, with their style.
  const face = cat.find((m) => m.name === 'face_v2_2x')!
  t.equal(face.available, true)
  t.match(face.face, { base: 'sr/realesr-general-x4v3', faceNet: 'sr/realesrgan-x4plus', strength: 0.55 })
  t.ok(cat.some((m) => m.kind === 'video' && m.name === 'general_restore_2x'))
  t.same(cat.find((m) => m.name === 'detail_denoise_1x')!.aliases, ['detail_denoise'])
  t.same(lucent.errorCodes().slice(-3), ['aborted', 'budget_exceeded', 'internal'])
})

t.test('probe', { skip }, async (t) => {
  t.same(lucent.probe(photo('tree_alpha_16bit.png')), { format: 'png', width: 342, height: 256, channels: 4, bitDepth: 16 })
  t.throws(() => lucent.probe(Buffer.from('hello')), { code: 'unsupported_format' })
})

t.test('enhance general_4x on a real image', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const seen: number[] = []
  const out = await lucent.enhance(photo('0014.jpg'), { model: 'general_4x', format: '.png' }, undefined, (p) => seen.push(p)) // 179 x 179
  t.same([out.width, out.height, out.format], [716, 716, 'png'])
  t.match(lucent.probe(out.data), { width: 716, height: 716, format: 'png' })
  t.ok(out.ms > 0)
  // Progress arrives asynchronously; give the queue a tick.
  await new Promise((r) => setImmediate(r))
  t.ok(seen.length > 0 && seen.every((v) => v >= 0 && v <= 100), JSON.stringify(seen))
})

t.test('error codes: unknown model, corrupt bytes, bad quality, abort', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const good = photo('0030.jpg')
  await t.rejects(lucent.enhance(good, { model: 'nope_4x', format: 'png' }), { code: 'unknown_model' })
  // A video-only name is not a photo model.
  await t.rejects(lucent.enhance(good, { model: 'face_soft_2x', format: 'png' }), { code: 'unknown_model' })
  const png = photo('00003.png')
  await t.rejects(lucent.enhance(png.subarray(0, png.length >> 1), { model: 'general_4x', format: 'png' }), { code: 'decode_failed' })
  await t.rejects(lucent.enhance(good, { model: 'general_4x', format: 'png', quality: 101 }), { code: 'invalid_argument' })
  // Already aborted: rejected before any work (even for a bad name).
  const ac = new AbortController()
  ac.abort()
  await t.rejects(lucent.enhance(good, { model: 'nope_4x', format: 'png' }, ac.signal), { code: 'aborted' })
  // Aborted while running (generative_4x on 220x220 takes far longer than 50 ms on a CPU).
  const ac2 = new AbortController()
  const t0 = Date.now()
  const p = lucent.enhance(good, { model: 'generative_4x', format: 'png' }, ac2.signal)
  setTimeout(() => ac2.abort(), 50)
  await t.rejects(p, { code: 'aborted' })
  t.ok(Date.now() - t0 < 30000, 'abort took too long')
  // A settled call leaves no listener on its signal; a throwing progress listener is ignored.
  const ac3 = new AbortController()
  let calls = 0
  const running = lucent.enhance(good, { model: 'general_2x', format: 'png' }, ac3.signal, () => {
    calls++
    throw new Error('listener bug')
  })
  t.equal(getEventListeners(ac3.signal, 'abort').length, 1, 'the call listens while it runs')
  const done = await running
  await new Promise((r) => setImmediate(r))
  t.equal(done.format, 'png')
  t.ok(calls > 0, 'the throwing listener was called')
  t.equal(getEventListeners(ac3.signal, 'abort').length, 0)
  t.equal(getEventListeners(ac2.signal, 'abort').length, 0)
})

t.test('enhance to a target size: targetWidth / targetHeight', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const img = photo('0030.jpg') // 220 x 220
  const { width, height } = lucent.probe(img)
  // general_2x runs at 2x, then the result is resampled: width alone keeps the aspect ratio.
  const w = await lucent.enhance(img, { model: 'general_2x', format: 'png', targetWidth: 330 })
  t.same([w.width, w.height], [330, Math.round((330 * height) / width)])
  t.match(lucent.probe(w.data), { width: w.width, height: w.height, format: 'png' })
  const both = await lucent.enhance(img, { model: 'general_2x', format: 'jpg', targetWidth: 100, targetHeight: 61 })
  t.match(lucent.probe(both.data), { width: 100, height: 61, format: 'jpg' })
  // Bad sides are invalid_argument; a size over the model's output limit is image_too_large.
  for (const bad of [{ targetWidth: 0 }, { targetHeight: -5 }, { targetWidth: 1.5 }, { targetWidth: 65536 }, { targetHeight: Number.NaN }]) {
    await t.rejects(lucent.enhance(img, { model: 'general_2x', format: 'png', ...bad }), { code: 'invalid_argument' }, JSON.stringify(bad))
  }
  await t.rejects(lucent.enhance(img, { model: 'general_2x', format: 'png', targetWidth: 65535, targetHeight: 65535 }), { code: 'image_too_large' })
})

t.test('enhanceFrames, with per-video state for face models', { skip }, async (t) => {
  lucent.init({ modelDir, backend: 'cpu' })
  const w = 16, h = 12
  const frames = Buffer.alloc(w * h * 3 * 2)
  for (let i = 0; i < frames.length; i++) frames[i] = (i * 7) & 255
  const out = await lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 2 })
  t.same([out.width, out.height, out.data.length], [32, 24, 32 * 24 * 3 * 2])
  t.equal(out.faceState, undefined, 'a plain model keeps no per-video state')
  const ignored = await lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 2, faceState: Buffer.from('junk') })
  t.same([ignored.data.equals(out.data), ignored.faceState], [true, undefined], 'and ignores a state passed to it')
  await t.rejects(lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 3 }), { code: 'invalid_argument' })
  const a = await lucent.enhanceFrames(frames.subarray(0, w * h * 3), { model: 'face_soft_2x', width: w, height: h, count: 1 })
  t.ok(a.faceState && a.faceState.length > 0, 'a face model returns its state')
  const b = await lucent.enhanceFrames(frames.subarray(0, w * h * 3), { model: 'face_soft_2x', width: w, height: h, count: 1, faceState: a.faceState })
  t.ok(b.faceState && b.faceState.length > 0)
  await t.rejects(lucent.enhanceFrames(frames.subarray(0, w * h * 3), { model: 'face_soft_2x', width: w, height: h, count: 1, faceState: Buffer.from('junk') }),
    { code: 'invalid_argument' })
  const ac = new AbortController()
  ac.abort()
  await t.rejects(lucent.enhanceFrames(frames, { model: 'general_restore_2x', width: w, height: h, count: 2 }, ac.signal), { code: 'aborted' })
})

t.test('worker threads share the one engine', { skip }, async (t) => {
  const info = lucent.init({ modelDir, backend: 'cpu' })
  const src = `
    const { parentPort, workerData } = require('node:worker_threads')
    const l = require(workerData.addon)
    const info = l.info()
    const frames = Buffer.alloc(8 * 8 * 3, 128)
    l.enhanceFrames(frames, { model: 'general_restore_2x', width: 8, height: 8, count: 1 })
      .then((o) => parentPort.postMessage({ info, w: o.width }), (e) => parentPort.postMessage({ err: e.code }))
  `
  const addon = createRequire(path.join(root, 'package.json')).resolve('@lucent/native')
  const w = new Worker(src, { eval: true, workerData: { addon } })
  const msg = await new Promise((res, rej) => {
    w.once('message', res)
    w.once('error', rej)
  })
  await w.terminate()
  t.same(msg, { info, w: 16 })
})
