/**
 * `lucent models add | list | remove` and `lucent enhance --model NAME` for an own model, as an operator runs them
 * (spawned, SQLite in DATA_DIR): what add prints, its exit statuses (0 added, 1 refused with nothing stored, 2 bad
 * usage), list before and after, enhance through the own model (photo and video), remove.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { repoRoot } from '../helper.js'
import { lucent, makePhoto, makeVideo, skipEngine, events } from '../support/enhance-cli.js'

const MODEL = path.join(repoRoot, 'native/models/tests/goldens/compact_x4_nf16_nc2.0.pth')

t.test('add, list, enhance with, remove an own model from the command line', { skip: skipEngine }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-own-cli-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const data = path.join(dir, 'data')
  const run = (...args: string[]) => lucent(args, repoRoot, { DATA_DIR: data })

  // listing creates no store
  const l0 = run('models', 'list')
  t.equal(l0.status, 0, l0.stderr)
  t.notMatch(l0.stdout, /own models/)
  t.notOk(fs.existsSync(path.join(data, 'lucent.db')), 'list made no database')

  const a = run('models', 'add', MODEL, '--name', 'tiny_4x', '--description', 'four times, tiny')
  t.equal(a.status, 0, a.stderr)
  t.match(a.stdout, /^added tiny_4x: Compact 4x \(pytorch\), both, sha256 [0-9a-f]{64}\n$/)
  t.match(a.stderr, /found: Compact, 4x, pytorch/)
  t.match(a.stderr, /smoke run: 32x32 -> 128x128/)
  const l1 = run('models', 'list')
  t.match(l1.stdout, /own models \(lucent models add\): 1\ntiny_4x +both +4x +Compact +pytorch +photo:enhance video:standard +[0-9a-f]{12} +four times, tiny/)

  // refusals: exit 1, nothing stored; bad usage: exit 2
  const again = run('models', 'add', MODEL, '--name', 'tiny_4x')
  t.equal(again.status, 1)
  t.match(again.stderr, /exists/)
  const shadow = run('models', 'add', MODEL, '--name', 'general_4x')
  t.equal(shadow.status, 1)
  t.match(shadow.stderr, /catalog model/)
  const junk = path.join(dir, 'junk.safetensors')
  fs.writeFileSync(junk, Buffer.from([8, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 34, 58, 123, 125, 125]))
  const bad = run('models', 'add', junk)
  t.equal(bad.status, 1, bad.stderr)
  t.equal(bad.stdout, '')
  t.equal(run('models', 'add', MODEL, '--kind', 'gif').status, 2)
  t.equal(run('models', 'add', MODEL, '--name', 'x', '--price-class', 'luxury').status, 2)
  t.match(run('models', 'list').stdout, /own models \(lucent models add\): 1\n/, 'still one')

  // the batch command runs it like a catalog model, photos and videos
  makePhoto(path.join(dir, 'in', 'a.png'), 40, 30)
  makeVideo(path.join(dir, 'in', 'b.mp4'), 32, 24, 1)
  const e = run('enhance', path.join(dir, 'in'), '--model', 'tiny_4x', '--out', path.join(dir, 'out'), '--json')
  t.equal(e.status, 0, e.stderr)
  const done = events(e.stdout).filter((x) => x.event === 'done')
  t.same(done.map((x) => [path.basename(String(x.output)), x.width, x.height]).sort(), [['a.png', 160, 120], ['b.mp4', 128, 96]])

  const r = run('models', 'remove', 'tiny_4x')
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout, 'removed tiny_4x\n')
  t.match(run('models', 'list').stdout, /own models \(lucent models add\): 0\n/)
  t.equal(run('models', 'remove', 'tiny_4x').status, 1)
  t.equal(run('models', 'remove', 'general_4x').status, 1)
  const gone = run('enhance', path.join(dir, 'in', 'a.png'), '--model', 'tiny_4x', '--out', path.join(dir, 'out2'))
  t.equal(gone.status, 2)
  t.match(gone.stderr, /unknown model tiny_4x/)
  t.same(fs.readdirSync(path.join(data, 'objects'), { recursive: true }).filter((f) => String(f).endsWith('.pth')), [], 'weights deleted')
})
