/**
 * The request hot path's memoisation: BoundedCache, the key cache (sync and async lookups), token grants, and
 * task-status answers kept in memory (finished jobs; converting ones until they change), still per key.
 * (That every job-state write reports its job is tested with the lifecycle: test/jobs/lifecycle.ts.)
 */
import t from 'tap'
import { BoundedCache } from '../../server/cache.js'
import { Authenticator, RateLimiter, hashKey, newApiKey } from '../../server/auth.js'
import { ApiError } from '../../server/errors.js'
import type { ApiKey } from '../../server/store/types.js'
import { build, createKey, post } from '../helper.js'
import { StatusAnswers } from '../../server/jobs/status.js'

const code = (f: () => unknown) => {
  try {
    f()
  } catch (e) {
    return (e as ApiError).errorCode
  }
  return null
}

t.test('BoundedCache: bounded, oldest entry goes first', async (t) => {
  const c = new BoundedCache<string, number>(3)
  c.set('a', 1)
  c.set('b', 2)
  c.set('c', 3)
  t.equal(c.get('a'), 1)
  c.set('d', 4)
  t.equal(c.size, 3)
  t.equal(c.get('a'), undefined, 'a (oldest) evicted')
  t.same([c.get('b'), c.get('c'), c.get('d')], [2, 3, 4])
  c.set('b', 20)
  t.equal(c.get('b'), 20, 'overwrite')
  c.set('e', 5)
  t.equal(c.get('c'), undefined, 'an overwritten entry counts as new: c is now the oldest')
  t.same([c.get('b'), c.get('d'), c.get('e')], [20, 4, 5])
  for (let i = 0; i < 1000; i++) c.set(`k${i}`, i)
  t.equal(c.size, 3, 'never above max')
  t.throws(() => new BoundedCache(0))
})

t.test('Authenticator: sync and async lookups, cache TTL, revoked and expired keys', async (t) => {
  const k = newApiKey()
  const row: ApiKey = { id: k.id, hash: k.hash, coins: 1, trialTotal: 0, trialLeft: 0, expiresAt: null, rate: null, revoked: false, createdAt: 0 }
  let lookups = 0
  const sync = new Authenticator((h) => { lookups++; return h === k.hash ? { ...row } : null }, 1000)
  const got = sync.authenticate(k.key, 1000)
  t.notOk(got instanceof Promise, 'a synchronous store answers synchronously')
  t.equal((got as ApiKey).id, k.id)
  t.equal((sync.authenticate(` ${k.key} `, 1500) as ApiKey).id, k.id, 'trimmed, cached')
  t.equal(lookups, 1, 'second call served by the cache')
  sync.authenticate(k.key, 2001)
  t.equal(lookups, 2, 'looked up again after the TTL')
  t.equal(code(() => sync.authenticate('lk_wrong', 0)), 110400000)
  t.equal(code(() => sync.authenticate(undefined, 0)), 110400000)
  t.equal(code(() => sync.authenticate(['', k.key], 0)), 110400000, 'first header value counts')

  const async = new Authenticator(async (h) => (h === k.hash ? { ...row, expiresAt: 5000 } : null), 0)
  const p = async.authenticate(k.key, 1000)
  t.ok(p instanceof Promise, 'an asynchronous store answers with a promise')
  t.equal((await p).id, k.id)
  const expired = await (async.authenticate(k.key, 5000) as Promise<ApiKey>).catch((e: ApiError) => e)
  t.equal((expired as ApiError).errorCode, 100401000, 'expired')
  const revoked = new Authenticator(() => ({ ...row, revoked: true }), 1000)
  t.equal(code(() => revoked.authenticate(k.key, 0)), 110400000, 'revoked')
  // a row whose stored hash is not the presented key's (never returned by a real store) is refused
  const wrong = new Authenticator(() => ({ ...row, hash: hashKey('other') }), 1000)
  t.equal(code(() => wrong.authenticate(k.key, 0)), 110400000, 'hash compared, not trusted')
})

