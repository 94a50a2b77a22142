/**
 * The request schemas' `model_name` check (server/routes/schemas.ts), as two Ajv formats: a catalog name or alias,
 * else one of the operator's own models of that kind in this process's registry. A failed check is a `format`
 * error on /model_name, which plugins/errors.ts answers with 110400005 as the catalog's enum did. The OpenAPI
 * document keeps listing the catalog's names as an enum (plugins/docs.ts `modelNameDocs`).
 */
import { photoModel, videoModel, PHOTO_MODEL_NAMES, VIDEO_MODEL_NAMES } from '../catalog.js'
import type { OwnModels } from './registry.js'

export const PHOTO_MODEL_FORMAT = 'lucent-photo-model'
export const VIDEO_MODEL_FORMAT = 'lucent-video-model'

/** Ajv `formats` for an app whose registry `own()` returns once the app's context exists. */
export function modelNameFormats(own: () => OwnModels | undefined) {
  return {
    [PHOTO_MODEL_FORMAT]: (s: string) => photoModel(s) !== undefined || own()?.photo(s) !== undefined,
    [VIDEO_MODEL_FORMAT]: (s: string) => videoModel(s) !== undefined || own()?.video(s) !== undefined,
  }
}

/** For the OpenAPI document: a route schema with the model_name formats shown as the catalog's enum. */
export function modelNameDocs<T>(schema: T): T {
  const body = (schema as { body?: { properties?: Record<string, { format?: string }> } } | undefined)?.body
  const m = body?.properties?.model_name
  if (!m || (m.format !== PHOTO_MODEL_FORMAT && m.format !== VIDEO_MODEL_FORMAT)) return schema
  const names = m.format === PHOTO_MODEL_FORMAT ? PHOTO_MODEL_NAMES : VIDEO_MODEL_NAMES
  const { format: _format, ...rest } = m
  return { ...schema, body: { ...body, properties: { ...body.properties, model_name: { ...rest, enum: names } } } } as T
}
