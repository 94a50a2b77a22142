/**
 * Bring your own model on the scale-out deployment (PostgreSQL + Redis + S3, separate `lucent serve` processes, no
 * shared disk): `lucent models add` against the deployment's store and bucket, a gateway serves the name within
 * its refresh interval, a worker runs it from a copy fetched from S3, a second worker started afterwards (an empty
 * DATA_DIR) has it too, `lucent models remove` takes it away from the running gateway and deletes the weights.
 */
import path from 'node:path'
import t from 'tap'
import { request } from 'undici'
import { ListObjectsV2Command } from '@aws-sdk/client-s3'
import { modelDir, inputServer, png, addonBuilt, waitFor, repoRoot } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { lucentCli } from '../support/serve.js'
import { requireServices, isolatedDeployment, inCI } from '../scaleout/services.js'

const MODEL = path.join(repoRoot, 'native/models/tests/goldens/compact_x4_nf16_nc2.0.pth')

t.test('own model on PostgreSQL + Redis + S3: add, served by a gateway and two workers, removed', async (t) => {
  if (!addonBuilt) {
    if (inCI) throw new Error('native/node is not built (npm run build:native)')
    t.plan(0, 'native addon not built (npm run build:native)')
    return
  }
  const svc = await requireServices(t)
  if ('skip' in svc) {
    t.plan(0, svc.skip)
    return
  }
  const dep = await isolatedDeployment(t, svc, modelDir)
  const common = { ...dep.env, LUCENT_OWN_MODELS_REFRESH_MS: '300' }
  const cli = (...args: string[]) => lucentCli({ ...common, DATA_DIR: '/nonexistent-not-used' }, ...args)
  const key = cli('keys', 'create', '--coins', '10000', '--rate', '1000').trimEnd().split('\n').pop()!
  const [gateway, worker1] = await Promise.all([dep.serve('gateway', { LUCENT_OWN_MODELS_REFRESH_MS: '300' }), dep.serve('worker', { LUCENT_OWN_MODELS_REFRESH_MS: '300' })])
  const srv = await inputServer(t)
  const api = async (url: string, body: unknown) => {
    const r = await request(`${gateway.base}${url}`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: r.statusCode, body: (await r.body.json()) as any }
  }
  const photo = (name: string) => api('/api/photo-enhancer', { model_name: 'mine_4x', img_url: srv.put(name, png(24, 20)), extension: '.png' })
  const finished = (jobId: string) => waitFor(async () => {
    const d = (await api('/api/task-status', { job_id: jobId })).body.data
    return d.status !== 'CONVERTING' && d
  }, 120_000, 150)
  const result = async (resUrl: string) => Buffer.from(await (await request(resUrl)).body.arrayBuffer())

  t.equal((await photo('early.png')).body.error_code, 110400005, 'unknown before the add')
  // the CLI against the deployment's PostgreSQL and S3 (its own process, as an operator runs it)
  const added = JSON.parse(cli('models', 'add', MODEL, '--name', 'mine_4x', '--kind', 'photo', '--json').trim().split('\n').pop()!)
  t.match(added, { name: 'mine_4x', architecture: 'Compact', scale: 4, fileKey: new RegExp(`^m/own/${added.sha256}\\.[0-9a-f]{12}\\.pth$`) })
  const objects = async () => ((await dep.s3.send(new ListObjectsV2Command({ Bucket: dep.bucket, Prefix: 'm/own/' }))).Contents ?? []).map((o) => o.Key)
  t.same(await objects(), [added.fileKey], 'the weights are in the bucket')
  t.match(cli('models', 'list'), /mine_4x +photo +4x +Compact/)

  // the running gateway serves it within its refresh interval; worker 1 runs it from a copy it fetched from S3
  const first = await waitFor(async () => {
    const r = await photo('a.png')
    return r.status === 200 && r
  }, 15_000, 100)
  const d1 = await finished(first.body.data.job_id)
  t.equal(d1.status, 'COMPLETED', JSON.stringify(d1))
  t.match(sniff(await result(d1.res_url)), { format: 'png', width: 96, height: 80 })

  // a second worker with an empty DATA_DIR, the first one stopped: it has the model too
  await worker1.kill('SIGTERM')
  const worker2 = await dep.serve('worker', { LUCENT_OWN_MODELS_REFRESH_MS: '300' })
  t.ok(worker2.base)
  const second = await photo('b.png')
  t.equal(second.status, 200)
  const d2 = await finished(second.body.data.job_id)
  t.equal(d2.status, 'COMPLETED', JSON.stringify(d2))
  t.match(sniff(await result(d2.res_url)), { width: 96, height: 80 })

  // removed through the CLI: the gateway refuses it within seconds, the weights leave the bucket
  t.match(cli('models', 'remove', 'mine_4x'), /removed mine_4x/)
  await waitFor(async () => (await photo('c.png')).body.error_code === 110400005, 15_000, 100)
  t.same(await objects(), [], 'weights deleted')
  const listed = await (await request(`${gateway.base}/api/models`)).body.json() as any
  t.notOk(listed.data.models.some((m: { name: string }) => m.name === 'mine_4x'))
})
