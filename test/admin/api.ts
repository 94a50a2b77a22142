/**
 * The admin API (server/admin/, issue 29 "keys and coins over an admin API"): who may reach it (only the admin
 * token: never a customer key, never without a token, not on the public port when it has its own listener), every
 * operation, the audit row of each change (none for reads, none for refused ones), coins never below 0 (also under
 * parallel adjustments), a disabled key refused at once by the customer API. On today's main there is no admin API
 * at all: every request here gets the unknown-route answer, so each test fails there.
 * The CLI sharing this code path: test/admin/cli.ts; the audit store on PostgreSQL: test/admin/store.ts.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, createKey, balance } from '../helper.js'
import { newAdminToken } from '../../server/admin/token.js'
import { requireServices, freshDatabase } from '../scaleout/services.js'

const ops = newAdminToken('ops')
const other = newAdminToken('other')
const ENV = { LUCENT_ADMIN_TOKEN_SHA256: `${ops.entry},${other.entry}`, LUCENT_KEY_CACHE_MS: '60000' }
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const A = bearer(ops.token)

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT'
const call = (app: FastifyInstance, method: Method, url: string, headers: Record<string, string>, payload?: object) =>
  app.inject({ method, url, headers, ...(payload ? { payload } : {}) })

const auditCount = async (app: FastifyInstance) => (await app.lucent.store.audit.list({ limit: 10_000 })).length

/** Every admin route with a valid body (for the authorization matrix). */
const routes = (id: string): Array<[Method, string, object?]> => [
  ['GET', '/admin/v1/keys'],
  ['POST', '/admin/v1/keys', { coins: 5 }],
  ['GET', `/admin/v1/keys/${id}`],
  ['PATCH', `/admin/v1/keys/${id}`, { disabled: true }],
  ['POST', `/admin/v1/keys/${id}/coins`, { delta: 10, reason: 'x' }],
  ['GET', `/admin/v1/keys/${id}/ledger`],
  ['GET', `/admin/v1/keys/${id}/usage`],
  ['GET', `/admin/v1/keys/${id}/quotas`],
  ['PUT', `/admin/v1/keys/${id}/quotas`, { max_jobs_in_flight: 1 }],
  ['GET', '/admin/v1/audit'],
]

t.test('only the admin token reaches the admin API; a customer key never does', async (t) => {
  const app = await build(t, ENV)
  const cust = await createKey(app, { coins: 100 })
  for (const [method, url, body] of routes(cust.id)) {
    const none = await call(app, method, url, {}, body)
    t.equal(none.statusCode, 401, `${method} ${url}: no token -> 401`)
    t.equal(none.json().error_code, 100400000)
    t.match(none.headers['www-authenticate'], /^Bearer/)
    const asKey = await call(app, method, url, { apikey: cust.key }, body)
    t.equal(asKey.statusCode, 401, `${method} ${url}: a valid customer Apikey -> 401`)
    const keyAsBearer = await call(app, method, url, bearer(cust.key), body)
    t.equal(keyAsBearer.statusCode, 403, `${method} ${url}: a customer key as the bearer token -> 403`)
    t.equal(keyAsBearer.json().error_code, 100403001)
    const wrong = await call(app, method, url, { ...bearer(`${ops.token.slice(0, -1)}${ops.token.endsWith('A') ? 'B' : 'A'}`), apikey: cust.key }, body)
    t.equal(wrong.statusCode, 403, `${method} ${url}: a wrong token (one character off) -> 403`)
    t.equal(wrong.json().error_code, 100403001)
  }
  t.equal(await auditCount(app), 0, 'nothing refused wrote an audit row')
  t.equal(await balance(app, cust.id), 100, 'nor changed the coins')
  t.notOk((await app.lucent.store.findKey(cust.id))!.revoked, 'nor disabled the key')

  // the right tokens (both configured ones) work, and say who acted
  const ok = await call(app, 'GET', '/admin/v1/keys', A)
  t.equal(ok.statusCode, 200)
  t.ok(ok.json().data.keys.some((k: { id: string }) => k.id === cust.id))
  await call(app, 'POST', `/admin/v1/keys/${cust.id}/coins`, bearer(other.token), { delta: 1, reason: 'second token' })
  t.equal((await app.lucent.store.audit.list({ limit: 1 }))[0].actor, 'admin:other')

  // the admin token is no customer key
  const acct = await app.inject({ method: 'GET', url: '/api/account', headers: { apikey: ops.token } })
  t.equal(acct.json().error_code, 110400000, 'the admin token as an Apikey is refused by the customer API')
})

