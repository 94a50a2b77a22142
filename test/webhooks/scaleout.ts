/**
 * Webhooks in the scale-out deployment: a gateway and two workers (separate processes, like separate hosts) over
 * PostgreSQL, Redis and S3 all deliver from the one outbox. Every job's event reaches the receiver exactly once
 * with a 2xx (leases: no two processes send the same delivery at once), a 500 is retried by whichever process
 * claims it next, signatures verify with the key's secret printed by `lucent keys create`.
 */
import t from 'tap'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { request } from 'undici'
import { Redis } from 'ioredis'
import { repoRoot, modelDir, inputServer, png, addonBuilt, waitFor } from '../helper.js'
import { requireServices, isolatedDeployment, inCI } from '../scaleout/services.js'
import { receiver } from '../support/webhook-receiver.js'

const bin = path.join(repoRoot, 'bin', 'lucent.js')

t.test('gateway + 2 workers deliver from one outbox, each event once', async (t) => {
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
  const common = dep.env
  const start = async (role: 'gateway' | 'worker') => {
    const { base } = await dep.serve(role, { LUCENT_RATE_PER_SEC: '1000', LUCENT_WEBHOOK_POLL_MS: '50', LUCENT_WEBHOOK_BACKOFF_MS: '100', LUCENT_WEBHOOK_BACKOFF_MAX_MS: '200' })
    await waitFor(async () => {
      try {
        const r = await request(`${base}/healthz`)
        await r.body.dump()
        return r.statusCode === 200
      } catch {
        return false
      }
    }, 120_000, 200)
    return base
  }
  const out = execFileSync(process.execPath, [bin, 'keys', 'create', '--coins', '10000', '--rate', '1000'], { env: { ...common, DATA_DIR: '/nonexistent-not-used' } }).toString().trimEnd().split('\n')
  const key = out[out.length - 1]
  const secret = out[out.length - 2]
  const rx = await receiver(t, () => secret)
  const srv = await inputServer(t)
  await start('worker')
  await start('worker')
  const gw = await start('gateway')

  const jobs: string[] = []
  for (let i = 0; i < 6; i++) {
    const r = await request(`${gw}/api/photo-enhancer`, {
      method: 'POST', headers: { apikey: key, 'content-type': 'application/json' },
      body: JSON.stringify({ model_name: 'general_2x', img_url: srv.put(`s${i}.png`, png(16, 16)), extension: '.png', callback_url: rx.url(`/job${i}`, i === 0 ? [500, 200] : [200]) }),
    })
    const b = (await r.body.json()) as any
    t.equal(b.code, 200)
    jobs.push(b.data.job_id)
  }
  await waitFor(async () => jobs.every((_, i) => rx.on(`/job${i}`).length >= (i === 0 ? 2 : 1)), 90_000, 100)
  await new Promise((r) => setTimeout(r, 1500)) // room for a duplicate, were there one
  for (const [i, id] of jobs.entries()) {
    const got = rx.on(`/job${i}`)
    t.same(got.map((g) => g.id), i === 0 ? [`msg_${id}_end`, `msg_${id}_end`] : [`msg_${id}_end`], `job ${i}: ${i === 0 ? '500, then one 200' : 'one delivery'}`)
    t.ok(got.every((g) => g.verified && g.body.type === 'job.completed' && g.body.data.status === 'COMPLETED'))
  }
  const list = await request(`${gw}/api/webhooks/deliveries`, { headers: { apikey: key } })
  const ds = ((await list.body.json()) as any).data.deliveries
  t.equal(ds.length, 6)
  t.ok(ds.every((d: any) => d.status === 'delivered'))
  t.equal(ds.find((d: any) => d.job_id === jobs[0]).attempts, 2)
})
