// Video enhancement pipeline: ffmpeg decodes the input into raw RGB frames over a pipe, batches of
// frames go through the engine (`processFrames`), the enhanced frames are written over a pipe into a
// second ffmpeg that fits them to the target resolution, encodes them and muxes the original's audio
// (copied bit-exact), subtitles (where the container allows) and metadata. Nothing but the two
// pipes and the output file touches the disk, so memory and disk stay bounded by the batch size.
import { spawn, type ChildProcess } from 'node:child_process'
import { rm } from 'node:fs/promises'

export interface VideoStreamInfo {
  width: number // coded width
  height: number
  rotation: number // degrees, as the display matrix says (0, 90, 180, 270)
  fps: string // exact rational, e.g. "1199/50"
  frames: number // expected frame count (estimate when the container does not say)
  hasAudio: boolean
  hasSubtitles: boolean
}

export type FrameProcessor = (
  frames: Buffer,
  width: number,
  height: number,
  count: number,
) => Promise<{ data: Buffer; width: number; height: number }>

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
  /** x264/x265 constant-rate factor (lower = better). */
  crf?: number
  onProgress?: (framesDone: number, framesTotal: number) => void
  signal?: AbortSignal
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

/** Frames above 4K (3840x2160 pixels) are encoded as HEVC, as the commercial service does. */
export function videoCodecFor(target: [number, number], container: string): string {
  if (container === 'gif') return 'gif'
  return target[0] * target[1] > 3840 * 2160 ? 'libx265' : 'libx264'
}

/** The scale filter that fits a frame into the target: keep the aspect ratio, centre it, pad
 *  with black (letterbox / pillarbox). Lanczos resampling; even sizes for yuv420p. */
export function fitFilter(target: [number, number]): string {
  const [w, h] = target
  return (
    `scale=${w}:${h}:flags=lanczos:force_original_aspect_ratio=decrease,` +
    `pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2:color=black,setsar=1`
  )
}

function encoderArgs(o: TranscodeOptions, frameW: number, frameH: number): string[] {
  const { container, target } = o
  const args = ['-hide_banner', '-v', 'error', '-nostdin', '-y']
  args.push('-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${frameW}x${frameH}`, '-framerate', o.info.fps, '-i', 'pipe:0')
  args.push('-i', o.input)
  args.push('-map', '0:v:0')
  const codec = videoCodecFor(target, container)
  if (container === 'gif') {
    args.push('-filter_complex', `[0:v]${fitFilter(target)},split[a][b];[a]palettegen=stats_mode=diff[p];[b][p]paletteuse`)
    args.push('-map_metadata', '1', '-f', 'gif', o.output)
    return args
  }
  args.push('-vf', fitFilter(target))
  if (o.info.hasAudio) args.push('-map', '1:a?', '-c:a', 'copy')
  if (o.info.hasSubtitles && container === 'mkv') args.push('-map', '1:s?', '-c:s', 'copy')
  if (o.info.hasSubtitles && (container === 'mp4' || container === 'mov' || container === 'm4v')) {
    args.push('-map', '1:s?', '-c:s', 'mov_text')
  }
  const crf = String(o.crf ?? 18)
  args.push('-c:v', codec, '-preset', 'medium', '-crf', crf, '-pix_fmt', 'yuv420p')
  if (codec === 'libx265') args.push('-tag:v', 'hvc1', '-x265-params', 'log-level=error')
  // Keep container and stream metadata (title, language, creation time ...), but not the input's
  // rotation: the frames are already upright.
  args.push('-map_metadata', '1', '-metadata:s:v:0', 'rotate=0')
  if (container === 'mp4' || container === 'mov' || container === 'm4v') args.push('-movflags', '+faststart')
  const fmt = { mp4: 'mp4', m4v: 'ipod', mov: 'mov', mkv: 'matroska', avi: 'avi' }[container] ?? container
  args.push('-f', fmt, o.output)
  return args
}

function decoderArgs(input: string): string[] {
  // -xerror / explode: a corrupt stream fails the job instead of producing damaged frames.
  return [
    '-hide_banner', '-v', 'error', '-nostdin', '-err_detect', 'explode', '-xerror',
    '-i', input, '-map', '0:v:0', '-fps_mode', 'passthrough', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1',
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
    else p.once('close', (code, sig) => resolve(code ?? (sig ? 128 : 1)))
  })
}

