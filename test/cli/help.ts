/**
 * The `lucent` command line's help and errors (commander): `--help` of the program and of each command with its
 * options, defaults and an example, `--version`, unknown commands and options (exit 2, a clear message).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { repoRoot } from '../helper.js'
import { lucent } from '../support/enhance-cli.js'

const version = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).version

t.test('lucent --help and --version', async (t) => {
  const h = lucent(['--help'])
  t.equal(h.status, 0)
  for (const c of ['serve', 'keys', 'models', 'enhance', 'segment', 'bench', 'native']) t.match(h.stdout, new RegExp(`^  ${c}\\b`, 'm'), `lists ${c}`)
  t.match(h.stdout, /Examples:/)
  for (const flag of ['--version', '-V']) {
    const v = lucent([flag])
    t.equal(v.status, 0)
    t.equal(v.stdout.trim(), version)
  }
})

t.test('lucent enhance --help: every option, defaults, models, examples', async (t) => {
  const h = lucent(['enhance', '--help'])
  t.equal(h.status, 0)
  for (const o of ['--model', '--video-model', '--out', '--recursive', '--format', '--video-format', '--quality', '--keep-meta', '--strip-meta',
    '--dpi', '--scale', '--width', '--height', '--resolution', '--backend', '--jobs', '--overwrite', '--json']) {
    t.match(h.stdout, new RegExp(`${o}\\b`), o)
  }
  t.match(h.stdout, /--out <dir>.*\(default:\s+"enhanced"\)/s)
  t.match(h.stdout, /--format <ext>.*\(default:\s+"keep"\)/s)
  t.match(h.stdout, /--jobs <n>.*\(default:\s+1\)/s)
  t.match(h.stdout, /Photo models: .*general_4x/)
  t.match(h.stdout, /Video models: .*general_restore_2x/)
  t.match(h.stdout, /Examples:\n  lucent enhance /)
})

t.test('every command has help with an example', async (t) => {
  for (const c of [['serve'], ['keys'], ['keys', 'create'], ['keys', 'update'], ['models'], ['models', 'fetch'], ['bench']]) {
    const h = lucent([...c, '--help'])
    t.equal(h.status, 0, c.join(' '))
    t.match(h.stdout, new RegExp(`Usage: lucent ${c.join(' ')}`), c.join(' '))
  }
  t.match(lucent(['keys', 'create', '--help']).stdout, /--coins <N>.*--trial <N>.*\(default: "0"\).*--expires.*--rate.*Example:/s)
  t.match(lucent(['models', 'fetch', '--help']).stdout, /--mirror <dir>.*--offline/s)
  t.match(lucent(['serve', '--help']).stdout, /--role <role>.*choices: "all", "gateway", "worker"/s)
})

t.test('unknown commands and options: exit 2 with a clear message', async (t) => {
  const u = lucent(['frobnicate'])
  t.equal(u.status, 2)
  t.match(u.stderr, /unknown command 'frobnicate'/)
  const o = lucent(['enhance', 'x.png', '--model', 'general_2x', '--bogus'])
  t.equal(o.status, 2)
  t.match(o.stderr, /unknown option '--bogus'/)
  const k = lucent(['keys', 'create', '--coinz', '5'])
  t.equal(k.status, 2)
  t.match(k.stderr, /unknown option '--coinz'.*Did you mean --coins\?/s)
  const m = lucent(['enhance', 'x.png'])
  t.equal(m.status, 2)
  t.match(m.stderr, /required option '-m, --model <name>' not specified/)
  const c = lucent(['enhance', 'x.png', '--model', 'general_2x', '--strip-meta', '--keep-meta'])
  t.equal(c.status, 2)
  t.match(c.stderr, /cannot be used with/)
  const s = lucent(['enhance', 'x.png', '--model', 'general_2x', '--scale', '2', '--width', '100'])
  t.equal(s.status, 2)
  t.match(s.stderr, /cannot be used with/)
  const b = lucent(['serve', '--role', 'boss'])
  t.equal(b.status, 2)
  t.match(b.stderr, /Allowed choices are all, gateway, worker/)
})
