/** Media object storage (originals, results, staged uploads): local disk (local.ts) or S3 (s3.ts). */
import type { Readable } from 'node:stream'

export interface ObjectMeta { contentType: string; size: number; createdAt: number }

export interface MediaStorage {
  put(key: string, data: Buffer, contentType: string): Promise<ObjectMeta>
  /** Streams into the object; rejects (and leaves nothing) past maxBytes. */
  putStream(key: string, src: Readable, contentType: string, maxBytes: number): Promise<ObjectMeta>
  get(key: string): Promise<{ data: Buffer; meta: ObjectMeta } | null>
  stream(key: string): Promise<{ stream: Readable; meta: ObjectMeta } | null>
  /** Where uploads can bypass the service (S3: pre-signed PUTs go to the bucket): the object's real size and last
   *  change, null when there is none (server/routes/presigned.ts measures them). Absent: every byte passes the service. */
  head?(key: string): Promise<{ size: number; modifiedAt: number } | null>
  /** A local file path for the object where the backend has one (ffprobe); null otherwise. */
  localPath(key: string): string | null
  delete(key: string): Promise<void>
  /** Deletes objects under `prefix` created before `before` (ms epoch). Returns how many. */
  sweep(prefix: string, before: number): Promise<number>
  /** Signed, expiring GET link for an object (served by the service, or by the backend itself). */
  signedGetUrl(key: string, expiresAt: number): string
  /** Signed, expiring PUT link; the PUT must carry exactly `contentType`. */
  signedPutUrl(key: string, contentType: string, expiresAt: number): string
  verifyGet(key: string, expires: string, sig: string): 'ok' | 'expired' | 'bad'
  verifyPut(key: string, contentType: string, expires: string, sig: string): 'ok' | 'expired' | 'bad'
  /** If `url` is a GET link this service handed out: its key (signature checked) or 'invalid'; else null. */
  ownKey(url: string): string | 'invalid' | null
}

/** Object keys: [a-zA-Z0-9] segments with . _ - inside, joined by '/'. */
export function validKey(key: string): boolean {
  return key.length <= 300 && /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/.test(key) && !key.includes('..')
}

/** Makes a client file name safe to use as the last key segment. */
export function safeName(name: string | undefined, fallback: string): string {
  const base = (name ?? '').split(/[\\/]/).pop() ?? ''
  const s = base.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[._-]+/, '').slice(-120)
  return s && validKey(s) ? s : fallback
}
