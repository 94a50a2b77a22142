/**
 * `lucent segment INPUT... [--model u2netp|u2net] [--mask] [--format png|webp]`: background removal on this
 * machine, no server. The batch, its guards, skip-existing, atomic writes, reporters and exit codes are
 * `lucent enhance`'s (batch.ts, files.ts, report.ts, command.ts runReported); this file holds the command's
 * options and its BatchJob: the addon's `segment` (U²-Net, edges refined at full resolution; EXIF orientation,
 * limits and decoding are the engine's) writing `<name>.png` (the subject on a transparent background) and, with
 * --mask, `<name>.mask.png` (8-bit grey). Failures carry the API's error_code (server/errors.ts via fromEngine).
 */
import fs from 'node:fs'
import path from 'node:path'
import fsp from 'node:fs/promises'
import { Command, InvalidArgumentError, Option } from 'commander'
import type { BatchJob } from './batch.js'
import type { Addon } from '../engine/addon.js'
import { SEG_MODELS, segModel, type SegModel as SegModelEntry } from '../segmentation.js'

/** The segmentation models (server/segmentation.ts, as the API has them): `<network>.onnx` in the model folder. */
const MODEL_NAMES = SEG_MODELS.map((m) => m.name).sort() // alphabetical in --help and its errors
type SegModel = SegModelEntry['name']
/** Formats of the matted image that hold alpha (the addon also writes tiff, tga, heif; these are the API's). */
export const SEG_FORMATS = ['png', 'webp'] as const

const network = (model: SegModel) => segModel(model)!.network
const segModelFile = (model: SegModel) => `${network(model)}.onnx`
const fetchHint = (model: SegModel) => `lucent models fetch ${network(model)}`

/** The model when none is named: u2net where its file is present (the better one), else u2netp (the small one). */
function defaultSegModel(modelDir: string): SegModel {
  return fs.existsSync(path.join(modelDir, segModelFile('u2net'))) ? 'u2net' : 'u2netp'
}

export interface SegmentSettings {
  model: SegModel
  format: (typeof SEG_FORMATS)[number]
  mask: boolean
}

/** `<rel without extension>.mask.png` beside the matted output. */
export const maskPath = (output: string) => `${output.slice(0, output.length - path.extname(output).length)}.mask.png`

/** The BatchJob of `lucent segment`: photos only; the matted image and, with --mask, the mask, each written atomically. */
export async function segmentJob(addon: Addon, s: SegmentSettings): Promise<BatchJob> {
  const { fromEngine, ItemError } = await import('./engine.js')
  const { writeAtomic } = await import('./files.js')
  const { engineErrorCode } = await import('../errors.js')
  return {
    model: s.model,
    check: (item) => (item.kind === 'photo' ? null
      : new ItemError(110400007, `background removal takes photos: ${path.basename(item.file)} is a video`)),
    output: (item, out) => path.resolve(out, `${item.rel.slice(0, item.rel.length - path.extname(item.rel).length)}.${s.format}`),
    extras: (output) => (s.mask ? [maskPath(output)] : []),
    run: async (item, signal, parts) => {
      const bytes = await fsp.readFile(item.file)
      let r
      try {
        r = await addon.segment(bytes, { model: s.model, format: s.format }, signal)
      } catch (e) {
        const err = fromEngine(e)
        if (err.engineCode === 'model_missing') throw new ItemError(err.errorCode, `${err.message} (${fetchHint(s.model)})`, err.engineCode)
        throw err
      }
      const write = (file: string, data: Uint8Array) => writeAtomic(file, data, parts).catch((e: Error) => {
        throw new ItemError(engineErrorCode('storage'), `cannot write ${file}: ${e.message}`)
      })
      // the mask first: the matted image is the file a reader looks for, and a rerun redoes a file missing either
      const mask = s.mask ? maskPath(item.output) : undefined
      if (mask) await write(mask, r.mask)
      await write(item.output, r.data)
      return { width: r.width, height: r.height, ms: r.ms, ...(mask ? { mask } : {}) }
    },
  }
}

interface Opts {
  model?: SegModel
  out: string
  recursive?: boolean
  mask?: boolean
  format: SegmentSettings['format']
  backend: 'auto' | 'cpu' | 'gpu'
  jobs: number
  overwrite?: boolean
  json?: boolean
}

