/**
 * `lucent enhance`: the batch. Inputs are expanded (files.ts), each gets its output path under --out; an output
 * that exists is skipped (outputs only ever appear whole: atomic writes), the rest run on the engine in-process
 * (engine.ts), `jobs` at a time. Each step is an event (the reporters in report.ts print them); a file's failure
 * is an event with its error code and the batch goes on. `signal` (Ctrl-C) stops the batch: running files are
 * aborted, their temporaries removed, nothing new starts, and the summary says `interrupted`.
 * Bad usage found on disk throws a UsageError before the batch starts: an --out at or above a folder input, an
 * output that would replace an input. An output that would land outside --out (a glob climbing out with `..`, a
 * symlinked folder under --out) is a failure of its file.
 */
import fs from 'node:fs'
import path from 'node:path'
import { engineErrorCode, type ErrorCode } from '../errors.js'
import { checkOut, expandInputs, makeOutDir, outsideOut, realish, refuseOverwritingInputs, sweepParts, type Ignored, type InputFile, type MediaKind } from './files.js'
import { enhancePhoto, enhanceVideo, fromEngine, ItemError, outputFor, videoModelFor, type EnhanceSettings, type ItemResult, type Planned } from './engine.js'
import type { Addon } from '../engine/addon.js'

export type BatchEvent =
  | { event: 'start'; total: number; ignored: number; model: string; backend: string; adapter: string; out: string }
  | { event: 'ignored'; input: string; reason: Ignored['reason'] }
  | { event: 'begin'; input: string; kind: MediaKind }
  | { event: 'progress'; input: string; pct: number }
  | { event: 'done'; input: string; output: string; kind: MediaKind; width: number; height: number; ms: number; mask?: string }
  | { event: 'skipped'; input: string; output: string; reason: 'exists' }
  | { event: 'failed'; input: string; error_code: ErrorCode; message: string; detail: string; engine_code?: string }
  | { event: 'summary'; done: number; skipped: number; failed: number; ignored: number; interrupted: boolean; seconds: number;
      failures: Array<{ input: string; error_code: ErrorCode; message: string; detail: string }> }

export type Summary = Extract<BatchEvent, { event: 'summary' }>

/**
 * What the batch does with each file. `lucent enhance` (the default, enhanceJob) and `lucent segment`
 * (segment.ts) share everything else: the walk, the guards, skip-existing, atomic writes, events, exit codes.
 */
export interface BatchJob {
  /** The model named in the start event. */
  model: string
  /** A failure of the file decided before its output is planned (e.g. a video with no video model), else null. */
  check?(item: InputFile): ItemError | null
  /** The main output of a file under `out` (absolute), or why it has none. */
  output(item: InputFile, out: string): string | ItemError
  /** Files written beside the main output: a file is skipped only when all exist, and none may be an input or
   *  another file's output. */
  extras?(output: string): string[]
  run(item: Planned, signal: AbortSignal, parts: Set<string>, onProgress: (pct: number) => void): Promise<ItemResult & { mask?: string }>
}

/** `lucent enhance`'s job: engine.ts on photos and videos. */
export function enhanceJob(settings: EnhanceSettings, addon: Addon): BatchJob {
  let videoModelErr: ItemError | null | undefined
  return {
    model: settings.model,
    check: (item) => {
      if (item.kind !== 'video') return null
      if (videoModelErr === undefined) {
        const m = videoModelFor(settings)
        videoModelErr = m instanceof ItemError ? m : null
      }
      return videoModelErr
    },
    output: (item, out) => outputFor(item, out, settings),
    run: (item, signal, parts, onProgress) => item.kind === 'photo'
      ? enhancePhoto(addon, item, settings, signal, parts, onProgress)
      : enhanceVideo(addon, item, settings, signal, parts, onProgress),
  }
}

export interface BatchOptions {
  inputs: string[]
  out: string
  recursive: boolean
  overwrite: boolean
  jobs: number
  /** `lucent enhance`'s settings (its job), unless `job` is given. */
  settings?: EnhanceSettings
  job?: BatchJob
  addon: Addon
  engine: { backend: string; adapter: string }
  signal: AbortSignal
  /** Temporaries being written (removed synchronously on a forced exit). */
  parts: Set<string>
  emit: (e: BatchEvent) => void
}

