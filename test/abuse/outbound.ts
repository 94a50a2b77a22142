/**
 * Outbound requests a user names (img_url, callback_url, output_put_url), issue 22 / 24: one rule
 * (server/fetch/policy.ts) with a port policy and a DNS time limit, at submission and on every hop/connection.
 *
 * DNS is real, over UDP on 127.0.0.1 (no external DNS here): `silentDns` is a socket that reads queries and never
 * answers (a name whose servers hang); `answeringDns` answers A records from a table (NXDOMAIN otherwise), and
 * can change its answer between two lookups (rebinding). The service is pointed at them with LUCENT_DNS_SERVERS.
 * Public IP literals on a refused port (93.184.215.14:6379) must be refused before any connection is tried.
 */
import t from 'tap'
import dgram from 'node:dgram'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { once } from 'node:events'
import { safeFetch, FetchError, type FetchPolicy } from '../../server/fetch/index.js'
import { checkPublicUrl } from '../../server/fetch/put.js'
import { safePost } from '../../server/fetch/post.js'
import { loadConfig } from '../../server/config.js'
import { build, createKey, post, png, inputServer, balance, addonBuilt } from '../helper.js'
import { newWebhookSecret } from '../../server/webhooks/signing.js'

interface T { teardown(fn: () => unknown): void }

/** A DNS server on 127.0.0.1 that never answers: counts the names asked. */
async function silentDns(t: T) {
  const sock = dgram.createSocket('udp4')
  const asked: string[] = []
  sock.on('message', (m) => asked.push(qname(m)))
  sock.bind(0, '127.0.0.1')
  await once(sock, 'listening')
  t.teardown(() => sock.close())
  return { server: `127.0.0.1:${sock.address().port}`, asked }
}

function qname(m: Buffer): string {
  const labels: string[] = []
  let i = 12
  while (i < m.length && m[i] !== 0) {
    labels.push(m.subarray(i + 1, i + 1 + m[i]!).toString('latin1'))
    i += 1 + m[i]!
  }
  return labels.join('.').toLowerCase()
}

/** A DNS server on 127.0.0.1 answering A queries from `table` (a list: one answer per lookup, the last repeats);
 *  AAAA: no data; unknown names: NXDOMAIN. */
async function answeringDns(t: T, table: Record<string, string[]>) {
  const sock = dgram.createSocket('udp4')
  const asked: string[] = []
  sock.on('message', (m, rinfo) => {
    const name = qname(m)
    asked.push(name)
    let end = 12
    while (m[end] !== 0) end += 1 + m[end]!
    const question = m.subarray(12, end + 5)
    const qtype = m.readUInt16BE(end + 1)
    const known = Object.hasOwn(table, name)
    const answers: Buffer[] = []
    if (known && qtype === 1) {
      const list = table[name]!
      const ip = list.length > 1 ? list.shift()! : list[0]!
      const rr = Buffer.alloc(16)
      rr.writeUInt16BE(0xc00c, 0) // name: the question's
      rr.writeUInt16BE(1, 2) // A
      rr.writeUInt16BE(1, 4) // IN
      rr.writeUInt32BE(0, 6) // TTL 0
      rr.writeUInt16BE(4, 10)
      ip.split('.').forEach((b, k) => rr.writeUInt8(Number(b), 12 + k))
      answers.push(rr)
    }
    const head = Buffer.alloc(12)
    head.writeUInt16BE(m.readUInt16BE(0), 0)
    head.writeUInt16BE(known ? 0x8180 : 0x8183, 2)
    head.writeUInt16BE(1, 4)
    head.writeUInt16BE(answers.length, 6)
    sock.send(Buffer.concat([head, question, ...answers]), rinfo.port, rinfo.address)
  })
  sock.bind(0, '127.0.0.1')
  await once(sock, 'listening')
  t.teardown(() => sock.close())
  return { server: `127.0.0.1:${sock.address().port}`, asked }
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return 'ok'
  } catch (e) {
    return e instanceof FetchError ? e.reason : `other: ${(e as Error)?.message ?? e}`
  }
}

/** An HTTP server on 127.0.0.1 counting connections. */
async function serve(t: T, handler: http.RequestListener) {
  const server = http.createServer(handler)
  const stats = { connections: 0 }
  server.on('connection', () => stats.connections++)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { port: (server.address() as net.AddressInfo).port, stats }
}

const PUBLIC = '93.184.215.14' // a public address: nothing in this sandbox answers there, so only a refusal is fast

const base: FetchPolicy = { allow: [], maxBytes: 1 << 20, connectTimeoutMs: 10_000, headersTimeoutMs: 5000, bodyTimeoutMs: 5000, maxRedirects: 5 }

