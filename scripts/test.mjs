#!/usr/bin/env node
// `npm test`: every test of the project. The Rust workspace (`cargo test --release`, sharing the
// release build of the addon), the real cooperative-matrix tests on Mesa 26's lavapipe where
// `scripts/mesa-coop.sh prepare` made its root, then the tap suites. Prints tap's totals as `# tap-pass N` /
// `# tap-fail N` lines (.ci/run adds them to cargo's "test result:" lines) and exits non-zero if
// anything failed. Pass `--js` or `--rust` to run one half only; other arguments go to tap.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const only = args.includes('--js') ? 'js' : args.includes('--rust') ? 'rust' : 'all'
const tapArgs = args.filter((a) => a !== '--js' && a !== '--rust')

function run(cmd, argv, { capture = false } = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, argv, { stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'], cwd: root })
    let out = ''
    if (capture) {
      p.stdout.on('data', (d) => {
        process.stdout.write(d)
        out += d.toString()
        if (out.length > 1 << 20) out = out.slice(-(1 << 19))
      })
    }
    p.on('close', (code) => resolve({ code: code ?? 1, out }))
  })
}

// Tests run against a model directory filled the way a deployment fills it: `lucent models fetch`
// from the ../shared/models mirror (hash-checked, .mat denoisers converted). Fast once present.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
if (!process.env.LUCENT_MODEL_DIR) {
  const dir = path.join(root, 'data', 'test-models')
  const mirror = path.resolve(root, '..', 'shared', 'models')
  if (existsSync(mirror)) {
    const r = await run(process.execPath, ['--import', 'tsx', path.join(root, 'server/cli.ts'), 'models', 'fetch', '--dir', dir, '--mirror', mirror, '--all'])
    if (r.code !== 0) {
      console.error('lucent: could not prepare the test model directory')
      process.exit(1)
    }
    process.env.LUCENT_MODEL_DIR = dir
  }
}

let failed = false
if (only !== 'js') {
  const r = await run('cargo', ['test', '--release', '--workspace', '--no-fail-fast'])
  if (r.code !== 0) failed = true
  // The real cooperative-matrix kernel on Mesa 26's lavapipe, where scripts/mesa-coop.sh prepared it
  // (.ci/run does; LUCENT_REQUIRE_MESA_COOP=1 makes a missing root a failure).
  const coopRoot = path.resolve(root, process.env.LUCENT_MESA_COOP_ROOT ?? 'data/mesa-coop')
  if (existsSync(path.join(coopRoot, '.ready'))) {
    if ((await run('bash', [path.join(root, 'scripts/mesa-coop.sh'), 'test'])).code !== 0) failed = true
  } else if (process.env.LUCENT_REQUIRE_MESA_COOP === '1') {
    console.log(`test result: FAILED. 0 passed; 1 failed; (no Mesa 26 root at ${coopRoot}: bash scripts/mesa-coop.sh prepare)`)
    failed = true
  } else {
    console.log('real cooperative-matrix tests: not run (no Mesa 26 lavapipe root; bash scripts/mesa-coop.sh prepare)')
  }
}
if (only !== 'rust') {
  // the playground page the suites serve and drive in Chromium (scripts/build-playground.mjs; fast)
  if ((await run(process.execPath, [path.join(root, 'scripts/build-playground.mjs')])).code !== 0) failed = true
  const r = await run('npx', ['tap', '--reporter=tap', ...tapArgs], { capture: true })
  const m = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?/.exec(r.out.slice(-4000))
  const pass = m ? Number(m[2] ?? 0) : 0
  let fail = m ? Number(m[3] ?? 0) : 0
  if (r.code !== 0 && fail === 0) fail = 1
  console.log(`# tap-pass ${pass}`)
  console.log(`# tap-fail ${fail}`)
  if (fail > 0) failed = true
}
process.exit(failed ? 1 : 0)
