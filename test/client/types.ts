/**
 * The typed client (clients/typescript) cannot drift from the server: tsc compiles test/support/client-types.ts,
 * which asserts that its wire types and the server's TypeBox schemas are identical (and that a drift would be
 * caught); and the package builds with its own tsconfig, declarations included.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { repoRoot, tempDir } from '../helper.js'

const tsc = path.join(repoRoot, 'node_modules/typescript/bin/tsc')
const run = (args: string[]) => promisify(execFile)(process.execPath, [tsc, ...args], { cwd: repoRoot, timeout: 300_000 })
  .then(() => ({ ok: true, out: '' }), (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }))

t.test('client wire types = server schemas (tsc)', async (t) => {
  const r = await run([
    '--noEmit', '--strict', '--skipLibCheck', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext',
    '--resolveJsonModule', '--esModuleInterop', '--types', 'node', 'test/support/client-types.ts',
  ])
  t.ok(r.ok, r.out || 'types identical')
})

t.test('the package builds with tsc (JavaScript and declarations)', async (t) => {
  const out = await tempDir(t, 'lucent-client-build-')
  const r = await run(['-p', 'clients/typescript', '--outDir', out])
  t.ok(r.ok, r.out || 'built')
  for (const f of ['index.js', 'index.d.ts', 'types.d.ts', 'webhook.js']) t.ok(fs.existsSync(path.join(out, f)), f)
  const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'clients/typescript/package.json'), 'utf8'))
  t.equal(pkg.name, '@lucent/client')
  t.same(pkg.dependencies ?? {}, {}, 'no runtime dependencies')
})
