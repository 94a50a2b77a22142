/**
 * `lucent models inspect FILE [--json]` (server/models/inspect.ts): the real CLI (bin/lucent.js) on golden model
 * files of native/models/tests/goldens (small random models, described in index.json as spandrel describes them),
 * a crafted hostile pickle (exit 1, the global named), missing files, directories and files over 2 GiB (refused
 * before reading), and bad usage (exit 2).
 *
 * The recognition cases need the addon built (npm run build:native); the file checks do not.
 */
import t from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { runModelsCli } from '../../server/models/index.js'
import { MAX_MODEL_BYTES } from '../../server/models/inspect.js'
import { zipStored } from '../support/zip.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const bin = path.join(root, 'bin', 'lucent.js')
const goldens = path.join(root, 'native/models/tests/goldens')
const built = fs.readdirSync(path.join(root, 'native/node')).some((f) => /^lucent\..+\.node$/.test(f))
const skip = built ? false : 'addon not built (npm run build:native)'
if (skip && process.env.CI) throw new Error(`CI: ${skip}`)

interface GoldenFile {
  file: string
  format: string
  spandrel: { architecture: string; scale: number; in_channels: number; out_channels: number; tags: string[] }
}
const index = JSON.parse(fs.readFileSync(path.join(goldens, 'index.json'), 'utf8')) as { configs: { files: GoldenFile[] }[] }
const golden = (file: string): GoldenFile => {
  const g = index.configs.flatMap((c) => c.files).find((f) => f.file === file)
  if (!g) throw new Error(`not in goldens/index.json: ${file}`)
  return g
}
const FORMATS: Record<string, string> = { zip: 'pytorch', legacy: 'pytorch-legacy', safetensors: 'safetensors' }

function lucent(args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, env: { ...process.env, LUCENT_MODEL_DIR: path.join(root, 'data/test-models') }, maxBuffer: 16 << 20 })
  return { status: r.status, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
}

function tmpdir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-inspect-'))
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}


