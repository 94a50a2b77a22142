/** The embedded default (SQLite, disk, in-process queue) exposes the same /readyz and /metrics; role checks. */
import t from 'tap'
import { build, createKey, post, png, inputServer } from '../helper.js'
import { loadConfig } from '../../server/config.js'
import { build as buildApp } from '../../server/app.js'

t.test('/readyz and /metrics in the single-process default', async (t) => {
  const app = await build(t, { LUCENT_METRICS_PUBLIC: '1' }) // on the public port (docs/observability.md)
  app.lucent.queue.pause()
  const r = await app.inject({ method: 'GET', url: '/readyz' })
  t.ok(r.statusCode === 200 || r.statusCode === 503)
  const d = r.json().data
  t.match(d, { role: 'all', checks: { store: true } })
  t.notOk('queue' in d.checks, 'no Redis check without Redis')
  t.notOk('workers' in d.checks, 'no worker registry without Redis')
  const srv = await inputServer(t)
  const { key } = await createKey(app, { coins: 100 })
  const s = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: srv.put('m.png', png(16, 16)), extension: '.png' })
  t.equal(s.statusCode, 200)
  const bad = await post(app, '/api/photo-enhancer', key, { model_name: 'general_2x', img_url: `${srv.base}/mem/missing.png`, extension: '.png' })
  t.equal(bad.statusCode, 400)
  const m = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(m.statusCode, 200)
  t.match(m.headers['content-type'], /text\/plain/)
  t.match(m.body, /^lucent_coins_debited_total 10$/m)
  t.match(m.body, /^lucent_jobs_submitted_total\{kind="photo"\} 1$/m)
  t.match(m.body, /^lucent_fetch_errors_total\{kind="photo"\} 1$/m)
  t.match(m.body, /^lucent_queue_depth\{state="waiting"\} 1$/m)
  t.match(m.body, /^lucent_worker_utilisation /m)
  t.match(m.body, /^lucent_process_cpu_seconds_total /m)
})

t.test('split roles need the shared queue; unknown roles are refused', async (t) => {
  t.throws(() => loadConfig({ LUCENT_ROLE: 'both' }), /gateway, worker or all/)
  for (const role of ['gateway', 'worker']) {
    await t.rejects(buildApp(loadConfig({ LUCENT_ROLE: role, DATA_DIR: t.testdirName, LUCENT_LOG_LEVEL: 'silent' })), /needs LUCENT_REDIS_URL/)
  }
  t.throws(() => loadConfig({ LUCENT_S3_ENDPOINT: 'http://s3.test' }), /LUCENT_S3_BUCKET is required/)
  t.match(loadConfig({ LUCENT_S3_ENDPOINT: 'http://s3.test/', LUCENT_S3_BUCKET: 'b', LUCENT_S3_ACCESS_KEY_ID: 'a', LUCENT_S3_SECRET_ACCESS_KEY: 's', LUCENT_S3_FORCE_PATH_STYLE: '1' }).s3,
    { endpoint: 'http://s3.test', bucket: 'b', region: 'us-east-1', forcePathStyle: true })
  t.equal(loadConfig({}).s3, null)
})
