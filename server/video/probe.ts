/**
 * Video probing with ffprobe (LUCENT_FFPROBE or `ffprobe` on PATH).
 *
 * probeVideo(): container + first video stream facts needed at submission (duration, fps, coded size,
 * display rotation, frame count estimate, audio / subtitle presence), and the stream's index: the one stream
 * the decoder maps (`-map 0:<index>`; attached pictures / cover art are never chosen).
 * probeTimestamps(): every packet of that stream (no decoding), counted (with or without a timestamp), and the
 * presentation timestamps, to detect variable frame rate and restore the original timing after the
 * constant-rate raw-pipe encode.
 *
 * Every ffprobe / ffmpeg that opens an input gets `inputArgs` (server/video/plan.ts demuxerFor): the sniffed
 * container as `-f` where it maps cleanly (else a whitelist of plain containers) and `-protocol_whitelist
 * file,pipe`, so no input (an HLS or concat playlist) can make them open another file or the network.
 */
import { execFile, spawn } from 'node:child_process'
import type { VideoModel } from '../catalog.js'

export interface VideoProbe {
  /** Index (in the file's stream list) of the video stream probed: the one decoded and priced. */
  index: number
  duration: number // seconds (container, else stream)
  width: number // coded width (before rotation)
  height: number
  /** Display rotation in degrees, normalised to 0, 90, 180 or 270. */
  rotation: number
  fps: number
  /** Exact frame rate as a rational string, e.g. "1199/50" (avg_frame_rate, else r_frame_rate). */
  fpsRational: string
  /** Frame count: from the container when it says, else duration * fps (an estimate). */
  frames: number
  codec: string
  format: string
  hasAudio: boolean
  hasSubtitles: boolean
  /** Codec names of the subtitle streams, in order. */
  subtitleCodecs: string[]
  /** Start of the video stream and of the whole file, seconds (0 when unknown). */
  videoStart: number
  fileStart: number
}

export class ProbeError extends Error {
  constructor(readonly reason: 'missing_ffprobe' | 'invalid' | 'no_video', message: string) {
    super(message)
    this.name = 'ProbeError'
  }
}

function rate(s: unknown): number {
  if (typeof s !== 'string') return 0
  const [n, d] = s.split('/').map(Number)
  const r = d ? n / d : n
  return Number.isFinite(r) && r > 0 ? r : 0
}

function normRotation(deg: number): number {
  const r = ((Math.round(deg / 90) * 90) % 360 + 360) % 360
  return r
}

function rotationOf(v: Record<string, unknown>): number {
  const side = (v.side_data_list as Array<Record<string, unknown>> | undefined) ?? []
  for (const s of side) {
    if (typeof s.rotation === 'number') return normRotation(s.rotation)
  }
  const tag = (v.tags as Record<string, string> | undefined)?.rotate
  return tag ? normRotation(-Number(tag) || 0) : 0
}

/** How ffmpeg / ffprobe open an input: `demuxer` (ffmpeg's name, e.g. 'mov', 'matroska') forces the container;
 *  null: any of the plain containers in SAFE_DEMUXERS. Local files and pipes only (never another protocol). */
export interface InputFormat { demuxer?: string | null }

/** Containers an input without a sniffed one may be read as (never playlists: hls, concat, image2, ...). */
export const SAFE_DEMUXERS = 'mov,matroska,avi,gif,mpegts,flv,mpeg,mpegvideo,asf,ogg,rm,mxf,nut,dv,h264,hevc,m4v,ivf,yuv4mpegpipe'

/** The options that go before an input file's `-i` (ffmpeg) or the file (ffprobe). */
export function inputArgs(f: InputFormat = {}): string[] {
  return ['-protocol_whitelist', 'file,pipe', ...(f.demuxer ? ['-f', f.demuxer] : ['-format_whitelist', SAFE_DEMUXERS])]
}

