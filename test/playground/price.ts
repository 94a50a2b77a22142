// The playground's price module (playground/src/price.ts) on the live catalog: plain video prices as before, and
// the frame-interpolation fields (fps / slowmo) the page sends with a video job.
import t from 'tap'
import { build, createKey } from '../helper.js'
import { videoQuote } from '../../playground/src/price.js'
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
