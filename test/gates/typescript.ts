/**
 * Gate: every TypeScript project type-checks (`tsc --noEmit`): the server, its tests and bin (tsconfig.json), the
 * typed client (clients/typescript) and the playground page (playground/, DOM types). tsx and esbuild strip
 * types without checking them, so without this a type error would run until it fails at run time.
 */
import t from 'tap'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { repoRoot } from '../helper.js'

const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc')

for (const project of ['tsconfig.json', 'clients/typescript/tsconfig.json', 'playground/tsconfig.json']) {
  t.test(`tsc --noEmit -p ${project}`, async (t) => {
    const r = spawnSync(process.execPath, [tsc, '--noEmit', '--pretty', 'false', '-p', project], { cwd: repoRoot, encoding: 'utf8', timeout: 300_000 })
    t.equal(r.status, 0, (r.stdout + r.stderr).split('\n').slice(0, 40).join('\n') || 'no output')
  })
}

t.test('the gate fails on a type error', async (t) => {
  const dir = t.testdir({
    'tsconfig.json': JSON.stringify({ compilerOptions: { strict: true, noEmit: true, types: [] }, include: ['*.ts'] }),
    'bad.ts': 'export const n: number = "not a number"\n',
  })
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '--pretty', 'false', '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' })
  t.not(r.status, 0)
  t.match(r.stdout, /TS2322/)
})
