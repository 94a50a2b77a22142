/**
 * How `lucent enhance` and `lucent segment` show a batch (events from batch.ts):
 * - `json`: one JSON object per line on stdout, every event but per-file progress (for scripts);
 * - `tty`: a progress bar on stderr (cli-progress: counts, current file, throughput, ETA), failures printed above
 *   it, then the summary on stdout;
 * - `plain` (stdout is not a terminal): one line per file and the summary.
 */
import path from 'node:path'
import cliProgress from 'cli-progress'
import type { BatchEvent, Summary } from './batch.js'

export type Reporter = (e: BatchEvent) => void
export type Mode = 'json' | 'tty' | 'plain'

const rel = (p: string) => {
  const r = path.relative(process.cwd(), p)
  return r && !r.startsWith('..') && !path.isAbsolute(r) ? r : p
}

export function summaryLines(s: Summary): string[] {
  const head = `${s.interrupted ? 'interrupted: ' : ''}done ${s.done}, skipped ${s.skipped} (output exists), failed ${s.failed}, ignored ${s.ignored} (junk, hidden, not media) in ${s.seconds.toFixed(1)} s`
  return [head, ...s.failures.map((f) => `  failed ${rel(f.input)}: ${f.error_code} ${f.message} (${f.detail})`)]
}

function failLine(e: Extract<BatchEvent, { event: 'failed' }>): string {
  return `fail  ${rel(e.input)}: ${e.error_code} ${e.message} (${e.detail})`
}

export function jsonReporter(write: (s: string) => void = (s) => process.stdout.write(s)): Reporter {
  return (e) => {
    if (e.event !== 'progress') write(`${JSON.stringify(e)}\n`)
  }
}

export function plainReporter(write: (s: string) => void = (s) => process.stdout.write(s), command = 'enhance'): Reporter {
  return (e) => {
    switch (e.event) {
      case 'start':
        write(`lucent ${command}: ${e.total} file(s), ${e.ignored} ignored; model ${e.model}; engine ${e.backend} (${e.adapter}); output ${rel(e.out)}\n`)
        break
      case 'done':
        write(`done  ${rel(e.input)} -> ${rel(e.output)}${e.mask ? ` + ${rel(e.mask)}` : ''} ${e.width}x${e.height} ${Math.round(e.ms)} ms\n`)
        break
      case 'skipped':
        write(`skip  ${rel(e.input)} (exists: ${rel(e.output)})\n`)
        break
      case 'failed':
        write(`${failLine(e)}\n`)
        break
      case 'summary':
        write(`${summaryLines(e).join('\n')}\n`)
        break
    }
  }
}

/** The terminal display: one bar of files finished (done + skipped + failed) and the running file's percentage. */
export function ttyReporter(stream: NodeJS.WriteStream = process.stderr, command = 'enhance'): Reporter {
  const multi = new cliProgress.MultiBar({
    stream,
    format: '{bar} {value}/{total} files | {rate} files/s | ETA {left} | {pct}% {file}',
    hideCursor: true,
    clearOnComplete: true,
    autopadding: true,
  }, cliProgress.Presets.shades_classic)
  let bar: cliProgress.SingleBar | null = null
  let t0 = 0
  let finished = 0
  let total = 0
  const clock = (s: number) => (s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(Math.round(s) % 60).padStart(2, '0')}s` : `${Math.round(s)}s`)
  const payload = (file: string, pct: number) => {
    const secs = (performance.now() - t0) / 1000
    const rate = secs > 0 ? finished / secs : 0
    return { file: file ? rel(file) : '', pct: String(Math.round(pct)).padStart(3), rate: rate.toFixed(2), left: rate > 0 ? clock((total - finished) / rate) : '-' }
  }
  const step = (file: string) => {
    finished++
    bar?.update(finished, payload(file, 100))
  }
  return (e) => {
    switch (e.event) {
      case 'start':
        t0 = performance.now()
        total = e.total
        bar = multi.create(e.total, 0, payload('', 0))
        multi.log(`lucent ${command}: ${e.total} file(s), ${e.ignored} ignored; model ${e.model}; engine ${e.backend} (${e.adapter})\n`)
        break
      case 'begin':
        bar?.update(finished, payload(e.input, 0))
        break
      case 'progress':
        bar?.update(finished, payload(e.input, e.pct))
        break
      case 'done':
      case 'skipped':
        step(e.input)
        break
      case 'failed':
        multi.log(`${failLine(e)}\n`)
        step(e.input)
        break
      case 'summary':
        multi.update() // a last render: lines logged since the previous one are written
        multi.stop()
        process.stdout.write(`${summaryLines(e).join('\n')}\n`)
        break
    }
  }
}

export function reporter(mode: Mode, command = 'enhance'): Reporter {
  return mode === 'json' ? jsonReporter() : mode === 'tty' ? ttyReporter(undefined, command) : plainReporter(undefined, command)
}
