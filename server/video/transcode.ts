// Video enhancement pipeline: ffmpeg decodes the input into raw RGB24 frames over a pipe, batches of
// frames go through the engine (`process`), the enhanced frames are written over a pipe into a second
// ffmpeg that fits them to the target resolution, encodes them and muxes the original's audio (copied
// bit-exact), subtitles (where the container allows) and metadata. Decoding, the engine and encoding run
// concurrently (one batch read ahead, one batch being written while the next is enhanced); memory is
// bounded by ~3 batches, and nothing but the output (plus, for VFR inputs, the encoded video stream)
// touches the disk.
//
// Choices (documented for the API):
// - Fit: the network output is scaled with Lanczos to fit INSIDE the target keeping its aspect ratio and
//   centred on black (letterbox / pillarbox). The output has exactly the requested size, rounded down to
//   even numbers for yuv420p (H.264/HEVC); GIF keeps odd sizes.
// - Codec: H.264 (libx264) up to 3840x2160 pixels, HEVC (libx265, tagged hvc1) above; yuv420p; CRF 18
//   (visually near-lossless; LUCENT_VIDEO_CRF) with preset medium (LUCENT_VIDEO_PRESET). GIF: per-frame
//   palettes (streaming, no whole-video palette pass).
// - Timing: the raw pipe carries no timestamps, so the encoder first gets constant-rate stamps at the
//   input's average rate. When the input is variable-frame-rate (see probe.ts analyseTimestamps), the
//   encoded video goes through mkvmerge with a v2 timestamp file holding every original frame time, then
//   is muxed (stream copy) with the audio: the output frame times equal the input's (1 ms precision).
//   AVI and GIF are always constant-rate.
// - Rotation: ffmpeg's decoder applies the display matrix (autorotate), so frames arrive upright; the
//   output carries no rotation.
// - Frame-rate conversion (`outFps`, server/video/interp.ts): the processor may return more frames than it
//   was given (and `flush` the last ones), in bounded pieces (`ProcessedFrames.more`, each written before the
//   next is made); the encoder takes them at `outFps`, constant rate. `dropAudio`
//   (slow motion) leaves out audio and subtitles, whose timing no longer applies.
// - Input (issue 29): the decoder maps exactly the planned stream (`stream`, by its index: never an attached
//   picture), reads the input as the planned container (`demuxer`, probe.ts inputArgs: local files and pipes
//   only), scales the upright frames to the network's input size (`decodeSize`, the plan's pre-scale) and
//   reports every decoded batch (`onDecoded`, the work meter's frame cap: it throws to stop the job).
import { spawn, type ChildProcess } from 'node:child_process'
import { rm, writeFile } from 'node:fs/promises'
import { inputArgs } from './probe.js'

export interface VideoStreamInfo {
  width: number // coded width
  height: number
  rotation: number // degrees, as the display matrix says (0, 90, 180, 270)
  fps: string // exact rational, e.g. "1199/50"
  frames: number // expected frame count (estimate when the container does not say)
  hasAudio: boolean
  hasSubtitles: boolean
  /** Subtitle codec names (to pick what each container can carry). */
  subtitleCodecs?: string[]
  /** Seconds from the start of the file to the first video frame (kept in the output). */
  videoOffset?: number
}

/** Processed frames: `count` of them (default: as many as were given) of width x height, RGB24. `more`: the
 *  next piece of the same call's output (a processor that makes many frames per input frame hands them on in
 *  bounded pieces), asked for once this piece is on its way to the encoder, until it answers null. */
export interface ProcessedFrames { data: Buffer; width: number; height: number; count?: number; more?: () => Promise<ProcessedFrames | null> }

export type FrameProcessor = (
  frames: Buffer,
  width: number,
  height: number,
  count: number,
) => Promise<ProcessedFrames>

