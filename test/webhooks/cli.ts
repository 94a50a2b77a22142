/** `lucent keys create --webhook` / `keys update --webhook|--webhook-secret`: secrets in the Standard Webhooks
 *  form, the key kept on the last line, private URLs refused, and an older key without a secret. */
import t from 'tap'
import path from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import { repoRoot, tempDir, modelDir, inputServer, png } from '../helper.js'
import { loadConfig } from '../../server/config.js'
import { build } from '../../server/app.js'
import { newApiKey } from '../../server/auth.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

t.test('keys create / update with webhooks', async (t) => {
  const dataDir = await tempDir(t)
  const env = { ...process.env, DATA_DIR: dataDir, LUCENT_FETCH_ALLOW: '127.0.0.1' }
  const run = (...args: string[]) => execFileSync(process.execPath, [bin, ...args], { env }).toString().trimEnd().split('\n')
  const fails = (...args: string[]) => {
    const r = spawnSync(process.execPath, [bin, ...args], { env })
    return { status: r.status, stderr: r.stderr.toString() }
  }
  const created = run('keys', 'create', '--coins', '100', '--webhook', 'http://127.0.0.1:9/hook')
  const key = created[created.length - 1]
  const secret = created[created.length - 2]
  t.match(key, /^lk_[A-Za-z0-9_-]{43}$/, 'the key alone on the last line')
  t.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/, 'its secret on the line before')
  t.match(created.join('\n'), /webhook=http:\/\/127\.0\.0\.1:9\/hook/)
  const id = /created key (k_[0-9a-f]+)/.exec(created.join('\n'))![1]

  for (const url of ['http://10.0.0.1/x', 'http://localhost:9/x']) {
    const bad = fails('keys', 'create', '--coins', '1', '--webhook', url)
    t.equal(bad.status, 2, url)
    t.match(bad.stderr, /--webhook: .*private/)
  }
  t.match(fails('keys', 'update', id, '--webhook', 'ftp://example.com').stderr, /http or https/)
  t.match(fails('keys', 'update', id).stderr, /give --webhook URL/)

  t.match(run('keys', 'update', id, '--webhook', '').join('\n'), /webhook=none secret=set/, 'cleared, secret kept')
  const rotated = run('keys', 'update', key, '--webhook-secret')
  const secret2 = rotated[rotated.length - 1]
  t.match(secret2, /^whsec_/)
  t.not(secret2, secret, 'a new secret')

  // an older key (made before webhooks: no secret) is refused a callback until it gets one
  const cfg = loadConfig({ DATA_DIR: dataDir, LUCENT_MODEL_DIR: modelDir, LUCENT_LOG_LEVEL: 'silent', LUCENT_KEY_CACHE_MS: '0', LUCENT_FETCH_ALLOW: '127.0.0.1' })
  const app = await build(cfg)
  t.teardown(() => app.close())
  app.lucent.queue.pause()
  const old = newApiKey()
  await app.lucent.store.createKey({ id: old.id, hash: old.hash, coins: 100, trial: 0, expiresAt: null, rate: null })
  const srv = await inputServer(t)
  const submit = () => app.inject({ method: 'POST', url: '/api/photo-enhancer', headers: { apikey: old.key },
    payload: { model_name: 'general_2x', img_url: srv.put('o.png', png(8, 8)), extension: '.png', callback_url: 'http://127.0.0.1:9/h' } })
  t.equal((await submit()).json().error_code, 110400022)
  const made = run('keys', 'update', old.id, '--webhook-secret')
  t.match(made[made.length - 1], /^whsec_/)
  t.equal((await submit()).statusCode, 200, 'accepted once the key has a secret')
  t.equal((await app.lucent.store.webhooks.keyWebhook(old.id)).secret, made[made.length - 1])
})
