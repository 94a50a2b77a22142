#!/usr/bin/env node
// `lucent` entry: registers tsx (TypeScript at run time, no build step) and runs server/cli.ts.
import { register } from 'tsx/esm/api'
register()
await import('../server/cli.ts')
