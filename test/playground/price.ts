// The playground's price module (playground/src/price.ts) on the live catalog: plain video prices as before, and
// the frame-interpolation fields (fps / slowmo) the page sends with a video job, and background removal's quote
// (the segmentation table of the live catalog) against the price the route charges (server/segmentation.ts).
import t from 'tap'
import { build, createKey } from '../helper.js'
import { segmentationQuote, videoQuote } from '../../playground/src/price.js'
import { segCoins } from '../../server/segmentation.js'
import { segmentationTable } from '../../server/pricing.js'
import type { CatalogModel } from '../../playground/src/api.js'

t.test('video quotes with and without frame interpolation', async (t) => {
  const app = await build(t)
  const key = await createKey(app)
  const res = await app.inject({ method: 'GET', url: '/api/models', headers: { Authorization: `Apikey ${key}` } })
  const models = (res.json().data.models as CatalogModel[])
  const interp = models.find((m) => m.name === 'frame_interpolation')!
  const plain = models.find((m) => m.kind === 'video' && m.name !== 'frame_interpolation')!
  t.ok(interp, 'frame_interpolation is listed')

  const q = videoQuote(plain, 1280, 720, 10)
  t.type(q.coins, 'number', 'a plain video job is priced before submission')
  t.equal(q.problem, null)

  const none = videoQuote(interp, 1280, 720, 10)
  t.equal(none.coins, null)
  t.match(none.problem, /frame rate or slow motion/, 'frame_interpolation without fps or slowmo cannot be submitted')

  for (const extra of [{ fps: 60 }, { slowmo: 4 }]) {
    const r = videoQuote(interp, 1280, 720, 10, extra)
    t.equal(r.problem, null, JSON.stringify(extra))
    t.match(r.text, /output rate/, 'priced by the output frames, shown after submission')
  }
})

t.test('background removal: the page quotes what the route charges, by input megapixels', async (t) => {
  const app = await build(t)
  const models = ((await app.inject({ method: 'GET', url: '/api/models' })).json().data.models as CatalogModel[])
  const seg = models.filter((m) => m.kind === 'segmentation')
  t.same(seg.map((m) => m.name), ['u2netp', 'u2net'])
  for (const [w, h] of [[179, 179], [2000, 2000], [2001, 2000], [4000, 3000], [6000, 4000], [8000, 6000]]) {
    const q = segmentationQuote(seg[0], w, h)
    t.equal(q.coins, segCoins(segmentationTable(app.lucent.prices), w, h), `${w} x ${h}`)
    t.equal(q.problem, null)
  }
  t.match(segmentationQuote(seg[0], 10000, 8000).problem, /over this model's limit of 70 MP/)
  t.match(segmentationQuote(seg[0], null, null), { coins: null, text: /^5–20 coins by input size/ })
})
