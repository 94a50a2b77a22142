// `node --import <this file>`: appends the URL of every module the process (and each worker thread started with
// the same flags) loads to the file named by LUCENT_TRACE_MODULES, one per line: ES modules through a load hook,
// and what require() loads (CommonJS, and ES modules required, as piscina loads a task file) through Module._load.
// test/cli/production.ts uses it to see which form of the server (dist/*.js or server/*.ts through tsx) runs.
import fs from 'node:fs'
import Module, { register } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const file = process.env.LUCENT_TRACE_MODULES
if (file) {
  register(`data:text/javascript,${encodeURIComponent(`
import fs from 'node:fs'
export async function load(url, context, next) {
  fs.appendFileSync(${JSON.stringify(file)}, url + '\\n')
  return next(url, context)
}`)}`)
  const M = Module
  const load = M._load
  M._load = function (request, parent, isMain) {
    try {
      const f = M._resolveFilename(request, parent, isMain)
      if (path.isAbsolute(f)) fs.appendFileSync(file, `${pathToFileURL(f).href}\n`)
    } catch {}
    return load.apply(this, [request, parent, isMain])
  }
}
