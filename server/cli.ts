/**
 * The `lucent` command line (commander: `lucent --help`, `lucent <command> --help`, `--version`, errors for
 * unknown commands and options with exit status 2):
 *   serve      the service (roles: all, gateway, worker)
 *   keys       API keys (server/admin/cli.ts, the admin API's functions): create (the webhook secret, then the key
 *              alone on the LAST line: scripts read it), update (webhook URL / new signing secret), list, revoke, enable,
 *              topup, adjust, ledger, usage, quotas, audit
 *   admin      `admin token`: a new admin token and its LUCENT_ADMIN_TOKEN_SHA256 entry
 *   models     model files: list, fetch, verify, inspect (server/models/); your own models: add, remove (server/own-models/)
 *   enhance    the engine in this process on files, folders and globs (server/enhance/)
 *   segment    background removal in this process on files, folders and globs (server/enhance/segment.ts)
 *   bench      times the engine alone (the Rust `lucent-native bench` binary); `native` passes anything to it
 *   config     the settings in effect and where each came from (server/settings.ts), secrets masked
 *   adapters   the GPU adapters wgpu sees, with the index LUCENT_ADAPTER=#N chooses
 * Output formats of existing commands are kept as they were: other tools parse them.
 */
import fs from 'node:fs'
import { Command, CommanderError, Option } from 'commander'
import { loadConfig, ConfigError, type Config } from './config.js'
import { unknownVariables, unknownWarning } from './settings.js'

function die(msg: string): never {
  process.stderr.write(`lucent: ${msg}\n`)
  process.exit(2)
}

