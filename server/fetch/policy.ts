/**
 * The ONE rule for every outbound request a user names (img_url / video_url fetches, callback_url webhooks,
 * output_put_url PUTs): may this URL be contacted?
 *
 *   scheme   http or https only
 *   address  not private / reserved (./address.ts), unless the host is in LUCENT_FETCH_ALLOW. IP literals are
 *            judged here (Node and undici never call `lookup` for them), names by every address they resolve to.
 *            `localhost` and `*.localhost` are loopback (RFC 6761) without asking DNS.
 *   port     the URL's port (80 / 443 when absent) must be in LUCENT_OUTBOUND_PORTS: by default 80, 443 and
 *            1024-65535 except the well-known service ports below (databases, caches, queues, admin APIs, the
 *            Fetch standard's "bad ports"). Hosts in LUCENT_FETCH_ALLOW may use any port.
 *   DNS      names are resolved with a time limit (LUCENT_DNS_TIMEOUT_MS, default 5000) by c-ares
 *            (`dns.Resolver`), which does not use libuv's thread pool: a name whose servers never answer costs a
 *            socket and a timer, never one of the pool's 4 threads (`dns.lookup` = getaddrinfo blocks a pool
 *            thread until the system resolver gives up, and cannot be cancelled). LUCENT_DNS_SERVERS picks the
 *            servers (default: the system's, /etc/resolv.conf). c-ares reads neither /etc/hosts nor search
 *            domains: a user-named host is a public name. Hosts in LUCENT_FETCH_ALLOW (the operator's own names,
 *            e.g. a Docker service) are resolved by the system resolver (`dns.lookup`), under the same limit.
 *
 * Used at submission (`checkPublicUrl`: the URL is refused before any debit) and again on every hop and every
 * connection (`parseTarget` per hop for scheme, literal address and port; `makeLookup` inside the connection, so
 * the address checked is the address connected to: no DNS-rebinding window).
 */
import dns from 'node:dns'
import net from 'node:net'
import { isBlockedAddress } from './address.js'

export type FetchErrorReason =
  | 'invalid_url'
  | 'blocked_address'
  | 'blocked_port'
  | 'too_large'
  | 'timeout'
  | 'http_status'
  | 'network'
  | 'too_many_redirects'
  | 'unsupported_scheme'

export class FetchError extends Error {
  reason: FetchErrorReason
  status?: number
  constructor(reason: FetchErrorReason, message: string, opts: { status?: number; cause?: unknown } = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined)
    this.name = 'FetchError'
    this.reason = reason
    if (opts.status !== undefined) this.status = opts.status
  }
}

// --- ports ------------------------------------------------------------------------------------------------

/** Allowed ports: the union of `allow` ranges minus the `deny` ranges (inclusive). */
export interface PortRule { allow: ReadonlyArray<readonly [number, number]>; deny: ReadonlyArray<readonly [number, number]> }

/** Well-known service ports >= 1024 that no webhook receiver, image host or bucket uses, and that a user must not
 *  make this server talk to: the Fetch standard's bad ports (https://fetch.spec.whatwg.org/#port-blocking) and
 *  common databases, caches, queues and admin APIs. */
export const DENIED_SERVICE_PORTS = '1080,1433,1434,1521,1719,1720,1723,2049,2375,2376,2379,2380,3306,3389,3659,4045,4190,4369,5060,5061,5432,' +
  '5672,5900,5984,6000,6379,6443,6566,6665-6669,6679,6697,8500,9042,9092,9200,9300,10080,10250,10255,11211,15672,25565,27017,27018,28017'

/** The default of LUCENT_OUTBOUND_PORTS. */
export const DEFAULT_OUTBOUND_PORTS = `80,443,1024-65535,${DENIED_SERVICE_PORTS.split(',').map((p) => `!${p}`).join(',')}`

/** Parses a port list: `N`, `A-B`, `!N`, `!A-B` comma-separated; `default` stands for DEFAULT_OUTBOUND_PORTS. */
export function parsePorts(spec: string): PortRule {
  const allow: Array<[number, number]> = []
  const deny: Array<[number, number]> = []
  for (const raw of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (raw === 'default') {
      const d = parsePorts(DEFAULT_OUTBOUND_PORTS)
      allow.push(...d.allow.map(([a, b]) => [a, b] as [number, number]))
      deny.push(...d.deny.map(([a, b]) => [a, b] as [number, number]))
      continue
    }
    const neg = raw.startsWith('!')
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(neg ? raw.slice(1) : raw)
    const a = m ? Number(m[1]) : NaN
    const b = m ? Number(m[2] ?? m[1]) : NaN
    if (!m || a < 1 || b > 65535 || a > b) throw new Error(`configuration: LUCENT_OUTBOUND_PORTS: ${JSON.stringify(raw)} is not a port or a range of ports (1-65535)`)
    ;(neg ? deny : allow).push([a, b])
  }
  return { allow, deny }
}

export const DEFAULT_PORT_RULE: PortRule = parsePorts(DEFAULT_OUTBOUND_PORTS)