t.test('RateLimiter.grant: what is there, rounded down; retryAfter; take on top of it', async (t) => {
  const r = new RateLimiter(5, 2) // burst 5, 2 tokens/s
  t.same(r.grant('k', null, 3, 0), { granted: 3, retryAfter: 0 })
  t.same(r.grant('k', null, 10, 0), { granted: 2, retryAfter: 1 }, 'only the 2 left')
  t.same(r.grant('k', null, 1, 250), { granted: 0, retryAfter: 1 }, '0.5 token after 250 ms: none')
  t.same(r.grant('k', null, 1, 500), { granted: 1, retryAfter: 1 }, 'one token after 500 ms')
  t.equal(code(() => r.take('k', null, 500)), 100429000)
  t.same(r.grant('k', null, 100, 100_000), { granted: 5, retryAfter: 1 }, 'refill stops at the burst')
  t.same(r.grant('fast', 50, 1000, 0), { granted: 50, retryAfter: 1 }, "a key's own rate raises its burst")
  t.equal(r.grant('never', 0, 10, 0).granted, 5, 'rate 0: the burst, then nothing')
  t.same(r.grant('never', 0, 1, 10_000), { granted: 0, retryAfter: 60 })
})

t.test('task-status: a finished job is answered from memory, still only to its own key', async (t) => {
  const app = await build(t)
  const owner = await createKey(app)
  const other = await createKey(app)
  const store = app.lucent.store
  const r = await store.debitAndCreateJob({ id: 'a'.repeat(32), keyId: owner.id, kind: 'photo', model: 'general_4x', params: { format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: 8, height: 8 }, output: { width: 32, height: 32 } }, coins: 3, originalKey: `o/${'a'.repeat(32)}.png` })
  t.ok(r.ok)
  const status = async (key: string) => (await post(app, '/api/task-status', key, { job_id: 'a'.repeat(32) })).json()
  const converting = await status(owner.key)
  t.equal(converting.data.status, 'CONVERTING')
  // the job's state written the way runners write it: through the job lifecycle
  const run = await app.lucent.jobs.start('a'.repeat(32))
  await run!.progress(40)
  t.equal((await status(owner.key)).data.progress, 40, 'a progress write is seen at once (the kept converting answer is dropped)')
  t.ok(await run!.complete(`r/${'a'.repeat(32)}.png`))
  const done = await status(owner.key)
  t.equal(done.data.status, 'COMPLETED')
  t.match(done.data.res_url, /^http:\/\/lucent\.invalid\/files\/r\//)
  t.equal((await status(other.key)).error_code, 110400002, "another key's finished job is unknown (cached answer or not)")
  t.same(await status(owner.key), done, 'same answer again')
  t.equal(done.data.original_url, converting.data.original_url, 'links are stable across calls')
})

t.test('StatusAnswers: finished kept for good; converting kept only when live, until a change or liveMs', async (t) => {
  const data = (status: string) => ({ job_id: 'j', status, progress: 0, original_url: 'u', consume_coins: 1 })
  const off = new StatusAnswers(false, 2000)
  off.put('j', 'k', data('CONVERTING'), 0)
  t.equal(off.get('j', 1), undefined, 'not live: a converting answer is never kept')
  off.put('j', 'k', data('COMPLETED'), 0)
  t.equal(off.get('j', 1e12)?.data.status, 'COMPLETED', 'a finished answer is kept for good')
  const on = new StatusAnswers(true, 2000)
  on.put('j', 'k', data('CONVERTING'), 1000)
  t.equal(on.get('j', 2999)?.keyId, 'k', 'live: kept')
  t.equal(on.get('j', 3001), undefined, 'dropped after liveMs')
  on.put('j', 'k', data('CONVERTING'), 5000)
  on.changed('j')
  t.equal(on.get('j', 5001), undefined, 'dropped on a change')
})