async function serve(opts: { role?: string }) {
  let config
  try {
    config = loadConfig(opts.role ? { ...process.env, LUCENT_ROLE: opts.role } : process.env)
  } catch (e) {
    die((e as Error).message)
  }
  const { default: cluster } = await import('node:cluster')
  // an unknown LUCENT_* variable is most likely a misspelt setting (once per host: not again in each HTTP child)
  if (!cluster.isWorker) for (const u of unknownVariables(process.env)) process.stderr.write(`lucent: warning: ${unknownWarning(u)}\n`)
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
  // SIGTERM / SIGINT: drain (server/plugins/lifecycle.ts: not ready, no new jobs, running ones finish within
  // LUCENT_DRAIN_GRACE_MS, the rest handed back without using an attempt), then close; a second signal: at once
  const { drainForStop } = await import('./plugins/lifecycle.js')
  const stop = () => {
    if (closing) {
      app.log.warn('second signal: stopping now (running jobs go back to the queue)')
      app.lucent.jobs.shutdown()
      setTimeout(() => process.exit(1), 10_000).unref()
      return
    }
    closing = true
    drainForStop(app).catch((err) => app.log.error({ err }, 'drain failed')).then(() => app.close()).then(() => process.exit(0), () => process.exit(1))
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
    if (closing) {
      // a second signal: running jobs released now (no attempt used)
      app?.lucent.jobs.shutdown()
      setTimeout(() => process.exit(1), 10_000).unref()
      return
    }
    closing = true
    // the HTTP children first, then the primary's own jobs drain (server/plugins/lifecycle.ts) before the close
    sup.stop().then(async () => {
      if (app) await (await import('./plugins/lifecycle.js')).drainForStop(app).catch(() => {})
    }).then(() => app?.close()).then(() => process.exit(code), () => process.exit(1))
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

const version = (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version

const program = new Command('lucent')
  .description('Lucent: self-hosted photo and video enhancement (API service, key and model administration, batch CLI)')
  .version(version, '-V, --version', 'print the version')
  .exitOverride()
  .showSuggestionAfterError(true)
  .showHelpAfterError('(add --help for usage)')
  .addHelpText('after', `
Environment: DATA_DIR, LUCENT_DATABASE_URL, LUCENT_MODEL_DIR, LUCENT_BACKEND ... (\`lucent config\`; docs/configuration.md).

Examples:
  lucent serve
  lucent keys create --coins 1000
  lucent models fetch
  lucent enhance photos/ --recursive --model general_4x --out upscaled/`)

program.command('serve')
  .description('serve the API (PORT, HOST, DATA_DIR, LUCENT_*: see `lucent config`, docs/configuration.md)')
  .addOption(new Option('--role <role>', 'overrides LUCENT_ROLE: gateway = HTTP API only, worker = runs jobs from the shared queue (LUCENT_REDIS_URL), all = both')
    .choices(['all', 'gateway', 'worker']).default(undefined, '$LUCENT_ROLE, else all'))
  .addHelpText('after', '\nExamples:\n  lucent serve\n  LUCENT_REDIS_URL=redis://q:6379 lucent serve --role worker')
  .action((o: { role?: string }) => serve(o))

const { addKeyCommands, addAdminCommands } = await import('./admin/cli.js') // `lucent keys ...`, `lucent admin token`: the admin API's code path
addKeyCommands(program)
addAdminCommands(program)

const models = program.command('models')
  .description('model files: state, fetch (upstream or a mirror, sha256-checked), verify; your own models: add, remove')
  .addHelpText('after', '\nExamples:\n  lucent models fetch\n  LUCENT_MODEL_MIRROR=../shared/models lucent models fetch --all\n  lucent models verify --quick')
const modelsCmd = (name: string, description: string, extra: (c: Command) => Command) => extra(models.command(name)
  .description(description)
  .argument('[model...]', 'model stems or files (default: models/required.json, or every file with --all)')
  .option('--dir <dir>', 'model directory (default $LUCENT_MODEL_DIR or ./data/models)')
  .option('--all', 'every file in the manifest'))
  .action(async (names: string[], o: Record<string, string | boolean | undefined>) => {
    const { runModelsCli } = await import('./models/index.js')
    const flags = Object.entries(o).flatMap(([k, v]) => v === undefined || v === false ? [] : v === true ? [`--${k}`] : [`--${k}`, v])
    process.exitCode = await runModelsCli([name, ...flags, ...names])
    // the operator's own models after the files (server/own-models/cli.ts)
    if (name === 'list' && !process.exitCode) await (await import('./own-models/cli.js')).printOwnModels()
  })
modelsCmd('list', 'state, size, source and licence of each model file', (c) => c)
modelsCmd('fetch', 'fetch missing or invalid files (mirror first, then upstream), sha256-checked, stored atomically', (c) => c
  .option('--mirror <dir>', 'local mirror tried before upstream (default $LUCENT_MODEL_MIRROR)')
  .option('--force', 're-fetch files that are already valid')
  .option('--offline', 'mirror only, no upstream downloads'))
modelsCmd('verify', 'check sizes and sha256 of the model files', (c) => c
  .option('--quick', 'sizes only, no hashing'))
const { addInspectCommand } = await import('./models/inspect.js') // `lucent models inspect FILE [--json]`
addInspectCommand(models)
const { addOwnModelCommands } = await import('./own-models/cli.js') // `lucent models add FILE`, `lucent models remove NAME`
addOwnModelCommands(models)

const enhance = await import('./enhance/command.js')
if (process.argv.slice(2).includes('enhance')) await enhance.loadCatalog() // its help lists the models
program.addCommand(enhance.enhanceCommand().copyInheritedSettings(program))
program.addCommand((await import('./enhance/segment.js')).segmentCommand().copyInheritedSettings(program))

program.command('bench')
  .description('time the engine alone (the Rust `lucent-native bench` binary built by npm run build:native)')
  .requiredOption('-m, --model <names>', 'catalog names, comma-separated (video:NAME for a video model)')
  .requiredOption('-i, --input <files>', 'input images, comma-separated')
  .option('-b, --backend <list>', 'cpu, gpu, auto, comma-separated')
  .option('-n, --runs <N>', 'timed runs', '3')
  .option('--tile <N>', 'tile side in input px')
  .option('--threads <N>', 'CPU backend threads')
  .option('-p, --precision <list>', 'CPU arithmetic: fp32, bf16, int8, auto (default $LUCENT_CPU_PRECISION, else auto), comma-separated; later ones get PSNR vs the first')
  .option('--model-dir <dir>', 'model directory (default $LUCENT_MODEL_DIR)')
  .option('--json', 'figures as JSON')
  .addHelpText('after', '\nExamples:\n  lucent bench --model general_4x,generative_4x --input photo.jpg --backend cpu,gpu --runs 3'
    + '\n  lucent bench --model general_4x --input photo.jpg --backend cpu --precision fp32,bf16,auto')
  .action((o: Record<string, string | boolean | undefined>) => {
    const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
    return native(['bench', ...Object.entries(o).flatMap(([k, v]) => v === undefined || v === false ? [] : v === true ? [`--${flag(k)}`] : [`--${flag(k)}`, v])])
  })

program.command('config')
  .description('print each setting\'s value in effect and its source (default or environment), secrets masked')
  .option('--json', 'as JSON: { settings: [{ name, value, source, default, type, unit?, readers, secret?, error? }], unknown: [{ name, closest }] }')
  .addHelpText('after', '\nExits 1 when a value is invalid (`lucent serve` would refuse to start). Every setting: docs/configuration.md.\n'
    + '\nExamples:\n  lucent config\n  lucent config --json | jq \'.settings[] | select(.source == "environment")\'')
  .action(async (o: { json?: boolean }) => {
    const { configText, effectiveSettings } = await import('./settings.js')
    const settings = effectiveSettings(process.env)
    if (o.json) process.stdout.write(`${JSON.stringify({ settings, unknown: unknownVariables(process.env) }, null, 2)}\n`)
    else process.stdout.write(configText(process.env))
    if (settings.some((s) => s.error)) process.exitCode = 1
  })

program.command('adapters')
  .description('list the GPU adapters wgpu sees, CPU ones included, with the index LUCENT_ADAPTER=#N chooses (one worker per adapter)')
  .option('--json', 'as JSON: [{ index, name, backend, deviceType }]')
  .addHelpText('after', '\nExamples:\n  lucent adapters\n  LUCENT_ADAPTER=#1 lucent serve --role worker')
  .action(async (o: { json?: boolean }) => {
    const { loadAddon } = await import('./engine/addon.js')
    const list = loadAddon().adapters()
    if (o.json) process.stdout.write(`${JSON.stringify(list, null, 2)}\n`)
    else process.stdout.write(list.length ? list.map((a) => `#${a.index}  ${a.name} (${a.backend}) [${a.deviceType}]\n`).join('') : 'no GPU adapter\n')
  })

program.command('native')
  .description('run the `lucent-native` binary with these arguments (bench, run, catalog; `lucent native help`)')
  .argument('[args...]', 'its arguments')
  .allowUnknownOption()
  .helpOption(false)
  .action((args: string[]) => native(args))

try {
  await program.parseAsync(process.argv)
} catch (e) {
  // a bad setting: its message (naming the variable), no stack trace
  if (e instanceof ConfigError) {
    process.stderr.write(`lucent: ${e.message}\n`)
    process.exit(2)
  }
  if (!(e instanceof CommanderError)) throw e
  // help and --version exit 0; usage errors 2 (as the commands' own checks)
  process.exit(e.exitCode === 0 ? 0 : 2)
}
