#!/usr/bin/env node
// `npm test`: every test of the project. The Rust workspace (`cargo test --release`, sharing the
// release build of the addon), then the tap suites. Prints tap's totals as `# tap-pass N` /
// `# tap-fail N` lines (.ci/run adds them to cargo's "test result:" lines) and exits non-zero if
// anything failed. Pass `--js` or `--rust` to run one half only; other arguments go to tap.
import { spawn } from 'node:child_process'

const args = process.argv.slice(2)
const only = args.includes('--js') ? 'js' : args.includes('--rust') ? 'rust' : 'all'
const tapArgs = args.filter((a) => a !== '--js' && a !== '--rust')

function run(cmd, argv, { capture = false } = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, argv, { stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'] })
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

let failed = false
if (only !== 'js') {
  const r = await run('cargo', ['test', '--release', '--workspace'])
  if (r.code !== 0) failed = true
}
if (only !== 'rust') {
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
