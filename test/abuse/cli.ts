/**
 * `lucent enhance` misused (issue 22, the CLI's holes): one test per hole, real files in temp dirs, the real CLI.
 * The CLI never writes over an input, refuses an --out that holds a folder input (exit 2 with a hint), follows no
 * symlink loop, never reads its own outputs back as inputs, and never writes outside --out.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { tempDir } from '../helper.js'
import { events, listFiles, lucent, makePhoto, skipEngine } from '../support/enhance-cli.js'

const model = ['--model', 'sharpen_denoise_1x', '--backend', 'cpu']
const done = (stdout: string) => events(stdout).filter((e) => e.event === 'done')

t.test('an output that is its own input (--out its folder, or that folder through a symlink) is refused, not overwritten', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'a.png'), 24, 16)
  makePhoto(path.join(dir, 'in', 'b.png'), 24, 16, 1)
  fs.symlinkSync('in', path.join(dir, 'link'))
  const a = fs.readFileSync(path.join(dir, 'a.png'))
  const b = fs.readFileSync(path.join(dir, 'in', 'b.png'))

  const r = lucent(['enhance', 'a.png', '--out', '.', '--overwrite', ...model, '--json'], dir)
  t.equal(r.status, 2, `bad usage\n${r.stdout}${r.stderr}`)
  t.match(r.stderr, /a\.png.*its own input[^]*--out/, 'says why and what to change')
  t.same(fs.readFileSync(path.join(dir, 'a.png')), a, 'the input is untouched')

  const r2 = lucent(['enhance', 'in/b.png', '--out', 'link', '--overwrite', ...model, '--json'], dir)
  t.equal(r2.status, 2, `bad usage\n${r2.stdout}${r2.stderr}`)
  t.same(fs.readFileSync(path.join(dir, 'in', 'b.png')), b, 'the input is untouched (same file through a symlinked --out)')

  // an output that is another input of the batch
  makePhoto(path.join(dir, 'x', 'c.jpg'), 24, 16, 2)
  makePhoto(path.join(dir, 'y', 'c.png'), 24, 16, 3)
  const c = fs.readFileSync(path.join(dir, 'y', 'c.png'))
  const r3 = lucent(['enhance', 'x/c.jpg', 'y/c.png', '--out', 'y', '--format', 'png', '--overwrite', ...model], dir)
  t.equal(r3.status, 2, `bad usage\n${r3.stdout}${r3.stderr}`)
  t.same(fs.readFileSync(path.join(dir, 'y', 'c.png')), c, 'the other input is untouched')
})

t.test('an --out at or above a folder input (or a glob\'s folder) is refused with exit 2 and a hint', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'in', 'a.png'), 24, 16)
  makePhoto(path.join(dir, 'in', 'sub', 'b.png'), 24, 16, 1)
  const before = listFiles(dir)
  for (const args of [['in', '--out', '.'], ['in', '--out', 'in', '--overwrite'], ['in', '-r', '--out', dir], ['in/*.png', '--out', '.']]) {
    const r = lucent(['enhance', ...args, ...model], dir)
    t.equal(r.status, 2, `${args.join(' ')}: bad usage, not a silent no-op\n${r.stdout}${r.stderr}`)
    t.match(r.stderr, /--out .*(holds|is) the input folder .*in.*\n.*hint: .*--out/, `${args.join(' ')}: the reason and a hint`)
    t.same(listFiles(dir), before, `${args.join(' ')}: nothing written`)
  }
})

t.test('an --out that is the input folder under another name (a symlink) does not overwrite the inputs', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'in', 'a.png'), 24, 16)
  fs.symlinkSync('in', path.join(dir, 'same'))
  const a = fs.readFileSync(path.join(dir, 'in', 'a.png'))
  const r = lucent(['enhance', 'in', '--out', 'same', '--overwrite', ...model, '--json'], dir)
  t.equal(r.status, 2, `bad usage\n${r.stdout}${r.stderr}`)
  t.same(fs.readFileSync(path.join(dir, 'in', 'a.png')), a, 'the input is untouched')
  t.same(listFiles(path.join(dir, 'in')), ['a.png'])
})

t.test('an --out inside the input folder, named through a symlink, is not read back as input on a rerun', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'in', 'a.png'), 24, 16)
  fs.mkdirSync(path.join(dir, 'in', 'enhanced'))
  fs.symlinkSync(path.join('in', 'enhanced'), path.join(dir, 'o'))
  const args = ['enhance', 'in', '-r', '--out', 'o', ...model, '--json']
  const r1 = lucent(args, dir)
  t.equal(r1.status, 0, r1.stderr)
  t.equal(done(r1.stdout).length, 1)
  const r2 = lucent(args, dir)
  t.equal(r2.status, 0, r2.stderr)
  t.match(events(r2.stdout).at(-1), { event: 'summary', done: 0, skipped: 1, failed: 0 }, 'the rerun enhances no output of the first run')
  t.same(listFiles(path.join(dir, 'in')), ['a.png', path.join('enhanced', 'a.png')])
})

t.test('a symlink loop under --recursive (and under a ** glob) is not followed: each file once', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'in', 'a.png'), 16, 16)
  fs.mkdirSync(path.join(dir, 'in', 'sub'))
  fs.symlinkSync('..', path.join(dir, 'in', 'sub', 'loop'))
  const r = lucent(['enhance', 'in', '-r', '--out', 'out', ...model, '--json'], dir)
  t.equal(r.status, 0, r.stderr)
  t.same(done(r.stdout).map((e) => path.relative(dir, e.input as string)), [path.join('in', 'a.png')], 'a.png enhanced once')
  t.same(events(r.stdout).filter((e) => e.event === 'ignored').map((e) => [path.relative(dir, e.input as string), e.reason]),
    [[path.join('in', 'sub', 'loop'), 'symlink_loop']], 'the loop is ignored and counted')
  t.same(listFiles(path.join(dir, 'out')), ['a.png'])

  const g = lucent(['enhance', 'in/**/*.png', '--out', 'gout', ...model, '--json'], dir)
  t.equal(g.status, 0, g.stderr)
  t.equal(done(g.stdout).length, 1, 'a glob through the loop: once')
  t.same(listFiles(path.join(dir, 'gout')), ['a.png'])
})

