/** The Helm chart (deploy/helm/lucent): its settings list is generated from server/settings.ts without drift;
 *  `helm lint` passes; `helm template` refuses values that would give pods that cannot start or share nothing
 *  (an unknown or misspelt setting, a credential in the ConfigMap, no Redis/PostgreSQL/S3); every rendered object,
 *  with the default values and with GPU workers + gateway HPA + KEDA, validates against the Kubernetes OpenAPI
 *  schemas (kubernetes-models, @kubernetes-models/keda); the pods set only declared settings, give the drain its
 *  grace, run read-only and non-root; the probe paths and the KEDA query's series are served by a real app.
 *  The helm parts need a helm binary (HELM, PATH, or ~/go/bin/helm: `go install helm.sh/helm/v3/cmd/helm@v3.22.0`);
 *  without one they say they skip, and why. */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { parseAllDocuments } from 'yaml'
import { build, repoRoot, waitFor } from '../helper.js'
import { SETTINGS } from '../../server/settings.js'
import { HELM_SETTINGS_FILE, helmSettingsYaml, isCredential } from '../../scripts/helm-settings.js'

const chart = path.join(repoRoot, 'deploy/helm/lucent')
const scaleout = path.join(chart, 'ci/scaleout-values.yaml')
const scaled = path.join(chart, 'ci/scaled-values.yaml')

function findHelm(): string | null {
  const candidates = [process.env.HELM, ...(process.env.PATH ?? '').split(path.delimiter).map((d) => d && path.join(d, 'helm')),
    path.join(os.homedir(), 'go/bin/helm')]
  for (const c of candidates) {
    if (!c) continue
    try { fs.accessSync(c, fs.constants.X_OK); if (fs.statSync(c).isFile()) return c } catch { /* next */ }
  }
  return null
}
const helmBin = findHelm()
const noHelm = helmBin ? false : 'no helm binary (HELM, PATH, ~/go/bin/helm): build one with `go install helm.sh/helm/v3/cmd/helm@v3.22.0` (docs/deploy.md)'

function helm(...args: string[]) {
  const r = spawnSync(helmBin!, args, { encoding: 'utf8', env: { ...process.env, HELM_CACHE_HOME: os.tmpdir(), HELM_CONFIG_HOME: os.tmpdir() } })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

type Obj = { apiVersion: string; kind: string; metadata: { name: string; annotations?: Record<string, string> }; [k: string]: any }

/** A helm built by `go install` defaults to Kubernetes 1.20 (no version ldflags): name a current one. */
const KUBE = ['--kube-version', '1.31.0']

function render(...args: string[]): Obj[] {
  const r = helm('template', 'lucent', chart, ...KUBE, ...args)
  if (r.code !== 0) throw new Error(`helm template failed: ${r.err}`)
  return parseAllDocuments(r.out).map((d) => d.toJS()).filter(Boolean) as Obj[]
}

/** The kubernetes-models class of each kind the chart may render. */
async function modelOf(o: Obj): Promise<(new (x: unknown) => { validate(): void }) | null> {
  const mods: Record<string, () => Promise<Record<string, any>>> = {
    v1: () => import('kubernetes-models/v1'),
    'apps/v1': () => import('kubernetes-models/apps/v1'),
    'policy/v1': () => import('kubernetes-models/policy/v1'),
    'autoscaling/v2': () => import('kubernetes-models/autoscaling/v2'),
    'keda.sh/v1alpha1': () => import('@kubernetes-models/keda/keda.sh/v1alpha1'),
  }
  const load = mods[o.apiVersion]
  return load ? ((await load())[o.kind] ?? null) : null
}

async function validateAll(t: Test, objs: Obj[]) {
  t.ok(objs.length > 0, 'something rendered')
  for (const o of objs) {
    const Model = await modelOf(o)
    t.ok(Model, `${o.apiVersion} ${o.kind} has a schema to validate against`)
    if (!Model) continue
    let err = ''
    try { new Model(o).validate() } catch (e) { err = (e as Error).message }
    t.equal(err, '', `${o.kind} ${o.metadata.name} validates against its OpenAPI schema`)
  }
}

const find = (objs: Obj[], kind: string, suffix = '') => objs.find((o) => o.kind === kind && o.metadata.name.endsWith(suffix))
const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]))
const KNOWN = new Set(SETTINGS.map((s) => s.name))
/** Process variables the image or the OS reads, not Lucent settings. */
const OS_VARS = new Set(['TMPDIR', 'HOME', 'XDG_CACHE_HOME', 'NVIDIA_DRIVER_CAPABILITIES'])

