/**
 * `lucent enhance INPUT... --model NAME [options]`: the command's options (commander), their checks, and the
 * run: engine init, the batch (batch.ts), a reporter (report.ts), Ctrl-C handling and the exit code
 * (0 all done or skipped, 1 something failed, 2 bad usage or no engine, 130 interrupted by SIGINT, 143 by SIGTERM).
 */
import path from 'node:path'
import { Command, Option, InvalidArgumentError } from 'commander'
import { loadConfig } from '../config.js'
import { photoExtensions, videoOutputExtensions, photoFormat, normExt } from '../media/formats.js'
import type { EnhanceSettings, ItemError } from './engine.js'
import type { Mode, Reporter } from './report.js'
import type { Summary } from './batch.js'
import type { OwnForEnhance } from '../own-models/registry.js'

const posInt = (name: string, max = Number.MAX_SAFE_INTEGER) => (v: string): number => {
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 1 || n > max) throw new InvalidArgumentError(`${name} must be an integer from 1 to ${max}`)
  return n
}
const posNum = (name: string, max = 16) => (v: string): number => {
  const n = Number(v)
  if (!Number.isFinite(n) || n <= 0 || n > max) throw new InvalidArgumentError(`${name} must be a number above 0, at most ${max}`)
  return n
}
const slowmoArg = (v: string): number => {
  if (!['2', '4', '8'].includes(v.trim())) throw new InvalidArgumentError('--slowmo must be 2, 4 or 8')
  return Number(v)
}
const photoFmt = (v: string): string => {
  if (v === 'keep') return v
  const e = normExt(v)
  if (!e || !photoFormat(e)) throw new InvalidArgumentError(`must be keep or one of ${photoExtensions.join(', ')}`)
  return e
}
const resolution = (v: string): [number, number] => {
  const m = /^(\d{1,5})x(\d{1,5})$/i.exec(v.trim())
  if (!m || !Number(m[1]) || !Number(m[2])) throw new InvalidArgumentError('must be WIDTHxHEIGHT, e.g. 1920x1080')
  return [Number(m[1]), Number(m[2])]
}

/** The catalog module, loaded on demand (building its maps costs about a second on a loaded machine: commands
 *  other than enhance do without it). `server/cli.ts` preloads it when the command line names enhance. */
let catalog: typeof import('../catalog.js') | null = null
export async function loadCatalog() {
  catalog ??= await import('../catalog.js')
  return catalog
}

interface Opts {
  model: string
  videoModel?: string
  out: string
  recursive?: boolean
  format: string
  videoFormat: string
  quality?: number
  keepMeta?: boolean
  stripMeta?: boolean
  dpi?: number
  scale?: number
  width?: number
  height?: number
  resolution?: [number, number]
  fps?: number
  slowmo?: number
  backend: 'auto' | 'cpu' | 'gpu'
  jobs: number
  overwrite?: boolean
  json?: boolean
}

export function enhanceCommand(): Command {
  const envBackend = process.env.LUCENT_BACKEND
  const cmd = new Command('enhance')
    .summary('enhance photos and videos on this machine (files, folders, globs; no server)')
    .description('Runs the engine in this process on every photo and video named by INPUT (files, folders, globs), writing '
      + 'the results under --out with the same relative paths. Outputs are written atomically, so a rerun skips what '
      + 'is done (resumable after a crash or Ctrl-C). Junk (Thumbs.db, .DS_Store, ._*, hidden folders) and non-media '
      + 'files are skipped and counted. Same catalog, limits and error codes as the server.')
    .argument('<input...>', 'files, folders or globs (quote globs: "photos/**/*.jpg")')
    .requiredOption('-m, --model <name>', 'photo model (see the list below); also the video model when it names one')
    .option('--video-model <name>', 'video model for video inputs (default: --model when it is a video model)')
    .option('-o, --out <dir>', 'output folder (folders are mirrored into it; not a folder input nor above one)', 'enhanced')
    .option('-r, --recursive', 'enter sub-folders of folder inputs')
    .option('-f, --format <ext>', `photo output format: keep, or one of ${photoExtensions.join(', ')}`, photoFmt, 'keep')
    .addOption(new Option('--video-format <ext>', 'video output container (keep: the input\'s when writable, else mp4)')
      .choices(['keep', ...videoOutputExtensions]).default('keep'))
    .option('-q, --quality <q>', 'JPEG / HEIF quality 1..100 (engine default 90)', posInt('--quality', 100))
    .option('--keep-meta', 'keep EXIF metadata (default)')
    .addOption(new Option('--strip-meta', 'drop EXIF metadata').conflicts('keepMeta'))
    .option('--dpi <n>', 'write this DPI (enhance models; default: keep the input\'s)', posInt('--dpi', 1_000_000))
    .addOption(new Option('--scale <s>', 'output size as a factor of the input, e.g. 1.5 (the model runs at its scale, then Lanczos resampling)').argParser(posNum('--scale')).conflicts(['width', 'height']))
    .addOption(new Option('--width <w>', 'output width in px (height keeps the aspect ratio)').argParser(posInt('--width', 65535)).conflicts(['scale', 'height']))
    .addOption(new Option('--height <h>', 'output height in px (width keeps the aspect ratio)').argParser(posInt('--height', 65535)).conflicts(['scale', 'width']))
    .option('--resolution <WxH>', 'video output size (letterboxed; default: input size times the model scale)', resolution)
    .addOption(new Option('--fps <n>', 'video: target frame rate made by frame interpolation (RIFE), above the source rate, at most 120 and 8x the source').argParser(posNum('--fps', 1000)))
    .addOption(new Option('--slowmo <n>', 'video: slow motion, frames interpolated and duration stretched (audio dropped)').argParser(slowmoArg))
    .addOption(new Option('--backend <backend>', 'engine backend').choices(['auto', 'cpu', 'gpu'])
      .default(envBackend === 'cpu' || envBackend === 'gpu' ? envBackend : 'auto', envBackend ? '$LUCENT_BACKEND' : 'auto'))
    .option('-j, --jobs <n>', 'files enhanced at once', posInt('--jobs', 64), 1)
    .option('--overwrite', 'redo files whose output exists (default: skip them)')
    .option('--json', 'one JSON object per line on stdout (events start, ignored, begin, done, skipped, failed, summary)')
    .addHelpText('after', () => `
Photo models: ${catalog ? [...catalog.PHOTO_MODELS.keys()].join(', ') : '(see models/catalog.json)'}
Video models: ${catalog ? [...catalog.VIDEO_MODELS.keys()].join(', ') : '(see models/catalog.json)'}
Models are read from $LUCENT_MODEL_DIR (default ./data/models; \`lucent models fetch\` fills it).

Exit status: 0 all done or skipped, 1 a file failed (its error_code is printed), 2 bad usage, 130 interrupted.

Examples:
  lucent enhance photos/ --recursive --model general_4x --out upscaled/
  lucent enhance "scans/*.tif" --model sharpen_denoise_1x --format png --strip-meta --json
  lucent enhance clips/ --model general_2x --video-model general_restore_2x --resolution 1280x720
  lucent enhance clip.mp4 --model frame_interpolation --fps 60`)
    .action(async (inputs: string[], o: Opts) => {
      process.exitCode = await enhanceAction(inputs, o)
    })
  return cmd
}