t.test('slow DNS: a name whose server never answers is refused within the DNS time limit, off the thread pool', async (t) => {
  const dns = await silentDns(t)
  const rules = { allow: [], dnsServers: [dns.server], dnsTimeoutMs: 400 }
  // many at once: c-ares waits on sockets, so libuv's 4 pool threads stay free for files and crypto meanwhile
  const t0 = Date.now()
  const checks = Array.from({ length: 12 }, (_, i) => reason(checkPublicUrl(`https://img${i}.slow.test/a.png`, rules as never)))
  const f0 = Date.now()
  for (let i = 0; i < 8; i++) await fs.promises.readFile(new URL(import.meta.url))
  const poolMs = Date.now() - f0
  const reasons = await Promise.all(checks)
  const ms = Date.now() - t0
  t.same(new Set(reasons), new Set(['timeout']), 'every check ends as a DNS timeout')
  t.ok(ms < 2500, `all 12 refused within the limit (+ slack): ${ms} ms`)
  t.ok(poolMs < 1000, `the thread pool was free meanwhile: 8 file reads in ${poolMs} ms`)
  t.ok(dns.asked.includes('img0.slow.test'), 'the lookup went to the configured (silent) server')

  // the connection's own lookup has the same limit (a fetch, a webhook POST)
  const f1 = Date.now()
  t.equal(await reason(safeFetch('http://img.slow.test/a.png', { ...base, ...rules })), 'timeout', 'fetch')
  t.equal(await reason(safePost('http://hook.slow.test/h', '{}', {}, { ...base, ...rules, maxRedirects: 0 })), 'timeout', 'webhook POST')
  t.ok(Date.now() - f1 < 2500, `both within the limit: ${Date.now() - f1} ms`)
})

t.test('ports: refused for user-named URLs (IP literals included), any port for allow-listed hosts', async (t) => {
  for (const u of [`http://${PUBLIC}:25/`, `http://${PUBLIC}:6379/`, `https://${PUBLIC}:5432/x`, `http://${PUBLIC}:22/`, `http://${PUBLIC}:11211/`, `http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:6379/`]) {
    const f0 = Date.now()
    t.equal(await reason(checkPublicUrl(u, [])), 'blocked_port', `submission check: ${u}`)
    t.equal(await reason(safeFetch(u, base)), 'blocked_port', `fetch: ${u}`)
    t.ok(Date.now() - f0 < 1000, 'refused before any connection attempt')
  }
  for (const u of [`http://${PUBLIC}/`, `https://${PUBLIC}/`, `http://${PUBLIC}:8080/`, `https://${PUBLIC}:8443/`, `http://${PUBLIC}:40000/`]) {
    t.equal(await reason(checkPublicUrl(u, [])), 'ok', `allowed: ${u}`)
  }
  // the operator's own hosts: any port
  t.equal(await reason(checkPublicUrl('http://127.0.0.1:6379/', ['127.0.0.1'])), 'ok')
  // LUCENT_OUTBOUND_PORTS: an explicit list
  const cfg = loadConfig({ LUCENT_OUTBOUND_PORTS: '443,8000-8999,!8500' })
  t.equal(await reason(checkPublicUrl(`https://${PUBLIC}/`, { allow: [], ...cfg.outbound } as never)), 'ok')
  t.equal(await reason(checkPublicUrl(`http://${PUBLIC}/`, { allow: [], ...cfg.outbound } as never)), 'blocked_port', '80 not listed')
  t.equal(await reason(checkPublicUrl(`http://${PUBLIC}:8500/`, { allow: [], ...cfg.outbound } as never)), 'blocked_port', 'excluded')
  t.throws(() => loadConfig({ LUCENT_OUTBOUND_PORTS: '80,70000' }), /LUCENT_OUTBOUND_PORTS/)
})

