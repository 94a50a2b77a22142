#!/usr/bin/env node
// Start-up of `lucent serve`, as an operator sees it: spawns `node bin/lucent.js serve` (temp DATA_DIR, a free
// port, LUCENT_MODEL_DIR as given, default data/models) and prints one JSON line:
//   healthz_ms   spawn -> first 200 on GET /healthz (the engine thread loaded)
//   job_ms       first photo job (general_2x on a 64x64 PNG served from here): POST /api/photo-enhancer ->
//                task-status COMPLETED; with --no-job only healthz_ms
// Then stops the server. Repeat it (or put it under `hyperfine` / `/usr/bin/time`) for medians:
//   node bench/startup/serve.mjs [--no-job] [--model general_2x] [--entry 'ARGS'] [-- extra args for `serve`]
// LUCENT_DEV=1 in the environment runs the sources through tsx (see bin/lucent.js). --entry names what node runs
// instead of bin/lucent.js, node flags included, split at spaces: `dist/cli.js` (the build itself),
// `--import tsx server/cli.ts` (the sources, as `npm start` did before the build existed).
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const bin = path.join(root, 'bin', 'lucent.js')
const args = process.argv.slice(2)
const noJob = args.includes('--no-job')
const entry = args.includes('--entry') ? args[args.indexOf('--entry') + 1].split(' ').filter(Boolean) : [bin]
const model = args.includes('--model') ? args[args.indexOf('--model') + 1] : 'general_2x'

const freePort = () => new Promise((resolve, reject) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)) }).on('error', reject)
})
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// a 64x64 PNG from the addon's encoder would need the addon here: a stored one from ffmpeg instead
function photo() {
  const f = path.join(os.tmpdir(), `lucent-startup-${process.pid}.png`)
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=64x64', '-frames:v', '1', f])
  const b = fs.readFileSync(f)
  fs.rmSync(f, { force: true })
  return b
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-startup-'))
const env = { ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: path.resolve(root, process.env.LUCENT_MODEL_DIR ?? 'data/models'),
  LUCENT_FETCH_ALLOW: '127.0.0.1', LUCENT_RATE_PER_SEC: '1000', LUCENT_RATE_BURST: '1000', LUCENT_LOG_LEVEL: process.env.LUCENT_LOG_LEVEL ?? 'warn' }
let child
const out = {}
try {
  let key
  if (!noJob) {
    const lines = execFileSync(process.execPath, [bin, 'keys', 'create', '--coins', '1000'], { env, encoding: 'utf8' }).trim().split('\n')
    key = lines[lines.length - 1]
  }
  const port = await freePort()
  const t0 = performance.now()
  child = spawn(process.execPath, [...entry, 'serve', ...(args.includes('--') ? args.slice(args.indexOf('--') + 1) : [])], { cwd: root, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] })
  const base = `http://127.0.0.1:${port}`
  for (;;) {
    if (child.exitCode !== null) throw new Error(`lucent serve exited with ${child.exitCode}`)
    const s = await fetch(`${base}/healthz`).then((r) => r.status, () => 0)
    if (s === 200) break
    if (performance.now() - t0 > 300_000) throw new Error('not healthy after 300 s')
    await sleep(20)
  }
  out.healthz_ms = Math.round(performance.now() - t0)
  if (!noJob) {
    const png = photo()
    const srv = http.createServer((_req, res) => { res.writeHead(200, { 'content-type': 'image/png' }); res.end(png) })
    await new Promise((r) => srv.listen(0, '127.0.0.1', r))
    const post = (p, body) => fetch(`${base}${p}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json())
    const t1 = performance.now()
    const r = await post('/api/photo-enhancer', { model_name: model, img_url: `http://127.0.0.1:${srv.address().port}/in.png`, extension: '.png' })
    if (!r.data?.job_id) throw new Error(`submit: ${JSON.stringify(r)}`)
    for (;;) {
      const st = await post('/api/task-status', { job_id: r.data.job_id })
      const d = st.data
      if (!d) throw new Error(`task-status: ${JSON.stringify(st)}`)
      if (d.status === 'COMPLETED') break
      if (d.status !== 'CONVERTING') throw new Error(`job: ${JSON.stringify(d)}`)
      await sleep(10)
    }
    out.job_ms = Math.round(performance.now() - t1)
    srv.close()
  }
  console.log(JSON.stringify(out))
} finally {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM')
    await new Promise((r) => child.once('exit', r))
  }
  fs.rmSync(dataDir, { recursive: true, force: true })
}
