/**
 * The native addon `@lucent/native` (package native/node, a `file:` dependency of the server): the types the
 * server uses from it, and the one loader (the engine threads call it; nothing else in the server loads it).
 */
import { createRequire } from 'node:module'

export type { EngineErrorCode, EngineInfo, EngineOptions, EnhanceOptions } from '@lucent/native'

// TODO(contracts.md §2: `@lucent/native` exports FramesOptions and FramesResult): today's native/node/index.d.ts
// does not name these two types; once the generated declarations do, replace both with
// `export type { FramesOptions, FramesResult } from '@lucent/native'`.
/** enhanceFrames() options: `count` packed RGB24 frames of width x height; faceState from the previous batch. */
export interface FramesOptions { model: string; width: number; height: number; count: number; faceState?: Buffer }
/** enhanceFrames() result: RGB24 frames at the network's output size; faceState for the next batch. */
export interface FramesResult { data: Buffer; width: number; height: number; faceState?: Buffer }

export type Addon = typeof import('@lucent/native')

/** Loads the addon (CommonJS). Throws (`code: 'internal'`) when it is not built. */
export function loadAddon(): Addon {
  return createRequire(import.meta.url)('@lucent/native') as Addon
}
