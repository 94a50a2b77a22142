/**
 * The typed client (@lucent/client, built with tsc into a temporary folder and imported from there, as a user
 * would) against a real spawned `lucent serve`: models, account, upload of a local file, submit + wait with
 * progress, typed errors with error_code, cancel, and webhook signature verification. The job runs need the
 * native addon (skipped until it is built).
 */
import t from 'tap'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { spawn, execFile, execFileSync, type ChildProcess } from 'node:child_process'
import { promisify } from 'node:util'
import { pathToFileURL } from 'node:url'
import { repoRoot, tempDir, modelDir, addonBuilt, waitFor, freePort, png, inputServer } from '../helper.js'
import type * as Client from '../../clients/typescript/src/index.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

interface T { teardown(fn: () => unknown): void }

async function buildClient(t: T): Promise<typeof Client> {
  const out = await tempDir(t, 'lucent-client-')
  await promisify(execFile)(process.execPath, [path.join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', 'clients/typescript', '--outDir', out], { cwd: repoRoot })
  fs.writeFileSync(path.join(out, 'package.json'), '{"type":"module"}')
  return import(pathToFileURL(path.join(out, 'index.js')).href) as Promise<typeof Client>
}

t.test('the client against a spawned server', async (t) => {
  const lib = await buildClient(t)
  const dataDir = await tempDir(t)
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const env = {
    ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_FETCH_ALLOW: '127.0.0.1',
    LUCENT_LOG_LEVEL: 'warn', LUCENT_PUBLIC_URL: base, LUCENT_RATE_BURST: '100000', LUCENT_RATE_PER_SEC: '100000',
  }
  const keys = (coins: number) => execFileSync(process.execPath, [bin, 'keys', 'create', '--coins', String(coins)], { env }).toString().trimEnd().split('\n').pop()!
  const key = keys(1000)
  const poor = keys(0)
  const child: ChildProcess = spawn(process.execPath, [bin, 'serve'], { env, stdio: ['ignore', 'inherit', 'inherit'] })
  t.teardown(() => { child.kill('SIGKILL') })
  const lucent = new lib.LucentClient({ baseUrl: `${base}/`, apiKey: key })
  await waitFor(async () => lucent.models().then(() => true, () => false), 180_000, 200)

  // models and account
  const models = await lucent.models()
  t.match(models.models.find((m) => m.name === 'general_4x'), { kind: 'photo', scale: 4, price: { unit: 'output_megapixels' }, limits: { max_output_mp: 432 } })
  t.ok(models.formats.photo.includes('.png') || models.formats.photo.includes('png'))
  const acct = await lucent.account()
  t.match(acct, { balance: 1000, trial: { left: 0 }, ledger: [{ kind: 'grant', delta: 1000 }] })

  // typed errors
  const err = await lucent.submitPhoto({ model_name: 'nope_9x', img_url: 'http://127.0.0.1:9/x.png', extension: '.png' }).catch((e) => e)
  t.ok(err instanceof lib.LucentError)
  t.match(err, { errorCode: 110400005, status: 400, message: 'The model is not supported' }, 'an unknown model')
  await t.rejects(lucent.submitVideo({ video_url: 'http://127.0.0.1:9/v.mp4', model_name: 'general_restore_2x', resolution: [1, 2, 3] }),
    { name: 'LucentError', errorCode: 100403000, status: 403 }, 'an ill-typed video request')
  const bad = await new lib.LucentClient({ baseUrl: base, apiKey: 'not-a-key' }).account().catch((e) => e)
  t.match(bad, { name: 'LucentError', errorCode: 110400000, status: 400 })
  const none = await new lib.LucentClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, apiKey: key }).account().catch((e) => e)
  t.match(none, { name: 'LucentError', errorCode: 0, status: 0 }, 'no answer')
  // cancel (POST /api/task-cancel): an unknown job is refused with an error_code
  const c = await lucent.cancel('0'.repeat(32)).catch((e) => e)
  t.ok(c instanceof lib.LucentError && c.errorCode > 0, `cancel of an unknown job: ${c?.errorCode}`)

  // upload a local file, then submit it
  const dir = await tempDir(t)
  const file = path.join(dir, 'in put.png')
  fs.writeFileSync(file, png(24, 18))
  const up = await lucent.upload(file)
  t.match(up, { object_key: /in_put\.png$|in%20put\.png$|in put\.png$/, size: fs.statSync(file).size })
  const got = await fetch(up.url)
  t.equal(got.status, 200)
  t.ok(Buffer.from(await got.arrayBuffer()).equals(fs.readFileSync(file)), 'the uploaded bytes')
  await t.rejects(lucent.upload(path.join(dir, 'x.unknown')), { name: 'LucentError', errorCode: 110400007 })

  const poorClient = new lib.LucentClient({ baseUrl: base, apiKey: poor })
  await t.rejects(poorClient.submitPhoto({ model_name: 'general_2x', img_url: up.url, extension: '.png' }), { name: 'LucentError', errorCode: 110402000, status: 402 })

  if (!addonBuilt) return
  const job = await lucent.submitPhoto({ model_name: 'general_2x', img_url: up.url, extension: '.png', target_width: 36 })
  t.match(job, { consume_coins: 10, model_name: 'general_2x', output_width: 36, output_height: 27 })
  const seen: number[] = []
  const done = await lucent.wait(job.job_id, { intervalMs: 50, onProgress: (p) => seen.push(p) })
  t.equal(done.status, 'COMPLETED')
  t.equal(seen.at(-1), 100)
  t.same(seen, [...seen].sort((a, b) => a - b), 'progress only goes up')
  const res = await fetch(done.res_url!)
  t.equal(res.status, 200)
  const buf = Buffer.from(await res.arrayBuffer())
  t.same([buf.readUInt32BE(16), buf.readUInt32BE(20)], [36, 27], 'PNG of the size asked for')
  t.equal((await lucent.account()).balance, 990)

  // background removal (the official client's image_segmentation call): the subject and its mask
  const photo = path.join(repoRoot, '..', 'shared', 'data', 'photos', '0014.jpg')
  if (fs.existsSync(photo) && fs.existsSync(path.join(modelDir, 'seg', 'u2netp.onnx'))) {
    const upSeg = await lucent.upload(photo)
    const seg = await lucent.submitSegmentation({ file_url: upSeg.url, return_type: 'mask', model_name: 'u2netp' })
    t.ok(seg.consume_coins > 0, `priced (${seg.consume_coins} coins)`)
    const sd = await lucent.wait(seg.job_id, { intervalMs: 50 })
    t.equal(sd.status, 'COMPLETED')
    for (const [u, what] of [[sd.res_url, 'the matted image'], [sd.mask_url, 'the mask']] as const) {
      const r = await fetch(u!)
      const b = Buffer.from(await r.arrayBuffer())
      t.same([r.status, b.subarray(1, 4).toString('latin1'), b.readUInt32BE(16), b.readUInt32BE(20)], [200, 'PNG', 179, 179], `${what}: a PNG of the photo's size`)
    }
    t.equal(sd.thumbnail_url, undefined, 'no thumbnail for return_type mask')
    t.equal((await lucent.account()).balance, 990 - seg.consume_coins)
  } else t.comment('no shared photo or u2netp: segmentation through the client not run')

  // a job that fails: wait() throws LucentJobError with the job's error_code
  const srv = await inputServer(t)
  const cut = png(32, 32)
  const failing = await lucent.submitPhoto({ model_name: 'general_2x', img_url: srv.put('cut.png', cut.subarray(0, cut.length - 40)), extension: '.png' })
  const e = await lucent.wait(failing.job_id, { intervalMs: 50 }).catch((x) => x)
  t.ok(e instanceof lib.LucentJobError, String(e))
  t.equal(e.job.status, 'ERROR')
  t.equal(e.errorCode, e.job.error_code)
  t.ok(e.errorCode > 0)

  // wait() gives up after timeoutMs, and stops on its AbortSignal (the job itself goes on)
  const slow = await lucent.submitPhoto({ model_name: 'generative_4x', img_url: up.url, extension: '.png' })
  await t.rejects(lucent.wait(slow.job_id, { timeoutMs: 150, intervalMs: 50 }), { name: 'LucentError', message: /still CONVERTING after 150 ms/ })
  const ac = new AbortController()
  setTimeout(() => ac.abort(new Error('enough')), 100)
  await t.rejects(lucent.wait(slow.job_id, { intervalMs: 30, signal: ac.signal }), { message: 'enough' })
})