export interface TranscodeOptions {
  input: string
  output: string
  /** Output container: mp4, mov, mkv, m4v, avi or gif (no dot). */
  container: string
  /** Target [width, height]; the network's output is letterboxed into it (aspect kept). */
  target: [number, number]
  info: VideoStreamInfo
  process: FrameProcessor
  /** Frames per engine call. */
  batch?: number
  ffmpeg?: string
  /** mkvmerge binary, used only when `timestamps` is given. */
  mkvmerge?: string
  /** x264/x265 constant-rate factor (lower = better). Default 18. */
  crf?: number
  /** x264/x265 preset. Default medium. */
  preset?: string
  /** Original presentation times (seconds, display order, first = 0) of a VFR input: restored in the output. */
  timestamps?: number[]
  onProgress?: (framesDone: number, framesTotal: number) => void
  signal?: AbortSignal
  /** Output frame rate (a frame-rate conversion: `process` returns the output's frames). Default: the input's. */
  outFps?: string
  /** Output frames expected (progress); default `info.frames`. */
  outFrames?: number
  /** After the last batch: the output's last frames, if any (e.g. the last frame repeated to the end). */
  flush?: () => Promise<ProcessedFrames | null>
  /** Leave out audio and subtitles (slow motion). */
  dropAudio?: boolean
  /** Index of the video stream decoded (the plan's); default the first video stream. */
  stream?: number
  /** The container ffmpeg reads the input as (`-f`); null / absent: probe.ts SAFE_DEMUXERS. */
  demuxer?: string | null
  /** The frames' size out of the decoder (the network's input: the upright frames scaled down); default upright. */
  decodeSize?: { width: number; height: number }
  /** Called with each decoded batch's frame count before it is processed; a throw stops the job. */
  onDecoded?: (frames: number) => void
}

export class TranscodeError extends Error {
  constructor(
    message: string,
    readonly reason: 'decode' | 'encode' | 'engine' | 'aborted',
    readonly engineCode?: string,
  ) {
    super(message)
  }
}

const MP4_LIKE = new Set(['mp4', 'mov', 'm4v'])
const TEXT_SUBS = new Set(['subrip', 'srt', 'ass', 'ssa', 'mov_text', 'webvtt', 'text'])
const MUXER: Record<string, string> = { mp4: 'mp4', m4v: 'ipod', mov: 'mov', mkv: 'matroska', avi: 'avi', gif: 'gif' }

/** Frames above 4K (3840x2160 pixels) are encoded as HEVC, as the commercial service does. */
export function videoCodecFor(target: [number, number], container: string): string {
  if (container === 'gif') return 'gif'
  return target[0] * target[1] > 3840 * 2160 ? 'libx265' : 'libx264'
}

/** The encoded size: yuv420p needs even sides (rounded down); GIF keeps the request. */
export function encodedSize(target: [number, number], container: string): [number, number] {
  if (container === 'gif') return target
  return [Math.max(2, target[0] & ~1), Math.max(2, target[1] & ~1)]
}

/** The scale filter that fits a frame into the target: keep the aspect ratio, centre it, pad
 *  with black (letterbox / pillarbox). Lanczos resampling. */
export function fitFilter(target: [number, number]): string {
  const [w, h] = target
  return (
    `scale=${w}:${h}:flags=lanczos:force_original_aspect_ratio=decrease,` +
    `pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2:color=black,setsar=1`
  )
}

/** The fit filter, or nothing but the SAR reset when the frames already have the encoded size. */
function fitFor(size: [number, number], frameW: number, frameH: number): string {
  return frameW === size[0] && frameH === size[1] ? 'setsar=1' : fitFilter(size)
}

/** Whether the VFR timestamp restoration applies to this container. */
export function keepsVfr(container: string): boolean {
  return container !== 'avi' && container !== 'gif'
}

/** Stream maps + codecs for what comes from the original file (input index `src`). */
function passthroughArgs(o: TranscodeOptions, src: number): string[] {
  const args: string[] = []
  const c = o.container
  if (o.info.hasAudio && !o.dropAudio) args.push('-map', `${src}:a?`, '-c:a', 'copy')
  const subs = o.dropAudio ? [] : o.info.subtitleCodecs ?? (o.info.hasSubtitles ? ['subrip'] : [])
  if (c === 'mkv') {
    subs.forEach((codec, i) => args.push('-map', `${src}:s:${i}`, `-c:s:${i}`, codec === 'mov_text' ? 'srt' : 'copy'))
    args.push('-map', `${src}:t?`)
  } else if (MP4_LIKE.has(c)) {
    let k = 0
    subs.forEach((codec, i) => {
      if (!TEXT_SUBS.has(codec)) return // bitmap subtitles cannot go into MP4/MOV
      args.push('-map', `${src}:s:${i}`, `-c:s:${k++}`, 'mov_text')
    })
  }
  // Container / stream metadata (title, language, creation time ...) from the original.
  args.push('-map_metadata', String(src))
  if (MP4_LIKE.has(c)) args.push('-movflags', '+faststart')
  return args
}

function videoCodecArgs(o: TranscodeOptions): string[] {
  const codec = videoCodecFor(o.target, o.container)
  const args = ['-c:v', codec, '-preset', o.preset ?? 'medium', '-crf', String(o.crf ?? 18), '-pix_fmt', 'yuv420p']
  if (codec === 'libx265') args.push('-tag:v', 'hvc1', '-x265-params', 'log-level=error')
  return args
}