function runProbe(ffprobe: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(ffprobe, args, { timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new ProbeError('missing_ffprobe', `ffprobe not found (${ffprobe}); install ffmpeg or set LUCENT_FFPROBE`))
        return
      }
      if (err) {
        reject(new ProbeError('invalid', `ffprobe failed: ${String(err.message).slice(0, 300)}`))
        return
      }
      resolve(stdout)
    })
  })
}

/** Probes the file at `file`. Throws ProbeError('missing_ffprobe') when ffprobe cannot be run at all. */
export async function probeVideo(file: string, ffprobe = 'ffprobe', timeoutMs = 30_000, format: InputFormat = {}): Promise<VideoProbe> {
  const args = ['-v', 'error', ...inputArgs(format), '-print_format', 'json', '-show_format', '-show_streams', file]
  const stdout = await runProbe(ffprobe, args, timeoutMs)
  let j: { streams?: Array<Record<string, unknown>>; format?: Record<string, unknown> }
  try {
    j = JSON.parse(stdout)
  } catch {
    throw new ProbeError('invalid', 'ffprobe output not JSON')
  }
  const streams = j.streams ?? []
  // Cover art / thumbnails are "video" streams with attached_pic set: not the movie.
  const v = streams.find((s) => s.codec_type === 'video' && !(s.disposition as Record<string, number> | undefined)?.attached_pic)
  if (!v) throw new ProbeError('no_video', 'no video stream')
  const fmtDur = Number(j.format?.duration)
  const stDur = Number(v.duration)
  const duration = Number.isFinite(fmtDur) && fmtDur > 0 ? fmtDur : Number.isFinite(stDur) ? stDur : 0
  const avg = rate(v.avg_frame_rate)
  const fpsRational = avg ? String(v.avg_frame_rate) : rate(v.r_frame_rate) ? String(v.r_frame_rate) : '25/1'
  const fps = rate(fpsRational)
  const nb = Number(v.nb_frames)
  const frames = Number.isInteger(nb) && nb > 0 ? nb : Math.max(1, Math.round(duration * fps))
  const start = Number(v.start_time)
  const fstart = Number(j.format?.start_time)
  const subs = streams.filter((s) => s.codec_type === 'subtitle')
  return {
    index: Number.isInteger(v.index) ? Number(v.index) : 0,
    duration,
    width: Number(v.width) || 0,
    height: Number(v.height) || 0,
    rotation: rotationOf(v),
    fps,
    fpsRational,
    frames,
    codec: String(v.codec_name ?? ''),
    format: String(j.format?.format_name ?? ''),
    hasAudio: streams.some((s) => s.codec_type === 'audio'),
    hasSubtitles: subs.length > 0,
    subtitleCodecs: subs.map((s) => String(s.codec_name ?? '')),
    videoStart: Number.isFinite(start) ? start : 0,
    fileStart: Number.isFinite(fstart) ? fstart : Number.isFinite(start) ? start : 0,
  }
}

export interface Timestamps {
  /** Presentation time of every video frame in display order, seconds, relative to the file's start. */
  pts: number[]
  /** True when the frame intervals are not constant (beyond rounding of the time base). */
  vfr: boolean
  /** Median frame interval, seconds. */
  interval: number
  /** How long the last frame (highest pts) lasts, from its packet's duration (0 when the container does not say). */
  lastDuration?: number
  /** More packets than `maxPackets`: reading stopped there (`pts` holds the first ones). */
  truncated?: boolean
  /** Packets of the stream read, with a timestamp or without (each is one frame through the networks). */
  packets?: number
}

export interface PacketOptions extends InputFormat {
  /** The stream's index (VideoProbe.index); default the first video stream. */
  stream?: number
}

/**
 * Reads every video packet's pts (streamed line by line: memory is 8 bytes per frame) and decides whether
 * the stream is variable-frame-rate. Every packet is counted (`packets`); packets without a pts have no
 * place in `pts`. Past `maxPackets` packets ffprobe is stopped and the answer says `truncated` (a bound on
 * the memory a crafted file can make it use). An ffprobe that fails or runs past `timeoutMs` rejects.
 */
