/**
 * Signed links served by the service: GET /files/<key> (results, originals, uploads), PUT /upload/<key>.
 * GET answers with fileHeaders() (media/formats.ts): the stored bytes are never served as a page.
 * PUT counts against the quotas of the key that asked for the link (./quota.ts): cut at its remaining bytes.
 */
import type { FastifyPluginAsync } from 'fastify'
import { ApiError } from '../errors.js'
import { TooLargeError } from '../storage/local.js'
import { fileHeaders } from '../media/formats.js'
import { ok } from '../context.js'
import { cutError, reserveObject } from './quota.js'

const files: FastifyPluginAsync = async (app) => {
  const l = app.lucent
  // Raw bodies of any type for the PUT (encapsulated: only this plugin's routes).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_req, _payload, done) => done(null))

  app.get<{ Params: { '*': string }; Querystring: { e?: string; s?: string } }>('/files/*', {
    config: { public: true }, schema: { hide: true },
  }, async (req, reply) => {
    const key = req.params['*']
    const v = l.storage.verifyGet(key, req.query.e ?? '', req.query.s ?? '')
    if (v !== 'ok') throw new ApiError(100403001)
    const obj = await l.storage.stream(key)
    if (!obj) throw new ApiError(100403002)
    // never the uploader's type: canonical type, nosniff, sandbox CSP, attachment unless shown (media/formats.ts)
    reply.headers(fileHeaders(key, obj.meta.contentType))
    reply.header('content-length', obj.meta.size)
    reply.header('cache-control', 'private, max-age=3600')
    return reply.send(obj.stream)
  })

  app.put<{ Params: { '*': string }; Querystring: { e?: string; s?: string } }>('/upload/*', {
    config: { public: true }, schema: { hide: true },
  }, async (req) => {
    const key = req.params['*']
    const ct = (req.headers['content-type'] ?? '').trim().toLowerCase()
    const v = l.storage.verifyPut(key, ct, req.query.e ?? '', req.query.s ?? '')
    if (v !== 'ok') {
      req.raw.resume()
      throw new ApiError(100403001, { detail: v === 'expired' ? 'upload URL expired' : 'signature or Content-Type mismatch' })
    }
    // the key that signed the link (presign-put reserved the object for it, until the link's expiry): its byte quota
    // cuts this stream, the object's size and retention are recorded, or nothing is kept
    const keyId = await l.store.quotas.owner(key)
    if (!keyId) {
      req.raw.resume()
      throw new ApiError(100403001, { detail: 'upload URL no longer valid' })
    }
    const linkExpiry = Number(req.query.e) * 1000
    let res
    try {
      res = await reserveObject(l, keyId, key, l.config.uploadMaxBytes, linkExpiry)
    } catch (e) {
      req.raw.resume()
      throw e
    }
    let kept = false
    try {
      const meta = await l.storage.putStream(key, req.raw, ct, res.maxBytes)
      await res.commit(meta.size)
      kept = true
      return ok({ object_key: key, size: meta.size })
    } catch (e) {
      req.raw.resume()
      if (e instanceof TooLargeError && res.overQuota()) throw res.error()
      if (e instanceof TooLargeError) throw cutError(new ApiError(100400002, { detail: 'upload too large' }))
      throw e
    } finally {
      if (!kept) {
        // nothing kept (an earlier PUT's object too), the link still usable until its expiry
        await l.storage.delete(key).catch(() => {})
        await l.store.quotas.reserve(keyId, { objectKey: key, bytes: 0, expiresAt: linkExpiry }).catch(() => {})
      }
    }
  })
}

export default files
