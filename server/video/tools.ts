/**
 * External tools of the video path (their paths: server/config.ts `video`, found on PATH by default):
 *   LUCENT_FFMPEG   (default `ffmpeg`)   decode / encode / mux        — required for video jobs
 *   LUCENT_FFPROBE  (default `ffprobe`)  probing                      — required for video jobs
 *   LUCENT_MKVMERGE (default `mkvmerge`) restores per-frame timestamps of variable-frame-rate inputs
 *                                        (Debian package `mkvtoolnix`); optional: without it a VFR input
 *                                        is encoded at its average constant rate (same frames, same length).
 * A missing ffmpeg / ffprobe makes video submissions answer 100500005 (configuration error); photos are
 * unaffected. Install: `apt-get install ffmpeg mkvtoolnix` (Debian/Ubuntu), `brew install ffmpeg mkvtoolnix`.
 */
import { spawn } from 'node:child_process'

const cache = new Map<string, { at: number; ok: boolean }>()

/** True when `bin -version` (or `--version`) runs. Cached for 60 s per binary path. */
export function toolWorks(bin: string, arg = '-version'): Promise<boolean> {
  const c = cache.get(bin)
  if (c && Date.now() - c.at < 60_000) return Promise.resolve(c.ok)
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      cache.set(bin, { at: Date.now(), ok })
      resolve(ok)
    }
    try {
      const p = spawn(bin, [arg], { stdio: 'ignore' })
      const timer = setTimeout(() => p.kill('SIGKILL'), 10_000)
      p.on('error', () => {
        clearTimeout(timer)
        done(false)
      })
      p.on('close', (code) => {
        clearTimeout(timer)
        done(code === 0)
      })
    } catch {
      done(false)
    }
  })
}

/** Null when ffmpeg and ffprobe both run; else a message naming what is missing. */
export async function missingVideoTools(t: { ffmpeg: string; ffprobe: string }): Promise<string | null> {
  const [a, b] = await Promise.all([toolWorks(t.ffmpeg), toolWorks(t.ffprobe)])
  if (a && b) return null
  const miss = [!a && `ffmpeg (${t.ffmpeg}; LUCENT_FFMPEG)`, !b && `ffprobe (${t.ffprobe}; LUCENT_FFPROBE)`].filter(Boolean).join(' and ')
  return `video processing needs ${miss}: install ffmpeg (apt-get install ffmpeg) or set the variables`
}
