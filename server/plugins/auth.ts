/**
 * Auth and rate limit on every route not marked `config: { public: true }` (nor `admin: true`: the admin API's
 * routes check the admin token instead, server/admin/routes.ts): the `Apikey` header's key
 * (server/auth.ts) and one token of its bucket. Callback style and synchronous when it can be (cached key,
 * in-process bucket): no promise per request on the hot path.
 */
import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import type { ApiKey } from '../store/types.js'

export default fp(async (app) => {
  const l = app.lucent
  app.decorateRequest('apiKey', null)
  const admit = (req: FastifyRequest, key: ApiKey): void | Promise<void> => {
    req.apiKey = key
    return l.rate.take(key.id, key.rate)
  }
  app.addHook('onRequest', (req, _reply, done) => {
    // admin routes answer only the admin token (their own hook, server/admin/routes.ts): never an Apikey
    if (req.routeOptions.config?.public || req.routeOptions.config?.admin) return done()
    let pending: void | Promise<void>
    try {
      const key = l.auth.authenticate(req.headers.apikey)
      pending = key instanceof Promise ? key.then((k) => admit(req, k)) : admit(req, key)
    } catch (e) {
      return done(e as Error)
    }
    if (pending instanceof Promise) pending.then(() => done(), done)
    else done()
  })
}, { name: 'lucent-auth' })
