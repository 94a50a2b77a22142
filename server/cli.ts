/**
 * The `lucent` CLI.
 *   lucent serve [--role gateway|worker|all]   serve (PORT, HOST, DATA_DIR, LUCENT_* : see server/config.ts); --role
 *                                              overrides LUCENT_ROLE: gateway = HTTP API only, worker = runs jobs
 *                                              from the shared queue (LUCENT_REDIS_URL), all = both (default)
 *   (keys: against LUCENT_DATABASE_URL when set, else DATA_DIR/lucent.db)
 *   lucent keys create --coins N [--trial N] [--expires ISO8601] [--rate R] [--webhook URL]
 *                                              prints the key's webhook secret (whsec_...) on the line before the
 *                                              new key, which is alone on the last line (both shown only this once)
 *   lucent keys update KEY [--webhook URL|''] [--webhook-secret]
 *                                              sets (or clears) the key's default webhook URL; --webhook-secret makes
 *                                              a new signing secret and prints it on the last line
 *   lucent keys list                           id, balance, trial left, expiry, rate, revoked
 *   lucent keys revoke KEY                     KEY: the key itself, its id (k_...), or an unambiguous id/hash prefix
 *   lucent keys topup KEY N                    adds N coins (ledger row 'topup')
 *   lucent models list|fetch|verify [...]       model files (server/models/cli.ts: --dir --mirror --all --force ...)
 *   lucent bench --model NAME --input FILE [--backend cpu|gpu] [--runs N] [--json]
 *                                              times the engine alone (the Rust `lucent-native bench` binary)
 */
import { parseArgs } from 'node:util'
import { loadConfig, type Config } from './config.js'
import { openStore } from './backends.js'
import { hashKey, newApiKey } from './auth.js'
import { newWebhookSecret } from './webhooks/signing.js'
import { checkCallbackUrl } from './webhooks/target.js'

function die(msg: string): never {
  process.stderr.write(`lucent: ${msg}\n`)
  process.exit(2)
}

function intArg(v: string | undefined, name: string, def?: number): number {
  if (v === undefined) {
    if (def === undefined) die(`--${name} is required`)
    return def
  }
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) die(`--${name} must be a non-negative integer`)
  return n
}

