/** The settings schema (server/settings.ts): generated docs without drift, defaults as before, errors that name the
 *  variable, unknown-variable warnings, `lucent config [--json]`, and a schema that covers every LUCENT_* name the
 *  code reads. */
import t from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { repoRoot } from '../helper.js'
import { loadConfig, modelSettings, videoSettings, MODELS_META_DIR } from '../../server/config.js'
import { DEFAULT_PORT_RULE, parsePorts } from '../../server/fetch/policy.js'
import {
  BUILD_TEST_KNOBS, ConfigError, NATIVE_READERS, SETTINGS, closestName, configurationMarkdown, effectiveSettings, editDistance,
  maskUrl, readSetting, unknownVariables, withKnobs,
} from '../../server/settings.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')
const read = (rel: string) => fs.readFileSync(path.join(repoRoot, rel), 'utf8')
/** The environment of a spawned `lucent` without this shell's LUCENT_* variables (services, model dir...). */
const cleanEnv = (extra: Record<string, string>) => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LUCENT_') && !['PORT', 'HOST', 'DATA_DIR'].includes(k))),
  ...extra,
})

t.test('docs/configuration.md and the knobs of docs/contributing.md are generated from the schema (no drift)', async (t) => {
  const hint = 'run: node --import tsx scripts/gen-config-doc.ts'
  t.equal(read('docs/configuration.md'), configurationMarkdown(), `docs/configuration.md is out of date: ${hint}`)
  const contributing = read('docs/contributing.md')
  t.equal(contributing, withKnobs(contributing), `docs/contributing.md's knobs are out of date: ${hint}`)
  t.match(contributing, /## Build and test knobs/)
  for (const s of SETTINGS) t.match(read('docs/configuration.md'), `| \`${s.name}\` |`, `${s.name} documented`)
})

t.test('the schema itself: unique names, one-line docs, readers, validation that fits the type', async (t) => {
  const names = [...SETTINGS.map((s) => s.name), ...BUILD_TEST_KNOBS.map((k) => k.name)]
  t.same(names.filter((n, i) => names.indexOf(n) !== i), [], 'no name declared twice')
  for (const s of SETTINGS) {
    t.ok(s.doc.length > 0 && !s.doc.includes('\n'), `${s.name}: one-line doc`)
    t.ok(s.readers.length > 0, `${s.name}: readers`)
    if (s.type === 'enum') t.ok(s.values?.length, `${s.name}: enum values`)
    if (s.type === 'url') t.ok(s.schemes?.length, `${s.name}: url schemes`)
    if (typeof s.default === 'string' && s.type === 'enum') t.ok(s.values!.includes(s.default), `${s.name}: default among its values`)
  }
  for (const k of BUILD_TEST_KNOBS) t.ok(k.doc && k.where, `${k.name}: doc and where`)
})

t.test('defaults are those of before the schema', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 8080)
  t.equal(c.host, '0.0.0.0')
  t.equal(c.dataDir, path.resolve('./data'))
  t.equal(c.publicUrl, 'http://127.0.0.1:8080')
  t.equal(c.publicUrlFromEnv, false)
  t.equal(c.filesBaseUrl, null)
  t.same(c.fetchAllow, [])
  t.equal(c.modelDir, path.resolve('./data/models'))
  t.equal(c.backend, undefined)
  t.equal(c.adapter, undefined)
  t.equal(c.engineThreads, undefined)
  t.equal(c.workers, 1)
  t.equal(c.rateBurst, 20)
  t.equal(c.ratePerSec, 10)
  t.equal(c.queueMax, 1000)
  t.equal(c.pricesFile, undefined)
  t.same(c.video, { ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', mkvmerge: 'mkvmerge', crf: 18, preset: 'medium', batchMb: 64, tmpDir: os.tmpdir(), probeTimeoutMs: 60_000 })
  t.equal(c.fetchMaxBytes, 256 * 1024 * 1024)
  t.equal(c.fetchMaxVideoBytes, 1024 * 1024 * 1024)
  t.equal(c.fetchTimeoutMs, 30_000)
  t.same(c.outbound, { ports: DEFAULT_PORT_RULE, dnsTimeoutMs: 5000, dnsServers: null })
  t.same(c.outputPut, { attempts: 3, backoffMs: 1000, timeoutMs: 120_000, deadlineMs: 300_000 })
  t.equal(c.uploadMaxBytes, 1024 * 1024 * 1024)
  t.equal(c.jobTimeoutMs, 30 * 60_000)
  t.equal(c.jobMaxAttempts, 3)
  t.equal(c.keyCacheMs, 1000)
  t.equal(c.logLevel, 'info')
  t.equal(c.role, 'all')
  t.equal(c.httpProcesses, 1)
  t.equal(c.databaseUrl, undefined)
  t.equal(c.redisUrl, undefined)
  t.same([c.queueLockMs, c.queueStalledMs, c.queueBackoffMs], [30_000, 15_000, 2000])
  t.equal(c.s3, null)
  t.equal(c.playground, true)
  t.same(c.webhooks, { timeoutMs: 10_000, maxAgeMs: 24 * 3600_000, backoffMs: 5000, backoffMaxMs: 3600_000, concurrency: 16, keyConcurrency: 2, pollMs: 1000, maxReplays: 5 })
  t.same(modelSettings({}), { modelDir: path.resolve('./data/models'), manifest: path.join(MODELS_META_DIR, 'manifest.tsv'), mirror: null,
    githubRawBase: 'https://raw.githubusercontent.com', npmRegistry: undefined })
  // derived defaults follow the settings they come from
  t.equal(loadConfig({ HOST: 'example.org', PORT: '9000' }).publicUrl, 'http://example.org:9000')
  t.equal(loadConfig({ DATA_DIR: '/srv/lucent' }).modelDir, '/srv/lucent/models')
  // overrides still win
  t.equal(loadConfig({ LUCENT_WORKERS: '4' }, { workers: 2 }).workers, 2)
})

t.test('values are parsed as before', async (t) => {
  const c = loadConfig({
    LUCENT_PUBLIC_URL: ' https://api.example.com/base// ', LUCENT_FILES_BASE_URL: 'https://files.example.com/', LUCENT_FETCH_ALLOW: ' a, b ,,',
    LUCENT_ENGINE_THREADS: '3', LUCENT_BACKEND: 'cpu', LUCENT_ADAPTER: ' nv ', LUCENT_RATE_PER_SEC: '2.5', LUCENT_WORKERS: '1e1',
    LUCENT_OUTBOUND_PORTS: '443,8000-8100,!8080', LUCENT_DNS_SERVERS: '1.1.1.1, 9.9.9.9:53', LUCENT_PLAYGROUND: 'off',
    LUCENT_S3_ENDPOINT: 'http://s3.test/', LUCENT_S3_BUCKET: 'b', LUCENT_S3_ACCESS_KEY_ID: 'a', LUCENT_S3_SECRET_ACCESS_KEY: 's', LUCENT_S3_FORCE_PATH_STYLE: 'YES',
  })
  t.equal(c.publicUrl, 'https://api.example.com/base')
  t.equal(c.publicUrlFromEnv, true)
  t.equal(c.filesBaseUrl, 'https://files.example.com')
  t.same(c.fetchAllow, ['a', 'b'])
  t.same([c.engineThreads, c.backend, c.adapter, c.ratePerSec, c.workers], [3, 'cpu', 'nv', 2.5, 10])
  t.same(c.outbound, { ports: parsePorts('443,8000-8100,!8080'), dnsTimeoutMs: 5000, dnsServers: ['1.1.1.1', '9.9.9.9:53'] })
  t.equal(c.playground, false)
  t.same(c.s3, { endpoint: 'http://s3.test', bucket: 'b', region: 'us-east-1', accessKeyId: 'a', secretAccessKey: 's', sessionToken: undefined,
    forcePathStyle: true, publicEndpoint: undefined })
  t.equal(loadConfig({ LUCENT_S3_ENDPOINT: 'http://s', LUCENT_S3_BUCKET: 'b', LUCENT_S3_ACCESS_KEY_ID: 'a', LUCENT_S3_SECRET_ACCESS_KEY: 's',
    LUCENT_S3_FORCE_PATH_STYLE: 'on' }).s3!.forcePathStyle, false, 'path style: 1/true/yes only, as before')
  // the video settings' lenient rule: out of range -> the default, no error
  t.same(videoSettings({ LUCENT_VIDEO_CRF: '99', LUCENT_VIDEO_BATCH_MB: 'x' }), videoSettings({}))
  t.equal(videoSettings({ LUCENT_VIDEO_CRF: '0' }).crf, 0)
})

t.test('a bad value fails with a message naming the variable and what it must be', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'x' }, /^configuration: PORT must be a number from 0 to 65535 \(got "x"\)$/],
    [{ LUCENT_WORKERS: '0' }, /^configuration: LUCENT_WORKERS must be a number >= 1 \(got "0"\)$/],
    [{ LUCENT_JOB_TIMEOUT_MS: '30s' }, /LUCENT_JOB_TIMEOUT_MS must be a number >= 1 \(got "30s"\)/],
    [{ LUCENT_ROLE: 'boss' }, /LUCENT_ROLE \/ --role must be gateway, worker or all \(got "boss"\)/],
    [{ LUCENT_BACKEND: 'tpu' }, /LUCENT_BACKEND must be gpu, cpu or auto/],
    [{ LUCENT_PLAYGROUND: 'maybe' }, /LUCENT_PLAYGROUND must be 1 or 0/],
    [{ LUCENT_LOG_LEVEL: 'loud' }, /LUCENT_LOG_LEVEL must be fatal, error, warn, info, debug, trace or silent/],
    [{ LUCENT_DATABASE_URL: 'mysql://db/x' }, /LUCENT_DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/],
    [{ LUCENT_REDIS_URL: 'localhost:6379' }, /LUCENT_REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/],
    [{ LUCENT_PUBLIC_URL: 'api.example.com' }, /LUCENT_PUBLIC_URL must be an http:\/\/ or https:\/\/ URL/],
    [{ LUCENT_FILES_BASE_URL: 'https://f.example.com/?x=1' }, /LUCENT_FILES_BASE_URL must be an http:\/\/ or https:\/\/ URL without query/],
    [{ LUCENT_OUTBOUND_PORTS: '443,70000' }, /LUCENT_OUTBOUND_PORTS: "70000" is not a port/],
    [{ LUCENT_DNS_TIMEOUT_MS: '10' }, /LUCENT_DNS_TIMEOUT_MS must be a number >= 50/],
    [{ LUCENT_S3_ENDPOINT: 'http://s3.test' }, /LUCENT_S3_BUCKET is required when LUCENT_S3_ENDPOINT is set/],
    [{ LUCENT_GITHUB_RAW_BASE: 'ftp://mirror' }, /LUCENT_GITHUB_RAW_BASE must be an http:\/\/ or https:\/\/ URL/],
  ]
  for (const [env, re] of cases) {
    const e = (() => { try { loadConfig(env); return null } catch (x) { return x as Error } })()
    t.ok(e instanceof ConfigError, `${Object.keys(env)[0]}: a ConfigError`)
    t.match(e?.message, re)
  }
  // the Rust crates parse their own variables: the server does not refuse them
  t.doesNotThrow(() => loadConfig({ LUCENT_GPU_COOP: 'whatever', LUCENT_GPU_TIMEOUT_S: 'x' }))
})