t.test('files/settings.yaml is generated from server/settings.ts (no drift), credentials marked secret', async (t) => {
  t.equal(fs.readFileSync(HELM_SETTINGS_FILE, 'utf8'), helmSettingsYaml(), 'run: node --import tsx scripts/helm-settings.ts')
  const secret = SETTINGS.filter(isCredential).map((s) => s.name)
  for (const n of ['LUCENT_DATABASE_URL', 'LUCENT_REDIS_URL', 'LUCENT_S3_ACCESS_KEY_ID', 'LUCENT_S3_SECRET_ACCESS_KEY', 'LUCENT_ADMIN_TOKEN_SHA256']) {
    t.ok(secret.includes(n), `${n} is a credential`)
  }
  t.notOk(secret.includes('LUCENT_S3_ENDPOINT'), 'an http endpoint is not')
})

t.test('helm lint', { skip: noHelm }, async (t) => {
  for (const extra of [[], ['-f', scaled]]) {
    const r = helm('lint', '--strict', ...KUBE, chart, '-f', scaleout, ...extra)
    t.equal(r.code, 0, `helm lint --strict ${extra.join(' ')}: ${r.out}${r.err}`)
  }
})

t.test('helm template refuses values that give pods which cannot start or share nothing', { skip: noHelm }, async (t) => {
  const fails = (msg: RegExp, ...args: string[]) => {
    const r = helm('template', 'lucent', chart, ...KUBE, ...args)
    t.not(r.code, 0, `refused: ${args.join(' ')}`)
    t.match(r.err, msg)
  }
  fails(/secrets\.LUCENT_REDIS_URL is required/) // the chart's defaults alone: no queue
  fails(/LUCENT_DATABASE_URL is required/, '--set', 'secrets.LUCENT_REDIS_URL=redis://r:6379')
  // unknown names built from parts, so that test/config/schema.ts's scan of LUCENT_* names does not take them for settings
  const misspelt = ['LUCENT', 'LOG_LEVL'].join('_')
  const unknown = ['LUCENT', 'NOPE'].join('_')
  fails(new RegExp(`config\\.${misspelt} is not a Lucent setting`), '-f', scaleout, '--set', `config.${misspelt}=debug`)
  fails(/config\.LUCENT_DATABASE_URL is a credential/, '-f', scaleout, '--set', 'config.LUCENT_DATABASE_URL=postgres://u:p@h/db')
  fails(/config\.LUCENT_ROLE is set by the chart/, '-f', scaleout, '--set', 'config.LUCENT_ROLE=all')
  fails(/set gateway\.drainGraceSeconds and worker\.drainGraceSeconds/, '-f', scaleout, '--set', 'config.LUCENT_DRAIN_GRACE_MS=1000')
  fails(new RegExp(`secrets\\.${unknown} is not a Lucent setting`), '-f', scaleout, '--set', `secrets.${unknown}=x`)
  // a trial without PostgreSQL and S3 is allowed only when asked for
  t.equal(helm('template', 'lucent', chart, ...KUBE, '--set', 'secrets.LUCENT_REDIS_URL=redis://r:6379', '--set', 'allowEmbeddedStore=true').code, 0)
  // a Secret managed elsewhere: the chart renders none and reads that one
  const objs = render('--set', 'existingSecret=lucent-prod', '--set', 'config.LUCENT_S3_ENDPOINT=https://s3.example', '--set', 'config.LUCENT_S3_BUCKET=b')
  t.notOk(find(objs, 'Secret'), 'no Secret rendered')
  t.ok(find(objs, 'Deployment', '-worker')!.spec.template.spec.containers[0].envFrom.some((e: any) => e.secretRef?.name === 'lucent-prod'))
})