async function serve(args: string[]) {
  const { values } = parseArgs({ args, options: { role: { type: 'string' } } })
  let config
  try {
    config = loadConfig(values.role ? { ...process.env, LUCENT_ROLE: values.role } : process.env)
  } catch (e) {
    die((e as Error).message)
  }
  const { default: cluster } = await import('node:cluster')
  const clustered = config.httpProcesses > 1
  if (clustered && config.role === 'worker') die('LUCENT_HTTP_PROCESSES applies to the all and gateway roles (a worker serves no API)')
  const child = clustered && cluster.isWorker
  if (config.role !== 'gateway' && !child) {
    // Workers run the models: refuse to start when a model file is missing or fails its sha256.
    const { assertModelsReady, requiredFiles } = await import('./models/index.js')
    try {
      await assertModelsReady(config.modelDir, requiredFiles())
    } catch (e) {
      die(`cannot start: ${(e as Error).message}`)
    }
  }
  if (clustered && cluster.isPrimary) return servePrimary(config)
  const { build } = await import('./app.js')
  const link = child ? new (await import('./cluster.js')).ClusterLink() : null
  let app
  try {
    app = await build(config, link ? { cluster: { mode: 'child', link } } : {})
  } catch (e) {
    die(`cannot start: ${(e as Error).message}`)
  }
  let addr
  try {
    addr = await app.listen({ port: config.port, host: config.host })
  } catch (e) {
    die(`cannot listen on ${config.host}:${config.port}: ${(e as Error).message}`)
  }
  if (!config.publicUrlFromEnv) {
    const a = app.server.address()
    if (a && typeof a === 'object') config.publicUrl = `http://${config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host}:${a.port}`
  }
  app.log.info({ addr, role: config.role, publicUrl: config.publicUrl, dataDir: config.dataDir, modelDir: config.modelDir, httpProcess: child ? cluster.worker?.id : undefined,
    store: config.databaseUrl ? 'postgres' : 'sqlite', queue: config.redisUrl ? 'bullmq' : child ? 'primary (ipc)' : 'memory', storage: config.s3 ? 's3' : 'disk' }, 'lucent serving')
  link?.notifyListening(addr)
  let closing = false
  const stop = () => {
    if (closing) return
    closing = true
    app.close().then(() => process.exit(0), () => process.exit(1))
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // an HTTP child stops with its primary
  if (child) process.on('disconnect', stop)
}

/** The cluster primary: the engine host (role all) plus supervision of the HTTP children (server/cluster.ts). */
async function servePrimary(config: Config) {
  const { superviseChildren } = await import('./cluster.js')
  const { build } = await import('./app.js')
  let app: Awaited<ReturnType<typeof build>> | null = null
  if (config.role === 'all') {
    try {
      app = await build(config, { cluster: { mode: 'primary' } })
      await app.ready()
    } catch (e) {
      die(`cannot start: ${(e as Error).message}`)
    }
  }
  const line = (level: string) => (o: object, msg: string) => {
    if (app) app.log[level as 'info'](o, msg)
    else process.stdout.write(`${JSON.stringify({ level, time: Date.now(), pid: process.pid, ...o, msg })}\n`)
  }
  const log = { info: line('info'), warn: line('warn'), error: line('error') }
  let closing = false
  const stop = (code: number) => {
    if (closing) return
    closing = true
    sup.stop().then(() => app?.close()).then(() => process.exit(code), () => process.exit(1))
  }
  const sup = superviseChildren({
    processes: config.httpProcesses,
    log,
    onListening: (addrs) => log.info({ addr: addrs.join(', '), processes: config.httpProcesses, role: config.role, dataDir: config.dataDir,
      store: config.databaseUrl ? 'postgres' : 'sqlite', queue: config.redisUrl ? 'bullmq' : 'memory (primary)' }, 'lucent serving (cluster)'),
    onFatal: (msg) => {
      process.stderr.write(`lucent: cannot start: ${msg}\n`)
      stop(2)
    },
  })
  process.on('SIGTERM', () => stop(0))
  process.on('SIGINT', () => stop(0))
}

async function keys(args: string[]) {
  const [sub, ...rest] = args
  const config = loadConfig()
  let store: Awaited<ReturnType<typeof openStore>>
  try {
    store = await openStore(config)
  } catch (e) {
    die(`cannot open the store: ${(e as Error).message}`)
  }
  const webhookUrl = async (raw: string | undefined): Promise<string | null | undefined> => {
    if (raw === undefined) return undefined
    if (raw.trim() === '') return null
    const c = await checkCallbackUrl(raw.trim(), config.fetchAllow)
    if (!c.ok) die(`--webhook: ${c.detail}`)
    return c.url
  }
  const resolve = async (ref: string | undefined) => {
    if (!ref) die('KEY is required')
    const k = (await store.keyByHash(hashKey(ref))) ?? (await store.findKey(ref))
    if (!k) die(`no such key: ${ref}`)
    return k
  }
  try {
    switch (sub) {
      case 'create': {
        const { values } = parseArgs({ args: rest, options: { coins: { type: 'string' }, trial: { type: 'string' }, expires: { type: 'string' }, rate: { type: 'string' }, webhook: { type: 'string' } } })
        const coins = intArg(values.coins, 'coins')
        const trial = intArg(values.trial, 'trial', 0)
        let expiresAt: number | null = null
        if (values.expires !== undefined) {
          expiresAt = Date.parse(values.expires)
          if (!Number.isFinite(expiresAt)) die('--expires must be an ISO 8601 date/time')
        }
        let rate: number | null = null
        if (values.rate !== undefined) {
          rate = Number(values.rate)
          if (!Number.isFinite(rate) || rate <= 0) die('--rate must be a positive number (requests per second)')
        }
        const url = await webhookUrl(values.webhook)
        const k = newApiKey()
        const secret = newWebhookSecret()
        await store.createKey({ id: k.id, hash: k.hash, coins, trial, expiresAt, rate })
        await store.webhooks.setKeyWebhook(k.id, { url: url ?? null, secret })
        process.stdout.write(`created key ${k.id}: coins=${coins} trial=${trial} expires=${expiresAt ? new Date(expiresAt).toISOString() : 'never'} rate=${rate ?? 'default'} webhook=${url ?? 'none'}\n`)
        process.stdout.write('the webhook signing secret, then the key (last line), are shown only this once:\n')
        process.stdout.write(`${secret}\n`)
        process.stdout.write(`${k.key}\n`)
        break
      }
      case 'list': {
        const all = await store.listKeys()
        process.stdout.write('id\tcoins\ttrial_left\texpires\trate\trevoked\tcreated\n')
        for (const k of all) {
          process.stdout.write([k.id, k.coins, `${k.trialLeft}/${k.trialTotal}`, k.expiresAt ? new Date(k.expiresAt).toISOString() : '-',
            k.rate ?? '-', k.revoked ? 'yes' : 'no', new Date(k.createdAt).toISOString()].join('\t') + '\n')
        }
        break
      }
      case 'update': {
        const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { webhook: { type: 'string' }, 'webhook-secret': { type: 'boolean' } } })
        const k = await resolve(positionals[0])
        const url = await webhookUrl(values.webhook)
        if (url === undefined && !values['webhook-secret']) die('keys update: give --webhook URL (empty to clear) and/or --webhook-secret')
        const secret = values['webhook-secret'] ? newWebhookSecret() : undefined
        const after = await store.webhooks.setKeyWebhook(k.id, { url, secret })
        process.stdout.write(`updated ${k.id}: webhook=${after.url ?? 'none'} secret=${after.secret ? 'set' : 'none'}\n`)
        if (secret) process.stdout.write(`the new webhook signing secret (shown only this once; the old one no longer signs):\n${secret}\n`)
        break
      }
      case 'revoke': {
        const k = await resolve(rest[0])
        await store.revokeKey(k.id)
        process.stdout.write(`revoked ${k.id}\n`)
        break
      }
      case 'topup': {
        const k = await resolve(rest[0])
        const n = intArg(rest[1], 'N')
        const after = await store.topup(k.id, n)
        process.stdout.write(`${k.id}: +${n} coins, balance ${after?.coins}\n`)
        break
      }
      default:
        die('usage: lucent keys create --coins N [--trial N] [--expires ISO8601] [--rate R] [--webhook URL] | update KEY [--webhook URL] [--webhook-secret] | list | revoke KEY | topup KEY N')
    }
  } finally {
    await store.close()
  }
}

