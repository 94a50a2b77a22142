/**
 * Abuse, issue 29 hole 7 as measured ("8 submissions naming one 200 MB upload took the gateway to 1.8 GB RSS"): a
 * photo input under the photo size limit was read whole into memory once per submission. Now it is spooled to a
 * temporary file and read whole only for its header facts, within the per-process budget LUCENT_INPUT_MEMORY_BYTES
 * (server/input.ts): parallel submissions naming one large upload keep the gateway's memory bounded by the budget,
 * and each is accepted at the right price or refused 503 + Retry-After (100500007) with nothing debited.
 */
import t from 'tap'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { build, createKey, post, png, balance, tempDir } from '../helper.js'
import { MemoryBudget, inputBudget } from '../../server/input.js'
import type { FastifyInstance } from 'fastify'

const MiB = 1024 * 1024

/** A sparse file on disk holding a valid 8x8 PNG of `n` bytes: its header and IHDR, one private ancillary chunk of
 *  zeros (a hole: nothing written), then its IDAT and IEND. */
async function sparsePng(dir: string, n: number): Promise<string> {
  const head = png(8, 8)
  const ihdrEnd = 8 + 25
  const pad = n - head.length - 12
  const file = path.join(dir, 'big.png')
  const fh = await fsp.open(file, 'w')
  try {
    const lead = Buffer.alloc(8)
    lead.writeUInt32BE(pad, 0)
    lead.write('zzZz', 4, 'latin1') // ancillary, private, safe to copy: every reader skips it
    await fh.write(head.subarray(0, ihdrEnd), 0, ihdrEnd, 0)
    await fh.write(lead, 0, 8, ihdrEnd)
    // the chunk's CRC stays zero (the queue is paused: nothing decodes it); the rest (IDAT, IEND) after the zeros
    const rest = head.subarray(ihdrEnd, head.length)
    await fh.write(rest, 0, rest.length, ihdrEnd + 8 + pad + 4)
  } finally {
    await fh.close()
  }
  t.equal((await fsp.stat(file)).size, n, 'the sparse PNG has its size')
  return file
}

async function storeUpload(app: FastifyInstance, file: string): Promise<string> {
  const key = 'u/0123456789abcdef0123456789abcdef/big.png'
  await app.lucent.storage.putStream(key, fs.createReadStream(file), 'image/png', Number.MAX_SAFE_INTEGER)
  return app.lucent.storage.signedGetUrl(key, Date.now() + 3600_000)
}

const tmpInputs = (app: FastifyInstance) => {
  const d = path.join(app.lucent.config.dataDir, 'tmp')
  return fs.existsSync(d) ? fs.readdirSync(d).filter((f) => f.startsWith('in-')) : []
}

