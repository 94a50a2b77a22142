/** The observability settings (server/settings.ts, group "Observability") as the service uses them: where
 *  /metrics and the detailed readiness answer, tracing, warm-up (docs/observability.md). */
import { readSetting } from '../settings.js'

export interface ObservabilityConfig {
  /** /metrics + detailed /readyz and /healthz on a listener of their own (null: none). */
  metricsPort: number | null
  metricsHost: string
  /** Bearer token opening them on the public port (null: none). */
  metricsToken: string | null
  /** Open on the public port to anyone (the old behaviour). */
  metricsPublic: boolean
  /** OTLP/HTTP traces endpoint (the full /v1/traces URL); null: tracing off. */
  otlpTracesUrl: string | null
  serviceName: string
  /** Photo models warmed up before readiness. */
  warmupModels: string[]
}

export function observabilityConfig(env: NodeJS.ProcessEnv): ObservabilityConfig {
  const endpoint = readSetting(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') as string | undefined
  const on = Boolean(endpoint) || (readSetting(env, 'LUCENT_OTEL') as boolean)
  const base = (endpoint || 'http://localhost:4318').replace(/\/+$/, '')
  return {
    metricsPort: (readSetting(env, 'LUCENT_METRICS_PORT') as number | undefined) ?? null,
    metricsHost: readSetting(env, 'LUCENT_METRICS_HOST') as string,
    metricsToken: (readSetting(env, 'LUCENT_METRICS_TOKEN') as string | undefined) || null,
    metricsPublic: readSetting(env, 'LUCENT_METRICS_PUBLIC') as boolean,
    otlpTracesUrl: on ? (base.endsWith('/v1/traces') ? base : `${base}/v1/traces`) : null,
    serviceName: readSetting(env, 'OTEL_SERVICE_NAME') as string,
    warmupModels: readSetting(env, 'LUCENT_WARMUP_MODELS') as string[],
  }
}
