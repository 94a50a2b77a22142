/** Upload facility (compat.md): presign-put (+batch), multipart upload, transfer (+batch). Every stored object
 *  counts against its key's quotas (./quota.ts, server/store/quotas.ts): reserved before a byte is read, the stream
 *  cut at the key's remaining bytes, recorded with its retention, or nothing kept and a 429. A pre-signed PUT on S3
 *  bypasses the gateway: its bytes are measured in the bucket afterwards (./presigned.ts). */
import crypto from 'node:crypto'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import multipart from '@fastify/multipart'
import { Type } from 'typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError, ERRORS, type ErrorCode } from '../errors.js'
import { contentTypeFor, extensionForType, servedType, uploadTypeAllowed } from '../media/formats.js'
import { safeName } from '../storage/types.js'
import { TooLargeError } from '../storage/local.js'
import { sniff } from '../media/sniff.js'
import { loadToFile, readHead } from '../input.js'
import { ok, RETENTION_MS, type Lucent } from '../context.js'
import { checkStoredRoom, cutError, quotaHeaders, reserveObject } from './quota.js'
import { Envelope, PresignItem, Presigned, Stored, errorResponses } from './schemas.js'

/** u/<random>/<name>; for a type of the table the name ends in one of its extensions (`evil.html` as video/mp4 ->
 *  `evil.html.mp4`): the key alone gives the type it is served with (media/formats.ts servedType), on S3 too. */
function uploadKey(filename: string | undefined, ct: string): string {
  const ext = extensionForType(ct)
  let name = safeName(filename, `file.${ext}`)
  const type = servedType(`file.${ext}`, ct)
  if (type !== 'application/octet-stream' && servedType(name) !== type) name = `${name.replace(/\.+$/, '')}.${ext}`
  return `u/${crypto.randomBytes(16).toString('hex')}/${name}`
}

async function presign(l: Lucent, keyId: string, f: { filename: string; content_type: string; expire_seconds?: number }) {
  // a bare image/video type only: it is signed, stored and (S3) served as given, so no parameters or lists
  const ct = f.content_type.trim().toLowerCase()
  if (!uploadTypeAllowed(ct)) throw new ApiError(110400007, { detail: `content_type ${JSON.stringify(f.content_type.slice(0, 100))} is not a bare photo or video type` })
  const key = uploadKey(f.filename, ct)
  const expireAt = Date.now() + (f.expire_seconds ?? 3600) * 1000
  // one file of the key's quota from now: until the link expires (local: the PUT through /upload records its bytes),
  // on S3 for the retention (the PUT goes to the bucket: the gateway never sees its bytes; they are measured when a
  // job first names the object and once the link has expired, ./presigned.ts)
  await reserveObject(l, keyId, key, l.config.uploadMaxBytes, l.config.s3 ? Date.now() + RETENTION_MS : expireAt,
    l.config.s3 ? { linkExpiresAt: expireAt } : {})
  return {
    upload_url: l.storage.signedPutUrl(key, ct, expireAt),
    access_url: l.storage.signedGetUrl(key, Date.now() + RETENTION_MS),
    object_key: key,
    content_type: ct,
    expire_at: new Date(Math.floor(expireAt / 1000) * 1000).toISOString(),
  }
}

function itemError(e: unknown) {
  const code: ErrorCode = e instanceof ApiError ? e.errorCode : 100500000
  return { error_code: code, error: ERRORS[code].message }
}

/** Type of a staged file: the declared type if allowed, else the name's extension, else the sniffed bytes. */
function stagedType(declared: string | null | undefined, name: string | undefined, head: Buffer | null): string | null {
  const d = (declared ?? '').split(';')[0].trim().toLowerCase()
  if (d && uploadTypeAllowed(d)) return d
  const ext = path.extname(name ?? '').slice(1).toLowerCase()
  if (ext && uploadTypeAllowed(contentTypeFor(ext))) return contentTypeFor(ext)
  const sn = head ? sniff(head) : null
  if (sn && uploadTypeAllowed(contentTypeFor(sn.format))) return contentTypeFor(sn.format)
  return null
}

async function transfer(l: Lucent, keyId: string, url: string, filename: string | undefined) {
  // the quota first (nothing fetched when the key is at it), under a placeholder key until the type is known
  const held = `q/${crypto.randomBytes(16).toString('hex')}`
  // hold: the whole cut reserved, so parallel transfers of the key hold at most its remaining bytes on disk at once
  const res = await reserveObject(l, keyId, held, l.config.uploadMaxBytes, undefined, { hold: true })
  let key: string | null = null
  let kept = false
  try {
    let input
    try {
      // the fetch is cut while streaming at the smaller of the upload limit and the key's remaining bytes
      input = await loadToFile(url, 'photo', l.config, l.storage, res.maxBytes)
    } catch (e) {
      if (e instanceof ApiError && e.errorCode === 110400009 && res.overQuota()) throw res.error()
      throw e
    }
    try {
      const name = filename ?? (() => { try { return decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '') } catch { return '' } })()
      const ct = stagedType(input.contentType, name, await readHead(input.file, 64 * 1024))
      if (!ct) throw new ApiError(110400007)
      key = uploadKey(name, ct)
      await res.rekey(key)
      const meta = await l.storage.putStream(key, fs.createReadStream(input.file), ct, res.maxBytes)
      await res.commit(meta.size)
      kept = true
      return { url: l.storage.signedGetUrl(key, Date.now() + RETENTION_MS), object_key: key, size: meta.size }
    } finally {
      await fsp.rm(input.file, { force: true })
    }
  } finally {
    if (!kept) {
      await res.release().catch(() => {})
      if (key) await l.storage.delete(key).catch(() => {})
    }
  }
}

