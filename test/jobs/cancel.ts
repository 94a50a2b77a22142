/**
 * POST /api/task-cancel (extension) on the embedded server with the real engine: a waiting job never runs; a
 * running photo job's engine call is aborted; a running VIDEO job's ffmpeg processes and temp files are gone;
 * each refunded once as the money policy says (server/jobs/refund.ts: all of it while waiting, the unprocessed share once running); a finished job cannot be canceled (409, 110409000); a cancel racing the run's
 * completion ends in exactly one final state with at most one refund. Canceled jobs report ERROR with
 * error_code 110400014 and reason "canceled". Skips the engine parts until the addon is built.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import type { FastifyInstance } from 'fastify'
import { build, createKey, balance, post, png, inputServer, addonBuilt, sharedData, tempDir, waitFor } from '../helper.js'

const hasFfmpeg = spawnSync('ffprobe', ['-version']).status === 0 && spawnSync('ffmpeg', ['-version']).status === 0
const skipEngine = !addonBuilt && 'native/node/index.js not built yet (npm run build:native)'

type Status = { status: string; progress: number; error_code?: number; reason?: string; message?: string; consume_coins: number }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const status = async (app: FastifyInstance, key: string, id: string) => (await post(app, '/api/task-status', key, { job_id: id })).json().data as Status
const cancel = (app: FastifyInstance, key: string, id: string) => post(app, '/api/task-cancel', key, { job_id: id })

/** Ledger rows of one job, by kind. */
async function ledgerOf(app: FastifyInstance, keyId: string, jobId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const r of await app.lucent.store.ledger(keyId)) if (r.jobId === jobId) out[r.kind] = (out[r.kind] ?? 0) + 1
  return out
}

/** A running job's cancel refund (server/jobs/refund.ts): its ledger row says at which progress; checks the amount. */
async function unprocessedShare(app: FastifyInstance, keyId: string, jobId: string, coins: number): Promise<number> {
  const row = (await app.lucent.store.ledger(keyId)).find((r) => r.jobId === jobId && r.kind === 'refund')
  const m = /^canceled at (\d+)%$/.exec(row?.reason ?? '')
  if (!row || !m) throw new Error(`no cancel refund row: ${JSON.stringify(row)}`)
  const share = Math.floor((coins * (100 - Number(m[1]))) / 100)
  if (row.delta !== share) throw new Error(`refund ${row.delta}, policy ${share}`)
  return share
}

/** Process ids of this process's children running `name` (ffmpeg), with their command lines. */
function children(name: string): Array<{ pid: number; args: string }> {
  const r = spawnSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)])
  return r.stdout.toString().split('\n').map((l) => l.trim()).filter(Boolean)
    .map((l) => ({ pid: Number(l.split(/\s+/)[0]), args: l.replace(/^\d+\s+/, '') }))
    .filter((p) => p.args.split(/\s+/)[0].endsWith(name))
}

t.test('a waiting job never runs; finished jobs and strangers cannot cancel', async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_BACKEND: 'cpu' })
  const srv = await inputServer(t)
  const { key, id: keyId } = await createKey(app, { coins: 1000 })
  const other = await createKey(app, { coins: 10 })
  const started: string[] = []
  app.lucent.jobs.on('running', (e) => started.push(e.job.id))
  app.lucent.queue.pause()
  const img = srv.put('a.png', png(16, 12), 'image/png')
  const a = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).json().data
  const b = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).json().data
  t.equal(await balance(app, keyId), 1000 - a.consume_coins - b.consume_coins)

  const stranger = await cancel(app, other.key, a.job_id)
  t.equal(stranger.json().error_code, 110400002, "another key's job is unknown to it")
  t.equal((await cancel(app, key, 'f'.repeat(32))).json().error_code, 110400002)

  const r = await cancel(app, key, a.job_id)
  t.equal(r.statusCode, 200)
  t.match(r.json().data, { job_id: a.job_id, status: 'ERROR', error_code: 110400014, reason: 'canceled', consume_coins: a.consume_coins })
  t.match(await status(app, key, a.job_id), { status: 'ERROR', error_code: 110400014, reason: 'canceled' }, 'task-status says ERROR, reason canceled')
  t.equal(await balance(app, keyId), 1000 - b.consume_coins, 'refunded')
  t.same(await ledgerOf(app, keyId, a.job_id), { debit: 1, refund: 1 })
  t.equal(app.lucent.queue.stats().waiting, 1, 'out of the queue')

  const again = await cancel(app, key, a.job_id)
  t.equal(again.statusCode, 409)
  t.equal(again.json().error_code, 110409000, 'a canceled job cannot be canceled again')
  t.same(await ledgerOf(app, keyId, a.job_id), { debit: 1, refund: 1 }, 'still one refund')

  app.lucent.queue.resume()
  if (!addonBuilt) return
  const done = await waitFor(async () => { const s = await status(app, key, b.job_id); return s.status !== 'CONVERTING' && s }, 120_000, 100)
  t.equal(done.status, 'COMPLETED', 'the other job ran')
  t.same(started, [b.job_id], 'the canceled job never started')
  const fin = await cancel(app, key, b.job_id)
  t.equal(fin.statusCode, 409)
  t.equal(fin.json().error_code, 110409000, 'a completed job cannot be canceled')
  t.equal((await status(app, key, b.job_id)).status, 'COMPLETED', 'and stays COMPLETED')
  t.same(await ledgerOf(app, keyId, b.job_id), { debit: 1 })
})

