/**
 * MediaStorage on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, moto, ...).
 * - Objects: PutObject / GetObject / DeleteObject / ListObjectsV2 through @aws-sdk/client-s3.
 * - Links: S3 pre-signed URLs (AWS Signature V4, query-string form). `signedGetUrl` / `signedPutUrl` are
 *   synchronous in the MediaStorage interface, so the V4 query signature is computed here (same algorithm as
 *   @aws-sdk/s3-request-presigner; test/storage/s3.ts checks both produce the same signature). A PUT link signs
 *   `content-type`: S3 answers 403 to a PUT with any other type, and to an expired link.
 * - `ownKey` recognises links to this bucket and checks their signature and expiry, so an `access_url` from
 *   presign-put can be passed as img_url / video_url and is read from the bucket directly.
 * - The service serves no /files or /upload links in this mode (verifyGet/verifyPut always answer 'bad'): a pre-signed
 *   PUT's bytes are measured afterwards with `head` (server/routes/presigned.ts).
 * - Served types (issue 22): objects are written with fileHeaders()' canonical type and disposition, and GET links
 *   carry them as response-content-type / response-content-disposition (S3 then answers those, whatever the
 *   object holds); S3 sets no CSP or nosniff, but its links are on the bucket's origin, never the gateway's.
 * Expiry of pre-signed links is capped at 7 days (the S3 maximum).
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import {
  S3Client, PutObjectCommand, GetObjectCommand, DeleteObjectCommand, ListObjectsV2Command, HeadBucketCommand, CreateBucketCommand,
  DeleteObjectsCommand, HeadObjectCommand,
} from '@aws-sdk/client-s3'
import { validKey, type MediaStorage, type ObjectMeta } from './types.js'
import { spoolToFile } from './local.js'
import { fileHeaders } from '../media/formats.js'

export interface S3Config {
  endpoint: string
  bucket: string
  region: string
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
  forcePathStyle: boolean
  /** Base URL clients use to reach the S3 endpoint (default: endpoint). */
  publicEndpoint?: string
}

const MAX_EXPIRES = 7 * 24 * 3600
const ALGO = 'AWS4-HMAC-SHA256'

/** RFC 3986 encoding as SigV4 wants it (unreserved A-Z a-z 0-9 - . _ ~ kept; '/' kept when `slash`). */
export function uriEncode(s: string, slash = false): string {
  let out = ''
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b)
    if (/[A-Za-z0-9\-._~]/.test(c) || (slash && c === '/')) out += c
    else out += '%' + b.toString(16).toUpperCase().padStart(2, '0')
  }
  return out
}

const sha256hex = (s: string) => crypto.createHash('sha256').update(s).digest('hex')
const hmac = (k: Buffer | string, s: string) => crypto.createHmac('sha256', k).update(s).digest()

export function amzDate(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')
}

export interface PresignInput {
  method: 'GET' | 'PUT'
  url: URL            // scheme + host (+ port) + path of the object, no query
  region: string
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
  date: string        // X-Amz-Date, YYYYMMDDTHHMMSSZ
  expires: number     // seconds
  headers?: Record<string, string> // extra signed headers (lower-case names), e.g. content-type
  extraQuery?: Array<[string, string]> // further (unsigned-header) query parameters covered by the signature
}