const routes: FastifyPluginAsyncTypebox = async (app) => {
  const l = app.lucent
  await app.register(multipart, { limits: { fileSize: l.config.uploadMaxBytes, files: 1, fields: 10 } })
  const common = { tags: ['uploads'], security: [{ apikey: [] }] }

  app.post('/api/oss/presign-put', {
    schema: { ...common, summary: 'Pre-signed PUT upload URL', body: PresignItem, response: { 200: Envelope(Presigned), ...errorResponses } },
  }, async (req) => ok(await presign(l, req.apiKey!.id, req.body)))

  app.post('/api/oss/presign-put/batch', {
    schema: {
      ...common, summary: 'Pre-signed PUT upload URLs (1..20)',
      body: Type.Object({ files: Type.Array(PresignItem, { minItems: 1, maxItems: 20 }) }),
    },
  }, async (req) => {
    await checkStoredRoom(l, req.apiKey!.id)
    const items = []
    for (const f of req.body.files) {
      try {
        items.push(await presign(l, req.apiKey!.id, f))
      } catch (e) {
        items.push({ filename: f.filename, content_type: f.content_type, ...itemError(e) })
      }
    }
    const success = items.filter((i) => 'upload_url' in i).length
    return ok({ total: items.length, success, failed: items.length - success, items })
  })

  app.post('/api/oss/upload', {
    schema: { ...common, summary: 'Multipart upload (field `file`)', consumes: ['multipart/form-data'], response: { 200: Envelope(Stored), ...errorResponses } },
  }, async (req, reply) => {
    if (!req.isMultipart()) throw new ApiError(100403000)
    const part = await req.file()
    if (!part || part.fieldname !== 'file') throw new ApiError(100403000)
    const ct = stagedType(part.mimetype, part.filename, null)
    if (!ct) {
      part.file.resume()
      throw new ApiError(110400007)
    }
    const key = uploadKey(part.filename, ct)
    let res
    try {
      res = await reserveObject(l, req.apiKey!.id, key, l.config.uploadMaxBytes)
    } catch (e) {
      part.file.resume()
      throw e
    }
    let meta
    let kept = false
    try {
      try {
        // cut while streaming at the smaller of the upload limit and the key's remaining bytes
        meta = await l.storage.putStream(key, part.file, ct, res.maxBytes)
      } catch (e) {
        part.file.resume()
        if (e instanceof TooLargeError && res.overQuota()) throw res.error()
        if (e instanceof TooLargeError || (e as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') throw cutError(new ApiError(100400002, { detail: 'file too large' }))
        throw e
      }
      if (part.file.truncated) throw new ApiError(100400002, { detail: 'file too large' })
      await res.commit(meta.size)
      kept = true
    } finally {
      if (!kept) {
        await res.release().catch(() => {})
        await l.storage.delete(key).catch(() => {})
      }
    }
    quotaHeaders(reply, await l.store.quotas.get(req.apiKey!.id), await l.store.quotas.usage(req.apiKey!.id))
    return ok({ url: l.storage.signedGetUrl(key, Date.now() + RETENTION_MS), object_key: key, size: meta.size })
  })

  app.post('/api/oss/transfer', {
    schema: {
      ...common, summary: 'Copy a remote file into storage',
      body: Type.Object({ url: Type.String(), filename: Type.Optional(Type.String({ maxLength: 255 })) }),
      response: { 200: Envelope(Stored), ...errorResponses },
    },
  }, async (req) => ok(await transfer(l, req.apiKey!.id, req.body.url, req.body.filename)))

  app.post('/api/oss/batch-transfer', {
    schema: {
      ...common, summary: 'Copy remote files into storage (1..20)',
      body: Type.Object({ urls: Type.Array(Type.String(), { minItems: 1, maxItems: 20 }) }),
    },
  }, async (req) => {
    // a key at its quota fetches nothing: 429 for the whole batch; else each transfer reserves its own place
    await checkStoredRoom(l, req.apiKey!.id)
    // each item's cut is what the key's quota leaves after the others' reservations (transfer() holds its cut): an
    // item refused for the key's bytes while others of the batch run waits for one of them to end (its reservation
    // shrinks to its real size or goes), then tries again
    let running = 0
    let waiting: Array<() => void> = []
    const wake = () => { const w = waiting; waiting = []; for (const f of w) f() }
    const items = await Promise.all(req.body.urls.map(async (u) => {
      for (;;) {
        running++
        let retry = false
        try {
          return { source_url: u, ...(await transfer(l, req.apiKey!.id, u, undefined)) }
        } catch (e) {
          retry = running > 1 && e instanceof ApiError && e.errorCode === 100429000 && !!e.headers?.['ratelimit-policy']?.startsWith('"stored_bytes"') && !e.headers.connection // refused before a byte was fetched
          if (!retry) return { source_url: u, ...itemError(e) }
        } finally {
          running--
          if (!retry) wake() // the last one running never waits: no item waits for nothing
        }
        await new Promise<void>((r) => waiting.push(r))
      }
    }))
    const success = items.filter((i) => 'url' in i).length
    return ok({ total: items.length, success, failed: items.length - success, items })
  })
}

export default routes