t.test('webhook signatures (Standard Webhooks)', async (t) => {
  const lib = await buildClient(t)
  const key = crypto.randomBytes(24)
  const secret = `whsec_${key.toString('base64')}`
  const body = JSON.stringify({ type: 'job.completed', data: { job_id: 'abc', status: 'COMPLETED' } })
  const id = 'msg_2Lz'
  const ts = Math.floor(Date.now() / 1000)
  // the scheme, computed here independently: HMAC-SHA256(key, `${id}.${ts}.${body}`), base64
  const sig = crypto.createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64')
  t.equal(lib.signWebhook(secret, id, ts, body), `v1,${sig}`)
  const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${sig}` }
  t.match(lib.verifyWebhook(secret, headers, body), { type: 'job.completed', data: { job_id: 'abc' } })
  t.match(lib.verifyWebhook(secret, new Headers(headers), Buffer.from(body)), { type: 'job.completed' }, 'Fetch Headers, bytes')
  t.match(lib.verifyWebhook(secret, { ...headers, 'Webhook-Signature': undefined, 'webhook-signature': `v1,${'A'.repeat(44)} v1,${sig}` }, body), { type: 'job.completed' }, 'one of several signatures (key rotation)')
  const fails = (h: Record<string, string>, b = body, o?: Client.VerifyOptions) => t.throws(() => lib.verifyWebhook(secret, h, b, o), lib.WebhookVerificationError)
  fails(headers, body.replace('abc', 'abd'))
  fails({ ...headers, 'webhook-id': 'msg_other' })
  fails({ ...headers, 'webhook-signature': `v2,${sig}` })
  fails({ ...headers, 'webhook-timestamp': String(ts - 3600) })
  fails(headers, body, { now: (ts + 301) * 1000 })
  fails({ 'webhook-id': id, 'webhook-timestamp': String(ts) })
  t.throws(() => lib.verifyWebhook(`whsec_${crypto.randomBytes(24).toString('base64')}`, headers, body), { name: 'WebhookVerificationError' }, 'another secret')
})