t.test('rendered with the scale-out values: valid objects, settings in their place, drain grace, read-only non-root pods', { skip: noHelm }, async (t) => {
  const objs = render('-f', scaleout)
  await validateAll(t, objs)
  t.same(objs.map((o) => o.kind).sort(), ['ConfigMap', 'Deployment', 'Deployment', 'PodDisruptionBudget', 'PodDisruptionBudget', 'Secret', 'Service', 'ServiceAccount'])

  const cm = find(objs, 'ConfigMap')!
  const secret = find(objs, 'Secret')!
  for (const k of Object.keys(cm.data)) t.notOk(isCredential(SETTINGS.find((s) => s.name === k)!), `ConfigMap ${k} is no credential`)
  t.same(Object.keys(secret.stringData).sort(), ['LUCENT_ADMIN_TOKEN_SHA256', 'LUCENT_DATABASE_URL', 'LUCENT_REDIS_URL', 'LUCENT_S3_ACCESS_KEY_ID', 'LUCENT_S3_SECRET_ACCESS_KEY'])

  for (const [role, grace] of [['gateway', 30 + 5], ['worker', 900]] as const) {
    const d = find(objs, 'Deployment', `-${role}`)!
    const pod = d.spec.template.spec
    t.equal(d.spec.replicas, 2, `${role}: 2 replicas`)
    const [c] = pod.containers
    const env = envOf(c)
    t.equal(env.LUCENT_ROLE, role)
    for (const n of Object.keys(env)) t.ok(KNOWN.has(n) || OS_VARS.has(n), `${role}: ${n} is a setting declared in server/settings.ts`)
    // the drain: Kubernetes waits the grace plus a margin before SIGKILL
    const graceMs = Number(env.LUCENT_DRAIN_GRACE_MS)
    t.equal(graceMs, grace * 1000 - (role === 'gateway' ? 5000 : 0), `${role}: drain grace passed in ms`)
    t.equal(pod.terminationGracePeriodSeconds, grace + 15, `${role}: terminationGracePeriodSeconds = grace (+ preStop) + margin`)
    t.equal(pod.securityContext.runAsNonRoot, true)
    t.equal(pod.automountServiceAccountToken, false)
    for (const x of [...(pod.initContainers ?? []), c]) {
      t.equal(x.securityContext.readOnlyRootFilesystem, true, `${role}/${x.name}: read-only root`)
      t.same(x.securityContext.capabilities.drop, ['ALL'])
      const mounts = x.volumeMounts.map((m: any) => m.mountPath)
      t.ok(mounts.includes('/data') && mounts.includes('/tmp'), `${role}/${x.name}: DATA_DIR and /tmp writable volumes`)
    }
    t.equal(env.DATA_DIR, '/data')
    t.equal(c.startupProbe.httpGet.path, '/healthz')
    t.equal(c.livenessProbe.httpGet.path, '/healthz')
    t.equal(c.readinessProbe.httpGet.path, '/readyz')
    t.same(c.envFrom.map((e: any) => e.configMapRef?.name ?? e.secretRef?.name), [cm.metadata.name, secret.metadata.name])
    t.match(d.spec.template.metadata.annotations, { 'checksum/config': /^[0-9a-f]{64}$/, 'checksum/secret': /^[0-9a-f]{64}$/ }, 'a settings change rolls the pods')
  }
  const worker = find(objs, 'Deployment', '-worker')!.spec.template.spec
  const [init] = worker.initContainers
  t.same(init.args.slice(0, 4), ['models', 'fetch', '--dir', '/models'], 'models fetched by `lucent models fetch` before the worker starts')
  t.equal(envOf(worker.containers[0]).LUCENT_MODEL_DIR, '/models')
  t.notOk(worker.containers[0].resources.limits['nvidia.com/gpu'], 'no GPU asked for by default')
  t.notOk(find(objs, 'Deployment', '-gateway')!.spec.template.spec.initContainers, 'gateways load no models')
  t.equal(find(objs, 'Service')!.spec.selector['app.kubernetes.io/component'], 'gateway', 'the Service reaches gateways only')
})

