/**
 * `lucent models inspect FILE [--json]` (issue 23, bring your own model, first step): reads a PyTorch
 * (`.pth` / `.pt` / `.ckpt`, zip or legacy) or `.safetensors` file and prints what the addon's `inspectModel`
 * (native/node/src/models.rs, lucent_models) detects in it: architecture, scale, channels, hyperparameters,
 * container format, warnings. Nothing is stored and nothing from the file runs: the pickle goes through the
 * addon's restricted reader (tensor rebuilds only; any other global, e.g. `posix.system`, is refused).
 * Exit status: 0 recognised, 1 the file cannot be read or is not a model Lucent can run (the message says why),
 * 2 bad usage (commander, or runInspectArgs for runModelsCli).
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import type { ModelInspection } from '@lucent/native'
import { loadAddon, type Addon } from '../engine/addon.js'

/** The largest model file read (the addon's own limit, lucent_models `Limits::max_file_bytes`: 2 GiB). */
export const MAX_MODEL_BYTES = 2 * 1024 ** 3

/** A file that cannot be inspected; `code` is 'model_invalid' for the addon's verdicts. */
export class InspectError extends Error {
  constructor(readonly code: 'not_found' | 'not_a_file' | 'too_large' | 'unreadable' | 'no_addon' | 'model_invalid', message: string) {
    super(message)
  }
}

/** What `--json` prints: the addon's ModelInspection (params sorted by name) with the file and its size. */
export interface InspectResult extends ModelInspection {
  file: string
  bytes: number
}

/** The file's bytes: a regular file of at most MAX_MODEL_BYTES, its size checked before anything is read. */
export function readModelFile(file: string): Buffer {
  let st: fs.Stats
  try {
    st = fs.statSync(file)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InspectError('not_found', 'no such file')
    throw new InspectError('unreadable', `cannot read: ${(e as Error).message}`)
  }
  if (st.isDirectory()) throw new InspectError('not_a_file', 'is a directory, not a model file (give the .pth, .pt, .ckpt, .safetensors or .onnx file itself)')
  if (!st.isFile()) throw new InspectError('not_a_file', 'is not a regular file')
  let fd: number
  try {
    fd = fs.openSync(file, 'r')
  } catch (e) {
    throw new InspectError('unreadable', `cannot read: ${(e as Error).message}`)
  }
  try {
    // the size of what was opened (the path may have changed since the stat)
    const size = fs.fstatSync(fd).size
    if (size > MAX_MODEL_BYTES) throw new InspectError('too_large', `${fmtBytes(size)} (${size} bytes), over the limit of 2 GiB for a model file`)
    const buf = Buffer.allocUnsafe(size)
    let off = 0
    while (off < size) {
      const n = fs.readSync(fd, buf, off, Math.min(size - off, 64 << 20), off)
      if (n === 0) break
      off += n
    }
    return off === size ? buf : buf.subarray(0, off)
  } catch (e) {
    if (e instanceof InspectError) throw e
    throw new InspectError('unreadable', `cannot read: ${(e as Error).message}`)
  } finally {
    fs.closeSync(fd)
  }
}

