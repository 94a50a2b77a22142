/**
 * File formats of the API (api.md, Limits): the photo and video extension lists, the canonical format of an
 * extension (the names sniff.ts reports and the engine takes), result extensions and content types.
 */
import type { Sniffed } from './sniff.js'

/** Photo extensions (input and output) -> canonical format. */
const PHOTO_FORMAT: Record<string, string> = {
  bmp: 'bmp', jpeg: 'jpeg', jpg: 'jpeg', png: 'png', jfif: 'jpeg', tga: 'tga', tiff: 'tiff', webp: 'webp', heif: 'heif',
}
/** Photo input/output extensions accepted by the API (without the dot). */
export const photoExtensions: readonly string[] = Object.keys(PHOTO_FORMAT)
/** Formats a photo input may have (sniffed): every photo extension's, and HEIC. */
export const PHOTO_INPUT_FORMATS = new Set([...Object.values(PHOTO_FORMAT), 'heic'])

/** The engine's output format for a photo extension (normalised, see normExt), or undefined. */
export function photoFormat(ext: string): string | undefined {
  return Object.hasOwn(PHOTO_FORMAT, ext) ? PHOTO_FORMAT[ext] : undefined
}

/** Result file extension of a photo output format (jpeg results are stored as .jpg). */
export function photoResultExt(format: string): string {
  return format === 'jpeg' ? 'jpg' : format
}

/** Video input extensions accepted by the API (without the dot). */
export const videoInputExtensions: readonly string[] = [
  'dv', 'mlv', 'm2ts', 'm2t', 'm2v', 'nut', 'ser', '3g2', '3gp', 'asf', 'avi', 'divx', 'f4v', 'flv', 'h261', 'h263',
  'm4v', 'mkv', 'mov', 'mp4', 'mpeg', 'mpeg4', 'mpg', 'mxf', 'ogv', 'rm', 'rmvb', 'webm', 'wmv', '3gp2', 'dmsm',
  'dvdmedia', 'dvr-ms', 'trp', 'vob', 'vro', 'gif', 'xvid',
]
/** Video output extensions (without the dot). */
export const videoOutputExtensions: readonly string[] = ['mp4', 'mov', 'mkv', 'm4v', 'avi', 'gif']

const EXT_FORMAT: Record<string, string> = {
  ...PHOTO_FORMAT,
  dv: 'dv', mlv: 'mlv', m2ts: 'm2ts', m2t: 'mpegts', trp: 'mpegts', m2v: 'm2v', nut: 'nut', ser: 'ser',
  '3g2': '3g2', '3gp2': '3g2', '3gp': '3gp', asf: 'asf', wmv: 'asf', 'dvr-ms': 'asf', avi: 'avi', divx: 'avi',
  xvid: 'avi', f4v: 'f4v', flv: 'flv', h261: 'h261', h263: 'h263', m4v: 'm4v', mkv: 'mkv', webm: 'webm',
  mov: 'mov', mp4: 'mp4', mpeg4: 'mp4', mpeg: 'mpeg', mpg: 'mpeg', vob: 'mpeg', vro: 'mpeg', mxf: 'mxf',
  ogv: 'ogg', rm: 'rm', rmvb: 'rm', gif: 'gif', dmsm: 'dmsm', dvdmedia: 'dvdmedia',
}

/**
 * Canonical format name for an extension of api.md's lists ('.JPG' -> 'jpeg', 'wmv' -> 'asf', 'vob' -> 'mpeg'),
 * or null when the extension is in neither list. The names are those sniff() returns, except 'h261', 'h263',
 * 'dmsm' and 'dvdmedia', which sniff() cannot recognise.
 */
export function formatFromExtension(ext: string): string | null {
  const e = String(ext ?? '').trim().toLowerCase().replace(/^\./, '')
  return Object.hasOwn(EXT_FORMAT, e) ? EXT_FORMAT[e]! : null
}

/** Container families: formats whose files are routinely labelled with each other's extensions. */
const FAMILY: Record<string, string> = {
  mp4: 'isobmff', mov: 'isobmff', m4v: 'isobmff', '3gp': 'isobmff', '3g2': 'isobmff', f4v: 'isobmff',
  heif: 'heif', heic: 'heif', avif: 'heif',
  mkv: 'matroska', webm: 'matroska',
  mpeg: 'mpeg-ps', m2v: 'mpeg-ps',
  mpegts: 'mpeg-ts', m2ts: 'mpeg-ts',
}

/** True when a sniffed format is acceptable for a declared extension (same format or same container family). */
export function extensionMatches(ext: string, sniffed: Sniffed | null): boolean {
  if (!sniffed) return false
  const declared = formatFromExtension(ext)
  if (!declared) return false
  if (declared === sniffed.format) return true
  const fa = FAMILY[declared]
  return fa !== undefined && fa === FAMILY[sniffed.format]
}

/** '.JPG' / 'jpg' -> 'jpg'; null if empty. */
export function normExt(ext: string): string | null {
  const e = ext.trim().toLowerCase().replace(/^\./, '')
  return e && /^[a-z0-9-]{1,10}$/.test(e) ? e : null
}

const CONTENT_TYPES: Record<string, string> = {
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
