/**
 * Abuse: the engine's work meter (issue 29, "a work meter with a budget"; server/jobs/budget.ts) and the faces
 * bound (hole 5), with the real engine threads on SQLite + disk storage + the in-process queue:
 * - a photo job whose stored params say less work than its original holds (params tampered through the store:
 *   a smaller input and output than the file's) ends 110400015, the engine having stopped before the network;
 *   on main the runner gave the engine no budget and the job COMPLETED, every pixel of work free;
 * - the same job with honest params completes, its work within its budget;
 * - a crowd of 24 faces made here (a real face of ../shared/data/faces, tiled by ffmpeg) on a face model: at most
 *   MAX_FACES faces get the face network and their work stays within the face allowance (the call's `work`);
 *   on main every face was restored and no work was counted.
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { SqliteStore } from '../../server/store/sqlite.js'
import { LocalStorage, loadSecret } from '../../server/storage/local.js'
import { MemoryQueue } from '../../server/queue/memory.js'
import { JobLifecycle } from '../../server/jobs/lifecycle.js'
import { makeRunner, type RunnerDeps } from '../../server/jobs/runner.js'
import { EnginePool } from '../../server/engine/pool.js'
import type { PhotoParams } from '../../server/jobs/params.js'
import { videoSettings } from '../../server/config.js'
import { newApiKey } from '../../server/auth.js'
import { FACE_ALLOWANCE, MAX_FACES, catalogBudgetModel, photoBudget } from '../../server/jobs/budget.js'
import { addonBuilt, modelDir, png, sharedData } from '../helper.js'

const hasFfmpeg = spawnSync('ffmpeg', ['-version']).status === 0
const skip = !addonBuilt && 'native addon not built'

interface Logged { obj: Record<string, unknown>; msg: string }

async function setup(t: Test) {
  const dir = t.testdir()
  const store = new SqliteStore(path.join(dir, 'm.db'))
  const storage = new LocalStorage(dir, loadSecret(dir), () => 'http://lucent.invalid')
  const queue = new MemoryQueue(100, 1)
  const logs: Logged[] = []
  const log = {
    info(obj: Record<string, unknown>, msg: string) { logs.push({ obj, msg }) }, warn() {}, error() {}, debug() {}, trace() {}, fatal() {},
    child() { return log }, level: 'info', silent() {},
  }
  const jobs = new JobLifecycle({ store, queue, log: log as never, jobTimeoutMs: 120_000, maxAttempts: 1 })
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 2 })
  t.teardown(async () => { await pool.close(); store.close() })
  const k = newApiKey()
  await store.createKey({ id: k.id, hash: k.hash, coins: 1000, trial: 0, expiresAt: null, rate: null })
  const run = makeRunner({ jobs, storage, log: log as unknown as RunnerDeps['log'], video: videoSettings({ LUCENT_VIDEO_TMP: path.join(dir, 'v') }), pool })
  /** A photo job as the store holds it: `params` as written there (tampered or not), `original` the stored file. */
  const photo = async (id: string, model: string, params: PhotoParams, original: Buffer) => {
    await storage.put(`o/${id}.png`, original, 'image/png')
    await jobs.submit({ id, keyId: k.id, kind: 'photo', model, params, coins: 10, originalKey: `o/${id}.png` })
    return run(id)
  }
  const completed = (id: string) => logs.find((l) => l.msg === 'job completed' && l.obj.job === id)?.obj
  return { store, pool, photo, completed, keyId: k.id }
}

const params = (inW: number, inH: number, outW: number, outH: number): PhotoParams =>
  ({ format: 'png', ext: 'png', exif: false, dpi: null, input: { format: 'png', width: inW, height: inH }, output: { width: outW, height: outH } })

