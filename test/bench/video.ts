/**
 * npm run bench:video — end-to-end video throughput (decode + engine + fit + encode + mux, the same code path
 * as a video job, without HTTP/storage), in frames per second per video model.
 *  1. The 640x480 demo clip (../shared/data/video/onepiece_demo.mp4), first LUCENT_BENCH_FRAMES frames
 *     (default 8 on the CPU backend, 120 on a GPU), every video model (or LUCENT_BENCH_MODELS=a,b),
 *     target = input x scale.
 *  2. When the engine runs on a GPU (or LUCENT_BENCH_1080P=1): a 1920x1080 input made from the demo clip,
 *     LUCENT_BENCH_FRAMES_1080 frames (default 240), general_restore_2x -> 3840x2160 H.264 (goal: >= 30 fps).
 *  3. "pipeline only": the same decode + fit + encode + mux with a processor that returns ready-made 2x frames
 *     (no engine), 640x480 -> 1280x960 and 1920x1080 -> 3840x2160: the ceiling ffmpeg sets on this machine
 *     (LUCENT_BENCH_PIPELINE=0 skips it).
 * Environment as for the server: LUCENT_MODEL_DIR (default ../shared/models), LUCENT_ENGINE_THREADS, LUCENT_BACKEND,
 * LUCENT_VIDEO_PRESET / LUCENT_VIDEO_CRF (encoder settings, default medium / 18), LUCENT_VIDEO_BATCH_MB.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { EnginePool } from '../../server/engine/pool.js'
import { transcode } from '../../server/video/transcode.js'
import { probeVideo } from '../../server/video/probe.js'
import { videoSettings } from '../../server/config.js'
import { batchFor } from '../../server/jobs/video.js'
import { VIDEO_MODELS } from '../../server/catalog.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const modelDir = path.resolve(process.env.LUCENT_MODEL_DIR ?? path.join(repoRoot, '../shared/models'))
const demo = path.join(repoRoot, '../shared/data/video/onepiece_demo.mp4')
const frames1080 = Number(process.env.LUCENT_BENCH_FRAMES_1080 ?? 240)
const tools = videoSettings()

/** Decode + encode only: the processor hands back a constant frame of the 2x size (no engine work). */
async function pipelineOnly(input: string, outDir: string): Promise<string> {
  const p = await probeVideo(input, tools.ffprobe)
  const target: [number, number] = [p.width * 2, p.height * 2]
  const out = path.join(outDir, `pipe-${p.width}.mp4`)
  let frame: Buffer | undefined
  const t0 = performance.now()
  const r = await transcode({
    input, output: out, container: 'mp4', target, ffmpeg: tools.ffmpeg, batch: batchFor(p.width, p.height, 2, tools.batchMb),
    info: { width: p.width, height: p.height, rotation: p.rotation, fps: p.fpsRational, frames: p.frames, hasAudio: p.hasAudio, hasSubtitles: false },
    crf: tools.crf, preset: tools.preset,
    process: async (f, width, height, count) => {
      frame ??= Buffer.alloc(width * height * 12, 0x80)
      return { data: Buffer.concat(Array(count).fill(frame)), width: width * 2, height: height * 2 }
    },
  })
  const s = (performance.now() - t0) / 1000
  fs.rmSync(out, { force: true })
  return `pipeline only (no engine)  ${p.width}x${p.height} -> ${target[0]}x${target[1]}  ${r.frames} frames in ${s.toFixed(2)} s  = ${(r.frames / s).toFixed(2)} fps`
}

async function run(pool: EnginePool, model: string, input: string, outDir: string): Promise<string> {
  const m = VIDEO_MODELS.get(model)!
  const p = await probeVideo(input, tools.ffprobe)
  const target: [number, number] = [p.width * m.scale, p.height * m.scale]
  const out = path.join(outDir, `${model}-${p.width}x${p.height}.mp4`)
  const t0 = performance.now()
  try {
    const r = await transcode({
      input, output: out, container: 'mp4', target, ffmpeg: tools.ffmpeg,
      info: { width: p.width, height: p.height, rotation: p.rotation, fps: p.fpsRational, frames: p.frames, hasAudio: p.hasAudio, hasSubtitles: false },
      batch: batchFor(p.width, p.height, m.scale, tools.batchMb),
      crf: tools.crf,
      preset: tools.preset,
      process: async (f, width, height, count) => {
        const o = await pool.enhanceFrames(f, { model, width, height, count })
        if (!o.ok) throw Object.assign(new Error(o.message), { code: o.error_code })
        return { data: Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength), width: o.width, height: o.height }
      },
    })
    const s = (performance.now() - t0) / 1000
    return `${model.padEnd(22)} ${p.width}x${p.height} -> ${target[0]}x${target[1]}  ${r.frames} frames in ${s.toFixed(2)} s  = ${(r.frames / s).toFixed(2)} fps end to end`
  } catch (e) {
    const err = e as Error & { engineCode?: string }
    return `${model.padEnd(22)} not run: ${err.engineCode ?? ''} ${err.message.slice(0, 160)}`
  } finally {
    fs.rmSync(out, { force: true })
  }
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lucent-vbench-'))
  const pool = new EnginePool({ workers: 1, modelDir, threads: process.env.LUCENT_ENGINE_THREADS ? Number(process.env.LUCENT_ENGINE_THREADS) : undefined })
  try {
    const init = await pool.init()
    if (!init.ok) throw new Error(`engine: ${init.error_code} ${init.message}`)
    const info = init.info as { backend: string; adapter: string }
    console.log(`engine: ${info.backend} (${info.adapter}), ${os.availableParallelism()} cores, preset ${process.env.LUCENT_VIDEO_PRESET || 'medium'}`)
    const frames = Number(process.env.LUCENT_BENCH_FRAMES ?? (info.backend === 'gpu' ? 120 : 8))
    const clip = path.join(dir, 'clip480.mp4')
    execFileSync(tools.ffmpeg, ['-v', 'error', '-y', '-i', demo, '-frames:v', String(frames), '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16', '-c:a', 'copy', clip])
    const models = process.env.LUCENT_BENCH_MODELS ? process.env.LUCENT_BENCH_MODELS.split(',') : [...VIDEO_MODELS.keys()]
    for (const m of models) console.log(await run(pool, m, clip, dir))
    if (info.backend === 'gpu' || process.env.LUCENT_BENCH_1080P === '1') {
      const hd = path.join(dir, 'clip1080.mp4')
      execFileSync(tools.ffmpeg, ['-v', 'error', '-y', '-stream_loop', '-1', '-i', demo, '-frames:v', String(frames1080), '-vf', 'scale=1920:1080:flags=lanczos',
        '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16', '-c:a', 'copy', hd])
      console.log(await run(pool, 'general_restore_2x', hd, dir), '(goal >= 30 fps)')
    } else {
      console.log('1920x1080 general_restore_2x: skipped (engine not on a GPU; LUCENT_BENCH_1080P=1 forces it)')
    }
    if (process.env.LUCENT_BENCH_PIPELINE !== '0') {
      console.log(await pipelineOnly(clip, dir))
      const hd = path.join(dir, 'pipe1080.mp4')
      execFileSync(tools.ffmpeg, ['-v', 'error', '-y', '-stream_loop', '-1', '-i', demo, '-frames:v', String(Math.max(frames, 48)), '-vf', 'scale=1920:1080:flags=lanczos',
        '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16', '-c:a', 'copy', hd])
      console.log(await pipelineOnly(hd, dir))
    }
  } finally {
    await pool.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
