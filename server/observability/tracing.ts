/**
 * OpenTelemetry traces, off by default (OTEL_EXPORTER_OTLP_ENDPOINT or LUCENT_OTEL=1): spans exported as OTLP/HTTP
 * JSON by the official SDK (@opentelemetry/sdk-trace + exporter-trace-otlp-http), imported only when tracing is on
 * (no start-up cost otherwise). One trace per submission: the gateway's HTTP request span -> (the job carries its
 * W3C traceparent in params.obs: server/observability/context.ts) -> the worker's `job.queue` (submission to run
 * start) and `job.run` spans -> one `engine.<op>` span per engine call. No global context manager: parents are
 * passed as traceparent strings, which is also what crosses the queue.
 */
import type { Span, Tracer } from '@opentelemetry/api'
import type { ObservabilityConfig } from './config.js'

export interface SpanHandle {
  /** W3C traceparent naming this span (the parent of its children, also across processes). */
  readonly traceparent: string
  set(attrs: Record<string, string | number | boolean>): void
  end(error?: unknown): void
}

export interface Tracing {
  span(name: string, o: { parent?: string; kind?: 'server' | 'internal' | 'consumer'; attrs?: Record<string, string | number | boolean>; startTime?: number }): SpanHandle
  shutdown(): Promise<void>
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

let active: Tracing | null = null

/** The tracing of this process, null when off. */
export function tracing(): Tracing | null {
  return active
}

/** Starts tracing when the settings ask for it (once per process: a second app in the same process shares it). */
export async function startTracing(cfg: ObservabilityConfig): Promise<Tracing | null> {
  if (!cfg.otlpTracesUrl) return null
  if (active) return active
  const [api, sdk, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/api'), import('@opentelemetry/sdk-trace'), import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/resources'),
  ])
  const exporter = new OTLPTraceExporter({ url: cfg.otlpTracesUrl })
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': cfg.serviceName }),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: 1000 })],
  })
  const tracer: Tracer = provider.getTracer('lucent')
  const kinds = { server: api.SpanKind.SERVER, internal: api.SpanKind.INTERNAL, consumer: api.SpanKind.CONSUMER }
  const parentCtx = (tp?: string) => {
    const m = tp ? TRACEPARENT.exec(tp) : null
    if (!m) return api.ROOT_CONTEXT
    return api.trace.setSpanContext(api.ROOT_CONTEXT, { traceId: m[1], spanId: m[2], traceFlags: parseInt(m[3], 16), isRemote: true })
  }
  const handle = (s: Span): SpanHandle => {
    const c = s.spanContext()
    return {
      traceparent: `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, '0')}`,
      set: (attrs) => { s.setAttributes(attrs) },
      end: (error) => {
        if (error !== undefined) s.setStatus({ code: api.SpanStatusCode.ERROR, message: String((error as Error)?.message ?? error) })
        s.end()
      },
    }
  }
  const t: Tracing = {
    span: (name, o) => handle(tracer.startSpan(name, { kind: kinds[o.kind ?? 'internal'], attributes: o.attrs, startTime: o.startTime }, parentCtx(o.parent))),
    shutdown: async () => {
      if (active === t) active = null
      await provider.shutdown()
    },
  }
  active = t
  return t
}