t.test('12 parallel submissions naming one 32 MiB upload: memory bounded by the input budget, each accepted at its price or 503', async (t) => {
  const budget = 64 * MiB
  const app = await build(t, { LUCENT_INPUT_MEMORY_BYTES: String(budget) })
  app.lucent.queue.pause()
  const { key, id } = await createKey(app, { coins: 10_000 })
  const size = 32 * MiB
  const url = await storeUpload(app, await sparsePng(await tempDir(t), size))
  // the price of the same 8x8 picture, small
  const srvKey = 'u/fedcba9876543210fedcba9876543210/small.png'
  await app.lucent.storage.put(srvKey, png(8, 8), 'image/png')
  const ref = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: app.lucent.storage.signedGetUrl(srvKey, Date.now() + 3600_000), extension: '.png' })
  t.equal(ref.statusCode, 200)
  const price = ref.json().data.consume_coins as number
  const before = await balance(app, id)

  global.gc?.()
  const m0 = process.memoryUsage()
  let peakRss = m0.rss
  let peakAb = m0.arrayBuffers
  const timer = setInterval(() => {
    const m = process.memoryUsage()
    peakRss = Math.max(peakRss, m.rss)
    peakAb = Math.max(peakAb, m.arrayBuffers)
  }, 2)
  const n = 12
  const rs = await Promise.all(Array.from({ length: n }, () =>
    post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })))
  clearInterval(timer)
  const rss = (peakRss - m0.rss) / MiB
  const ab = (peakAb - m0.arrayBuffers) / MiB
  const accepted = rs.filter((r) => r.statusCode === 200)
  const refused = rs.filter((r) => r.statusCode !== 200)
  t.comment(`${n} parallel submissions naming one ${size / MiB} MiB upload, budget ${budget / MiB} MiB: ${accepted.length} accepted, ` +
    `peak growth arrayBuffers ${ab.toFixed(0)} MiB, RSS ${rss.toFixed(0)} MiB (whole reads: >= ${(n * size) / MiB} MiB)`)
  // bounds: the budget plus a few inputs' worth of garbage not yet collected (generous, against flakes; whole reads
  // measured 894 MiB arrayBuffers / 1431 MiB RSS with 12 x 64 MiB, about 14 and 22 inputs)
  const abMax = budget / MiB + 4 * size / MiB
  const rssMax = budget / MiB + 6 * size / MiB + 64
  t.ok(ab < abMax, `peak arrayBuffers growth ${ab.toFixed(0)} MiB < ${abMax} MiB`)
  t.ok(rss < rssMax, `peak RSS growth ${rss.toFixed(0)} MiB < ${rssMax} MiB`)
  t.ok(accepted.length >= 1, 'some accepted')
  t.ok(accepted.every((r) => r.json().data.consume_coins === price), `each accepted one priced as the 8x8 picture it is (${price})`)
  t.ok(refused.every((r) => r.statusCode === 503 && r.json().error_code === 100500007 && /^\d+$/.test(String(r.headers['retry-after']))),
    'the others: 503 100500007 + Retry-After')
  t.equal(await balance(app, id), before - accepted.length * price, 'only the accepted ones debited')
  t.equal((await app.lucent.store.ledger(id)).filter((e) => e.kind === 'debit').length, 1 + accepted.length, 'one debit row each')
  t.same(tmpInputs(app), [], 'no temporary input left behind')
  t.equal(inputBudget(app.lucent.config).inUse, 0, 'the budget is free again')
})

t.test('the budget full past the wait: 503 + Retry-After, nothing debited, nothing stored', async (t) => {
  const app = await build(t, { LUCENT_INPUT_MEMORY_BYTES: String(MiB) })
  app.lucent.queue.pause()
  const { key, id } = await createKey(app, { coins: 100 })
  const k = 'u/0123456789abcdef0123456789abcdef/a.png'
  await app.lucent.storage.put(k, png(8, 8), 'image/png')
  const url = app.lucent.storage.signedGetUrl(k, Date.now() + 3600_000)
  const hold = (await inputBudget(app.lucent.config).take(MiB, 0))!
  t.ok(hold, 'the test holds the whole budget')
  const r = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })
  t.equal(r.statusCode, 503)
  t.equal(r.json().error_code, 100500007)
  t.match(String(r.headers['retry-after']), /^[1-9]\d*$/, 'Retry-After')
  t.equal(await balance(app, id), 100, 'nothing debited')
  t.equal((await app.lucent.store.jobsByStatus('CONVERTING')).length, 0, 'no job')
  const originals = path.join(app.lucent.config.dataDir, 'objects', 'o')
  t.notOk(fs.existsSync(originals) && fs.readdirSync(originals).length, 'no original stored')
  t.same(tmpInputs(app), [], 'the temporary input removed')
  hold()
  t.equal((await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: url, extension: '.png' })).statusCode, 200, 'room again')
})

t.test('MemoryBudget: FIFO, an input larger than the budget alone, a wait that ends', async (t) => {
  const b = new MemoryBudget(100)
  const a = (await b.take(60, 0))!
  const order: string[] = []
  const big = b.take(500, 1000).then((r) => { order.push('big'); return r })
  const small = b.take(10, 1000).then((r) => { order.push('small'); return r })
  await new Promise((r) => setTimeout(r, 20))
  t.same(order, [], 'the large one waits at the head; the small one behind it (FIFO, no starvation)')
  a()
  const rb = (await big)!
  t.equal(b.inUse, 500, 'larger than the budget: granted alone')
  rb()
  ;(await small)!()
  t.same(order, ['big', 'small'])
  t.equal(b.inUse, 0)
  const h = (await b.take(100, 0))!
  t.equal(await b.take(1, 30), null, 'no room within the wait: null')
  h()
  h()
  t.equal(b.inUse, 0, 'a release counts once')
})