t.test('the admin routes are not in the public OpenAPI document', async (t) => {
  const app = await build(t, ENV)
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.ok(Object.keys(doc.paths).some((p) => p.startsWith('/api/')), 'the document lists the API')
  t.notOk(Object.keys(doc.paths).some((p) => p.startsWith('/admin')), 'but no admin route')
})

t.test('the admin API on PostgreSQL', async (t) => {
  const env = await requireServices(t)
  if ('skip' in env) return t.plan(0, env.skip)
  const app = await build(t, { ...ENV, LUCENT_DATABASE_URL: await freshDatabase(t, env.LUCENT_DATABASE_URL) })
  const c = (await call(app, 'POST', '/admin/v1/keys', A, { coins: 20, reason: 'pg sale' })).json().data
  const id: string = c.key.id
  t.equal((await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, { delta: -21, reason: 'x' })).statusCode, 403, 'never below 0')
  t.match((await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, { delta: -5, reason: 'fix' })).json().data, { key: { coins: 15 }, ledger: { kind: 'adjust', reason: 'fix' } })
  t.equal((await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, { disabled: true })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/api/account', headers: { apikey: c.api_key } })).json().error_code, 110400000, 'disabled: refused')
  t.match((await call(app, 'PUT', `/admin/v1/keys/${id}/quotas`, A, { max_stored_files: 3 })).json().data, { quotas: { max_stored_files: 3 } })
  t.match((await call(app, 'GET', `/admin/v1/audit?key_id=${id}`, A)).json().data.audit.map((a: { action: string }) => a.action),
    ['quotas.set', 'key.update', 'coins.adjust', 'key.create'])
})

t.test('no admin token configured: no admin API (the unknown-route answer)', async (t) => {
  const app = await build(t)
  const unknown = await app.inject({ method: 'GET', url: '/no/such/route' })
  const r = await call(app, 'GET', '/admin/v1/keys', A)
  t.equal(r.statusCode, unknown.statusCode)
  t.same(r.json(), unknown.json())
})

