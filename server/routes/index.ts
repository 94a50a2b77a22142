/** The HTTP API of gateways: job submission and status (jobs.ts), the upload facility (oss.ts), signed links
 *  served by the service (files.ts), the model catalog (models.ts), webhook deliveries (webhooks.ts), the calling key's account (account.ts). Each is an encapsulated plugin with its own schemas. */
import type { FastifyPluginAsync } from 'fastify'
import jobRoutes from './jobs.js'
import ossRoutes from './oss.js'
import fileRoutes from './files.js'
import modelRoutes from './models.js'
import webhookRoutes from './webhooks.js'
import accountRoutes from './account.js'

const api: FastifyPluginAsync = async (app) => {
  await app.register(jobRoutes)
  await app.register(ossRoutes)
  await app.register(fileRoutes)
  await app.register(modelRoutes)
  await app.register(webhookRoutes)
  await app.register(accountRoutes)
}

export default api
