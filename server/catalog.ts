/** API model names (api.md), their aliases, multipliers and categories; format lists. */

export type PhotoCategory = 'enhance' | 'generative_portrait' | 'generative'

export interface PhotoModel { name: string; scale: number; category: PhotoCategory }

const photo: PhotoModel[] = [
  ...['face', 'face_v2', 'general', 'high_fidelity'].flatMap((f) => [2, 4].map((s) => ({ name: `${f}_${s}x`, scale: s, category: 'enhance' as const }))),
  { name: 'sharpen_denoise_1x', scale: 1, category: 'enhance' },
  { name: 'detail_denoise_1x', scale: 1, category: 'enhance' },
  ...[1, 2, 4].map((s) => ({ name: `generative_portrait_${s}x`, scale: s, category: 'generative_portrait' as const })),
  ...[1, 2, 4].map((s) => ({ name: `generative_${s}x`, scale: s, category: 'generative' as const })),
]

export const PHOTO_ALIASES: Record<string, string> = {
  sharpen_denoise: 'sharpen_denoise_1x',
  detail_denoise: 'detail_denoise_1x',
}

export const PHOTO_MODELS: ReadonlyMap<string, PhotoModel> = new Map(photo.map((m) => [m.name, m]))
export const PHOTO_MODEL_NAMES = [...PHOTO_MODELS.keys(), ...Object.keys(PHOTO_ALIASES)]

export function photoModel(name: string): PhotoModel | undefined {
  return PHOTO_MODELS.get(PHOTO_ALIASES[name] ?? name)
}

export type VideoTier = 'standard' | 'premium'
export interface VideoModel { name: string; scale: number; tier: VideoTier }
export const VIDEO_MODELS: ReadonlyMap<string, VideoModel> = new Map(([
  ['face_soft_2x', 2, 'standard'],
  ['portrait_restore_1x', 1, 'standard'],
  ['portrait_restore_2x', 2, 'standard'],
  ['general_restore_1x', 1, 'standard'],
  ['general_restore_2x', 2, 'standard'],
  ['general_restore_4x', 4, 'standard'],
  ['ultrahd_restore_2x', 2, 'premium'],
  ['generative_1x', 1, 'premium'],
] as const).map(([name, scale, tier]) => [name, { name, scale, tier }]))
export const VIDEO_MODEL_NAMES = [...VIDEO_MODELS.keys()]

/** Photo limits in megapixels (api.md "Limits"). */
export const PHOTO_LIMITS: Record<PhotoCategory, { maxInMP: number; maxOutMP: number }> = {
  enhance: { maxInMP: 70, maxOutMP: 432 },
  generative_portrait: { maxInMP: 34, maxOutMP: 34 },
  generative: { maxInMP: 34, maxOutMP: 34 },
}
export const VIDEO_MAX_OUT_MP = 36
export const VIDEO_MIN_SECONDS = 0.5
export const VIDEO_MAX_SECONDS = 3600

/** Photo extensions (input and output). Value: canonical format name as reported by sniff / used by the engine. */
export const PHOTO_EXTENSIONS: Record<string, string> = {
  bmp: 'bmp', jpeg: 'jpeg', jpg: 'jpeg', png: 'png', jfif: 'jpeg', tga: 'tga', tiff: 'tiff', webp: 'webp', heif: 'heif',
}
export const PHOTO_INPUT_FORMATS = new Set([...Object.values(PHOTO_EXTENSIONS), 'heic'])

export const VIDEO_INPUT_EXTENSIONS = new Set(['dv', 'mlv', 'm2ts', 'm2t', 'm2v', 'nut', 'ser', '3g2', '3gp', 'asf', 'avi', 'divx', 'f4v', 'flv',
  'h261', 'h263', 'm4v', 'mkv', 'mov', 'mp4', 'mpeg', 'mpeg4', 'mpg', 'mxf', 'ogv', 'rm', 'rmvb', 'webm', 'wmv', '3gp2', 'dmsm',
  'dvdmedia', 'dvr-ms', 'trp', 'vob', 'vro', 'gif', 'xvid'])
export const VIDEO_OUTPUT_EXTENSIONS = new Set(['mp4', 'mov', 'mkv', 'm4v', 'avi', 'gif'])

/** '.JPG' / 'jpg' -> 'jpg'; null if empty. */
export function normExt(ext: string): string | null {
  const e = ext.trim().toLowerCase().replace(/^\./, '')
  return e && /^[a-z0-9-]{1,10}$/.test(e) ? e : null
}

export const CONTENT_TYPES: Record<string, string> = {
  png: 'image/png', jpeg: 'image/jpeg', jpg: 'image/jpeg', jfif: 'image/jpeg', webp: 'image/webp', bmp: 'image/bmp',
  tga: 'image/x-tga', tiff: 'image/tiff', tif: 'image/tiff', heif: 'image/heif', heic: 'image/heic', gif: 'image/gif',
  mp4: 'video/mp4', m4v: 'video/x-m4v', mov: 'video/quicktime', mkv: 'video/x-matroska', webm: 'video/webm',
  avi: 'video/x-msvideo', flv: 'video/x-flv', wmv: 'video/x-ms-wmv', mpeg: 'video/mpeg', mpg: 'video/mpeg',
  '3gp': 'video/3gpp', '3g2': 'video/3gpp2', ogv: 'video/ogg', m2ts: 'video/mp2t', ts: 'video/mp2t', mxf: 'application/mxf',
}

export function contentTypeFor(ext: string): string {
  return CONTENT_TYPES[ext.toLowerCase().replace(/^\./, '')] ?? 'application/octet-stream'
}

/** Content types accepted by the upload facility (photo and video formats of api.md). */
export function uploadTypeAllowed(ct: string): boolean {
  const t = ct.split(';')[0].trim().toLowerCase()
  if (t === 'application/octet-stream') return false
  return Object.values(CONTENT_TYPES).includes(t) || t.startsWith('image/') && PHOTO_INPUT_FORMATS.has(t.slice(6))
    || t.startsWith('video/')
}