t.test('lucent serve: a bad value prints its message and exits 2 (no stack trace); unknown LUCENT_* are warned about', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-config-'))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const bad = spawnSync(process.execPath, [bin, 'serve'], { env: cleanEnv({ DATA_DIR: dataDir, LUCENT_QUEUE_MAX: '-1' }), encoding: 'utf8' })
  t.equal(bad.status, 2)
  t.equal(bad.stderr, 'lucent: configuration: LUCENT_QUEUE_MAX must be a number >= 0 (got "-1")\n')
  // other commands too
  const keys = spawnSync(process.execPath, [bin, 'keys', 'list'], { env: cleanEnv({ DATA_DIR: dataDir, LUCENT_DATABASE_URL: 'mysql://x/y' }), encoding: 'utf8' })
  t.equal(keys.status, 2)
  t.match(keys.stderr, /^lucent: configuration: LUCENT_DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/)
  t.notMatch(keys.stderr, /\n\s+at /, 'no stack trace')
  // a misspelt variable: warned about (with the closest name), before the model check stops this start
  const warn = spawnSync(process.execPath, [bin, 'serve'], {
    env: cleanEnv({ DATA_DIR: dataDir, LUCENT_MODEL_DIR: path.join(dataDir, 'no-models'), LUCENT_WOKERS: '2', LUCENT_CHROMIUM: '/x', LUCENT_GPU_TUNE: '0' }), encoding: 'utf8',
  })
  t.match(warn.stderr, 'lucent: warning: unknown variable LUCENT_WOKERS in the environment (not a Lucent setting; did you mean LUCENT_WORKERS?)\n')
  t.notMatch(warn.stderr, /LUCENT_CHROMIUM|LUCENT_GPU_TUNE/, 'knobs and Rust settings are known')
})