t.test('a photo job whose params were tampered below its original ends 110400015; honest, it completes within budget', { skip }, async (t) => {
  const s = await setup(t)
  const original = png(160, 120)
  // honest: priced (and budgeted) for what the file holds
  t.equal(await s.photo('honest', 'general_2x', params(160, 120, 320, 240), original), 'ended')
  t.match(await s.store.getJob('honest'), { status: 'COMPLETED' })
  const done = s.completed('honest')!
  const budget = photoBudget(params(160, 120, 320, 240), catalogBudgetModel('general_2x')!)
  t.equal(done.work, 320 * 240 / 1e6, 'work: the network output, once')
  t.equal(done.budget, budget)
  t.ok((done.work as number) <= budget)

  // tampered: the params in the store claim a 40 x 30 input (priced and budgeted for it); the file holds 160 x 120
  t.equal(await s.photo('small-claim', 'general_2x', params(40, 30, 80, 60), original), 'ended')
  const j = await s.store.getJob('small-claim')
  t.equal(j?.status, 'ERROR')
  t.equal(j?.errorCode, 110400015, 'stopped by the meter')
  t.notOk(s.completed('small-claim'), 'no result')
  // the money policy by cause (server/jobs/refund.ts): the input's failure gets back the unprocessed share at most,
  // with its reason in the ledger
  const refund = (await s.store.ledger(s.keyId)).filter((e) => e.jobId === 'small-claim' && e.kind === 'refund')
  t.equal(refund.length, 1, 'refunded once')
  const m = /^input failed 110400015 at (\d+)%$/.exec(refund[0]?.reason ?? '')
  t.ok(m, `reason: ${refund[0]?.reason}`)
  t.ok(refund[0].delta <= Math.floor((10 * (100 - Number(m?.[1] ?? 0))) / 100), 'at most the unprocessed share')
})

t.test('the pool reports work and refuses a bad budget', { skip }, async (t) => {
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 2 })
  t.teardown(() => pool.close())
  const ok = await pool.enhance(png(24, 16), { model: 'general_2x', format: 'png', budget: 48 * 32 / 1e6 })
  t.ok(ok.ok && ok.work === 48 * 32 / 1e6, JSON.stringify(ok.ok ? ok.work : ok))
  const short = await pool.enhance(png(24, 16), { model: 'general_2x', format: 'png', budget: 48 * 32 / 1e6 - 1e-6 })
  t.match(short, { ok: false, error_code: 'budget_exceeded' })
  const bad = await pool.enhance(png(24, 16), { model: 'general_2x', format: 'png', budget: -1 })
  t.match(bad, { ok: false, error_code: 'invalid_argument' })
})

t.test('hole 5: a crowd of 24 faces gets MAX_FACES faces restored, within the face allowance', { skip: skip || (!hasFfmpeg && 'ffmpeg missing') }, async (t) => {
  const s = await setup(t)
  const dir = t.testdir()
  /** `cols` x `rows` copies of one real face (32 px in a 52 px tile, grey around): identical faces, so every
   *  restored face costs about the same work (the detector's boxes differ by a pixel or two). The Rust test
   *  (native/engine/tests/meter.rs) counts the faces exactly. */
  const crowd = (cols: number, rows: number) => {
    const out = path.join(dir, `crowd-${cols}x${rows}.png`)
    const face = path.join(sharedData, 'faces/cropped/0143.png')
    const r = spawnSync('ffmpeg', ['-v', 'error', '-loop', '1', '-i', face, '-vf', `scale=32:32,pad=52:52:10:10:gray,tile=${cols}x${rows}`, '-frames:v', '1', '-y', out])
    t.equal(r.status, 0, String(r.stderr))
    return { png: fs.readFileSync(out), w: cols * 52, h: rows * 52 }
  }
  const model = 'face_2x'
  const faceWork = async (c: { png: Buffer; w: number; h: number }) => {
    const p = params(c.w, c.h, c.w * 2, c.h * 2)
    const budget = photoBudget(p, catalogBudgetModel(model)!)
    const r = await s.pool.enhance(c.png, { model, format: 'png', budget })
    if (!r.ok) throw new Error(`${r.error_code}: ${r.message}`)
    const base = (c.w * 2 * c.h * 2) / 1e6
    return { faces: r.work! - base, base, work: r.work!, budget }
  }
  // four faces (under the bound: all restored): one face's work
  const one = (await faceWork(crowd(2, 2))).faces / 4
  t.ok(one > 0, `one face: ${one} MP`)
  // 24 faces: MAX_FACES of them (each about `one`; on main all 24 were restored, and no work was counted)
  const many = await faceWork(crowd(6, 4))
  const n = many.faces / one
  // (the detector's boxes vary by a few px with the picture: the exact count is the Rust test's; here: well
  // below 24 faces' work, and faces restored)
  t.ok(n <= MAX_FACES * 1.1, `${many.faces} MP of faces = ${n.toFixed(2)} faces: at most about ${MAX_FACES}, not 24`)
  t.ok(n >= MAX_FACES / 2, 'faces restored')
  t.ok(many.faces <= FACE_ALLOWANCE * many.base + 1e-9, 'within the face allowance')
  t.ok(many.work <= many.budget, 'within the job budget')
})
