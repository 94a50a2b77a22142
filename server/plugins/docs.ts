/** The OpenAPI document generated from the route schemas (GET /docs/json) and its UI (GET /docs), public. */
import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { modelNameDocs } from '../own-models/formats.js'

export default fp(async (app) => {
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...(route.config ?? {}), public: true }
  })
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Lucent media enhancement API', version: '0.1.0',
        description: 'Asynchronous photo/video enhancement. Errors: {error_code, message, code, msg}; invalid or missing fields -> 100403000; queue full -> HTTP 503 + Retry-After with 100500007.',
      },
      components: { securitySchemes: { apikey: { type: 'apiKey', in: 'header', name: 'Apikey' } } },
    },
    // model_name is checked by a format (the operator's own models come and go); the document lists the catalog's
    transform: ({ schema, url }) => ({ schema: modelNameDocs(schema), url }),
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list' } })
}, { name: 'lucent-docs' })
