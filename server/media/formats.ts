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

/** Canonical type of an extension (CONTENT_TYPES), else application/octet-stream. */
export function contentTypeFor(ext: string): string {
  const e = ext.toLowerCase().replace(/^\./, '')
  return Object.hasOwn(CONTENT_TYPES, e) ? CONTENT_TYPES[e]! : 'application/octet-stream'
}

const SERVED_TYPES = new Set(Object.values(CONTENT_TYPES))
/** A bare media type (RFC 9110 tokens, lower case): no parameters, no list, no white space. */
const BARE_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/

/**
 * Content types accepted by the upload facility (photo and video formats of api.md): a bare `image/<photo format>`,
 * `video/<anything>` or a type of CONTENT_TYPES, nothing else (no `video/mp4;x=1, text/html`, no SVG). The caller
 * strips parameters first where it wants to accept them (stagedType); presign-put does not (the type is signed).
 */
export function uploadTypeAllowed(ct: string): boolean {
  const t = ct.trim().toLowerCase()
  if (!BARE_TYPE.test(t) || t === 'application/octet-stream') return false
  return SERVED_TYPES.has(t) || t.startsWith('image/') && PHOTO_INPUT_FORMATS.has(t.slice(6)) || t.startsWith('video/')
}

/** The extension an upload of type `ct` is stored under: the table's for that type, else its subtype when plain. */
export function extensionForType(ct: string): string {
  const t = ct.trim().toLowerCase()
  const known = Object.keys(CONTENT_TYPES).find((e) => CONTENT_TYPES[e] === t)
  const sub = t.split('/')[1] ?? ''
  return known ?? (/^[a-z0-9]{1,10}$/.test(sub) ? sub : 'bin')
}

/**
 * Stored files (uploads, originals, results; issue 22) are served with a type of CONTENT_TYPES only, never the
 * uploader's string: the key's extension decides, else the stored type when it is exactly one of the table's, else
 * application/octet-stream. No HTML, XML or SVG type is in the table, so none is ever served.
 */
export function servedType(key: string, stored?: string): string {
  const name = key.slice(key.lastIndexOf('/') + 1)
  const dot = name.lastIndexOf('.')
  if (dot > 0) {
    const t = contentTypeFor(name.slice(dot + 1))
    if (t !== 'application/octet-stream') return t
  }
  const s = (stored ?? '').trim().toLowerCase()
  return SERVED_TYPES.has(s) ? s : 'application/octet-stream'
}

/** Types the playground shows (<img>, <video>): served `inline`; every other type is an attachment. */
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/bmp', 'video/mp4', 'video/webm', 'video/quicktime', 'video/x-m4v'])

/**
 * THE headers of a stored file, wherever it is served: GET /files/<key> (routes/files.ts) and, as far as S3 lets a
 * link choose them (type and disposition), the S3 GET links and objects (storage/s3.ts). A canonical type,
 * nosniff, a sandbox CSP (a document opened from it runs no script and has an opaque origin, so no access to the
 * gateway's localStorage), and `attachment` unless a type the playground shows. No filename parameter: it would
 * override the playground's `download` name; browsers take the key's last segment.
 */
export function fileHeaders(key: string, stored?: string): Record<'content-type' | 'content-disposition' | 'x-content-type-options' | 'content-security-policy', string> {
  const type = servedType(key, stored)
  return {
    'content-type': type,
    'content-disposition': INLINE_TYPES.has(type) ? 'inline' : 'attachment',
    'x-content-type-options': 'nosniff',
    'content-security-policy': "sandbox; default-src 'none'",
  }
}
