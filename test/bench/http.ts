/**
 * npm run bench:http — autocannon against a running server: task-status (50 connections) and photo-enhancer
 * submissions with a rejected model. Prints req/s and latency p99.
 * Against an existing server: LUCENT_BENCH_URL, LUCENT_BENCH_KEY, LUCENT_BENCH_JOB. Otherwise it starts
 * `lucent serve` on a temp DATA_DIR (child process) with a completed job and a key without rate limit.
 * LUCENT_BENCH_SECONDS (default 10), LUCENT_BENCH_CONNECTIONS (default 50).
 */
import autocannon from 'autocannon'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import net from 'node:net'
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { SqliteStore } from '../../server/store/sqlite.js'
import { newApiKey } from '../../server/auth.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const seconds = Number(process.env.LUCENT_BENCH_SECONDS ?? 10)
const connections = Number(process.env.LUCENT_BENCH_CONNECTIONS ?? 50)

async function freePort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as net.AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

async function setup(): Promise<{ url: string; key: string; job: string; child?: ChildProcess; dir?: string }> {
  if (process.env.LUCENT_BENCH_URL) {
    return { url: process.env.LUCENT_BENCH_URL, key: process.env.LUCENT_BENCH_KEY ?? '', job: process.env.LUCENT_BENCH_JOB ?? '' }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-bench-'))
  const store = new SqliteStore(path.join(dir, 'lucent.db'))
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 1000, trial: 0, expiresAt: null, rate: 1e9 })
  const job = 'b'.repeat(32)
  await store.debitAndCreateJob({ id: job, keyId: k.id, kind: 'photo', model: 'general_4x', params: { format: 'png' }, coins: 10, originalKey: `o/${job}.png` })
  await store.completeJob(job, `r/${job}.png`)
  await store.close()
  const port = await freePort()
  const child = spawn(process.execPath, [path.join(repoRoot, 'bin/lucent.js'), 'serve'], {
    env: { ...process.env, DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn', LUCENT_MODEL_DIR: process.env.LUCENT_MODEL_DIR ?? path.resolve(repoRoot, '../shared/models') },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    try {
      await fetch(`${url}/healthz`)
      break
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return { url, key: k.key, job, child, dir }
}

function run(name: string, opts: autocannon.Options): Promise<void> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, r) => {
      if (err) return reject(err)
      const non2xx = r.non2xx
      console.log(`${name}: ${Math.round(r.requests.average)} req/s (total ${r.requests.total}), latency avg ${r.latency.average.toFixed(2)} ms, p99 ${r.latency.p99} ms, errors ${r.errors}, timeouts ${r.timeouts}, non-2xx ${non2xx}`)
      resolve()
    })
  })
}

const s = await setup()
try {
  const headers = { apikey: s.key, 'content-type': 'application/json' }
  // warm-up
  await run('warm-up task-status', { url: `${s.url}/api/task-status`, method: 'POST', headers, body: JSON.stringify({ job_id: s.job }), connections, duration: 2 })
  await run(`task-status (${connections} connections, ${seconds} s)`, { url: `${s.url}/api/task-status`, method: 'POST', headers, body: JSON.stringify({ job_id: s.job }), connections, duration: seconds })
  await run(`photo-enhancer, rejected model (${connections} connections, ${seconds} s)`, {
    url: `${s.url}/api/photo-enhancer`, method: 'POST', headers, connections, duration: seconds,
    body: JSON.stringify({ model_name: 'no_such_model', img_url: 'https://example.com/a.png', extension: '.png' }),
  })
} finally {
  s.child?.kill('SIGTERM')
  if (s.dir) fs.rmSync(s.dir, { recursive: true, force: true })
}
