/** Video probing with ffprobe (LUCENT_FFPROBE or `ffprobe` on PATH). */
import { execFile } from 'node:child_process'

export interface VideoProbe { duration: number; width: number; height: number; fps: number; codec: string; format: string }

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
  return Number.isFinite(r) ? r : 0
}

/** Probes the file at `file`. Throws ProbeError('missing_ffprobe') when ffprobe cannot be run at all. */
export function probeVideo(file: string, ffprobe = 'ffprobe', timeoutMs = 30_000): Promise<VideoProbe> {
  const args = ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]
  return new Promise((resolve, reject) => {
    execFile(ffprobe, args, { timeout: timeoutMs, maxBuffer: 8 << 20 }, (err, stdout) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new ProbeError('missing_ffprobe', `ffprobe not found (${ffprobe}); install ffmpeg or set LUCENT_FFPROBE`))
        return
      }
      if (err) {
        reject(new ProbeError('invalid', `ffprobe failed: ${String(err.message).slice(0, 300)}`))
        return
      }
      let j: { streams?: Array<Record<string, unknown>>; format?: Record<string, unknown> }
      try {
        j = JSON.parse(stdout)
      } catch {
        reject(new ProbeError('invalid', 'ffprobe output not JSON'))
        return
      }
      const v = (j.streams ?? []).find((s) => s.codec_type === 'video')
      if (!v) {
        reject(new ProbeError('no_video', 'no video stream'))
        return
      }
      const duration = Number(j.format?.duration ?? v.duration ?? NaN)
      resolve({
        duration: Number.isFinite(duration) ? duration : 0,
        width: Number(v.width) || 0,
        height: Number(v.height) || 0,
        fps: rate(v.avg_frame_rate) || rate(v.r_frame_rate),
        codec: String(v.codec_name ?? ''),
        format: String(j.format?.format_name ?? ''),
      })
    })
  })
}
