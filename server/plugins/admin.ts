/**
 * Where the admin API (server/admin/routes.ts) is served, on gateways (processes that serve the API):
 * - no LUCENT_ADMIN_TOKEN_SHA256: nowhere (/admin/* is an unknown route, as any other);
 * - LUCENT_ADMIN_PORT unset: on the public app under /admin/v1, answering only the admin token;
 * - LUCENT_ADMIN_PORT set: on a second Fastify instance of its own (its error handler, the admin routes, nothing
 *   else), listening on LUCENT_ADMIN_HOST:LUCENT_ADMIN_PORT from the moment the public app is ready and closed with it;
 *   the public app then has no /admin route at all. `app.adminServer` is that instance (null otherwise).
 */
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { sideListener } from '../observability/listener.js'
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
  // a listener of its own (server/observability/listener.ts, shared with LUCENT_METRICS_PORT)
  app.adminServer = await sideListener(app, { port: cfg.port, host: cfg.host, routes: adminRoutes })
}, { name: 'lucent-admin' })
