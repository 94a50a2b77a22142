/** Test support: inspection of encoded videos with ffprobe / ffmpeg (test/video/, test/jobs/runners.ts): frame
 *  count, timing, audio packet hash, rotation. */
import { execFileSync } from 'node:child_process'

export interface Inspection {
  width: number
  height: number
  codec: string
  /** Video packets (= frames) in the file. */
  frames: number
  /** Sorted presentation times of the video frames, seconds. */
  pts: number[]
  /** Video duration from the packets: last pts + its duration - first pts. */
  duration: number
  rotation: number | null
  rotateTag: string | null
  audioStreams: number
}

export function inspect(file: string, ffprobe = 'ffprobe'): Inspection {
  const j = JSON.parse(execFileSync(ffprobe, ['-v', 'error', '-print_format', 'json', '-show_streams', '-show_packets', '-select_streams', 'v:0', file], { maxBuffer: 256 << 20 }).toString())
  const v = j.streams[0]
  // AVI packets carry only dts (no B-frame reordering there): use it when pts is absent.
  const pk = ((j.packets ?? []) as Array<{ pts_time?: string; dts_time?: string; duration_time?: string }>)
    .map((p) => ({ t: Number(p.pts_time ?? p.dts_time), d: Number(p.duration_time) || 0 }))
  const pts = pk.map((p) => p.t).filter(Number.isFinite).sort((a, b) => a - b)
  const last = pk.reduce((m, p) => {
    const e = p.t + p.d
    return Number.isFinite(e) ? Math.max(m, e) : m
  }, -Infinity)
  const side = (v.side_data_list ?? []) as Array<{ rotation?: number }>
  const rot = side.find((s) => typeof s.rotation === 'number')
  const all = JSON.parse(execFileSync(ffprobe, ['-v', 'error', '-print_format', 'json', '-show_streams', file]).toString())
  return {
    width: v.width,
    height: v.height,
    codec: v.codec_name,
    frames: pts.length,
    pts,
    duration: pts.length ? last - pts[0] : 0,
    rotation: rot ? rot.rotation! : null,
    rotateTag: v.tags?.rotate ?? v.tags?.ROTATE ?? null,
    audioStreams: (all.streams as Array<{ codec_type: string }>).filter((s) => s.codec_type === 'audio').length,
  }
}

/** MD5 over the audio packets (stream copy, no decoding): equal for a bit-exact copy. */
export function audioHash(file: string, ffmpeg = 'ffmpeg'): string {
  return execFileSync(ffmpeg, ['-v', 'error', '-i', file, '-map', '0:a', '-c', 'copy', '-f', 'streamhash', '-hash', 'md5', '-']).toString().trim()
}