t.test('rendered with GPU workers, a gateway HPA and a KEDA ScaledObject: valid, autoscaled replicas left to them', { skip: noHelm }, async (t) => {
  const objs = render('-f', scaleout, '-f', scaled)
  await validateAll(t, objs)
  const gw = find(objs, 'Deployment', '-gateway')!
  const wk = find(objs, 'Deployment', '-worker')!
  t.equal(gw.spec.replicas, undefined, 'the HPA owns the gateways\' replica count')
  t.equal(wk.spec.replicas, undefined, 'KEDA owns the workers\' replica count')
  const c = wk.spec.template.spec.containers[0]
  t.equal(c.resources.limits['nvidia.com/gpu'], 1)
  t.equal(c.resources.limits.memory, '8Gi', 'the GPU limit is added to the other limits')
  t.equal(envOf(c).LUCENT_BACKEND, 'gpu')
  t.match(envOf(c).NVIDIA_DRIVER_CAPABILITIES, /graphics/, 'the Vulkan ICD needs the graphics capability')
  t.equal(wk.spec.template.spec.runtimeClassName, 'nvidia')
  t.same(wk.spec.template.spec.initContainers[0].args, ['models', 'fetch', '--dir', '/models', '--all'])
  t.same(wk.spec.template.spec.volumes.find((v: any) => v.name === 'models').persistentVolumeClaim, { claimName: 'lucent-models' })
  const hpa = find(objs, 'HorizontalPodAutoscaler')!
  t.equal(hpa.spec.scaleTargetRef.name, gw.metadata.name)
  const so = find(objs, 'ScaledObject')!
  t.equal(so.spec.scaleTargetRef.name, wk.metadata.name)
  t.equal(so.spec.triggers[0].type, 'prometheus')
})

t.test('the probes\' paths and the KEDA query\'s series are what a real app serves', async (t) => {
  const objs = noHelm ? null : render('-f', scaleout, '-f', scaled)
  const query: string = objs ? find(objs, 'ScaledObject')!.spec.triggers[0].metadata.query : 'max(lucent_queue_backlog_seconds) + 30 * max(lucent_queue_backlog_unestimated_jobs)'
  const app = await build(t, { LUCENT_METRICS_PUBLIC: '1' })
  await waitFor(async () => (await app.inject({ method: 'GET', url: '/healthz' })).statusCode === 200, 180_000, 250)
  for (const p of ['/healthz', '/readyz']) t.equal((await app.inject({ method: 'GET', url: p })).statusCode, 200, `${p} answers 200 on a ready app`)
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  const series = [...new Set([...query.matchAll(/\b(lucent_[a-z_]+)/g)].map((m) => m[1]))]
  t.ok(series.length > 0, `the query names lucent series: ${query}`)
  for (const s of series) {
    const family = s.replace(/_(sum|count|bucket)$/, '')
    t.match(metrics, new RegExp(`^# TYPE ${family} (gauge|counter|histogram)$`, 'm'), `${s} is exposed at /metrics`)
  }
  // the query's series carry a value, unlabelled (max() of one series per process)
  for (const s of series) t.match(metrics, new RegExp(`^${s} \\d`, 'm'), `${s} has a value`)
})