function rawInput(o: TranscodeOptions, frameW: number, frameH: number, offset: boolean): string[] {
  const args = ['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${frameW}x${frameH}`, '-framerate', o.outFps ?? o.info.fps]
  if (offset && (o.info.videoOffset ?? 0) > 0.001) args.push('-itsoffset', (o.info.videoOffset ?? 0).toFixed(6))
  return [...args, '-i', 'pipe:0']
}

const BASE = ['-hide_banner', '-v', 'error', '-nostdin', '-y']

/** One-step encoder: frames from the pipe + audio/subs/metadata from the original, straight into the output. */
function encoderArgs(o: TranscodeOptions, frameW: number, frameH: number): string[] {
  const size = encodedSize(o.target, o.container)
  const args = [...BASE, ...rawInput(o, frameW, frameH, true), ...inputArgs(o), '-i', o.input, '-map', '0:v:0']
  if (o.container === 'gif') {
    args.push('-filter_complex', `[0:v]${fitFor(size, frameW, frameH)},split[a][b];[a]palettegen=stats_mode=single[p];[b][p]paletteuse=new=1`)
    args.push('-map_metadata', '1', '-f', 'gif', o.output)
    return args
  }
  args.push('-vf', fitFor(size, frameW, frameH), ...videoCodecArgs(o), ...passthroughArgs(o, 1), '-f', MUXER[o.container] ?? o.container, o.output)
  return args
}

/** VFR step 1: frames -> fitted, encoded, video-only Matroska (constant-rate stamps, fixed below). */
function vfrEncoderArgs(o: TranscodeOptions, frameW: number, frameH: number, file: string): string[] {
  const size = encodedSize(o.target, o.container)
  return [...BASE, ...rawInput(o, frameW, frameH, false), '-map', '0:v:0', '-vf', fitFor(size, frameW, frameH), ...videoCodecArgs(o), '-f', 'matroska', file]
}

function decoderArgs(o: TranscodeOptions): string[] {
  // -xerror / explode: a corrupt stream fails the job instead of producing damaged frames.
  // passthrough: every decoded frame once (no duplication / dropping to a constant rate).
  const scale = o.decodeSize ? ['-vf', `scale=${o.decodeSize.width}:${o.decodeSize.height}:flags=lanczos`] : []
  return [
    '-hide_banner', '-v', 'error', '-nostdin', '-err_detect', 'explode', '-xerror',
    ...inputArgs(o), '-i', o.input, '-map', o.stream === undefined ? '0:v:0' : `0:${o.stream}`, ...scale,
    '-fps_mode', 'passthrough', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1',
  ]
}

function collectStderr(p: ChildProcess): () => string {
  let err = ''
  p.stderr?.on('data', (d: Buffer) => {
    if (err.length < 8192) err += d.toString()
  })
  return () => err.trim()
}

function exitOf(p: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    if (p.exitCode !== null) resolve(p.exitCode)
    else {
      p.once('error', () => resolve(127))
      p.once('close', (code, sig) => resolve(code ?? (sig ? 128 : 1)))
    }
  })
}

/** Runs a helper process to completion; rejects with its stderr. */
function runTool(bin: string, args: string[], reason: 'encode' | 'decode', signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    const err = collectStderr(p)
    let out = ''
    p.stdout?.on('data', (d: Buffer) => {
      if (out.length < 4096) out += d.toString()
    })
    const onAbort = () => p.kill('SIGKILL')
    signal?.addEventListener('abort', onAbort, { once: true })
    p.on('error', (e) => {
      signal?.removeEventListener('abort', onAbort)
      reject(new TranscodeError(`${bin}: ${e.message}`, reason))
    })
    p.on('close', (code) => {
      signal?.removeEventListener('abort', onAbort)
      // mkvmerge exits 1 for warnings only (output written).
      const okCode = code === 0 || (bin.includes('mkvmerge') && code === 1)
      if (okCode) resolve()
      else reject(new TranscodeError(`${bin} failed (${code}): ${(err() || out).slice(0, 500)}`, reason))
    })
  })
}

