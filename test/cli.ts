/** The `lucent keys` CLI against a DATA_DIR shared with the server. */
import t from 'tap'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { repoRoot, tempDir, modelDir } from './helper.js'
import { loadConfig } from '../server/config.js'
import { build } from '../server/app.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

t.test('keys create / list / topup / revoke', async (t) => {
  const dataDir = await tempDir(t)
  const env = { ...process.env, DATA_DIR: dataDir }
  const run = (...args: string[]) => execFileSync(process.execPath, [bin, ...args], { env }).toString()
  const out = run('keys', 'create', '--coins', '250', '--trial', '3', '--expires', '2099-01-01T00:00:00Z', '--rate', '5')
  const lines = out.trimEnd().split('\n')
  const key = lines[lines.length - 1]
  t.match(key, /^lk_[A-Za-z0-9_-]{43}$/, 'the key alone on the last line')
  t.equal(lines.filter((l) => l.includes(key)).length, 1)
  const id = /created key (k_[0-9a-f]+)/.exec(out)![1]

  const list = run('keys', 'list')
  t.match(list, new RegExp(`${id}\\t250\\t3/3\\t2099-01-01T00:00:00.000Z\\t5\\tno`))
  t.notMatch(list, key, 'list never shows the key')
  t.match(run('keys', 'topup', id, '50'), /balance 300/)
  t.match(run('keys', 'topup', key, '1'), /balance 301/, 'the key itself also names it')

  const bad = spawnSync(process.execPath, [bin, 'keys', 'create'], { env })
  t.equal(bad.status, 2)
  t.match(bad.stderr.toString(), /--coins is required/)

  // the server on the same DATA_DIR accepts the key, and refuses it once revoked
  const app = await build(loadConfig({ DATA_DIR: dataDir, LUCENT_MODEL_DIR: modelDir, LUCENT_LOG_LEVEL: 'silent', LUCENT_KEY_CACHE_MS: '0' }))
  t.teardown(() => app.close())
  const ask = () => app.inject({ method: 'POST', url: '/api/task-status', headers: { apikey: key }, payload: { job_id: 'x' } })
  t.equal((await ask()).json().error_code, 110400002)
  t.match(run('keys', 'revoke', id), /revoked/)
  t.equal((await ask()).json().error_code, 110400000)
  t.match(run('keys', 'list'), new RegExp(`${id}\\t301\\t.*\\tyes`))

  const exp = run('keys', 'create', '--coins', '1', '--expires', '2001-01-01T00:00:00Z').trimEnd().split('\n').pop()!
  const r = await app.inject({ method: 'POST', url: '/api/task-status', headers: { apikey: exp }, payload: { job_id: 'x' } })
  t.equal(r.statusCode, 401)
})
