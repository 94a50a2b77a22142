/**
 * Writes deploy/helm/lucent/files/settings.yaml from the settings schema (server/settings.ts): every setting the
 * service reads, with whether the chart keeps it in the Secret. The chart's ConfigMap and Secret templates read
 * that file: a `config:` or `secrets:` key that is not a Lucent setting fails `helm template` with the closest
 * name, a credential put in `config:` fails too. `--check`: writes nothing, exits 1 when the file is stale
 * (test/deploy/helm.ts runs the same comparison).
 *
 *   node --import tsx scripts/helm-settings.ts [--check]
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { SETTINGS, defaultDoc, nativeOnly, type Setting } from '../server/settings.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const HELM_SETTINGS_FILE = path.join(root, 'deploy/helm/lucent/files/settings.yaml')

/** A credential: masked by `lucent config` (secret), or a connection URL that carries a password (PostgreSQL,
 *  Redis). These go to the chart's Secret, never its ConfigMap. */
export const isCredential = (s: Setting) => !!s.secret || (s.type === 'url' && !(s.schemes ?? []).some((x) => x.startsWith('http')))

/** Set by the chart itself per Deployment (role, listen address and port, data and model folders). */
export const CHART_OWNED = ['PORT', 'HOST', 'DATA_DIR', 'LUCENT_ROLE', 'LUCENT_MODEL_DIR', 'LUCENT_WORKERS', 'LUCENT_METRICS_PORT', 'LUCENT_DRAIN_GRACE_MS']

const q = (v: string) => JSON.stringify(v) // a JSON string is a YAML double-quoted scalar

export function helmSettingsYaml(): string {
  const out = [
    '# Generated from server/settings.ts by `node --import tsx scripts/helm-settings.ts`; do not edit',
    '# (test/deploy/helm.ts checks it). Read by templates/_helpers.tpl: the names `config:` and `secrets:` may use.',
    '# secret: a credential, kept in the Secret; chart: set by the chart per Deployment (values name it otherwise).',
    'settings:',
  ]
  for (const s of SETTINGS) {
    if (nativeOnly(s) || !s.readers.includes('server')) continue
    out.push(`  ${s.name}:`, `    type: ${s.type}`, `    default: ${q(defaultDoc(s))}`, `    secret: ${isCredential(s)}`, `    chart: ${CHART_OWNED.includes(s.name)}`, `    doc: ${q(s.doc)}`)
  }
  return out.join('\n') + '\n'
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const want = helmSettingsYaml()
  const have = fs.existsSync(HELM_SETTINGS_FILE) ? fs.readFileSync(HELM_SETTINGS_FILE, 'utf8') : ''
  if (process.argv.includes('--check')) {
    if (have !== want) { console.error(`${path.relative(root, HELM_SETTINGS_FILE)} is out of date: run node --import tsx scripts/helm-settings.ts`); process.exit(1) }
  } else if (have !== want) {
    fs.mkdirSync(path.dirname(HELM_SETTINGS_FILE), { recursive: true })
    fs.writeFileSync(HELM_SETTINGS_FILE, want)
    console.log(`wrote ${path.relative(root, HELM_SETTINGS_FILE)}`)
  }
}
