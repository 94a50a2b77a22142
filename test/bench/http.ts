/**
 * npm run bench:http — autocannon against a running server: task-status (50 connections) and photo-enhancer
 * submissions with a rejected model. Prints req/s and latency p99.
 * Against an existing server: LUCENT_BENCH_URL, LUCENT_BENCH_KEY, LUCENT_BENCH_JOB. Otherwise it starts
 * `lucent serve` on a temp DATA_DIR (child process), once with 1 HTTP process and once with one per core
 * (LUCENT_HTTP_PROCESSES set: with that count only), with a key without rate limit, a completed job, and a job
 * still CONVERTING (added behind the server's back after its start, so it is never run): task-status is
 * measured for both (a finished job's answer is kept in memory; a converting job's is read from the store and
 * signed on every request).
 * LUCENT_BENCH_SECONDS (default 10), LUCENT_BENCH_CONNECTIONS (default 50).
 */
import autocannon from 'autocannon'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { SqliteStore } from '../../server/store/sqlite.js'
import { newApiKey } from '../../server/auth.js'
import { freePort } from '../helper.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const seconds = Number(process.env.LUCENT_BENCH_SECONDS ?? 10)
const connections = Number(process.env.LUCENT_BENCH_CONNECTIONS ?? 50)

async function setup(processes: number): Promise<{ url: string; key: string; job: string; converting?: string; child?: ChildProcess; dir?: string }> {
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
    env: { ...process.env, LUCENT_HTTP_PROCESSES: String(processes), DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', LUCENT_LOG_LEVEL: 'warn', LUCENT_MODEL_DIR: process.env.LUCENT_MODEL_DIR ?? path.resolve(repoRoot, '../shared/models') },
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
  // a job the server never saw being submitted: it stays CONVERTING (recovery ran at start)
  const converting = 'c'.repeat(32)
  const late = new SqliteStore(path.join(dir, 'lucent.db'))
  await late.debitAndCreateJob({ id: converting, keyId: k.id, kind: 'photo', model: 'general_4x', params: { format: 'png' }, coins: 10, originalKey: `o/${converting}.png` })
  await late.close()
  return { url, key: k.key, job, converting, child, dir }
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

// Own server: measured with 1 HTTP process and with one per core (LUCENT_HTTP_PROCESSES set: that alone).
const counts = process.env.LUCENT_BENCH_URL ? [0]
  : process.env.LUCENT_HTTP_PROCESSES ? [Number(process.env.LUCENT_HTTP_PROCESSES)]
  : [...new Set([1, os.availableParallelism()])]
for (const processes of counts) {
  const s = await setup(processes)
  try {
    const headers = { apikey: s.key, 'content-type': 'application/json' }
    // warm-up
    await run('warm-up task-status', { url: `${s.url}/api/task-status`, method: 'POST', headers, body: JSON.stringify({ job_id: s.job }), connections, duration: 2 })
    console.log(`server: ${s.child ? `lucent serve, LUCENT_HTTP_PROCESSES=${processes}` : s.url}; ${os.availableParallelism()} cores; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`)
    await run(`task-status (${connections} connections, ${seconds} s)`, { url: `${s.url}/api/task-status`, method: 'POST', headers, body: JSON.stringify({ job_id: s.job }), connections, duration: seconds })
    if (s.converting) {
      await run(`task-status, CONVERTING job (${connections} connections, ${seconds} s)`, { url: `${s.url}/api/task-status`, method: 'POST', headers, body: JSON.stringify({ job_id: s.converting }), connections, duration: seconds })
    }
    await run(`photo-enhancer, rejected model (${connections} connections, ${seconds} s)`, {
      url: `${s.url}/api/photo-enhancer`, method: 'POST', headers, connections, duration: seconds,
      body: JSON.stringify({ model_name: 'no_such_model', img_url: 'https://example.com/a.png', extension: '.png' }),
    })
  } finally {
    if (s.child && s.child.exitCode === null) {
      const exited = new Promise((r) => s.child!.once('exit', r))
      s.child.kill('SIGTERM')
      await exited
    }
    if (s.dir) fs.rmSync(s.dir, { recursive: true, force: true })
  }
}