export function portAllowed(rule: PortRule, port: number): boolean {
  const inAny = (rs: PortRule['allow']) => rs.some(([a, b]) => port >= a && port <= b)
  return inAny(rule.allow) && !inAny(rule.deny)
}

/** The port a URL connects to. */
export const urlPort = (u: URL): number => (u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80)

// --- settings -------------------------------------------------------------------------------------------------

/** The outbound settings (server/config.ts reads them: LUCENT_OUTBOUND_PORTS, LUCENT_DNS_TIMEOUT_MS,
 *  LUCENT_DNS_SERVERS). */
export interface OutboundSettings {
  ports: PortRule
  /** Deadline of resolving one host name (all its tries, A and AAAA). */
  dnsTimeoutMs: number
  /** DNS servers (`ip` or `ip:port`); null: the system's. */
  dnsServers: string[] | null
}

export const DEFAULT_DNS_TIMEOUT_MS = 5000

/** Parses the three variables (used by server/config.ts, and as the default of callers that pass none). */
export function outboundSettings(env: NodeJS.ProcessEnv = process.env): OutboundSettings {
  const t = env.LUCENT_DNS_TIMEOUT_MS?.trim()
  const ms = t ? Number(t) : DEFAULT_DNS_TIMEOUT_MS
  if (!Number.isFinite(ms) || ms < 50) throw new Error(`configuration: LUCENT_DNS_TIMEOUT_MS must be a number >= 50 (got ${JSON.stringify(t)})`)
  const servers = (env.LUCENT_DNS_SERVERS ?? '').split(',').map((s) => s.trim()).filter(Boolean)
  const ports = env.LUCENT_OUTBOUND_PORTS?.trim()
  return { ports: ports ? parsePorts(ports) : DEFAULT_PORT_RULE, dnsTimeoutMs: ms, dnsServers: servers.length ? servers : null }
}

let envDefaults: OutboundSettings | undefined
/** The settings of this process's environment (callers that were given no settings). */
export const defaultOutbound = (): OutboundSettings => (envDefaults ??= outboundSettings(process.env))

/** What a caller passes: the allow-list (LUCENT_FETCH_ALLOW) and, optionally, the settings (default: the env's). */
export interface OutboundRules extends Partial<OutboundSettings> { allow: readonly string[] }

/** The rules compiled for one call. */
export interface Outbound extends OutboundSettings { allow: Set<string> }

export function compileRules(r: OutboundRules | readonly string[]): Outbound {
  const rules: OutboundRules = Array.isArray(r) ? { allow: r as readonly string[] } : (r as OutboundRules)
  const d = defaultOutbound()
  return {
    allow: new Set(rules.allow.map(normalizeHost)),
    ports: rules.ports ?? d.ports,
    dnsTimeoutMs: rules.dnsTimeoutMs ?? d.dnsTimeoutMs,
    dnsServers: rules.dnsServers !== undefined ? rules.dnsServers : d.dnsServers,
  }
}

// --- hosts and addresses ---------------------------------------------------------------------------------------

/** Lower-case, strip IPv6 brackets and one trailing dot; IP literals in canonical WHATWG form. */
export function normalizeHost(h: string): string {
  let s = h.trim().toLowerCase()
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1)
  if (s.endsWith('.')) s = s.slice(0, -1)
  try {
    const u = new URL(`http://${net.isIPv6(s) ? `[${s}]` : s}/`)
    let c = u.hostname
    if (c.startsWith('[') && c.endsWith(']')) c = c.slice(1, -1)
    return c
  } catch {
    return s
  }
}

/** RFC 6761: `localhost` and names under it are loopback, whatever a DNS server says. */
const isLocalhostName = (host: string) => host === 'localhost' || host.endsWith('.localhost')

/** Checks one hop's URL before connecting (sync): scheme, host, an IP-literal (or localhost) address, port.
 *  Throws FetchError. `base` resolves a relative redirect. */
export function parseTarget(raw: string, base: URL | undefined, o: Outbound): URL {
  let url: URL
  try {
    url = base ? new URL(raw, base) : new URL(raw)
  } catch (e) {
    throw new FetchError('invalid_url', `invalid URL: ${String(raw).slice(0, 200)}`, { cause: e })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new FetchError('unsupported_scheme', `unsupported scheme ${url.protocol}`)
  }
  const host = normalizeHost(url.hostname)
  if (host === '') throw new FetchError('invalid_url', 'URL has no host')
  if (o.allow.has(host)) return url // the operator's own hosts: any address, any port
  if (net.isIP(host) !== 0 && isBlockedAddress(host)) throw new FetchError('blocked_address', `address ${host} is not allowed`)
  if (isLocalhostName(host)) throw new FetchError('blocked_address', `${host} is a loopback name`)
  const port = urlPort(url)
  if (!portAllowed(o.ports, port)) throw new FetchError('blocked_port', `port ${port} is not allowed for outbound requests`)
  return url
}

export interface Resolved { address: string; family: 4 | 6 }

/** Every address of `host` (a name, not a literal), within `o.dnsTimeoutMs`. Throws FetchError: `timeout` (no
 *  answer in time), `invalid_url` (the name does not exist / has no address). Allow-listed names: the system
 *  resolver (hosts file, search domains); others: c-ares, off the thread pool. */