t.test('golden files: architecture, scale, channels and format as the goldens say (table and --json)', { skip }, async (t) => {
  // an ESRGAN zip .pth with a pixel-unshuffle warning, a legacy ESRGAN .pth, a Compact .safetensors, SPAN, RealPLKSR
  for (const file of ['esrgan_unshuffle2_x2_nf8_nb1.0.pth', 'esrgan_x2_nf8_nb2.0.pth', 'compact_x2_nf24_nc4.0.safetensors',
    'span_x4_f8.0.pth', 'realplksr_x2_d16_nb2_k7.1.safetensors']) {
    const g = golden(file)
    const rel = path.relative(root, path.join(goldens, file))
    const j = lucent(['models', 'inspect', rel, '--json'])
    t.equal(j.status, 0, `${file} --json exit 0: ${j.stderr}`)
    t.equal(j.stdout.trim().split('\n').length, 1, `${file}: one line`)
    const o = JSON.parse(j.stdout) as Record<string, unknown>
    t.same(Object.keys(o).sort(), ['architecture', 'bytes', 'file', 'format', 'inChannels', 'outChannels', 'params', 'scale', 'tags', 'warnings'], `${file} keys`)
    t.equal(o.file, rel)
    t.equal(o.bytes, fs.statSync(path.join(goldens, file)).size, `${file} bytes`)
    t.equal(o.architecture, g.spandrel.architecture, `${file} architecture`)
    t.equal(o.scale, g.spandrel.scale, `${file} scale`)
    t.equal(o.inChannels, g.spandrel.in_channels, `${file} in channels`)
    t.equal(o.outChannels, g.spandrel.out_channels, `${file} out channels`)
    t.equal(o.format, FORMATS[g.format], `${file} format`)
    t.same(o.tags, g.spandrel.tags, `${file} tags`)
    t.ok(o.params && typeof o.params === 'object' && Object.values(o.params).every((v) => typeof v === 'string'), `${file} params: strings`)
    t.same(Object.keys(o.params as object), Object.keys(o.params as object).sort(), `${file} params sorted`)
    t.ok(Array.isArray(o.warnings), `${file} warnings`)
    if (file.startsWith('esrgan_unshuffle2')) t.match(o.warnings, [/multiple of 2/])
  }

  const h = lucent(['models', 'inspect', path.join(goldens, 'esrgan_unshuffle2_x2_nf8_nb1.0.pth')])
  t.equal(h.status, 0, h.stderr)
  t.match(h.stdout, /^architecture +ESRGAN \(ESRGAN \/ RRDBNet\)$/m)
  t.match(h.stdout, /^scale +2x$/m)
  t.match(h.stdout, /^channels +3 in, 3 out$/m)
  t.match(h.stdout, /^format +pytorch \(PyTorch zip/m)
  t.match(h.stdout, /^hyperparameters +.*\bnum_filters=8\b/m)
  t.match(h.stdout, /^warning +input sides must be a multiple of 2/m)
  const p = lucent(['models', 'inspect', path.join(goldens, 'realplksr_x2_d16_nb2_k7.1.safetensors')])
  t.equal(p.status, 0, p.stderr)
  t.match(p.stdout, /^architecture +PLKSR \(RealPLKSR, LayerNorm\)$/m)
  t.match(p.stdout, /^format +safetensors$/m)
  t.match(p.stdout, /^warnings +none$/m)
})

t.test('a crafted pickle calling posix.system: exit 1, the global named, nothing run', { skip }, async (t) => {
  const d = tmpdir()
  const marker = path.join(d, 'ran')
  // GLOBAL posix.system, the string `touch <marker>`, TUPLE1, REDUCE, STOP
  const cmd = Buffer.from(`touch ${marker}`)
  const len = Buffer.alloc(4)
  len.writeUInt32LE(cmd.length)
  const pkl = Buffer.concat([Buffer.from('\x80\x02cposix\nsystem\nX', 'latin1'), len, cmd, Buffer.from('\x85R.', 'latin1')])
  const file = path.join(d, 'evil.pth')
  fs.writeFileSync(file, zipStored([['archive/data.pkl', pkl], ['archive/version', Buffer.from('3\n')]]))
  const r = lucent(['models', 'inspect', file])
  t.equal(r.status, 1, r.stderr)
  t.equal(r.stdout, '')
  t.match(r.stderr, /posix\.system/)
  t.match(r.stderr, /not allowed/)
  t.notOk(fs.existsSync(marker), 'the command did not run')
  const j = lucent(['models', 'inspect', file, '--json'])
  t.equal(j.status, 1)
  t.equal(j.stdout, '')
  t.match(j.stderr, /posix\.system/)
})

t.test('missing files, directories, other files and files over 2 GiB: exit 1 with a clear error', async (t) => {
  const d = tmpdir()
  const m = lucent(['models', 'inspect', path.join(d, 'nope.pth')])
  t.equal(m.status, 1)
  t.match(m.stderr, /nope\.pth: no such file/)
  const dir = path.join(d, 'model.pth')
  fs.mkdirSync(dir)
  const r = lucent(['models', 'inspect', dir])
  t.equal(r.status, 1)
  t.match(r.stderr, /model\.pth: is a directory, not a model file/)
  // a sparse file one byte over the limit: refused from its size, nothing read
  const big = path.join(d, 'big.safetensors')
  fs.writeFileSync(big, '')
  fs.truncateSync(big, MAX_MODEL_BYTES + 1)
  t.equal(MAX_MODEL_BYTES, 2 * 1024 ** 3)
  const b = lucent(['models', 'inspect', big, '--json'])
  t.equal(b.status, 1)
  t.equal(b.stdout, '')
  t.match(b.stderr, /big\.safetensors: 2\.0 GiB \(2147483649 bytes\), over the limit of 2 GiB/)
  if (!skip) {
    const txt = path.join(d, 'notes.pth')
    fs.writeFileSync(txt, 'hello')
    const n = lucent(['models', 'inspect', txt])
    t.equal(n.status, 1)
    t.match(n.stderr, /notes\.pth: not a PyTorch \(\.pth\/\.pt\/\.ckpt\) or \.safetensors model file/)
  }
})

t.test('bad usage exits 2; help says nothing is stored or run, what is recognised, and that `models add` serves it', async (t) => {
  const none = lucent(['models', 'inspect'])
  t.equal(none.status, 2)
  t.match(none.stderr, /missing required argument 'file'/)
  const opt = lucent(['models', 'inspect', 'x.pth', '--jsn'])
  t.equal(opt.status, 2)
  t.match(opt.stderr, /unknown option '--jsn'/)
  const h = lucent(['models', 'inspect', '--help'])
  t.equal(h.status, 0)
  t.match(h.stdout, /Usage: lucent models inspect \[options\] <file>/)
  t.match(h.stdout, /--json/)
  t.match(h.stdout, /nothing is stored/)
  t.match(h.stdout, /SAFMN, SwinIR, DAT/)
  t.match(h.stdout, /lucent models add. serves a recognised file/s)
  t.match(lucent(['models', '--help']).stdout, /^  inspect \[options\] <file>/m)
})

t.test('runModelsCli([\'inspect\', ...]) in process', async (t) => {
  const out: string[] = []
  const err: string[] = []
  t.equal(await runModelsCli(['inspect'], (s) => out.push(s), (s) => err.push(s)), 2)
  t.equal(await runModelsCli(['inspect', 'a.pth', '--bogus'], (s) => out.push(s), (s) => err.push(s)), 2)
  t.match(err.join('\n'), /usage: lucent models inspect FILE \[--json\]/)
  if (skip) return
  t.equal(await runModelsCli(['inspect', '--json', path.join(goldens, 'compact_x2_nf24_nc4.0.safetensors')], (s) => out.push(s), (s) => err.push(s)), 0)
  const o = JSON.parse(out.at(-1)!) as { architecture: string; scale: number }
  t.equal(o.architecture, 'Compact')
  t.equal(o.scale, 2)
})