export function probeTimestamps(file: string, ffprobe = 'ffprobe', timeoutMs = 300_000, maxPackets = Infinity, o: PacketOptions = {}): Promise<Timestamps> {
  return new Promise((resolve, reject) => {
    const sel = o.stream === undefined ? 'v:0' : String(o.stream)
    const p = spawn(ffprobe, ['-v', 'error', ...inputArgs(o), '-select_streams', sel, '-show_entries', 'packet=pts_time,duration_time', '-of', 'csv=p=0', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      p.kill('SIGKILL')
    }, timeoutMs)
    const pts: number[] = []
    let last = { t: -Infinity, d: 0 }
    let truncated = false
    let packets = 0
    const line = (l: string) => {
      if (truncated || !l.trim()) return
      if (packets >= maxPackets) {
        truncated = true
        p.kill('SIGKILL')
        return
      }
      packets++
      const [a, b] = l.split(',')
      const t = Number(a)
      if (a === undefined || a.trim() === '' || !Number.isFinite(t)) return
      pts.push(t)
      if (t > last.t) last = { t, d: Number(b) || 0 }
    }
    let rest = ''
    let err = ''
    p.stdout.setEncoding('utf8')
    p.stdout.on('data', (d: string) => {
      const lines = (rest + d).split('\n')
      rest = lines.pop() ?? ''
      for (const l of lines) line(l)
    })
    p.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString()
    })
    p.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(e.code === 'ENOENT' ? new ProbeError('missing_ffprobe', `ffprobe not found (${ffprobe})`) : e)
    })
    p.on('close', (code) => {
      clearTimeout(timer)
      line(rest)
      if (truncated) return resolve({ pts: pts.sort((a, b) => a - b), vfr: false, interval: 0, lastDuration: 0, truncated, packets })
      if (timedOut) return reject(new ProbeError('invalid', `ffprobe packets: no answer within ${timeoutMs} ms`))
      if (code !== 0) return reject(new ProbeError('invalid', `ffprobe packets failed: ${err.trim().slice(0, 300)}`))
      pts.sort((a, b) => a - b)
      resolve({ ...analyseTimestamps(pts), lastDuration: last.d > 0 ? last.d : 0, packets })
    })
  })
}

/** VFR when some frame interval deviates from the median by more than 25 % (CFR time-base rounding
 *  jitter stays far below that). Exported for tests. */
export function analyseTimestamps(pts: number[]): Timestamps {
  const d: number[] = []
  for (let i = 1; i < pts.length; i++) d.push(pts[i] - pts[i - 1])
  if (d.length === 0) return { pts, vfr: false, interval: 0 }
  const sorted = [...d].sort((a, b) => a - b)
  const interval = sorted[Math.floor(sorted.length / 2)]
  const tol = Math.max(interval * 0.25, 1e-4)
  const vfr = d.some((x) => Math.abs(x - interval) > tol)
  return { pts, vfr, interval }
}

/** The displayed (upright) sides of a probed video: a 90 / 270 degree rotation swaps them. */
export function displaySize(pr: Pick<VideoProbe, 'width' | 'height' | 'rotation'>): { width: number; height: number } {
  return pr.rotation === 90 || pr.rotation === 270 ? { width: pr.height, height: pr.width } : { width: pr.width, height: pr.height }
}

/**
 * What is wrong with a probed input for `model` (null: nothing): not a video ffmpeg decodes as one (an image
 * sequence or pipe demuxer, no size: 110400007), or a duration outside the model's limits (110400011).
 */
export function videoInputError(pr: VideoProbe, model: Pick<VideoModel, 'name' | 'limits'>): { code: 110400007 | 110400011; detail: string } | null {
  if (/(^|,)(image2|[a-z0-9]+_pipe)(,|$)/.test(pr.format) || !pr.width || !pr.height) return { code: 110400007, detail: 'not a video' }
  const lim = model.limits
  if (!(pr.duration >= lim.minSeconds && pr.duration <= lim.maxSeconds)) {
    return { code: 110400011, detail: `${pr.duration.toFixed(2)} s is outside ${lim.minSeconds}..${lim.maxSeconds} s for ${model.name}` }
  }
  return null
}