t.test('every operation, its audit row, none for reads', async (t) => {
  const app = await build(t, ENV)
  const rid = 'req-42.a:b'
  // create
  const c = await call(app, 'POST', '/admin/v1/keys', { ...A, 'x-request-id': rid }, { coins: 100, trial: 2, rate: 3, expires_at: '2099-01-01T00:00:00Z', reason: 'sold 100 coins' })
  t.equal(c.statusCode, 201)
  t.equal(c.headers['x-request-id'], rid)
  const d = c.json().data
  t.match(d.api_key, /^lk_/)
  t.match(d.webhook_secret, /^whsec_/)
  t.match(d.key, { coins: 100, trial: { total: 2, left: 2 }, rate: 3, disabled: false, expires_at: '2099-01-01T00:00:00.000Z' })
  const id: string = d.key.id
  const [created] = await app.lucent.store.audit.list({ limit: 1 })
  t.match(created, { id: d.audit_id, actor: 'admin:ops', action: 'key.create', keyId: id, before: null, after: { coins: 100, revoked: false }, delta: 100, reason: 'sold 100 coins', requestId: rid })
  t.notMatch(JSON.stringify(created), d.api_key, 'the audit row never holds the key')
  t.notMatch(JSON.stringify(await app.lucent.store.audit.list({ limit: 100 })), (await app.lucent.store.findKey(id))!.hash, 'nor its hash')
  // the new key works on the customer API
  const account = () => app.inject({ method: 'GET', url: '/api/account', headers: { apikey: d.api_key } })
  t.equal((await account()).json().data.balance, 100)

  // reads write nothing
  let n = await auditCount(app)
  for (const url of ['/admin/v1/keys', `/admin/v1/keys/${id}`, `/admin/v1/keys/${id}/ledger`, `/admin/v1/keys/${id}/usage`, `/admin/v1/keys/${id}/quotas`, '/admin/v1/audit']) {
    t.equal((await call(app, 'GET', url, A)).statusCode, 200, url)
  }
  t.equal(await auditCount(app), n, 'no audit row for reads')

  // coins: topup, adjust down, refused below 0
  const up = await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, { delta: 50, reason: 'invoice 7' })
  t.equal(up.statusCode, 200)
  t.match(up.json().data, { key: { coins: 150 }, ledger: { kind: 'topup', delta: 50, balance_after: 150, reason: 'invoice 7' } })
  const down = await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, { delta: -30, reason: 'chargeback' })
  t.match(down.json().data, { key: { coins: 120 }, ledger: { kind: 'adjust', delta: -30, balance_after: 120, reason: 'chargeback' } })
  const audits = await app.lucent.store.audit.list({ keyId: id, limit: 2 })
  t.match(audits[0], { action: 'coins.adjust', delta: -30, before: { coins: 150 }, after: { coins: 120 }, reason: 'chargeback', actor: 'admin:ops' })
  t.match(audits[1], { action: 'coins.topup', delta: 50, before: { coins: 100 }, after: { coins: 150 }, reason: 'invoice 7' })
  n = await auditCount(app)
  const ledgerBefore = (await app.lucent.store.ledger(id)).length
  const neg = await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, { delta: -121, reason: 'too much' })
  t.equal(neg.statusCode, 403)
  t.equal(neg.json().error_code, 100403000)
  t.match(neg.json().detail, /below 0.*120/)
  for (const [body, why] of [
    [{ delta: 5, reason: '' }, 'an empty reason'],
    [{ delta: 5 }, 'no reason'],
    [{ delta: 0, reason: 'x' }, 'a zero delta'],
    [{ delta: -5, kind: 'topup', reason: 'x' }, 'a negative topup'],
    [{ delta: 1.5, reason: 'x' }, 'a fraction'],
    [{ delta: 2 ** 60, reason: 'x' }, 'an unsafe integer'],
    [{ delta: 5, reason: 'x', kind: 'grant' }, 'another ledger kind'],
  ] as const) {
    const r = await call(app, 'POST', `/admin/v1/keys/${id}/coins`, A, body)
    t.equal(r.statusCode, 403, why)
    t.equal(r.json().error_code, 100403000, why)
  }
  t.equal(await balance(app, id), 120, 'refused adjustments changed nothing')
  t.equal((await app.lucent.store.ledger(id)).length, ledgerBefore, 'no ledger row for them')
  t.equal(await auditCount(app), n, 'no audit row for them')

  // the ledger: newest first, reasons, pages
  const led = (await call(app, 'GET', `/admin/v1/keys/${id}/ledger?limit=2`, A)).json().data.ledger
  t.match(led, [{ kind: 'adjust', reason: 'chargeback' }, { kind: 'topup', reason: 'invoice 7' }])
  const next = (await call(app, 'GET', `/admin/v1/keys/${id}/ledger?before_id=${led[1].id}`, A)).json().data.ledger
  t.match(next, [{ kind: 'grant', delta: 100 }])

  // disable: refused by the customer API at once (the key cache is long here); again: no change, no row; enable
  t.equal((await account()).statusCode, 200)
  const dis = await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, { disabled: true, reason: 'abuse report 3' })
  t.equal(dis.statusCode, 200)
  t.equal(dis.json().data.key.disabled, true)
  t.equal((await account()).json().error_code, 110400000, 'a disabled key is refused')
  const [disRow] = await app.lucent.store.audit.list({ keyId: id, limit: 1 })
  t.match(disRow, { action: 'key.update', before: { revoked: false }, after: { revoked: true }, reason: 'abuse report 3' })
  n = await auditCount(app)
  t.same((await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, { disabled: true })).json().data.audit_ids, [])
  t.equal(await auditCount(app), n, 'disabling a disabled key writes no row')
  await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, { disabled: false })
  t.equal((await account()).statusCode, 200, 'enabled again')
  // rate, expiry, webhook
  const p = await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, { rate: null, expires_at: null, webhook_url: '', new_webhook_secret: true })
  t.equal(p.statusCode, 200)
  t.match(p.json().data, { key: { rate: null, expires_at: null }, webhook_secret: /^whsec_/ })
  t.equal(p.json().data.audit_ids.length, 2, 'the key change and the webhook change')
  const [hookRow] = await app.lucent.store.audit.list({ keyId: id, limit: 1 })
  t.match(hookRow, { action: 'webhook.update', after: { secret: 'new' } })
  t.notMatch(JSON.stringify(hookRow), p.json().data.webhook_secret, 'the audit row never holds the secret')
  for (const [body, why] of [[{}, 'nothing'], [{ disabled: 'yes' }, 'a string'], [{ rate: -1 }, 'a negative rate'], [{ expires_at: 'soon' }, 'not a date'],
    [{ coins: 5 }, 'coins are not patched'], [{ webhook_url: 'http://10.0.0.1/x' }, 'a private webhook']] as const) {
    const r = await call(app, 'PATCH', `/admin/v1/keys/${id}`, A, body)
    t.equal(r.statusCode, 403, why)
    t.equal(r.json().error_code, 100403000, why)
  }

  // quotas (store.quotas), their audit row, usage
  const q = await call(app, 'PUT', `/admin/v1/keys/${id}/quotas`, A, { max_jobs_in_flight: 2, max_stored_files: null, reason: 'big customer' })
  t.equal(q.statusCode, 200)
  t.match(q.json().data, { quotas: { max_jobs_in_flight: 2, max_stored_files: null }, overrides: { max_jobs_in_flight: 2, max_stored_files: null } })
  t.match(await app.lucent.store.quotas.get(id), { maxJobsInFlight: 2, maxStoredFiles: null })
  t.match((await app.lucent.store.audit.list({ keyId: id, limit: 1 }))[0], { action: 'quotas.set', before: { overrides: {} }, after: { overrides: { maxJobsInFlight: 2 } }, reason: 'big customer' })
  const reset = await call(app, 'PUT', `/admin/v1/keys/${id}/quotas`, A, { reset: true })
  t.same(reset.json().data.overrides, {})
  t.same(await app.lucent.store.quotas.overrides(id), {})
  t.equal((await call(app, 'PUT', `/admin/v1/keys/${id}/quotas`, A, { max_jobs_in_flight: -1 })).statusCode, 403)
  t.equal((await call(app, 'PUT', `/admin/v1/keys/${id}/quotas`, A, {})).statusCode, 403)
  const u = (await call(app, 'GET', `/admin/v1/keys/${id}/usage`, A)).json().data
  t.match(u, { key_id: id, coins: 120, trial: { total: 2, left: 2 }, jobs: { CONVERTING: 0, COMPLETED: 0, ERROR: 0 }, ledger: { grant: 100, topup: 50, adjust: -30 },
    usage: { stored_bytes: 0, stored_files: 0, jobs_in_flight: 0 } })

  // the audit trail over HTTP, by key, in pages
  const trail = (await call(app, 'GET', `/admin/v1/audit?key_id=${id}&limit=3`, A)).json().data.audit
  t.equal(trail.length, 3)
  t.match(trail[0], { action: 'quotas.set', actor: 'admin:ops', key_id: id })
  const older = (await call(app, 'GET', `/admin/v1/audit?key_id=${id}&before_id=${trail[2].id}`, A)).json().data.audit
  t.ok(older.every((a: { id: number }) => a.id < trail[2].id))
  t.equal(older[older.length - 1].action, 'key.create')

  // unknown keys: 404, nothing written
  n = await auditCount(app)
  for (const [m, url, body] of routes('k_nope').filter(([, url]) => url.includes('k_nope'))) {
    const r = await call(app, m, url, A, body)
    t.equal(r.statusCode, 404, `${m} ${url}`)
    t.equal(r.json().error_code, 100403000)
  }
  t.equal(await auditCount(app), n)
})

