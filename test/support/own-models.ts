/** What `addModel` / `removeModel` (server/own-models/admin.ts) need from a test app: its config, store, storage
 *  (another one may be given) and an engine on the CPU backend over the app's model directory. */
import type { FastifyInstance } from 'fastify'
import type { MediaStorage } from '../../server/storage/types.js'
import { loadAddon } from '../../server/engine/addon.js'

export function adminDeps(app: FastifyInstance, storage: MediaStorage = app.lucent.storage) {
  const engine = () => {
    const a = loadAddon()
    a.init({ modelDir: app.lucent.config.modelDir, backend: 'cpu' })
    return a
  }
  return { config: app.lucent.config, store: app.lucent.store, storage, engine }
}