t.test('unknown variables and the closest known name', async (t) => {
  t.equal(editDistance('kitten', 'sitting'), 3)
  t.equal(editDistance('', 'abc'), 3)
  t.same(unknownVariables({ LUCENT_WOKERS: '2', LUCENT_REDIS_ULR: 'redis://x', LUCENT_SPIRV_VAL: 'x', LUCENT_GPU_F32: '1', PATH: '/bin', PORT: '1' }), [
    { name: 'LUCENT_REDIS_ULR', closest: 'LUCENT_REDIS_URL' },
    { name: 'LUCENT_WOKERS', closest: 'LUCENT_WORKERS' },
  ])
  t.equal(closestName('LUCENT_WEBHOOK_TIMEOUT'), 'LUCENT_WEBHOOK_TIMEOUT_MS')
  t.equal(closestName('LUCENT_S3_SECRET_KEY'), 'LUCENT_S3_SECRET_ACCESS_KEY')
})

t.test('secrets are masked', async (t) => {
  t.equal(maskUrl('postgres://lucent:hunter2@db:5432/lucent'), 'postgres://lucent:****@db:5432/lucent')
  t.equal(maskUrl('redis://:tok@r:6379/2'), 'redis://:****@r:6379/2')
  t.equal(maskUrl('postgres://postgres@127.0.0.1:5433/lucent'), 'postgres://****@127.0.0.1:5433/lucent')
  t.equal(maskUrl('redis://127.0.0.1:6390'), 'redis://127.0.0.1:6390')
  const eff = Object.fromEntries(effectiveSettings({
    LUCENT_DATABASE_URL: 'postgres://u:hunter2@db/x', LUCENT_S3_SECRET_ACCESS_KEY: 'sekrit', LUCENT_S3_ACCESS_KEY_ID: 'AKIA1', LUCENT_S3_SESSION_TOKEN: 'tok',
  }).map((e) => [e.name, e]))
  t.equal(eff.LUCENT_DATABASE_URL.value, 'postgres://u:****@db/x')
  t.equal(eff.LUCENT_S3_SECRET_ACCESS_KEY.value, '****')
  t.equal(eff.LUCENT_S3_ACCESS_KEY_ID.value, '****')
  t.equal(eff.LUCENT_S3_SESSION_TOKEN.value, '****')
  t.equal(eff.LUCENT_S3_SECRET_ACCESS_KEY.secret, true)
})