t.test('a running photo job: the engine call is aborted, no result, one refund', { skip: skipEngine }, async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_BACKEND: 'cpu', LUCENT_ENGINE_THREADS: '1' })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key, id: keyId } = await createKey(app, { coins: 10_000 })
  // x4v3 on 512 x 512 (4 tiles x 33 layers at input size) on one thread: many seconds of engine work in short
  // layers (the engine checks the signal between layers)
  const img = srv.put('big.png', png(512, 512), 'image/png')
  const sub = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_4x', img_url: img, extension: '.png' })).json().data
  await waitFor(async () => app.lucent.jobs.running === 1, 30_000, 20)
  await new Promise((r) => setTimeout(r, 1000)) // inside the network by now
  const t0 = Date.now()
  const r = await cancel(app, key, sub.job_id)
  t.match(r.json().data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' })
  await waitFor(async () => app.lucent.queue.stats().running === 0, 20_000, 20)
  const ms = Date.now() - t0
  t.ok(ms < 5000, `the run returned ${ms} ms after the cancel (the engine stops at its next layer)`)
  t.equal(await app.lucent.storage.get(`r/${sub.job_id}.png`), null, 'no result written')
  t.same(await ledgerOf(app, keyId, sub.job_id), { debit: 1, refund: 1 })
  t.equal(await balance(app, keyId), 10_000 - sub.consume_coins + await unprocessedShare(app, keyId, sub.job_id, sub.consume_coins),
    'the unprocessed share back (the money policy)')
  // the engine thread is still usable
  const small = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('s.png', png(16, 12), 'image/png'), extension: '.png' })).json().data
  const done = await waitFor(async () => { const s = await status(app, key, small.job_id); return s.status !== 'CONVERTING' && s }, 120_000, 100)
  t.equal(done.status, 'COMPLETED', 'the next job runs')
})