/** `lucent bench ...` and `lucent native ...` run the release `lucent-native` binary built next to the addon. */
async function native(args: string[]) {
  const { spawnSync } = await import('node:child_process')
  const { existsSync } = await import('node:fs')
  const path = await import('node:path')
  const { fileURLToPath } = await import('node:url')
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
  const bin = path.join(target, 'release', process.platform === 'win32' ? 'lucent-native.exe' : 'lucent-native')
  if (!existsSync(bin)) die(`${bin} is not built: run \`npm run build:native\``)
  const env = { ...process.env }
  if (!env.LUCENT_MODEL_DIR) env.LUCENT_MODEL_DIR = loadConfig().modelDir
  const r = spawnSync(bin, args, { stdio: 'inherit', env })
  process.exit(r.status ?? 1)
}

const [cmd, ...args] = process.argv.slice(2)
if (cmd === 'serve') await serve(args)
else if (cmd === 'keys') await keys(args)
else if (cmd === 'models') {
  const { runModelsCli } = await import('./models/index.js')
  process.exitCode = await runModelsCli(args)
} else if (cmd === 'bench') await native(['bench', ...args])
else if (cmd === 'native') await native(args)
else die('usage: lucent serve | keys create|update|list|revoke|topup ... | models list|fetch|verify | bench --model NAME --input FILE')