function writeAll(p: ChildProcess, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const stdin = p.stdin!
    if (stdin.destroyed || p.exitCode !== null || p.signalCode !== null) {
      reject(new TranscodeError('encoder exited', 'encode'))
      return
    }
    const cleanup = () => {
      stdin.off('error', onError)
      stdin.off('close', onClose)
      stdin.off('drain', onDrain)
    }
    const onError = (e: Error) => { cleanup(); reject(new TranscodeError(`encoder input closed: ${e.message}`, 'encode')) }
    const onClose = () => { cleanup(); reject(new TranscodeError('encoder input closed', 'encode')) }
    const onDrain = () => { cleanup(); resolve() }
    stdin.once('error', onError)
    stdin.once('close', onClose)
    if (stdin.write(data)) {
      cleanup()
      resolve()
    } else {
      stdin.once('drain', onDrain)
    }
  })
}

/** Reads exactly `size`-byte frames from a stream, in batches of up to `batch`. */
async function* frameBatches(stream: NodeJS.ReadableStream, size: number, batch: number): AsyncGenerator<Buffer> {
  const want = size * batch
  let parts: Buffer[] = []
  let have = 0
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    parts.push(chunk)
    have += chunk.length
    while (have >= want) {
      const all = Buffer.concat(parts, have)
      // A copy of exactly one batch: it may be transferred to an engine thread (its ArrayBuffer moves).
      yield Buffer.from(all.subarray(0, want))
      const rest = all.subarray(want)
      parts = rest.length ? [Buffer.from(rest)] : []
      have = rest.length
    }
  }
  const whole = Math.floor(have / size) * size
  if (whole > 0) yield Buffer.from(Buffer.concat(parts, have).subarray(0, whole))
  if (have !== whole) throw new TranscodeError(`decoder produced a partial frame (${have - whole} bytes)`, 'decode')
}

/** mkvmerge timestamp file (format v2): one line per frame, milliseconds, display order. */
export function timestampFile(ts: number[], frames: number, interval: number): string {
  const lines = ['# timestamp format v2']
  let last = -Infinity
  for (let i = 0; i < frames; i++) {
    // More frames decoded than packets stamped (rare): continue at the median interval.
    let t = i < ts.length ? ts[i] : (ts.length ? ts[ts.length - 1] : 0) + (i - ts.length + 1) * interval
    if (t <= last) t = last + 0.001 // strictly increasing after ms rounding
    last = t
    lines.push((t * 1000).toFixed(3))
  }
  return lines.join('\n') + '\n'
}

/** Runs the whole pipeline. Resolves with the number of frames written; on any failure both
 *  ffmpeg processes are killed and the partial output and intermediates are removed. */