t.test('lucent config --json: every setting, its value, its source; unknown variables; exit 1 on a bad value', async (t) => {
  const run = (extra: Record<string, string>, ...args: string[]) => spawnSync(process.execPath, [bin, 'config', ...args], { env: cleanEnv(extra), encoding: 'utf8' })
  const r = run({ LUCENT_WORKERS: '3', LUCENT_DATABASE_URL: 'postgres://u:hunter2@db/x', LUCENT_S3_SECRET_ACCESS_KEY: 'sekrit', LUCENT_WOKERS: '1', LUCENT_GPU_COOP: 'emulate' }, '--json')
  t.equal(r.status, 0, r.stderr)
  t.notMatch(r.stdout, /hunter2|sekrit/, 'no secret in the output')
  const j = JSON.parse(r.stdout) as { settings: Array<Record<string, unknown>>; unknown: Array<{ name: string; closest: string }> }
  t.same(j.settings.map((s) => s.name), SETTINGS.map((s) => s.name), 'every setting, in schema order')
  for (const s of j.settings) {
    t.ok(['default', 'environment'].includes(s.source as string), `${s.name}: source`)
    t.ok('value' in s && typeof s.default === 'string' && typeof s.type === 'string' && Array.isArray(s.readers), `${s.name}: shape`)
  }
  const by = Object.fromEntries(j.settings.map((s) => [s.name, s]))
  t.match(by.LUCENT_WORKERS, { value: 3, source: 'environment', type: 'int' })
  t.match(by.LUCENT_QUEUE_MAX, { value: 1000, source: 'default', default: '1000' })
  t.match(by.LUCENT_DATABASE_URL, { value: 'postgres://u:****@db/x', source: 'environment' })
  t.match(by.LUCENT_S3_SECRET_ACCESS_KEY, { value: '****', source: 'environment', secret: true })
  t.match(by.LUCENT_REDIS_URL, { value: null, source: 'default', default: 'in-process queue' })
  t.match(by.LUCENT_GPU_COOP, { value: 'emulate', source: 'environment', readers: ['server', 'cli'] })
  t.match(by.LUCENT_FETCH_TIMEOUT_MS, { value: 30000, unit: 'ms' })
  t.same(j.unknown, [{ name: 'LUCENT_WOKERS', closest: 'LUCENT_WORKERS' }])

  const text = run({ LUCENT_WORKERS: '3' })
  t.equal(text.status, 0)
  t.match(text.stdout, /^LUCENT_WORKERS +3 +environment$/m)
  t.match(text.stdout, /^LUCENT_QUEUE_MAX +1000 +default$/m)

  const bad = run({ LUCENT_WORKERS: 'many' }, '--json')
  t.equal(bad.status, 1)
  t.match(JSON.parse(bad.stdout).settings.find((s: { name: string }) => s.name === 'LUCENT_WORKERS'),
    { value: 'many', source: 'environment', error: 'configuration: LUCENT_WORKERS must be a number >= 1 (got "many")' })
})

