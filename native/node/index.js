'use strict'
// Loader + thin JS wrapper of the Lucent native addon (see index.d.ts for the contract).
// CommonJS; from ESM use `createRequire(import.meta.url)('<repo>/native/node')`.
const fs = require('node:fs')
const path = require('node:path')

function loadNative() {
  const names = [`lucent.${process.platform}-${process.arch}.node`, 'lucent.node']
  const tried = []
  for (const n of names) {
    const p = path.join(__dirname, n)
    tried.push(p)
    if (fs.existsSync(p)) return require(p)
  }
  const err = new Error(
    'Lucent native addon is not built (looked for ' + tried.join(', ') + '). Build it with: ' +
      'cargo build --release -p lucent-node && node native/node/build.js'
  )
  err.code = 'internal'
  throw err
}

const native = loadNative()

function abortError(signal) {
  const err = new Error('aborted' + (signal && signal.reason !== undefined ? ': ' + String(signal.reason) : ''))
  err.name = 'AbortError'
  err.code = 'aborted'
  return err
}

// Run a raw native async call with a CancelToken tied to `signal`.
function withSignal(signal, start) {
  if (signal && signal.aborted) return Promise.reject(abortError(signal))
  const token = new native.CancelToken()
  const onAbort = () => token.cancel()
  if (signal) signal.addEventListener('abort', onAbort, { once: true })
  const done = () => {
    if (signal) signal.removeEventListener('abort', onAbort)
  }
  let p
  try {
    p = start(token)
  } catch (e) {
    done()
    return Promise.reject(e)
  }
  return p.then(
    (v) => {
      done()
      return v
    },
    (e) => {
      done()
      throw e
    }
  )
}

function enhance(data, opts, signal, onProgress) {
  const cb =
    typeof onProgress === 'function'
      ? (pct) => {
          try {
            onProgress(pct)
          } catch (_) {
            // a throwing progress listener must not take the process down
          }
        }
      : undefined
  return withSignal(signal, (token) => native.enhanceRaw(data, opts, token, cb))
}

function enhanceFrames(frames, opts, signal) {
  return withSignal(signal, (token) => native.enhanceFramesRaw(frames, opts, token))
}

module.exports = {
  init: native.init,
  info: native.info,
  catalog: native.catalog,
  probe: native.probe,
  enhance,
  enhanceFrames,
}