/** The query parameters (with X-Amz-Signature) of a SigV4 pre-signed S3 request. */
export function presignQuery(p: PresignInput): Array<[string, string]> {
  const day = p.date.slice(0, 8)
  const scope = `${day}/${p.region}/s3/aws4_request`
  const headers: Record<string, string> = { host: p.url.host, ...(p.headers ?? {}) }
  const names = Object.keys(headers).map((h) => h.toLowerCase()).sort()
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v.trim().replace(/\s+/g, ' ')]))
  const q: Array<[string, string]> = [
    ['X-Amz-Algorithm', ALGO],
    ['X-Amz-Content-Sha256', 'UNSIGNED-PAYLOAD'],
    ['X-Amz-Credential', `${p.accessKeyId}/${scope}`],
    ['X-Amz-Date', p.date],
    ['X-Amz-Expires', String(p.expires)],
  ]
  if (p.sessionToken) q.push(['X-Amz-Security-Token', p.sessionToken])
  q.push(['X-Amz-SignedHeaders', names.join(';')])
  const canonicalQuery = [...q, ...(p.extraQuery ?? [])].map(([k, v]) => [uriEncode(k), uriEncode(v)]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`).join('&')
  const canonicalRequest = [
    p.method,
    uriEncode(decodeURIComponent(p.url.pathname), true),
    canonicalQuery,
    names.map((n) => `${n}:${lower[n]}\n`).join(''),
    names.join(';'),
    'UNSIGNED-PAYLOAD',
  ].join('\n')
  const toSign = [ALGO, p.date, scope, sha256hex(canonicalRequest)].join('\n')
  const kDate = hmac(`AWS4${p.secretAccessKey}`, day)
  const kSigning = hmac(hmac(hmac(kDate, p.region), 's3'), 'aws4_request')
  q.push(...(p.extraQuery ?? []))
  q.push(['X-Amz-Signature', crypto.createHmac('sha256', kSigning).update(toSign).digest('hex')])
  return q
}

export class S3Storage implements MediaStorage {
  readonly client: S3Client
  private readonly cfg: S3Config
  private readonly pub: URL

  constructor(cfg: S3Config) {
    this.cfg = cfg
    this.pub = new URL(cfg.publicEndpoint || cfg.endpoint)
    this.client = new S3Client({
      endpoint: cfg.endpoint,
      region: cfg.region,
      forcePathStyle: cfg.forcePathStyle,
      credentials: { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey, sessionToken: cfg.sessionToken },
      // S3-compatible servers differ in their support for the newer default checksums: only when required.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    })
  }

  /** Checks the bucket is reachable; creates it when `create` and it is missing. */
  async ensureBucket(create = false): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.cfg.bucket }))
    } catch (e) {
      if (!create || httpStatus(e) !== 404) throw e
      await this.client.send(new CreateBucketCommand({ Bucket: this.cfg.bucket }))
    }
  }

  /** Readiness probe: the bucket answers. */
  async ping(): Promise<boolean> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.cfg.bucket }))
      return true
    } catch {
      return false
    }
  }

  private check(key: string): string {
    if (!validKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return key
  }

  async put(key: string, data: Buffer, contentType: string): Promise<ObjectMeta> {
    const createdAt = Date.now()
    const h = fileHeaders(this.check(key), contentType)
    await this.client.send(new PutObjectCommand({
      Bucket: this.cfg.bucket, Key: key, Body: data, ContentType: h['content-type'], ContentDisposition: h['content-disposition'],
      ContentLength: data.length, Metadata: { 'created-at': String(createdAt) },
    }))
    return { contentType: h['content-type'], size: data.length, createdAt }
  }

  async putStream(key: string, src: Readable, contentType: string, maxBytes: number): Promise<ObjectMeta> {
    this.check(key)
    // Spool to a temp file (bounded by maxBytes), then one PutObject with a known length.
    const tmp = path.join(os.tmpdir(), `lucent-s3-${process.pid}-${crypto.randomBytes(6).toString('hex')}`)
    try {
      const size = await spoolToFile(src, tmp, maxBytes)
      const createdAt = Date.now()
      const h = fileHeaders(key, contentType)
      await this.client.send(new PutObjectCommand({
        Bucket: this.cfg.bucket, Key: key, Body: fs.createReadStream(tmp), ContentType: h['content-type'],
        ContentDisposition: h['content-disposition'], ContentLength: size, Metadata: { 'created-at': String(createdAt) },
      }))
      return { contentType: h['content-type'], size, createdAt }
    } finally {
      await fsp.rm(tmp, { force: true })
    }
  }

  private async getObject(key: string) {
    if (!validKey(key)) return null
    try {
      return await this.client.send(new GetObjectCommand({ Bucket: this.cfg.bucket, Key: key }))
    } catch (e) {
      if (httpStatus(e) === 404 || (e as { name?: string }).name === 'NoSuchKey') return null
      throw e
    }
  }

  private meta(o: { ContentType?: string; ContentLength?: number; LastModified?: Date; Metadata?: Record<string, string> }): ObjectMeta {
    const created = Number(o.Metadata?.['created-at'])
    return {
      contentType: o.ContentType ?? 'application/octet-stream',
      size: o.ContentLength ?? 0,
      createdAt: Number.isFinite(created) && created > 0 ? created : (o.LastModified?.getTime() ?? 0),
    }
  }

  async get(key: string) {
    const o = await this.getObject(key)
    if (!o || !o.Body) return null
    const data = Buffer.from(await o.Body.transformToByteArray())
    return { data, meta: { ...this.meta(o), size: data.length } }
  }

  async stream(key: string) {
    const o = await this.getObject(key)
    if (!o || !o.Body) return null
    return { stream: o.Body as Readable, meta: this.meta(o) }
  }

  /** The object's real size and last change (HeadObject): pre-signed PUTs go to the bucket, never through the
   *  gateway, so their bytes are measured here (server/routes/presigned.ts). null: no such object. */
  async head(key: string): Promise<{ size: number; modifiedAt: number } | null> {
    if (!validKey(key)) return null
    try {
      const o = await this.client.send(new HeadObjectCommand({ Bucket: this.cfg.bucket, Key: key }))
      return { size: o.ContentLength ?? 0, modifiedAt: o.LastModified?.getTime() ?? Date.now() }
    } catch (e) {
      if (httpStatus(e) === 404 || (e as { name?: string }).name === 'NotFound' || (e as { name?: string }).name === 'NoSuchKey') return null
      throw e
    }
  }

  localPath(_key: string): string | null {
    return null
  }

  async delete(key: string) {
    if (!validKey(key)) return
    await this.client.send(new DeleteObjectCommand({ Bucket: this.cfg.bucket, Key: key }))
  }

  /** Deletes objects under `prefix` last modified before `before`. (A bucket lifecycle rule does this better.) */
  async sweep(prefix: string, before: number): Promise<number> {
    let n = 0
    let token: string | undefined
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.cfg.bucket, Prefix: prefix.replace(/\/?$/, '/'), ContinuationToken: token }))
      const old = (page.Contents ?? []).filter((o) => o.Key && o.LastModified && o.LastModified.getTime() < before)
      if (old.length) {
        await this.client.send(new DeleteObjectsCommand({ Bucket: this.cfg.bucket, Delete: { Objects: old.map((o) => ({ Key: o.Key! })), Quiet: true } }))
        n += old.length
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
    return n
  }

  /** The object's URL (no query) as clients reach it. */
  objectUrl(key: string): URL {
    const u = new URL(this.pub.href)
    const base = u.pathname.replace(/\/+$/, '')
    if (this.cfg.forcePathStyle) {
      u.pathname = `${base}/${this.cfg.bucket}/${uriEncode(key, true)}`
    } else {
      u.hostname = `${this.cfg.bucket}.${u.hostname}`
      u.pathname = `${base}/${uriEncode(key, true)}`
    }
    return u
  }

  private presign(method: 'GET' | 'PUT', key: string, expiresAt: number, headers?: Record<string, string>, extraQuery?: Array<[string, string]>, now = Date.now()): string {
    const url = this.objectUrl(this.check(key))
    const expires = Math.max(1, Math.min(MAX_EXPIRES, Math.ceil((expiresAt - now) / 1000)))
    const q = presignQuery({
      method, url, region: this.cfg.region, accessKeyId: this.cfg.accessKeyId, secretAccessKey: this.cfg.secretAccessKey,
      sessionToken: this.cfg.sessionToken, date: amzDate(now), expires, headers, extraQuery,
    })
    return `${url.href}?${q.map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).join('&')}`
  }

  /** The link makes S3 answer the canonical type and disposition of the key (fileHeaders), whatever the object holds. */
  signedGetUrl(key: string, expiresAt: number): string {
    const h = fileHeaders(this.check(key))
    return this.presign('GET', key, expiresAt, undefined, [['response-content-disposition', h['content-disposition']], ['response-content-type', h['content-type']]])
  }

  signedPutUrl(key: string, contentType: string, expiresAt: number): string {
    return this.presign('PUT', key, expiresAt, { 'content-type': contentType })
  }

  verifyGet(): 'bad' { return 'bad' }
  verifyPut(): 'bad' { return 'bad' }

  ownKey(url: string): string | 'invalid' | null {
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return null
    }
    const prefix = this.objectUrl('x')
    const base = prefix.pathname.slice(0, -1) // path up to the key
    if (u.protocol !== prefix.protocol || u.host !== prefix.host || !u.pathname.startsWith(base)) return null
    let key: string
    try {
      key = decodeURIComponent(u.pathname.slice(base.length))
    } catch {
      return 'invalid'
    }
    const qp = u.searchParams
    const date = qp.get('X-Amz-Date') ?? ''
    const expires = Number(qp.get('X-Amz-Expires'))
    const sig = qp.get('X-Amz-Signature') ?? ''
    if (!validKey(key) || !/^\d{8}T\d{6}Z$/.test(date) || !Number.isInteger(expires) || expires < 1 || expires > MAX_EXPIRES) return 'invalid'
    if (qp.get('X-Amz-Algorithm') !== ALGO || qp.get('X-Amz-SignedHeaders') !== 'host'
      || qp.get('X-Amz-Credential') !== `${this.cfg.accessKeyId}/${date.slice(0, 8)}/${this.cfg.region}/s3/aws4_request`) return 'invalid'
    const signedAt = Date.parse(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`)
    if (!(signedAt + expires * 1000 >= Date.now())) return 'invalid'
    // Recompute over every query parameter the link carries (other signers add some, e.g. x-id=GetObject).
    const mine = new Set(['X-Amz-Algorithm', 'X-Amz-Content-Sha256', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-Security-Token', 'X-Amz-SignedHeaders', 'X-Amz-Signature'])
    if (qp.get('X-Amz-Content-Sha256') !== null && qp.get('X-Amz-Content-Sha256') !== 'UNSIGNED-PAYLOAD') return 'invalid'
    if ((qp.get('X-Amz-Security-Token') ?? undefined) !== this.cfg.sessionToken) return 'invalid'
    const extraQuery = [...qp.entries()].filter(([k]) => !mine.has(k))
    const q = presignQuery({
      method: 'GET', url: this.objectUrl(key), region: this.cfg.region, accessKeyId: this.cfg.accessKeyId, secretAccessKey: this.cfg.secretAccessKey,
      sessionToken: this.cfg.sessionToken, date, expires, extraQuery,
    })
    const want = Buffer.from(q[q.length - 1][1])
    const got = Buffer.from(sig)
    return want.length === got.length && crypto.timingSafeEqual(want, got) ? key : 'invalid'
  }

  async close(): Promise<void> {
    this.client.destroy()
  }
}

function httpStatus(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode
}