function writeAll(p: ChildProcess, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const stdin = p.stdin!
    const onError = (e: Error) => reject(new TranscodeError(`encoder input closed: ${e.message}`, 'encode'))
    stdin.once('error', onError)
    if (stdin.write(data)) {
      stdin.off('error', onError)
      resolve()
    } else {
      stdin.once('drain', () => {
        stdin.off('error', onError)
        resolve()
      })
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
      yield all.subarray(0, want)
      const rest = all.subarray(want)
      parts = rest.length ? [Buffer.from(rest)] : []
      have = rest.length
    }
  }
  const whole = Math.floor(have / size) * size
  if (whole > 0) yield Buffer.concat(parts, have).subarray(0, whole)
  if (have !== whole) throw new TranscodeError(`decoder produced a partial frame (${have - whole} bytes)`, 'decode')
}

/** Runs the whole pipeline. Resolves with the number of frames written; on any failure both
 *  ffmpeg processes are killed and the partial output is removed. */
export async function transcode(o: TranscodeOptions): Promise<{ frames: number; width: number; height: number }> {
  const ffmpeg = o.ffmpeg ?? 'ffmpeg'
  const rot = ((o.info.rotation % 360) + 360) % 360
  const [w, h] = rot === 90 || rot === 270 ? [o.info.height, o.info.width] : [o.info.width, o.info.height]
  const frameBytes = w * h * 3
  const batch = Math.max(1, o.batch ?? 4)
  const dec = spawn(ffmpeg, decoderArgs(o.input), { stdio: ['ignore', 'pipe', 'pipe'] })
  const decErr = collectStderr(dec)
  const decExit = exitOf(dec)
  let enc: ChildProcess | undefined
  let encErr = () => ''
  let encExit: Promise<number> | undefined
  const kill = () => {
    dec.kill('SIGKILL')
    enc?.kill('SIGKILL')
  }
  const onAbort = () => kill()
  o.signal?.addEventListener('abort', onAbort, { once: true })
  let done = 0
  let outW = 0
  let outH = 0
  try {
    for await (const frames of frameBatches(dec.stdout!, frameBytes, batch)) {
      if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
      const count = frames.length / frameBytes
      let out
      try {
        out = await o.process(frames, w, h, count)
      } catch (e) {
        const err = e as Error & { code?: string }
        throw new TranscodeError(err.message, 'engine', err.code)
      }
      if (!enc) {
        outW = out.width
        outH = out.height
        enc = spawn(ffmpeg, encoderArgs(o, outW, outH), { stdio: ['pipe', 'ignore', 'pipe'] })
        encErr = collectStderr(enc)
        encExit = exitOf(enc)
      }
      if (out.data.length !== outW * outH * 3 * count) {
        throw new TranscodeError(`engine returned ${out.data.length} bytes for ${count} frames`, 'engine')
      }
      await writeAll(enc, out.data)
      done += count
      o.onProgress?.(done, Math.max(done, o.info.frames))
    }
    const dcode = await decExit
    if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
    if (dcode !== 0) throw new TranscodeError(`decoding failed: ${decErr() || `ffmpeg exited ${dcode}`}`, 'decode')
    if (!enc || done === 0) throw new TranscodeError(`no frames decoded${decErr() ? `: ${decErr()}` : ''}`, 'decode')
    enc.stdin!.end()
    const ecode = await encExit!
    if (ecode !== 0) throw new TranscodeError(`encoding failed: ${encErr() || `ffmpeg exited ${ecode}`}`, 'encode')
    return { frames: done, width: outW, height: outH }
  } catch (e) {
    kill()
    await Promise.allSettled([decExit, encExit])
    await rm(o.output, { force: true })
    if (o.signal?.aborted) throw new TranscodeError('cancelled', 'aborted')
    if (e instanceof TranscodeError) throw e
    throw new TranscodeError((e as Error).message, 'decode')
  } finally {
    o.signal?.removeEventListener('abort', onAbort)
  }
}
