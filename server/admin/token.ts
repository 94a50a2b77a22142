/**
 * Admin tokens: made by `lucent admin token` (shown once), configured as their sha256 only
 * (LUCENT_ADMIN_TOKEN_SHA256 = `label:hex,...`), checked in constant time against every configured hash.
 * A token is 256 random bits, so a plain sha256 cannot be searched backwards; a slow hash (scrypt) would only
 * cost CPU on every admin request. The token never works as a customer key (those are looked up in the keys
 * table by their own hash), and a customer key never matches an admin hash.
 */
import crypto from 'node:crypto'
import { ConfigError } from '../settings.js'

export interface AdminTokenHash {
  /** Who the token is in the audit trail (`admin:<label>`): the configured label, else `sha256:<first 8 hex>`. */
  label: string
  /** sha256 of the token, 32 bytes. */
  hash: Buffer
}

const LABEL = /^[A-Za-z0-9_.-]{1,40}$/
const HEX = /^[0-9a-fA-F]{64}$/

/** LUCENT_ADMIN_TOKEN_SHA256's entries (`label:hex` or `hex`); throws ConfigError naming the bad one. */
export function parseAdminTokens(entries: readonly string[]): AdminTokenHash[] {
  const out: AdminTokenHash[] = []
  for (const e of entries) {
    const i = e.lastIndexOf(':')
    const label = i < 0 ? null : e.slice(0, i)
    const hex = i < 0 ? e : e.slice(i + 1)
    if (!HEX.test(hex) || (label !== null && !LABEL.test(label))) {
      throw new ConfigError(`LUCENT_ADMIN_TOKEN_SHA256 must be a comma list of LABEL:SHA256HEX (label: letters, digits, _ . -; the hash: 64 hex digits) (got an entry ${JSON.stringify(e.slice(0, 12) + (e.length > 12 ? '...' : ''))})`)
    }
    const l = label ?? `sha256:${hex.slice(0, 8).toLowerCase()}`
    if (out.some((t) => t.label === l)) throw new ConfigError(`LUCENT_ADMIN_TOKEN_SHA256: the label ${l} is used twice`)
    out.push({ label: l, hash: Buffer.from(hex, 'hex') })
  }
  return out
}

/** A new admin token (shown once) and the setting entry to configure for it. */
export function newAdminToken(label: string): { token: string; entry: string } {
  if (!LABEL.test(label)) throw new TypeError('the label must be 1-40 letters, digits, _ . -')
  const token = `lat_${crypto.randomBytes(32).toString('base64url')}`
  return { token, entry: `${label}:${crypto.hash('sha256', token, 'hex')}` }
}

/** The label of the configured token `presented` is, or null. Every configured hash is compared (constant time,
 *  no early exit), so the time taken does not tell which one or how much matched. */
export function matchAdminToken(tokens: readonly AdminTokenHash[], presented: string): string | null {
  const h = crypto.createHash('sha256').update(presented, 'utf8').digest()
  let found: string | null = null
  for (const t of tokens) if (crypto.timingSafeEqual(t.hash, h) && found === null) found = t.label
  return found
}

/** The bearer token of an Authorization header value, or null. */
export function bearer(header: string | string[] | undefined): string | null {
  const v = Array.isArray(header) ? header[0] : header
  const m = v ? /^\s*Bearer\s+(\S+)\s*$/i.exec(v) : null
  return m ? m[1] : null
}
