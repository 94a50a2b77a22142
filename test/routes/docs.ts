/** OpenAPI document generated from the route schemas, and the UI. */
import t from 'tap'
import { build } from '../helper.js'

t.test('/docs and /docs/json without a key', async (t) => {
  const app = await build(t)
  const j = await app.inject({ method: 'GET', url: '/docs/json' })
  t.equal(j.statusCode, 200)
  const doc = j.json()
  t.match(doc.openapi, /^3\./)
  for (const p of ['/api/photo-enhancer', '/api/video-enhancer', '/api/task-status', '/api/oss/presign-put', '/api/oss/upload', '/api/oss/transfer']) t.ok(doc.paths[p]?.post, p)
  const photo = doc.paths['/api/photo-enhancer'].post
  const schema = photo.requestBody.content['application/json'].schema
  t.same(schema.required.sort(), ['extension', 'img_url', 'model_name'])
  t.ok(schema.properties.model_name.enum.includes('sharpen_denoise'))
  t.ok(photo.responses['402'], 'error responses documented')
  t.match(doc.components.securitySchemes.apikey, { type: 'apiKey', in: 'header', name: 'Apikey' })
  t.notOk(doc.paths['/files/*'], 'signed links hidden')
  const ui = await app.inject({ method: 'GET', url: '/docs/' })
  t.equal(ui.statusCode, 200)
  t.match(ui.headers['content-type'], /text\/html/)
  const h = await app.inject({ method: 'GET', url: '/healthz' })
  t.ok(h.statusCode === 200 || h.statusCode === 503, 'healthz is public')
  t.not(h.json().error_code, 110400000)
})
