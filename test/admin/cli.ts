/**
 * `lucent keys` and the admin API are one code path (server/admin/keys.ts): a key the CLI makes shows in the API
 * with its audit row (actor `cli`), a key the API makes shows in the CLI with its row (actor `admin:<label>`),
 * the CLI's coins changes go through the same ledger rule (never below 0, the reason on the row), and
 * `lucent admin token` prints a token and the setting line that makes a server accept it. On today's main the
 * CLI writes no audit rows and there is no admin API: these fail there.
 */
import t from 'tap'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { repoRoot, tempDir, modelDir } from '../helper.js'
import { loadConfig } from '../../server/config.js'
import { build } from '../../server/app.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

t.test('the CLI and the admin API share keys, ledger and audit trail', async (t) => {
  const dataDir = await tempDir(t)
  const env = { ...process.env, DATA_DIR: dataDir }
  const run = (...args: string[]) => execFileSync(process.execPath, [bin, ...args], { env }).toString()

  // the token the CLI makes is accepted by a server configured with the line it prints
  const tok = run('admin', 'token', '--label', 'ops').trimEnd().split('\n')
  const setting = /^LUCENT_ADMIN_TOKEN_SHA256=(ops:[0-9a-f]{64})$/.exec(tok[0])
  t.ok(setting, 'the setting line first')
  const token = tok[tok.length - 1]
  t.match(token, /^lat_[A-Za-z0-9_-]{43}$/, 'the token alone on the last line')
  t.notMatch(tok[0], token, 'the setting holds no token')

  const created = run('keys', 'create', '--coins', '10', '--reason', 'sold at the desk')
  const cliKey = /created key (k_[0-9a-f]+)/.exec(created)![1]

  const app = await build(loadConfig({ DATA_DIR: dataDir, LUCENT_MODEL_DIR: modelDir, LUCENT_LOG_LEVEL: 'silent', LUCENT_KEY_CACHE_MS: '0', LUCENT_ADMIN_TOKEN_SHA256: setting![1] }))
  t.teardown(() => app.close())
  const A = { authorization: `Bearer ${token}` }
  const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) => {
    const r = await app.inject({ method, url, headers: A, ...(payload ? { payload } : {}) })
    return { status: r.statusCode, body: r.json() }
  }

  // the CLI's key in the API, with its audit row
  t.match((await api('GET', `/admin/v1/keys/${cliKey}`)).body.data, { id: cliKey, coins: 10, disabled: false })
  t.match((await api('GET', `/admin/v1/audit?key_id=${cliKey}`)).body.data.audit, [{ action: 'key.create', actor: 'cli', reason: 'sold at the desk', delta: 10 }])

  // the API's key in the CLI, with its audit row
  const apiKey = (await api('POST', '/admin/v1/keys', { coins: 5, reason: 'sold online' })).body.data.key.id as string
  t.match(run('keys', 'list'), new RegExp(`${apiKey}\\t5\\t`))

  // coins by the CLI: the same rule (never below 0, exit 2 with the reason why), the reason on the ledger row
  const neg = spawnSync(process.execPath, [bin, 'keys', 'adjust', cliKey, '-11', '--reason', 'too much'], { env })
  t.equal(neg.status, 2)
  t.match(neg.stderr.toString(), /below 0: the key has 10 coins/)
  t.match(run('keys', 'adjust', cliKey, '-4', '--reason', 'refund reversed'), new RegExp(`${cliKey}: -4 coins, balance 6`))
  t.match((await api('GET', `/admin/v1/keys/${cliKey}/ledger`)).body.data.ledger[0], { kind: 'adjust', delta: -4, balance_after: 6, reason: 'refund reversed' })

  // a CLI revoke is an audited update the API sees
  run('keys', 'revoke', apiKey, '--reason', 'chargeback')
  t.equal((await api('GET', `/admin/v1/keys/${apiKey}`)).body.data.disabled, true)

  const audit = run('keys', 'audit').trimEnd().split('\n').slice(1).map((l) => l.split('\t'))
  const rows = audit.map(([, , actor, action, key, delta, reason]) => ({ actor, action, key, delta, reason }))
  t.match(rows, [
    { actor: 'cli', action: 'key.update', key: apiKey, reason: 'chargeback' },
    { actor: 'cli', action: 'coins.adjust', key: cliKey, delta: '-4', reason: 'refund reversed' },
    { actor: 'admin:ops', action: 'key.create', key: apiKey, delta: '5', reason: 'sold online' },
    { actor: 'cli', action: 'key.create', key: cliKey, delta: '10', reason: 'sold at the desk' },
  ], 'every change of both, newest first; the refused adjustment wrote nothing')
  t.equal(rows.length, 4)
})