t.test('a running VIDEO job: ffmpeg gone, temp files gone, one refund', { skip: skipEngine || (!hasFfmpeg && 'ffmpeg/ffprobe not installed') }, async (t) => {
  const tmp = await tempDir(t, 'lucent-vtmp-')
  const app = await build(t, { LUCENT_WORKERS: '1', LUCENT_BACKEND: 'cpu', LUCENT_VIDEO_TMP: tmp })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  const srv = await inputServer(t)
  const { key, id: keyId } = await createKey(app, { coins: 100_000 })
  const dir = await tempDir(t)
  const small = path.join(dir, 'small.mp4') // the whole demo (7.5 s) at 128x96: minutes of work on the CPU
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-i', path.join(sharedData, 'video', 'onepiece_demo.mp4'), '-vf', 'scale=128:96', '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'copy', small])
  const sub = (await post(app, '/api/video-enhancer', key, { video_url: srv.put('d.mp4', fs.readFileSync(small)), model_name: 'general_restore_2x', resolution: [256, 192] })).json().data
  t.ok(sub.job_id, 'submitted')
  const before = await balance(app, keyId)
  // running: the first batch through the engine, ffmpeg decoding and encoding, the output file in the temp dir
  await waitFor(async () => (await status(app, key, sub.job_id)).progress > 0, 300_000, 100)
  await waitFor(async () => fs.readdirSync(tmp).some((f) => f.includes(sub.job_id)), 60_000, 50)
  t.pass(`temp files of the job exist: ${fs.readdirSync(tmp).join(', ')}`)
  const ff = children('ffmpeg')
  t.ok(ff.length >= 1, `ffmpeg running (${ff.length} processes)`)
  const t0 = Date.now()
  const r = await cancel(app, key, sub.job_id)
  t.match(r.json().data, { status: 'ERROR', error_code: 110400014, reason: 'canceled' })
  await waitFor(async () => app.lucent.queue.stats().running === 0, 30_000, 20)
  t.comment(`run returned ${Date.now() - t0} ms after the cancel`)
  const alive = ff.filter((p) => { try { process.kill(p.pid, 0); return true } catch { return false } })
  t.same(alive, [], 'the ffmpeg processes are gone')
  t.same(children('ffmpeg'), [], 'no ffmpeg child left')
  t.same(fs.readdirSync(tmp), [], 'temp files removed')
  t.same(await ledgerOf(app, keyId, sub.job_id), { debit: 1, refund: 1 }, 'refunded once')
  t.equal(await balance(app, keyId), before + await unprocessedShare(app, keyId, sub.job_id, sub.consume_coins), 'the unprocessed share back')
  t.equal(await app.lucent.storage.get(`r/${sub.job_id}.mp4`), null, 'no result written')
})

t.test('cancel racing completion: one final state, at most one refund', async (t) => {
  const app = await build(t, { LUCENT_WORKERS: '1' })
  const srv = await inputServer(t)
  const { key, id: keyId } = await createKey(app, { coins: 100_000 })
  app.lucent.queue.pause() // this test is the worker: it starts the runs itself
  const img = srv.put('r.png', png(16, 12), 'image/png')
  const outcomes = { completed: 0, canceled: 0 }
  for (let i = 0; i < 24; i++) {
    const sub = (await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: img, extension: '.png' })).json().data
    const run = await app.lucent.jobs.start(sub.job_id)
    if (!run) throw new Error('no run')
    // alternate who goes first; the completion at once, a tick late, 1 ms late or 50 ms late (the cancels
    // surely first); two cancels race too
    const wait = [() => null, () => new Promise((r) => setImmediate(r)), () => sleep(1), () => sleep(50)][i % 4]
    const racers = [
      async () => { await wait(); return run.complete(`r/${sub.job_id}.png`) },
      () => cancel(app, key, sub.job_id), () => cancel(app, key, sub.job_id),
    ]
    if (i % 2) racers.reverse()
    const [a, b, c] = await Promise.all(racers.map((f) => f()))
    const [completed, ...cancels] = (i % 2 ? [c, b, a] : [a, b, c]) as [boolean, { statusCode: number }, { statusCode: number }]
    const st = await status(app, key, sub.job_id)
    const ledger = await ledgerOf(app, keyId, sub.job_id)
    const ok = cancels.filter((x) => x.statusCode === 200).length
    if (st.status === 'COMPLETED') {
      outcomes.completed++
      if (!completed || ok !== 0 || ledger.refund) t.fail(`COMPLETED but complete=${completed}, cancels ok=${ok}, ledger=${JSON.stringify(ledger)}`)
    } else {
      outcomes.canceled++
      if (st.error_code !== 110400014 || completed || ok !== 1 || ledger.refund !== 1) {
        t.fail(`ERROR but code=${st.error_code} complete=${completed}, cancels ok=${ok}, ledger=${JSON.stringify(ledger)}`)
      }
    }
    if (cancels.some((x) => x.statusCode !== 200 && x.statusCode !== 409)) t.fail(`cancel answered ${cancels.map((x) => x.statusCode)}`)
  }
  t.comment(`outcomes: ${JSON.stringify(outcomes)}`)
  t.equal(outcomes.completed + outcomes.canceled, 24, 'every job in exactly one final state, refunds matching')
  t.ok(outcomes.canceled > 0, 'cancels won some races (a late completion changed nothing)')
  t.ok(outcomes.completed > 0, 'completions won some (the cancels answered 409, nothing refunded)')
  const rows = await app.lucent.store.ledger(keyId)
  const sum = rows.reduce((s, r) => s + r.delta, 0)
  t.equal(sum, await balance(app, keyId), 'balance = ledger sum')
})
