/**
 * A second listener of a process (the admin API's LUCENT_ADMIN_PORT, the metrics' LUCENT_METRICS_PORT): a Fastify
 * instance of its own with the app's `lucent`, the spec error handler and the given routes, nothing else;
 * listening on host:port from the moment the public app is ready, closed with it.
 */
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import errors from '../plugins/errors.js'

export async function sideListener(app: FastifyInstance, o: { port: number; host: string; routes: FastifyPluginAsync }): Promise<FastifyInstance> {
  const l = app.lucent
  const side = Fastify({
    logger: l.config.logLevel === 'silent' ? false : { level: l.config.logLevel },
    bodyLimit: 1 << 20,
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>()
  side.decorate('lucent', l)
  await side.register(errors)
  await side.register(o.routes)
  app.addHook('onReady', async () => {
    await side.listen({ port: o.port, host: o.host })
  })
  app.addHook('onClose', async () => {
    await side.close()
  })
  return side as unknown as FastifyInstance
}
