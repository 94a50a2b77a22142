/**
 * build(config) -> the Fastify instance, composed from named parts; each line says where its concern lives.
 * docs/architecture.md follows a photo and a video job through these files.
 */
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { processRole, type ClusterMode } from './roles/index.js'
import { openBackends } from './backends.js'
import { createLucent } from './context.js'
import errors from './plugins/errors.js'
import observability from './observability/http.js'
import { logMixin, requestIdOf } from './observability/context.js'
import auth from './plugins/auth.js'
import docs from './plugins/docs.js'
import ops from './plugins/ops.js'
import api from './routes/index.js'
import cluster from './plugins/cluster.js'
import cancelRelay from './plugins/cancel-relay.js'
import lifecycle from './plugins/lifecycle.js'
import webhooks from './plugins/webhooks.js'
import admin from './plugins/admin.js'
import playground from './playground.js'
import { modelNameFormats } from './own-models/formats.js'
import type { OwnModels } from './own-models/registry.js'

export type { Lucent } from './context.js'
export type { ClusterMode } from './roles/index.js'

export async function build(config: Config, opts: { cluster?: ClusterMode } = {}): Promise<FastifyInstance> {
  const role = processRole(config, opts.cluster)      // roles/index.ts    what this process does (API, jobs, cluster place)
  let own: OwnModels | undefined
  const app = Fastify({
    // model_name: the catalog's names, then the operator's own models (own-models/formats.ts)
    ajv: { customOptions: { formats: modelNameFormats(() => own) } },
    // a job run's log lines carry the submitting request's id (observability/context.ts)
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel, mixin: logMixin },
    // X-Request-Id when a bounded token, else a new id: req.id, echoed (observability/http.ts)
    genReqId: requestIdOf,
    requestIdHeader: false,
    bodyLimit: 1 << 20,
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>()
  const backends = await openBackends(config, role)   // backends.ts       store, storage, queue, rate limits, registry
  app.decorate('lucent', createLucent(config, role, backends, app.log)) // context.ts  lifecycle, pool, metrics, kept answers
  own = app.lucent.ownModels                          // own-models/        the operator's own networks (bring your own model)
  await app.register(errors)                          // plugins/errors.ts every failure as a spec error body
  await app.register(observability)                   // observability/http.ts request ids, access log, HTTP series, request spans
  await app.register(auth)                            // plugins/auth.ts   Apikey + token bucket on non-public routes
  await app.register(docs)                            // plugins/docs.ts   OpenAPI + /docs
  await app.register(ops)                             // plugins/ops.ts    /healthz /readyz /metrics
  if (role.servesApi) await app.register(api)         // routes/           jobs, uploads, signed files, models
  if (role.servesApi && config.playground) await app.register(playground) // playground.ts the web page at / (playground/)
  await app.register(admin)                           // plugins/admin.ts  the admin API: /admin/v1 here, or its own listener (admin/)
  await app.register(cluster)                         // plugins/cluster.ts an embedded cluster's primary / child wiring
  await app.register(cancelRelay)                     // plugins/cancel-relay.ts cancels reach workers on other hosts (Redis)
  await app.register(lifecycle)                       // plugins/lifecycle.ts start (runner, engine, recovery) and stop
  await app.register(webhooks)                        // plugins/webhooks.ts  webhook delivery from the outbox (webhooks/)
  return app
}