t.test('a glob whose matches climb out of its folder (..) writes nothing outside --out', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  fs.mkdirSync(path.join(dir, 'in', 'sub'), { recursive: true })
  makePhoto(path.join(dir, 'outside', 'z.png'), 16, 16)
  const out = path.join(dir, 'o', 'deep')
  const r = lucent(['enhance', 'in/*/../../outside/*.png', '--out', out, ...model, '--json'], dir)
  t.equal(r.status, 1, `the file fails\n${r.stdout}${r.stderr}`)
  t.match(events(r.stdout).find((e) => e.event === 'failed'), { input: path.join(dir, 'outside', 'z.png'), error_code: 100403000, detail: /outside --out/ })
  t.same(listFiles(path.join(dir, 'o')), [], 'nothing written beside --out')
  t.same(listFiles(path.join(dir, 'outside')), ['z.png'])
})

t.test('a symlinked folder inside --out does not carry an output outside --out', { skip: skipEngine }, async (t) => {
  const dir = await tempDir(t, 'lucent-abuse-')
  makePhoto(path.join(dir, 'in', 'a.png'), 16, 16)
  makePhoto(path.join(dir, 'in', 'sub', 'b.png'), 16, 16, 1)
  fs.mkdirSync(path.join(dir, 'out'))
  fs.mkdirSync(path.join(dir, 'elsewhere'))
  fs.symlinkSync(path.join('..', 'elsewhere'), path.join(dir, 'out', 'sub'))
  const r = lucent(['enhance', 'in', '-r', '--out', 'out', ...model, '--json'], dir)
  t.equal(r.status, 1, `the file fails\n${r.stdout}${r.stderr}`)
  t.match(events(r.stdout).find((e) => e.event === 'failed'), { input: path.join(dir, 'in', 'sub', 'b.png'), error_code: 100403000, detail: /outside --out/ })
  t.same(listFiles(path.join(dir, 'elsewhere')), [], 'nothing written through the symlink')
  t.same(done(r.stdout).map((e) => path.relative(dir, e.output as string)), [path.join('out', 'a.png')], 'the rest of the batch is done')
})