export async function resolveHost(host: string, o: Outbound): Promise<Resolved[]> {
  const ms = o.dnsTimeoutMs
  if (isLocalhostName(host)) return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new FetchError('timeout', `${host} did not resolve within ${ms} ms`)), ms)
  })
  if (o.allow.has(host)) {
    try {
      const r = await Promise.race([dns.promises.lookup(host, { all: true }), expired])
      return r.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }))
    } catch (e) {
      if (e instanceof FetchError) throw e
      throw new FetchError('invalid_url', `${host} does not resolve`, { cause: e })
    } finally {
      clearTimeout(timer)
    }
  }
  // One resolver per name: cancel() on it ends exactly this name's queries. Per-try timeout a third of the
  // deadline with 2 tries (c-ares doubles the second), and the deadline enforced by the timer above.
  const resolver = new dns.promises.Resolver({ timeout: Math.max(25, Math.floor(ms / 3)), tries: 2 })
  if (o.dnsServers) resolver.setServers(o.dnsServers)
  const settle = <T>(p: Promise<T>) => p.then((v) => ({ ok: true as const, v }), (e: NodeJS.ErrnoException) => ({ ok: false as const, e }))
  try {
    const [a, aaaa] = await Promise.race([Promise.all([settle(resolver.resolve4(host)), settle(resolver.resolve6(host))]), expired])
    const out: Resolved[] = [
      ...(a.ok ? a.v.map((address) => ({ address, family: 4 as const })) : []),
      ...(aaaa.ok ? aaaa.v.map((address) => ({ address, family: 6 as const })) : []),
    ]
    if (out.length > 0) return out
    const codes = [a, aaaa].map((r) => (r.ok ? 'ENODATA' : r.e.code))
    if (codes.some((c) => c === 'ETIMEOUT' || c === 'ECANCELLED' || c === 'ECONNREFUSED')) {
      throw new FetchError('timeout', `${host} did not resolve within ${ms} ms (${codes.join(', ')})`)
    }
    throw new FetchError('invalid_url', `${host} does not resolve (${codes.join(', ')})`)
  } finally {
    clearTimeout(timer)
    resolver.cancel()
  }
}

/**
 * Checks a user-named URL before it is accepted (at submission): parseTarget's checks, then every address the
 * host resolves to (all blocked -> `blocked_address`; no address -> `invalid_url`; no answer within the DNS time
 * limit -> `timeout`). The connection is checked again when it is made (DNS answers may change in between).
 */
export async function checkPublicUrl(raw: string, rules: OutboundRules | readonly string[]): Promise<URL> {
  const o = compileRules(rules)
  const url = parseTarget(raw, undefined, o)
  const host = normalizeHost(url.hostname)
  if (net.isIP(host) !== 0 || o.allow.has(host)) return url
  const addrs = await resolveHost(host, o)
  if (addrs.every((a) => isBlockedAddress(a.address))) {
    throw new FetchError('blocked_address', `${host} resolves to a blocked address (${addrs.map((a) => a.address).join(', ')})`)
  }
  return url
}

export class BlockedLookupError extends Error {
  code = 'ERR_LUCENT_BLOCKED_ADDRESS'
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void

/** The connection's own `lookup` (undici `connect.lookup`): the addresses it returns are the ones checked. */
export function makeLookup(o: Outbound) {
  return (hostname: string, options: dns.LookupOptions | number | undefined, callback: LookupCb): void => {
    const opts: dns.LookupOptions = typeof options === 'number' ? { family: options } : { ...(options ?? {}) }
    const wantAll = opts.all === true
    const host = normalizeHost(hostname)
    const literal = net.isIP(host)
    const got: Promise<Resolved[]> = literal !== 0 ? Promise.resolve([{ address: host, family: literal === 6 ? 6 : 4 }]) : resolveHost(host, o)
    got.then((addresses) => {
      const fam = opts.family === 4 || opts.family === 6 ? opts.family : 0
      const usable = fam ? addresses.filter((a) => a.family === fam) : addresses
      const ok = o.allow.has(host) ? usable : usable.filter((a) => !isBlockedAddress(a.address))
      if (ok.length === 0) {
        const list = addresses.map((a) => a.address).join(', ')
        return callback(new BlockedLookupError(`${hostname} resolves to a blocked address (${list})`), wantAll ? [] : '')
      }
      if (wantAll) callback(null, ok)
      else callback(null, ok[0]!.address, ok[0]!.family)
    }, (e: Error) => {
      // at connection time a name that does not resolve is a network failure (retried where retries are made)
      const err = e instanceof FetchError && e.reason === 'invalid_url' ? new FetchError('network', e.message, { cause: e }) : e
      callback(err as NodeJS.ErrnoException, wantAll ? [] : '')
    })
  }
}

/** The rules of a configuration (server/config.ts): LUCENT_FETCH_ALLOW and the outbound settings. */
export const outboundRules = (cfg: { fetchAllow: readonly string[]; outbound: OutboundSettings }): OutboundRules =>
  ({ allow: cfg.fetchAllow, ...cfg.outbound })
