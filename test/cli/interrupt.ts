/**
 * `lucent enhance` stopped mid-batch: SIGKILL, then a rerun (no input enhanced twice, every input once, no
 * partial output, the killed run's temporaries swept); SIGINT (exit 130, the summary says interrupted, no partial
 * or temporary file).
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { tempDir } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { events, listFiles, lucent, makePhoto, skipEngine, spawnLucent } from '../support/enhance-cli.js'

const N = 10

async function photos(t: Test) {
  const dir = await tempDir(t, 'lucent-interrupt-')
  for (let i = 0; i < N; i++) makePhoto(path.join(dir, 'in', `p${String(i).padStart(2, '0')}.png`), 96, 64, i)
  return dir
}

/** Waits until `pred` holds on the lines seen so far (or the process ends). */
async function until(lines: string[], exited: Promise<unknown>, pred: (ev: Array<{ event: string }>) => boolean) {
  let over = false
  void exited.then(() => { over = true })
  while (!over && !pred(lines.map((l) => JSON.parse(l)))) await new Promise((r) => setTimeout(r, 20))
}

/** Every output is whole: a decodable header with the model's size, and no temporary remains. */
function checkOutputs(t: Test, out: string, names: string[]) {
  for (const n of names) t.match(sniff(fs.readFileSync(path.join(out, n))), { format: 'png', width: 192, height: 128 }, `${n} whole`)
}

t.test('SIGKILL mid-batch, then a rerun: no duplicate work, no partial file', { skip: skipEngine }, async (t) => {
  const dir = await photos(t)
  const out = path.join(dir, 'out')
  const args = ['enhance', path.join(dir, 'in'), '--model', 'general_2x', '--out', out, '--backend', 'cpu', '--json']
  const run1 = spawnLucent(args)
  await until(run1.lines, run1.exited, (ev) => ev.filter((e) => e.event === 'done').length >= 2)
  run1.child.kill('SIGKILL')
  const x = await run1.exited
  t.equal(x.signal, 'SIGKILL')
  const done1 = run1.lines.map((l) => JSON.parse(l)).filter((e) => e.event === 'done').map((e) => path.basename(e.input))
  t.ok(done1.length >= 2 && done1.length < N, `killed mid-batch (${done1.length} of ${N} done)`)
  const visible = listFiles(out).filter((f) => !f.startsWith('.'))
  // every named output is whole (a file being written at the kill is a hidden temporary, never the output)
  checkOutputs(t, out, visible)
  t.ok(visible.length >= done1.length, 'every reported output exists')

  const r2 = lucent(args)
  t.equal(r2.status, 0, r2.stderr)
  const ev2 = events(r2.stdout)
  const done2 = ev2.filter((e) => e.event === 'done').map((e) => path.basename(e.input as string))
  const skipped2 = ev2.filter((e) => e.event === 'skipped').map((e) => path.basename(e.input as string))
  t.same(done2.filter((n) => done1.includes(n)), [], 'nothing done twice')
  t.same([...done2, ...skipped2].sort(), fs.readdirSync(path.join(dir, 'in')).sort(), 'every input done or skipped once')
  t.equal(skipped2.length, visible.length, 'the outputs there before are skipped')
  t.match(ev2.at(-1), { event: 'summary', done: N - visible.length, skipped: visible.length, failed: 0 })
  const all = listFiles(out)
  t.same(all, Array.from({ length: N }, (_, i) => `p${String(i).padStart(2, '0')}.png`), 'no temporaries left (swept)')
  checkOutputs(t, out, all)
})

t.test('SIGINT: exit 130, summary printed, no partial or temporary file', { skip: skipEngine }, async (t) => {
  const dir = await photos(t)
  const out = path.join(dir, 'out')
  const run = spawnLucent(['enhance', path.join(dir, 'in'), '--model', 'general_2x', '--out', out, '--backend', 'cpu', '--json', '--jobs', '2'])
  await until(run.lines, run.exited, (ev) => ev.some((e) => e.event === 'done'))
  run.child.kill('SIGINT')
  const x = await run.exited
  t.equal(x.code, 130, run.stderr())
  const ev = run.lines.map((l) => JSON.parse(l))
  const sum = ev.at(-1)
  t.match(sum, { event: 'summary', interrupted: true, failed: 0 })
  t.ok(sum.done >= 1 && sum.done < N, `stopped early (${sum.done} of ${N})`)
  const files = listFiles(out)
  t.equal(files.length, sum.done, 'exactly the outputs reported done, no temporary')
  checkOutputs(t, out, files)
})

t.test('a second SIGINT exits at once: 130, no temporary file', { skip: skipEngine }, async (t) => {
  const dir = await photos(t)
  const out = path.join(dir, 'out')
  const run = spawnLucent(['enhance', path.join(dir, 'in'), '--model', 'general_2x', '--out', out, '--backend', 'cpu', '--json'])
  await until(run.lines, run.exited, (ev) => ev.some((e) => e.event === 'begin'))
  run.child.kill('SIGINT')
  run.child.kill('SIGINT')
  const x = await run.exited
  t.equal(x.code, 130, run.stderr())
  const files = listFiles(out)
  t.same(files.filter((f) => f.includes('.part')), [], 'no temporary')
  checkOutputs(t, out, files)
})
