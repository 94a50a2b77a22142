/**
 * Error handling: every failure leaves as a spec error body `{error_code, message, code, msg}` with the status
 * of server/errors.ts (the one error table); an unknown route answers 400 / 100400002.
 */
import fp from 'fastify-plugin'
import type { FastifyError } from 'fastify'
import { ApiError, errorBody, type ErrorCode } from '../errors.js'

function mapValidation(err: FastifyError): ErrorCode {
  const v = err.validation?.[0]
  // an unknown model_name (server/own-models/formats.ts: the catalog's names, then the operator's own models)
  if (v && (v.keyword === 'enum' || v.keyword === 'format') && v.instancePath === '/model_name') return 110400005
  return 100403000
}

export default fp(async (app) => {
  const metrics = app.lucent.metrics
  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    let code: ErrorCode
    let status: number
    if (err instanceof ApiError) {
      code = err.errorCode
      status = err.status
      if (err.headers) reply.headers(err.headers)
      if (err.detail) req.log.info({ code, detail: err.detail }, 'request rejected')
    } else if (err.validation) {
      code = mapValidation(err)
      status = code === 110400005 ? 400 : 403
    } else if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || (err instanceof SyntaxError && err.statusCode === 400)
      || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      code = 100403000
      status = 403
    } else if ((err.statusCode ?? 500) < 500) {
      code = 100400002
      status = 400
    } else {
      req.log.error({ err }, 'internal error')
      code = err.code?.startsWith('SQLITE') ? 100500001 : 100500000
      status = 500
    }
    if ((code === 100400001 || code === 110400008 || code === 110400009) && err instanceof ApiError && err.detail) {
      metrics.fetchErrors.inc({ kind: code === 110400008 ? 'video' : 'photo' })
    }
    return reply.code(status).send(errorBody(code, err instanceof ApiError ? err.hint : undefined))
  })
  app.setNotFoundHandler((_req, reply) => reply.code(400).send(errorBody(100400002)))
}, { name: 'lucent-errors' })
