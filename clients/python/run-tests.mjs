#!/usr/bin/env node
// The Python client's tests as part of `npm test` (scripts/test.mjs runs this): makes a virtual environment in
// data/pyenv (once; again when requirements-test.txt changes) with pip from PyPI, runs `python -m pytest
// clients/python` (its tests start a real `lucent serve`), and prints the counts as a cargo-style line
// `test result: ok. N passed; M failed; ...`, which .ci/run adds to its totals. Where no python3 >= 3.9 is found
// (LUCENT_PYTHON names another interpreter) the tests are not run, and it says so; any other failure to set up
// counts as one failed test. Exit status: 0 when nothing failed.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '..', '..')
const venv = path.resolve(root, process.env.LUCENT_PYENV ?? 'data/pyenv')
const reqFile = path.join(here, 'requirements-test.txt')
const t0 = Date.now()

function result(passed, failed, note) {
  const ok = failed === 0 ? 'ok' : 'FAILED'
  console.log(`test result: ${ok}. ${passed} passed; ${failed} failed; (python client: pytest clients/python${note ? `, ${note}` : ''}, ${Math.round((Date.now() - t0) / 1000)} s)`)
  process.exit(failed === 0 ? 0 : 1)
}

const sh = (cmd, args, o = {}) => spawnSync(cmd, args, { cwd: root, encoding: 'utf8', ...o })

// an interpreter of 3.9 or newer
const python = process.env.LUCENT_PYTHON ?? 'python3'
const v = sh(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2]); sys.exit(0 if sys.version_info >= (3, 9) else 3)'])
if (v.error || v.status !== 0) {
  console.log(`python client tests: not run (${v.error ? `no ${python}` : `${python} is ${v.stdout.trim()}, 3.9 or newer is needed`})`)
  process.exit(0)
}

// the environment, with the test requirements installed from PyPI when they changed
const bin = path.join(venv, process.platform === 'win32' ? 'Scripts' : 'bin', process.platform === 'win32' ? 'python.exe' : 'python')
const stamp = path.join(venv, '.lucent-requirements')
const want = readFileSync(reqFile, 'utf8')
// a venv whose interpreter is gone (the system's Python upgraded) is made again
if (existsSync(bin) && sh(bin, ['-c', 'import sys']).status !== 0) rmSync(venv, { recursive: true, force: true })
if (!existsSync(bin)) {
  const r = sh(python, ['-m', 'venv', venv], { stdio: 'inherit' })
  if (r.status !== 0) {
    rmSync(venv, { recursive: true, force: true })
    result(0, 1, `\`${python} -m venv\` failed: on Debian, apt-get install python3-venv`)
  }
}
if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== want) {
  const r = sh(bin, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', reqFile], { stdio: 'inherit' })
  if (r.status !== 0) result(0, 1, 'pip install -r clients/python/requirements-test.txt failed')
  writeFileSync(stamp, want)
}

// the tests; counts from pytest's JUnit report (errors of set-up count as failures)
const tmp = mkdtempSync(path.join(os.tmpdir(), 'lucent-pytest-'))
const xml = path.join(tmp, 'report.xml')
const r = sh(bin, ['-m', 'pytest', 'clients/python', '-q', '-p', 'no:cacheprovider', `--junitxml=${xml}`], {
  stdio: 'inherit', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
})
let tests = 0, failures = 0, errors = 0, skipped = 0
if (existsSync(xml)) {
  const m = /<testsuite\b[^>]*>/.exec(readFileSync(xml, 'utf8'))
  const attr = (name) => Number((m && new RegExp(`\\b${name}="(\\d+)"`).exec(m[0]))?.[1] ?? 0)
  ;[tests, failures, errors, skipped] = ['tests', 'failures', 'errors', 'skipped'].map(attr)
}
rmSync(tmp, { recursive: true, force: true })
let failed = failures + errors
if (r.status !== 0 && failed === 0) failed = 1 // pytest itself failed (collection, usage)
result(tests - failures - errors - skipped, failed, skipped ? `${skipped} skipped` : '')
