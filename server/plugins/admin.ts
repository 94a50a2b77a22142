/**
 * Where the admin API (server/admin/routes.ts) is served, on gateways (processes that serve the API):
 * - no LUCENT_ADMIN_TOKEN_SHA256: nowhere (/admin/* is an unknown route, as any other);
 * - LUCENT_ADMIN_PORT unset: on the public app under /admin/v1, answering only the admin token;
 * - LUCENT_ADMIN_PORT set: on a second Fastify instance of its own (its error handler, the admin routes, nothing
 *   else), listening on LUCENT_ADMIN_HOST:LUCENT_ADMIN_PORT from the moment the public app is ready and closed with it;
 *   the public app then has no /admin route at all. `app.adminServer` is that instance (null otherwise).
 */
import fp from 'fastify-plugin'
import Fastify, { type FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import errors from './errors.js'
import adminRoutes from '../admin/routes.js'

declare module 'fastify' {
  interface FastifyInstance { adminServer: FastifyInstance | null }
}

export default fp(async (app) => {
  const l = app.lucent
  const cfg = l.config.admin
  app.decorate('adminServer', null)
  if (!cfg?.tokens.length || !l.role.servesApi) return
  if (cfg.port === null) {
    await app.register(adminRoutes)
    return
  }
  const admin = Fastify({
    logger: l.config.logLevel === 'silent' ? false : { level: l.config.logLevel },
    bodyLimit: 1 << 20,
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>()
  admin.decorate('lucent', l)
  await admin.register(errors)
  await admin.register(adminRoutes)
  app.adminServer = admin as unknown as FastifyInstance
  app.addHook('onReady', async () => {
    await admin.listen({ port: cfg.port!, host: cfg.host })
  })
  app.addHook('onClose', async () => {
    await admin.close()
  })
}, { name: 'lucent-admin' })