export function usage(msg: string, command = 'enhance'): number {
  process.stderr.write(`lucent ${command}: ${msg}\n`)
  return 2
}

async function enhanceAction(inputs: string[], o: Opts): Promise<number> {
  const { photoModel, videoModel } = await loadCatalog()
  // not a catalog model: one of the operator's own (`lucent models add`), from the configured store and storage
  const ownName = !photoModel(o.model) && !videoModel(o.model) ? o.model : o.videoModel && !videoModel(o.videoModel) ? o.videoModel : null
  let own: OwnForEnhance | null = null
  if (ownName) {
    try {
      own = await (await import('../own-models/cli.js')).ownForEnhance(ownName)
    } catch (e) {
      return usage(`cannot read the own model ${ownName}: ${(e as Error).message}`)
    }
  }
  if (!photoModel(o.model) && !videoModel(o.model) && !own) return usage(`unknown model ${o.model} (lucent enhance --help lists them)`)
  if (o.videoModel && !videoModel(o.videoModel) && !own?.video) return usage(`unknown video model ${o.videoModel}`)
  const size = { scale: o.scale, width: o.width, height: o.height }
  // the engine side is loaded only when the command runs (`lucent --help` and the other commands stay quick)
  const [{ openEngine }, { runBatch }] = await Promise.all([import('./engine.js'), import('./batch.js')])
  const config = loadConfig()
  const settings: EnhanceSettings = {
    model: o.model, videoModel: o.videoModel, format: o.format, videoFormat: o.videoFormat, quality: o.quality,
    keepMeta: !o.stripMeta, dpi: o.dpi, size, resolution: o.resolution, video: config.video,
    fps: o.fps, slowmo: o.slowmo, ...(own ? { own } : {}),
  }
  let engine
  try {
    engine = openEngine(config.modelDir, o.backend)
  } catch (e) {
    const err = e as ItemError
    return usage(`cannot start the engine: ${err.errorCode ?? ''} ${err.message}`)
  }
  return runReported('enhance', !!o.json, (emit, signal, parts) => runBatch({
    inputs, out: path.resolve(o.out), recursive: !!o.recursive, overwrite: !!o.overwrite, jobs: o.jobs, settings,
    addon: engine.addon, engine: { backend: engine.info.backend, adapter: engine.info.adapter }, signal, parts, emit,
  }))
}

/**
 * A batch command's run, shared by `lucent enhance` and `lucent segment` (segment.ts): the reporter (--json, a
 * terminal, plain), Ctrl-C / SIGTERM (the first aborts the batch, a second exits at once, temporaries removed),
 * bad usage found on disk, and the exit code (0, 1 a file failed, 2 bad usage, 130 / 143 interrupted).
 */
export async function runReported(command: string, json: boolean,
  batch: (emit: Reporter, signal: AbortSignal, parts: Set<string>) => Promise<Summary>): Promise<number> {
  const [{ removePartsSync, UsageError }, { reporter }] = await Promise.all([import('./files.js'), import('./report.js')])
  const mode: Mode = json ? 'json' : process.stderr.isTTY && process.stdout.isTTY ? 'tty' : 'plain'
  const emit = reporter(mode, command)
  const ac = new AbortController()
  const parts = new Set<string>()
  let signalled: NodeJS.Signals | null = null
  const onSignal = (sig: NodeJS.Signals) => {
    if (signalled) {
      // a second Ctrl-C: do not wait for the running files to stop
      removePartsSync(parts)
      process.exit(sig === 'SIGINT' ? 130 : 143)
    }
    signalled = sig
    ac.abort()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    const s = await batch(emit, ac.signal, parts)
    if (signalled) return signalled === 'SIGINT' ? 130 : 143
    return s.failed ? 1 : 0
  } catch (e) {
    if (e instanceof UsageError) return usage(`${e.message}\nhint: ${e.hint}`, command)
    throw e
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