export async function runBatch(o: BatchOptions): Promise<Summary> {
  const t0 = performance.now()
  const job = o.job ?? enhanceJob(o.settings!, o.addon)
  const extras = (output: string) => job.extras?.(output) ?? []
  const out = path.resolve(o.out)
  await checkOut(o.inputs, out)
  const { inputs, ignored, missing } = await expandInputs(o.inputs, { recursive: o.recursive, exclude: out })
  const pairs: Array<{ file: string; output: string }> = []
  for (const item of inputs) {
    const output = job.output(item, out)
    if (typeof output === 'string') for (const p of [output, ...extras(output)]) pairs.push({ file: item.file, output: p })
  }
  await refuseOverwritingInputs(pairs)
  const outReal = await realish(out)
  await sweepParts(out)
  const s: Summary = { event: 'summary', done: 0, skipped: 0, failed: 0, ignored: ignored.length, interrupted: false, seconds: 0, failures: [] }
  const fail = (input: string, err: ItemError) => {
    s.failed++
    const f = { input, error_code: err.errorCode, message: err.apiMessage, detail: err.message }
    s.failures.push(f)
    o.emit({ event: 'failed', ...f, ...(err.engineCode ? { engine_code: err.engineCode } : {}) })
  }
  o.emit({ event: 'start', total: inputs.length + missing.length, ignored: ignored.length, model: job.model, ...o.engine, out })
  for (const i of ignored) o.emit({ event: 'ignored', input: i.file, reason: i.reason })
  for (const m of missing) fail(m.input, new ItemError(100403000, `no such file, folder or matching file: ${m.input}`))

  // Plan every output first: two inputs that would write the same output are a failure of the later one.
  const planned: Planned[] = []
  const owners = new Map<string, string>()
  for (const item of inputs) {
    const bad = job.check?.(item)
    if (bad) {
      fail(item.file, bad)
      continue
    }
    const output = job.output(item, out)
    if (output instanceof ItemError) {
      fail(item.file, output)
      continue
    }
    const outside = await outsideOut(output, out, outReal)
    if (outside) {
      fail(item.file, new ItemError(100403000, outside))
      continue
    }
    const mine = [output, ...extras(output)]
    const taken = mine.find((p) => owners.has(p))
    if (taken) {
      fail(item.file, new ItemError(100403000, `its output ${taken} is also the output of ${owners.get(taken)}`))
      continue
    }
    for (const p of mine) owners.set(p, item.file)
    planned.push({ ...item, output })
  }

  let next = 0
  const worker = async () => {
    while (next < planned.length && !o.signal.aborted) {
      const item = planned[next++]!
      if (!o.overwrite && [item.output, ...extras(item.output)].every((p) => fs.existsSync(p))) {
        s.skipped++
        o.emit({ event: 'skipped', input: item.file, output: item.output, reason: 'exists' })
        continue
      }
      let outside: string | null
      try {
        outside = await makeOutDir(item.output, out, outReal)
      } catch (e) {
        fail(item.file, new ItemError(engineErrorCode('storage'), `cannot make the folder of ${item.output}: ${(e as Error).message}`))
        continue
      }
      if (outside) {
        fail(item.file, new ItemError(100403000, outside))
        continue
      }
      o.emit({ event: 'begin', input: item.file, kind: item.kind })
      const onProgress = (pct: number) => o.emit({ event: 'progress', input: item.file, pct })
      try {
        const r = await job.run(item, o.signal, o.parts, onProgress)
        s.done++
        o.emit({ event: 'done', input: item.file, output: item.output, kind: item.kind, ...r, ms: Math.round(r.ms * 10) / 10 })
      } catch (e) {
        if (o.signal.aborted) break // an interrupted file is neither done nor failed: a rerun does it
        fail(item.file, e instanceof ItemError ? e : fromEngine(e))
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, Math.min(o.jobs, planned.length || 1)) }, worker))
  s.interrupted = o.signal.aborted
  s.seconds = Math.round(performance.now() - t0) / 1000
  o.emit(s)
  return s
}