/** Reads and inspects one file (the addon is loaded here unless given). */
export function inspectModelFile(file: string, addon?: Addon): InspectResult {
  const bytes = readModelFile(file)
  let a = addon
  if (!a) {
    try {
      a = loadAddon()
    } catch (e) {
      throw new InspectError('no_addon', `the native addon is not built (npm run build:native): ${(e as Error).message}`)
    }
  }
  const name = path.basename(file)
  let m: ModelInspection
  try {
    m = a.inspectModel(bytes, name)
  } catch (e) {
    // the addon's messages for files that are no model at all start with the name it was given
    const msg = (e as Error).message.startsWith(`${name}: `) ? (e as Error).message.slice(name.length + 2) : (e as Error).message
    throw new InspectError('model_invalid', msg)
  }
  const params = Object.fromEntries(Object.entries(m.params).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
  return {
    file,
    bytes: bytes.length,
    architecture: m.architecture,
    format: m.format,
    scale: m.scale,
    inChannels: m.inChannels,
    outChannels: m.outChannels,
    params,
    tags: m.tags,
    warnings: m.warnings,
  }
}

function fmtBytes(n: number): string {
  return n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(1)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`
}

/** spandrel's architecture ids, as people know them. */
const ARCH_NAMES: Record<string, string> = {
  ESRGAN: 'ESRGAN / RRDBNet',
  Compact: 'Real-ESRGAN Compact / SRVGGNetCompact',
  SPAN: 'SPAN',
}
const FORMAT_NAMES: Record<string, string> = {
  pytorch: 'PyTorch zip, torch.save',
  'pytorch-legacy': 'PyTorch legacy, torch.save before 1.6',
  safetensors: 'safetensors',
  onnx: 'ONNX, the graph mapped op by op',
}

/** The human table: one `label  value` row per line, hyperparameters wrapped as `name=value` pairs. */
export function inspectText(r: InspectResult): string {
  const arch = r.architecture === 'PLKSR'
    ? (r.tags.includes('Real') ? `PLKSR (RealPLKSR${r.tags.includes('LayerNorm') ? ', LayerNorm' : ''})` : 'PLKSR')
    : ARCH_NAMES[r.architecture] && ARCH_NAMES[r.architecture] !== r.architecture ? `${r.architecture} (${ARCH_NAMES[r.architecture]})` : r.architecture
  const rows: [string, string][] = [
    ['file', `${r.file} (${fmtBytes(r.bytes)})`],
    ['format', `${r.format}${FORMAT_NAMES[r.format] && FORMAT_NAMES[r.format] !== r.format ? ` (${FORMAT_NAMES[r.format]})` : ''}`],
    ['architecture', arch],
    ['scale', `${r.scale}x`],
    ['channels', `${r.inChannels} in, ${r.outChannels} out`],
    ['tags', r.tags.length ? r.tags.join(', ') : '-'],
  ]
  // hyperparameters: name=value pairs, wrapped at about 100 columns
  const pairs = Object.entries(r.params).map(([k, v]) => `${k}=${v}`)
  const lines: string[] = []
  for (const p of pairs) {
    if (lines.length && lines[lines.length - 1]!.length + 1 + p.length <= 84) lines[lines.length - 1] += ` ${p}`
    else lines.push(p)
  }
  if (!lines.length) lines.push('-')
  lines.forEach((l, i) => rows.push([i ? '' : 'hyperparameters', l]))
  if (!r.warnings.length) rows.push(['warnings', 'none'])
  for (const w of r.warnings) rows.push(['warning', w])
  return rows.map(([k, v]) => `${k.padEnd(17)}${v}`.trimEnd()).join('\n')
}

/** Inspects `file` and prints the table (or one JSON object); errors go to errOut. Returns the exit status. */
export function inspectFile(
  file: string,
  opts: { json?: boolean } = {},
  out: (s: string) => void = (s) => process.stdout.write(s + '\n'),
  errOut: (s: string) => void = (s) => process.stderr.write(s + '\n'),
): number {
  let r: InspectResult
  try {
    r = inspectModelFile(file)
  } catch (e) {
    if (!(e instanceof InspectError)) throw e
    errOut(e.code === 'no_addon' ? `lucent: ${e.message}` : `lucent: ${file}: ${e.message}`)
    return 1
  }
  out(opts.json ? JSON.stringify(r) : inspectText(r))
  return 0
}

export const INSPECT_USAGE = 'usage: lucent models inspect FILE [--json]'

/** `runModelsCli(['inspect', ...args])`: `[--json] FILE`; bad usage returns 2. */
export function runInspectArgs(args: string[], out?: (s: string) => void, errOut: (s: string) => void = (s) => process.stderr.write(s + '\n')): number {
  let json = false
  const files: string[] = []
  for (const a of args) {
    if (a === '--json') json = true
    else if (a.startsWith('-') && a !== '-') {
      errOut(`unknown option ${a}\n${INSPECT_USAGE}`)
      return 2
    } else files.push(a)
  }
  if (files.length !== 1) {
    errOut(`${files.length ? 'one file at a time' : 'missing FILE'}\n${INSPECT_USAGE}`)
    return 2
  }
  return inspectFile(files[0]!, { json }, out, errOut)
}

/** Declares `inspect` under the `models` command group (server/cli.ts). */
export function addInspectCommand(models: Command): Command {
  return models.command('inspect')
    .description('say what a model file is (architecture, scale, channels, hyperparameters, format); nothing is stored or run')
    .argument('<file>', 'a .pth, .pt, .ckpt (PyTorch zip or legacy), .safetensors or .onnx file, at most 2 GiB')
    .option('--json', 'one JSON object: { file, bytes, architecture, format, scale, inChannels, outChannels, params, tags, warnings }')
    .addHelpText('after', `
Recognised today: ESRGAN / RRDBNet (incl. ESRGAN+ and pixel-unshuffle inputs), Real-ESRGAN Compact,
SPAN, RealPLKSR (LayerNorm), SAFMN, SwinIR, DAT (incl. DAT-light), HAT (CPU backend only for now).
The file is only read: its pickle goes through a restricted reader that rebuilds tensors and refuses
anything else, nothing is stored and nothing in it runs. \`lucent models add\` serves a recognised file
through the API.
Exit status: 0 recognised, 1 not readable or not a model Lucent can run (the message says why), 2 bad usage.

Examples:
  lucent models inspect 4x-MyModel.pth
  lucent models inspect 2x_span.safetensors --json | jq .scale`)
    .action((file: string, o: { json?: boolean }) => {
      process.exitCode = inspectFile(file, o)
    })
}
