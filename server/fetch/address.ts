// IP address classification for the SSRF guard.
//
// Everything that is not a globally routable unicast address is "blocked". Addresses are parsed by hand into
// bytes (IPv4: 4, IPv6: 16) so that every textual form Node or the resolver may hand us is judged by its value,
// and IPv6 forms that embed an IPv4 address (mapped, compatible, SIIT, NAT64, 6to4, Teredo) are judged by the
// embedded IPv4 address as well.

/** Parses dotted-quad IPv4 (strict: four decimal parts 0..255, no leading zeros beyond "0"). */
export function parseIPv4(s: string): Uint8Array | null {
  const parts = s.split('.')
  if (parts.length !== 4) return null
  const out = new Uint8Array(4)
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return null
    const v = Number(p)
    if (v > 255) return null
    out[i] = v
  }
  return out
}

/** Parses an IPv6 address (optionally bracketed, optional %zone, optional trailing dotted IPv4). */
export function parseIPv6(input: string): Uint8Array | null {
  let s = input
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1)
  const pct = s.indexOf('%')
  if (pct >= 0) s = s.slice(0, pct)
  if (s.length === 0 || s.length > 45) return null
  const words: number[] = []
  let tailV4: Uint8Array | null = null
  const lastColon = s.lastIndexOf(':')
  if (lastColon >= 0 && s.indexOf('.', lastColon) >= 0) {
    tailV4 = parseIPv4(s.slice(lastColon + 1))
    if (!tailV4) return null
    s = s.slice(0, lastColon + 1)
    // "::1.2.3.4" -> "::" ; "::ffff:1.2.3.4" -> "::ffff:" ; keep a trailing "::" intact
    if (s.endsWith(':') && !s.endsWith('::')) s = s.slice(0, -1)
  }
  const dbl = s.indexOf('::')
  if (dbl >= 0 && s.indexOf('::', dbl + 1) >= 0) return null
  const parseGroup = (g: string): number | null => (/^[0-9a-fA-F]{1,4}$/.test(g) ? parseInt(g, 16) : null)
  const want = tailV4 ? 6 : 8
  if (dbl >= 0) {
    const head = s.slice(0, dbl)
    const tail = s.slice(dbl + 2)
    const hs = head === '' ? [] : head.split(':')
    const ts = tail === '' ? [] : tail.split(':')
    if (hs.length + ts.length > want - 1) return null
    for (const g of hs) {
      const v = parseGroup(g)
      if (v === null) return null
      words.push(v)
    }
    for (let i = hs.length + ts.length; i < want; i++) words.push(0)
    for (const g of ts) {
      const v = parseGroup(g)
      if (v === null) return null
      words.push(v)
    }
  } else {
    const gs = s.split(':')
    if (gs.length !== want) return null
    for (const g of gs) {
      const v = parseGroup(g)
      if (v === null) return null
      words.push(v)
    }
  }
  const out = new Uint8Array(16)
  for (let i = 0; i < want; i++) {
    out[i * 2] = words[i]! >> 8
    out[i * 2 + 1] = words[i]! & 0xff
  }
  if (tailV4) out.set(tailV4, 12)
  return out
}

function inPrefix(addr: Uint8Array, prefix: readonly number[], bits: number): boolean {
  let i = 0
  for (; bits >= 8; bits -= 8, i++) if (addr[i] !== prefix[i]) return false
  if (bits > 0) {
    const mask = (0xff << (8 - bits)) & 0xff
    if ((addr[i]! & mask) !== ((prefix[i] ?? 0) & mask)) return false
  }
  return true
}