// --- completeness: every LUCENT_* name the code reads is declared ------------------------------------------------------

/** LUCENT_* names in a text (not fragments like `LUCENT_S3_*`, not ERR_LUCENT_...). */
const names = (text: string) => new Set(text.match(/(?<![A-Za-z0-9_])LUCENT_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_*])/g) ?? [])

function files(dir: string, keep: (f: string) => boolean, out: string[] = []): string[] {
  if (!fs.existsSync(dir)) return out
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const f = path.join(dir, e.name)
    if (e.isDirectory()) { if (!['node_modules', 'target', '.git', 'dist'].includes(e.name)) files(f, keep, out) }
    else if (keep(f)) out.push(f)
  }
  return out
}

const settingNames = new Set(SETTINGS.map((s) => s.name))
const knobNames = new Set(BUILD_TEST_KNOBS.map((k) => k.name))
const rel = (f: string) => path.relative(repoRoot, f)

t.test('server/: every LUCENT_* name read from the environment is a setting; every one named is declared', async (t) => {
  const read = /(?:env|process\.env)(?:\?\.|\.)(LUCENT_[A-Z0-9_]+)|env\[['"](LUCENT_[A-Z0-9_]+)['"]\]|(?:readSetting|num|str|opt|list|setting)\(\s*(?:env,\s*)?['"](LUCENT_[A-Z0-9_]+|PORT|HOST|DATA_DIR)['"]/g
  const missing: string[] = []
  const undeclared: string[] = []
  let reads = 0
  for (const f of files(path.join(repoRoot, 'server'), (x) => /\.(ts|mts|js|mjs)$/.test(x))) {
    const text = fs.readFileSync(f, 'utf8')
    for (const m of text.matchAll(read)) {
      reads++
      const n = m[1] ?? m[2] ?? m[3]
      if (!settingNames.has(n)) missing.push(`${rel(f)}: ${n}`)
    }
    for (const n of names(text)) if (!settingNames.has(n) && !knobNames.has(n)) undeclared.push(`${rel(f)}: ${n}`)
  }
  t.ok(reads > 60, `found the reads (${reads})`)
  t.same(missing, [], 'read from the environment but not declared in server/settings.ts SETTINGS')
  t.same(undeclared, [], 'named in server/ but declared nowhere in server/settings.ts')
})

t.test('native engine settings: each is passed to the addon as the option it names, and the addon declares it', async (t) => {
  // the crates read no environment (test/gates/rust-env.ts): server/engine/options.ts maps the settings, except
  // backend / adapter / threads, which the pool and `lucent enhance` pass from their own config
  const mapper = fs.readFileSync(path.join(repoRoot, 'server/engine/options.ts'), 'utf8')
  const dts = fs.readFileSync(path.join(repoRoot, 'native/node/index.d.ts'), 'utf8')
  const opts = dts.slice(dts.indexOf('export interface EngineOptions'), dts.indexOf('}', dts.indexOf('export interface EngineOptions')))
  const passed = SETTINGS.filter((s) => s.addon)
  t.ok(passed.length >= 20, `settings passed as addon options (${passed.length})`)
  const unmapped: string[] = []
  const undeclared: string[] = []
  for (const s of passed) {
    if (!['backend', 'adapter', 'threads'].includes(s.addon!) && !mapper.includes(`'${s.name}'`)) unmapped.push(s.name)
    for (const o of s.addon!.split(/,\s*/)) if (!new RegExp(`\\b${o}\\?:`).test(opts)) undeclared.push(`${s.name}: ${o}`)
  }
  t.same(unmapped, [], 'declared as an addon option but not mapped in server/engine/options.ts')
  t.same(undeclared, [], 'an addon option that native/node/index.d.ts (EngineOptions) lacks')
  t.same(SETTINGS.filter((s) => s.readers.every((r) => NATIVE_READERS.includes(r))).map((s) => s.name), [], 'no setting is left to a crate to read')
})

t.test('scripts, tests, benches, CI, Rust tests and examples: every LUCENT_* name is a setting or a knob', async (t) => {
  const self = path.join(repoRoot, 'test/config/schema.ts')
  const roots = ['scripts', 'test', 'bench', '.ci', 'bin', 'clients', 'native']
  const undeclared: string[] = []
  for (const r of roots) {
    for (const f of files(path.join(repoRoot, r), (x) => x !== self && /\.(ts|mts|js|mjs|rs|sh|py|toml)$|[/\\]\.ci[/\\]run$/.test(x))) {
      for (const n of names(fs.readFileSync(f, 'utf8'))) if (!settingNames.has(n) && !knobNames.has(n)) undeclared.push(`${rel(f)}: ${n}`)
    }
  }
  t.same(undeclared, [], 'declare these in server/settings.ts (SETTINGS or BUILD_TEST_KNOBS)')
  const used = new Set<string>()
  for (const r of roots) for (const f of files(path.join(repoRoot, r), (x) => x !== self && /\.(ts|mts|js|mjs|rs|sh|py|toml)$|[/\\]\.ci[/\\]run$/.test(x))) for (const n of names(fs.readFileSync(f, 'utf8'))) used.add(n)
  t.same(BUILD_TEST_KNOBS.map((k) => k.name).filter((n) => !used.has(n)), [], 'a knob nothing reads any more')
})

t.test('readSetting: unset and blank give the default; free-form engine settings are passed through as text', async (t) => {
  t.equal(readSetting({}, 'LUCENT_WORKERS'), 1)
  t.equal(readSetting({ LUCENT_WORKERS: '  ' }, 'LUCENT_WORKERS'), 1)
  t.equal(readSetting({}, 'LUCENT_ENGINE_THREADS'), undefined)
  t.equal(readSetting({ LUCENT_GPU_TUNE: ' 64 ' }, 'LUCENT_GPU_TUNE'), '64')
  t.throws(() => readSetting({}, 'LUCENT_NOPE'), /not declared/)
})
