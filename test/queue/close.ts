/**
 * Closing over a Redis that does not answer (frozen: SIGSTOP, as a Redis mid-restart or a failover leaves a
 * connection): the app's close ends within its bound instead of waiting forever on BullMQ's blocking reads,
 * the worker registry's goodbye and the rate limiter.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { Redis } from 'ioredis'
import { build, freePort, tempDir, waitFor } from '../helper.js'

const noRedis = spawnSync('redis-server', ['--version']).status !== 0 && 'redis-server not installed'

t.test('app.close() over a frozen Redis ends within the bound', { skip: noRedis }, async (t) => {
  const port = await freePort()
  const dir = await tempDir(t, 'lucent-redis-')
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
  child.unref()
  t.teardown(() => { child.kill('SIGCONT'); child.kill('SIGKILL') })
  await waitFor(async () => {
    const r = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    r.on('error', () => {})
    try { await r.connect(); return (await r.ping()) === 'PONG' } catch { return false } finally { r.disconnect() }
  }, 10_000, 50)
  const app = await build({ teardown: () => {} } as unknown as typeof t, { LUCENT_REDIS_URL: `redis://127.0.0.1:${port}` })
  await waitFor(async () => (await app.inject({ url: '/readyz' })).statusCode === 200, 60_000, 50)
  child.kill('SIGSTOP')
  const t0 = Date.now()
  const closed = await Promise.race([app.close().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 30_000).unref())])
  const ms = Date.now() - t0
  t.ok(closed, `closed (${ms} ms)`)
  t.ok(ms < 20_000, 'within the bound')
})
