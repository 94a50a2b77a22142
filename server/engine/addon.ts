/**
 * The native addon `@lucent/native` (package native/node, a `file:` dependency of the server): the types the
 * server uses from it, and the one loader (the engine threads call it; nothing else in the server loads it).
 */
import { createRequire } from 'node:module'

export type { EngineErrorCode, EngineInfo, EngineOptions, EnhanceOptions } from '@lucent/native'

export type { FramesOptions, FramesResult } from '@lucent/native'

export type Addon = typeof import('@lucent/native')

/** Loads the addon (CommonJS). Throws (`code: 'internal'`) when it is not built. */
export function loadAddon(): Addon {
  return createRequire(import.meta.url)('@lucent/native') as Addon
}