export async function transcode(o: TranscodeOptions): Promise<{ frames: number; width: number; height: number; vfrRestored: boolean }> {
  const ffmpeg = o.ffmpeg ?? 'ffmpeg'
  const rot = ((o.info.rotation % 360) + 360) % 360
  const [w, h] = o.decodeSize ? [o.decodeSize.width, o.decodeSize.height]
    : rot === 90 || rot === 270 ? [o.info.height, o.info.width] : [o.info.width, o.info.height]
  const frameBytes = w * h * 3
  const batch = Math.max(1, o.batch ?? 4)
  const vfr = !o.outFps && !!o.timestamps && o.timestamps.length > 1 && keepsVfr(o.container)
  const tmpVideo = `${o.output}.v.mkv`
  const tmpTimed = `${o.output}.t.mkv`
  const tmpTs = `${o.output}.ts.txt`
  const dec = spawn(ffmpeg, decoderArgs(o), { stdio: ['ignore', 'pipe', 'pipe'] })
  const decErr = collectStderr(dec)
  const decExit = exitOf(dec)
  let enc: ChildProcess | undefined
  let encErr = () => ''
  let encExit: Promise<number> | undefined
  const kill = () => {
    dec.kill('SIGKILL')
    enc?.kill('SIGKILL')
    // Unread pipe data would keep 'close' from ever firing: drop it.
    dec.stdout?.destroy()
    enc?.stdin?.destroy()
  }
  const onAbort = () => kill()
  o.signal?.addEventListener('abort', onAbort, { once: true })
  let done = 0
  let outW = 0
  let outH = 0
  let pendingWrite: Promise<void> = Promise.resolve()
  /** A processor call; its failure is the engine's (unless the run was stopped). */
  const engine = async (fn: () => Promise<ProcessedFrames | null>) => {
    try {
      return await fn()
    } catch (e) {
      if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
      const err = e as Error & { code?: string }
      throw new TranscodeError(err.message, 'engine', err.code)
    }
  }
  try {
    const it = frameBatches(dec.stdout!, frameBytes, batch)
    let next = it.next()
    for (;;) {
      const r = await next
      const frames = r.done ? null : r.value
      // The decoder is done: one more round for the processor's last frames (`flush`), if it holds any back.
      if (!frames && (!o.flush || done === 0)) break
      if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
      if (frames) {
        next = it.next() // decode the next batch while this one is enhanced
        next.catch(() => {})
      }
      const count = frames ? frames.length / frameBytes : 0
      if (count) {
        try {
          o.onDecoded?.(count)
        } catch (e) {
          throw new TranscodeError((e as Error).message, 'engine', (e as { code?: string }).code ?? 'budget_exceeded')
        }
      }
      let out = await engine(() => frames ? o.process(frames, w, h, count) : o.flush!())
      if (!out) break
      // The call's output, piece by piece (`more`): each piece is written while the next one is made.
      for (let first = true; out; first = false) {
        const piece: ProcessedFrames = out
        const made = piece.count ?? (first ? count : 0)
        await pendingWrite
        if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
        if (!enc) {
          outW = piece.width
          outH = piece.height
          // VFR: Matroska gets the full mux now and its video timestamps replaced by mkvmerge (which keeps the
          // audio/subtitles as they are); MP4/MOV get a video-only stream, re-timed, then muxed by ffmpeg.
          const args = !vfr ? encoderArgs(o, outW, outH)
            : o.container === 'mkv' ? encoderArgs({ ...o, output: tmpVideo }, outW, outH) : vfrEncoderArgs(o, outW, outH, tmpVideo)
          enc = spawn(ffmpeg, args, { stdio: ['pipe', 'ignore', 'pipe'] })
          encErr = collectStderr(enc)
          encExit = exitOf(enc)
        }
        if (piece.width !== outW || piece.height !== outH || piece.data.length !== outW * outH * 3 * made) {
          throw new TranscodeError(`engine returned ${piece.data.length} bytes (${piece.width}x${piece.height}) for ${made} frames`, 'engine')
        }
        if (made > 0) {
          pendingWrite = writeAll(enc, piece.data) // the encoder drains this while the next batch is enhanced
          pendingWrite.catch(() => {})
        }
        done += made
        o.onProgress?.(done, Math.max(done, o.outFrames ?? o.info.frames))
        out = piece.more ? await engine(piece.more) : null
      }
      if (!frames) break
    }
    await pendingWrite
    const dcode = await decExit
    if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
    if (dcode !== 0) throw new TranscodeError(`decoding failed: ${decErr() || `ffmpeg exited ${dcode}`}`, 'decode')
    if (!enc || done === 0) throw new TranscodeError(`no frames decoded${decErr() ? `: ${decErr()}` : ''}`, 'decode')
    enc.stdin!.end()
    const ecode = await encExit!
    if (ecode !== 0) throw new TranscodeError(`encoding failed: ${encErr() || `ffmpeg exited ${ecode}`}`, 'encode')
    if (vfr) {
      const ts = o.timestamps!
      const t0 = ts[0]
      const off = o.info.videoOffset ?? 0
      const rel = ts.map((t) => t - t0 + (o.container === 'mkv' ? off : 0))
      const interval = ts.length > 1 ? (ts[ts.length - 1] - t0) / (ts.length - 1) : 0.04
      await writeFile(tmpTs, timestampFile(rel, done, interval))
      const mkvmerge = o.mkvmerge ?? 'mkvmerge'
      if (o.container === 'mkv') {
        await runTool(mkvmerge, ['-q', '-o', o.output, '--timestamps', `0:${tmpTs}`, tmpVideo], 'encode', o.signal)
        return { frames: done, width: outW, height: outH, vfrRestored: true }
      }
      await runTool(mkvmerge, ['-q', '-o', tmpTimed, '--timestamps', `0:${tmpTs}`, tmpVideo], 'encode', o.signal)
      const mux = [...BASE]
      if (off > 0.001) mux.push('-itsoffset', off.toFixed(6))
      mux.push('-i', tmpTimed, ...inputArgs(o), '-i', o.input, '-map', '0:v:0', '-c:v', 'copy', ...passthroughArgs(o, 1))
      mux.push('-f', MUXER[o.container] ?? o.container, o.output)
      await runTool(ffmpeg, mux, 'encode', o.signal)
    }
    return { frames: done, width: outW, height: outH, vfrRestored: vfr }
  } catch (e) {
    kill()
    await Promise.allSettled([decExit, encExit, pendingWrite])
    await rm(o.output, { force: true })
    if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
    if (e instanceof TranscodeError) throw e
    throw new TranscodeError((e as Error).message, 'decode')
  } finally {
    o.signal?.removeEventListener('abort', onAbort)
    await Promise.all([tmpVideo, tmpTimed, tmpTs].map((f) => rm(f, { force: true })))
  }
}