export function segmentCommand(): Command {
  const envBackend = process.env.LUCENT_BACKEND
  return new Command('segment')
    .summary('remove the background of photos on this machine (files, folders, globs; no server)')
    .description('Runs U²-Net in this process on every photo named by INPUT (files, folders, globs) and writes the subject on a '
      + 'transparent background as <name>.png (RGBA; <name>.webp with --format webp) under --out with the same relative paths, and with --mask the mask as '
      + '<name>.mask.png (8-bit grey). The mask\'s edges are refined at full resolution (docs/segmentation.md). Outputs are '
      + 'written atomically and a rerun skips files whose outputs exist. Same error codes as the server.')
    .argument('<input...>', 'files, folders or globs (quote globs: "photos/**/*.jpg")')
    .addOption(new Option('-m, --model <name>', 'segmentation model: u2net (full, 176 MB) or u2netp (small, 4.6 MB); '
      + 'default: u2net where its file is present, else u2netp').choices(MODEL_NAMES))
    .option('-o, --out <dir>', 'output folder (folders are mirrored into it; not a folder input nor above one)', 'cutout')
    .option('-r, --recursive', 'enter sub-folders of folder inputs')
    .option('--mask', 'also write the mask, <name>.mask.png (8-bit grey, the size of the output)')
    .addOption(new Option('-f, --format <ext>', 'format of the subject on transparent background').choices(SEG_FORMATS).default('png'))
    .addOption(new Option('--backend <backend>', 'engine backend').choices(['auto', 'cpu', 'gpu'])
      .default(envBackend === 'cpu' || envBackend === 'gpu' ? envBackend : 'auto', envBackend ? '$LUCENT_BACKEND' : 'auto'))
    .option('-j, --jobs <n>', 'files processed at once', (v: string) => {
      const n = Number(v)
      if (!Number.isSafeInteger(n) || n < 1 || n > 64) throw new InvalidArgumentError('--jobs must be an integer from 1 to 64')
      return n
    }, 1)
    .option('--overwrite', 'redo files whose outputs exist (default: skip them)')
    .option('--json', 'one JSON object per line on stdout (events start, ignored, begin, done, skipped, failed, summary)')
    .addHelpText('after', `
Models are read from $LUCENT_MODEL_DIR (default ./data/models): seg/u2netp.onnx, seg/u2net.onnx
(\`lucent models fetch seg/u2netp\`, \`lucent models fetch seg/u2net\`).

Exit status: 0 all done or skipped, 1 a file failed (its error_code is printed), 2 bad usage or no model, 130 interrupted.

Examples:
  lucent segment photos/ --recursive --out cutout/
  lucent segment "shop/*.jpg" --model u2netp --mask --format webp --json`)
    .action(async (inputs: string[], o: Opts) => {
      process.exitCode = await segmentAction(inputs, o)
    })
}

async function segmentAction(inputs: string[], o: Opts): Promise<number> {
  const [{ loadConfig }, { usage, runReported }] = await Promise.all([import('../config.js'), import('./command.js')])
  const config = loadConfig()
  const model = o.model ?? defaultSegModel(config.modelDir)
  const file = path.join(config.modelDir, segModelFile(model))
  // checked before the engine starts: without the network no file can be done (exit 2, as a missing engine)
  if (!fs.existsSync(file)) {
    return usage(`100500005 Configuration error: the model file ${segModelFile(model)} is missing in ${config.modelDir}\nhint: ${fetchHint(model)}`, 'segment')
  }
  const [{ openEngine }, { runBatch }] = await Promise.all([import('./engine.js'), import('./batch.js')])
  let engine: ReturnType<typeof openEngine>
  try {
    engine = openEngine(config.modelDir, o.backend)
  } catch (e) {
    const err = e as { errorCode?: number; message: string }
    return usage(`cannot start the engine: ${err.errorCode ?? ''} ${err.message}`, 'segment')
  }
  if (typeof engine.addon.segment !== 'function') return usage('100500005 the native addon has no segment (rebuild it: npm run build:native)', 'segment')
  const job = await segmentJob(engine.addon, { model, format: o.format, mask: !!o.mask })
  return runReported('segment', !!o.json, (emit, signal, parts) => runBatch({
    inputs, out: path.resolve(o.out), recursive: !!o.recursive, overwrite: !!o.overwrite, jobs: o.jobs, job,
    addon: engine.addon, engine: { backend: engine.info.backend, adapter: engine.info.adapter }, signal, parts, emit,
  }))
}
