/**
 * Request ids and trace context carried through one request, its job and the job's run (docs/observability.md):
 * - `requestIdOf(raw)`: the client's X-Request-Id when it is a bounded token (1..128 of [A-Za-z0-9._:-]), else a
 *   new random id (Fastify's genReqId: it becomes `req.id`, the access log's and every request log line's reqId);
 * - an AsyncLocalStorage store per request (set by server/observability/http.ts) and per job run (runner.ts):
 *   the job lifecycle reads it at submission (`jobObs()`) and stores it in the job's params under `obs`
 *   (never part of an API answer), the worker runs the job inside it (`withJobObs`), and the process logger's
 *   mixin (`logMixin`) adds `reqId` to the log lines written inside a run (a request's lines have it already).
 */
import crypto from 'node:crypto'
import { AsyncLocalStorage } from 'node:async_hooks'
import type { IncomingMessage } from 'node:http'

/** What a job carries from the request that submitted it (its params' `obs`). */
export interface JobObs {
  /** The submitting request's id (X-Request-Id). */
  request_id?: string
  /** W3C traceparent of the submitting request's span (OpenTelemetry; only when tracing is on). */
  traceparent?: string
}

interface Store { kind: 'request' | 'job'; obs: JobObs }

const als = new AsyncLocalStorage<Store>()

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The client's X-Request-Id when it is a bounded token, else a new id. */
export function requestIdOf(raw: Pick<IncomingMessage, 'headers'>): string {
  const h = raw.headers['x-request-id']
  const v = Array.isArray(h) ? undefined : h
  return v !== undefined && REQUEST_ID.test(v) ? v : crypto.randomUUID()
}

export function isRequestId(v: unknown): v is string {
  return typeof v === 'string' && REQUEST_ID.test(v)
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/

/** A job's `obs` as stored (params are JSON from the store: checked, never trusted). */
export function obsOf(params: unknown): JobObs {
  const o = (params as { obs?: unknown } | null)?.obs as Record<string, unknown> | undefined
  if (!o || typeof o !== 'object') return {}
  const r: JobObs = {}
  if (isRequestId(o.request_id)) r.request_id = o.request_id
  if (typeof o.traceparent === 'string' && TRACEPARENT.test(o.traceparent)) r.traceparent = o.traceparent
  return r
}

/** Runs `fn` (the rest of a request) with its request id. */
export function runRequest(requestId: string, fn: () => void): void {
  als.run({ kind: 'request', obs: { request_id: requestId } }, fn)
}

/** The current request's store: its traceparent is set once the request's span exists (tracing on). */
export function currentObs(): JobObs | undefined {
  return als.getStore()?.obs
}

/** What a job submitted now carries: the current request's id and trace context, or nothing outside a request. */
export function jobObs(): JobObs | undefined {
  const s = als.getStore()
  return s && (s.obs.request_id || s.obs.traceparent) ? { ...s.obs } : undefined
}

/** Runs a job's run with the request id (and trace context) of the request that submitted it. */
export function withJobObs<T>(obs: JobObs, fn: () => Promise<T>): Promise<T> {
  return als.run({ kind: 'job', obs }, fn)
}

/** pino mixin: a job run's log lines name the request id of the submission (a request's lines have `reqId`
 *  from Fastify's child logger already). */
export function logMixin(): Record<string, unknown> {
  const s = als.getStore()
  return s?.kind === 'job' && s.obs.request_id ? { reqId: s.obs.request_id } : {}
}
