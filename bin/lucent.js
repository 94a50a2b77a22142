#!/usr/bin/env node
// `lucent` entry (also `npm start`). Production runs the compiled server, dist/cli.js (scripts/build-server.mjs,
// built by `npm ci`); development runs server/cli.ts through tsx (registered in-process). dist/ runs only while it
// was built from the sources as they are now (scripts/server-dist.mjs): a stale or missing build, or LUCENT_DEV=1,
// runs the sources instead, so an old build never runs silently.
import { pathToFileURL } from 'node:url'
import { distEntry } from '../scripts/server-dist.mjs'

const entry = distEntry()
if (entry) {
  await import(pathToFileURL(entry).href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import('../server/cli.ts')
}
