/** File formats of the API: photo extensions (input and output), video output containers, content types. */

/** Photo extensions (input and output). Value: canonical format name as reported by sniff / used by the engine. */
export const PHOTO_EXTENSIONS: Record<string, string> = {
  bmp: 'bmp', jpeg: 'jpeg', jpg: 'jpeg', png: 'png', jfif: 'jpeg', tga: 'tga', tiff: 'tiff', webp: 'webp', heif: 'heif',
}
export const PHOTO_INPUT_FORMATS = new Set([...Object.values(PHOTO_EXTENSIONS), 'heic'])

/** Result file extension of a photo output format (jpeg results are stored as .jpg). */
export function photoResultExt(format: string): string {
  return format === 'jpeg' ? 'jpg' : format
}

export const VIDEO_OUTPUT_EXTENSIONS = new Set(['mp4', 'mov', 'mkv', 'm4v', 'avi', 'gif'])

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