t.test('redirect hops: IP literals and ports checked on every hop (undici never calls lookup for a literal)', async (t) => {
  const target = await serve(t, (_req, res) => res.end('secret'))
  const hops: Record<string, string> = {
    '/to-public-redis': `http://${PUBLIC}:6379/`,
    '/to-public-smtp': `http://${PUBLIC}:25/`,
    '/to-mapped-private': `http://[::ffff:10.0.0.1]/`,
    '/to-hex-loopback': `http://0x7f000002:${target.port}/`,
    '/to-loopback-name': `http://app.localhost:${target.port}/`,
  }
  const { port } = await serve(t, (req, res) => {
    res.writeHead(302, { location: hops[req.url ?? ''] ?? '/' })
    res.end()
  })
  const local = { ...base, allow: ['127.0.0.1'] }
  const u = (p: string) => `http://127.0.0.1:${port}${p}`
  t.equal(await reason(safeFetch(u('/to-public-redis'), local)), 'blocked_port')
  t.equal(await reason(safeFetch(u('/to-public-smtp'), local)), 'blocked_port')
  t.equal(await reason(safeFetch(u('/to-mapped-private'), local)), 'blocked_address')
  t.equal(await reason(safeFetch(u('/to-hex-loopback'), local)), 'blocked_address')
  t.equal(await reason(safeFetch(u('/to-loopback-name'), local)), 'blocked_address', '*.localhost is loopback (RFC 6761)')
  t.equal(target.stats.connections, 0, 'no hop reached the target')
})

t.test('names: private answers refused at submission and at connection (rebinding between the two)', async (t) => {
  const target = await serve(t, (_req, res) => res.end('internal'))
  const dns = await answeringDns(t, {
    'private.test': ['10.1.2.3'],
    'public.test': [PUBLIC],
    'rebind.test': [PUBLIC, '127.0.0.1'], // public when checked at submission, loopback when connected
  })
  const rules = { allow: [], dnsServers: [dns.server], dnsTimeoutMs: 2000 }
  t.equal(await reason(checkPublicUrl('http://private.test/', rules as never)), 'blocked_address')
  t.equal(await reason(checkPublicUrl('http://public.test/', rules as never)), 'ok')
  t.equal(await reason(checkPublicUrl('http://public.test:6379/', rules as never)), 'blocked_port')
  t.equal(await reason(checkPublicUrl('http://nowhere.test/', rules as never)), 'invalid_url', 'NXDOMAIN')
  t.equal(await reason(checkPublicUrl(`http://rebind.test:${target.port}/`, rules as never)), 'ok', 'submission: public')
  t.equal(await reason(safePost(`http://rebind.test:${target.port}/`, '{}', {}, { ...base, ...rules, maxRedirects: 0 })), 'blocked_address', 'connection: loopback')
  t.equal(target.stats.connections, 0)
  t.ok(dns.asked.filter((n) => n === 'rebind.test').length >= 2, 'resolved again for the connection')
})

t.test('the API: ports and slow DNS refused at submission with the API codes, nothing debited', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const dns = await silentDns(t)
  const app = await build(t, { LUCENT_DNS_SERVERS: dns.server, LUCENT_DNS_TIMEOUT_MS: '400' })
  const srv = await inputServer(t)
  const k = await createKey(app, { coins: 1000 })
  await app.lucent.store.webhooks.setKeyWebhook(k.id, { secret: newWebhookSecret() })
  const img = srv.put('a.png', png(8, 8))
  const submit = (extra: object) => post(app, '/api/photo-enhancer', k.key, { model_name: 'general_2x', img_url: img, extension: '.png', ...extra })
  const code = async (extra: object) => (await submit(extra)).json().error_code

  t.equal(await code({ callback_url: `http://${PUBLIC}:6379/hook` }), 110400020, 'callback_url on :6379')
  t.equal(await code({ callback_url: `http://${PUBLIC}:25/hook` }), 110400020, 'callback_url on :25')
  t.equal(await code({ output_put_url: `http://${PUBLIC}:6379/bucket/o.png` }), 100400001, 'output_put_url on :6379')
  t.equal(await code({ output_put_url: `https://${PUBLIC}:22/bucket/o.png` }), 100400001, 'output_put_url on :22')
  t.equal(await code({ img_url: `http://${PUBLIC}:6379/a.png` }), 100400001, 'img_url on :6379')

  const f0 = Date.now()
  t.equal(await code({ callback_url: 'http://hook.slow.test/h' }), 110400020, 'callback_url whose DNS never answers')
  t.equal(await code({ output_put_url: 'http://bucket.slow.test/o.png' }), 100400001, 'output_put_url whose DNS never answers')
  t.equal(await code({ img_url: 'http://img.slow.test/a.png' }), 100400001, 'img_url whose DNS never answers')
  t.ok(Date.now() - f0 < 6000, `three DNS time limits: ${Date.now() - f0} ms`)
  t.ok(dns.asked.includes('hook.slow.test'), 'the callback host was asked of the configured server')
  t.equal(await balance(app, k.id), 1000, 'nothing debited')

  // allowed ports pass the check (an allow-listed host: any port)
  const ok = await submit({ callback_url: `http://127.0.0.1:6379/hook` })
  t.equal(ok.statusCode, 200, ok.body)
})