t.test('coins never go below 0, however many adjustments run at once', async (t) => {
  const app = await build(t, ENV)
  const k = await createKey(app, { coins: 100 })
  const rs = await Promise.all(Array.from({ length: 25 }, (_, i) => call(app, 'POST', `/admin/v1/keys/${k.id}/coins`, A, { delta: -10, reason: `take ${i}` })))
  t.equal(rs.filter((r) => r.statusCode === 200).length, 10, 'exactly the ten that fit')
  t.equal(rs.filter((r) => r.statusCode === 403).length, 15)
  t.equal(await balance(app, k.id), 0)
  const rows = (await app.lucent.store.ledger(k.id)).filter((r) => r.kind === 'adjust')
  t.equal(rows.length, 10)
  t.ok(rows.every((r) => r.balanceAfter >= 0 && r.reason?.startsWith('take ')))
  t.equal((await app.lucent.store.audit.list({ keyId: k.id, limit: 100 })).length, 10, 'one audit row per applied adjustment')
})

t.test('LUCENT_ADMIN_PORT: the admin API on its own listener only', async (t) => {
  const app = await build(t, { ...ENV, LUCENT_ADMIN_PORT: '0' })
  t.ok(app.adminServer, 'a second listener')
  const addr = app.adminServer!.server.address()
  if (!addr || typeof addr !== 'object') throw new Error('the admin listener is not listening')
  t.equal(addr.address, '127.0.0.1', 'on loopback by default (LUCENT_ADMIN_HOST)')
  const base = `http://127.0.0.1:${addr.port}`
  const k = await createKey(app, { coins: 7 })

  // the public app: no /admin route at all, whatever the token (the answer of any unknown route)
  const unknown = await app.inject({ method: 'GET', url: '/no/such/route' })
  for (const [method, url, body] of routes(k.id)) {
    const r = await call(app, method, url, A, body)
    t.equal(r.statusCode, unknown.statusCode, `public ${method} ${url}`)
    t.same(r.json(), unknown.json())
  }
  // the admin listener: the admin token works over real HTTP, nothing else does, and it serves nothing else
  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${base}${path}`, { headers })
  const ok = await get(`/admin/v1/keys/${k.id}`, A)
  t.equal(ok.status, 200)
  t.equal(((await ok.json()) as { data: { coins: number } }).data.coins, 7)
  t.equal((await get(`/admin/v1/keys/${k.id}`)).status, 401)
  t.equal((await get(`/admin/v1/keys/${k.id}`, { apikey: k.key })).status, 401)
  t.equal((await get(`/admin/v1/keys/${k.id}`, bearer(k.key))).status, 403)
  const api = await get('/api/account', { apikey: k.key })
  t.equal(api.status, 400, 'the customer API is not on the admin listener')
  t.equal(((await api.json()) as { error_code: number }).error_code, 100400002)
  const post = await fetch(`${base}/admin/v1/keys/${k.id}/coins`, { method: 'POST', headers: { ...A, 'content-type': 'application/json' }, body: JSON.stringify({ delta: 3, reason: 'port test' }) })
  t.equal(post.status, 200)
  t.equal(await balance(app, k.id), 10)
  t.match((await app.lucent.store.audit.list({ limit: 1 }))[0], { action: 'coins.topup', actor: 'admin:ops', reason: 'port test' })
})

t.test('settings: a bad token hash or a port without tokens refuse to start', async (t) => {
  await t.rejects(build(t, { LUCENT_ADMIN_TOKEN_SHA256: 'ops:abc' }), /LUCENT_ADMIN_TOKEN_SHA256/)
  await t.rejects(build(t, { LUCENT_ADMIN_PORT: '0' }), /LUCENT_ADMIN_PORT needs LUCENT_ADMIN_TOKEN_SHA256/)
  await t.rejects(build(t, { LUCENT_ADMIN_TOKEN_SHA256: `${ops.entry},${ops.entry}` }), /used twice/)
})