// [prefix bytes, prefix length]
const V4_BLOCKED: ReadonlyArray<readonly [readonly number[], number]> = [
  [[0], 8], // "this network", incl. 0.0.0.0
  [[10], 8], // private
  [[100, 64], 10], // CGNAT shared address space
  [[127], 8], // loopback
  [[169, 254], 16], // link-local, incl. cloud metadata 169.254.169.254
  [[172, 16], 12], // private
  [[192, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2], 24], // TEST-NET-1
  [[192, 88, 99], 24], // deprecated 6to4 relay anycast
  [[192, 168], 16], // private
  [[198, 18], 15], // benchmarking
  [[198, 51, 100], 24], // TEST-NET-2
  [[203, 0, 113], 24], // TEST-NET-3
  [[224], 4], // multicast
  [[240], 4], // reserved, incl. broadcast 255.255.255.255
]

export function isBlockedIPv4(a: Uint8Array): boolean {
  for (const [p, bits] of V4_BLOCKED) if (inPrefix(a, p, bits)) return true
  return false
}

const V6_BLOCKED: ReadonlyArray<readonly [readonly number[], number]> = [
  [[0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48], // local-use NAT64 (RFC 8215)
  [[0x01, 0x00, 0, 0, 0, 0, 0, 0], 64], // discard-only
  [[0x20, 0x01, 0x0d, 0xb8], 32], // documentation
  [[0x20, 0x01, 0x00, 0x10], 28], // ORCHID (deprecated)
  [[0x20, 0x01, 0x00, 0x20], 28], // ORCHIDv2
  [[0xfc], 7], // unique local
  [[0xfe, 0x80], 10], // link-local
  [[0xfe, 0xc0], 10], // site-local (deprecated)
  [[0xff], 8], // multicast
]

export function isBlockedIPv6(a: Uint8Array): boolean {
  // The first 80 bits zero: ::, ::1, IPv4-compatible ::a.b.c.d, IPv4-mapped ::ffff:a.b.c.d, SIIT ::ffff:0:a.b.c.d
  if (a.subarray(0, 10).every((b) => b === 0)) {
    if (a[10] === 0xff && a[11] === 0xff) return isBlockedIPv4(a.subarray(12, 16))
    // ::, ::1, IPv4-compatible ::a.b.c.d and the rest of ::/80: nothing legitimate lives here
    return true
  }
  // SIIT ::ffff:0:a.b.c.d
  if (a.subarray(0, 8).every((b) => b === 0) && a[8] === 0xff && a[9] === 0xff && a[10] === 0 && a[11] === 0) {
    return isBlockedIPv4(a.subarray(12, 16))
  }
  // NAT64 well-known prefix 64:ff9b::/96
  if (inPrefix(a, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96)) return isBlockedIPv4(a.subarray(12, 16))
  // 6to4 2002:V4ADDR::/48
  if (a[0] === 0x20 && a[1] === 0x02) return isBlockedIPv4(a.subarray(2, 6))
  // Teredo 2001:0::/32: the client's IPv4 address is the bitwise NOT of the last 32 bits; the server at bits 32..63
  if (a[0] === 0x20 && a[1] === 0x01 && a[2] === 0 && a[3] === 0) {
    const client = a.subarray(12, 16).map((b) => ~b & 0xff)
    return isBlockedIPv4(client) || isBlockedIPv4(a.subarray(4, 8))
  }
  for (const [p, bits] of V6_BLOCKED) if (inPrefix(a, p, bits)) return true
  // Anything outside global unicast 2000::/3 is unassigned or special.
  if ((a[0]! & 0xe0) !== 0x20) return true
  return false
}

/**
 * True when `ip` must not be fetched from: loopback, private, link-local, multicast, unspecified, CGNAT,
 * broadcast/reserved, documentation, IPv6 forms embedding such an IPv4 address. Anything that is not a valid
 * IP address literal is also reported as blocked (fail closed).
 */
export function isBlockedAddress(ip: string): boolean {
  const s = ip.trim()
  const v4 = parseIPv4(s)
  if (v4) return isBlockedIPv4(v4)
  const v6 = parseIPv6(s)
  if (v6) return isBlockedIPv6(v6)
  return true
}
