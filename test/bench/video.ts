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
 * Every line gives fps and seconds per frame; the face models (face pipeline) also their cost relative to the
 * plain path of the same run (general_restore_2x, the same base network), the figure issue 14 asks about
 * (goal: within ~3x). LUCENT_FACE_PROFILE=1 makes the engine print, per frame of a face model, where its time
 * goes (base network, detector, each face: crop -> face-network input size, network, resample + blend).
 * The per-video face state is carried from batch to batch as a video job does (server/jobs/video.ts).
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
import { VIDEO_MODELS, readCatalog } from '../../server/catalog.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const modelDir = path.resolve(process.env.LUCENT_MODEL_DIR ?? path.join(repoRoot, '../shared/models'))
const demo = path.join(repoRoot, '../shared/data/video/onepiece_demo.mp4')
const frames1080 = Number(process.env.LUCENT_BENCH_FRAMES_1080 ?? 240)
const tools = videoSettings()
/** Video models that run the face pipeline (catalog: pipeline 'face'). */
const FACE_VIDEO_MODELS = new Set(readCatalog().filter((m) => m.kind === 'video' && m.pipeline === 'face').map((m) => m.name))

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

type Run = { line: string; secondsPerFrame?: number }

async function run(pool: EnginePool, model: string, input: string, outDir: string): Promise<Run> {
  const m = VIDEO_MODELS.get(model)!
  const p = await probeVideo(input, tools.ffprobe)
  const target: [number, number] = [p.width * m.scale, p.height * m.scale]
  const out = path.join(outDir, `${model}-${p.width}x${p.height}.mp4`)
  const t0 = performance.now()
  let faceState: Uint8Array | undefined
  try {
    const r = await transcode({
      input, output: out, container: 'mp4', target, ffmpeg: tools.ffmpeg,
      info: { width: p.width, height: p.height, rotation: p.rotation, fps: p.fpsRational, frames: p.frames, hasAudio: p.hasAudio, hasSubtitles: false },
      batch: batchFor(p.width, p.height, m.scale, tools.batchMb),
      crf: tools.crf,
      preset: tools.preset,
      process: async (f, width, height, count) => {
        const o = await pool.enhanceFrames(f, { model, width, height, count, faceState })
        if (!o.ok) throw Object.assign(new Error(o.message), { code: o.error_code })
        faceState = o.faceState
        return { data: Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength), width: o.width, height: o.height }
      },
    })
    const s = (performance.now() - t0) / 1000
    const spf = s / Math.max(1, r.frames)
    return {
      line: `${model.padEnd(22)} ${p.width}x${p.height} -> ${target[0]}x${target[1]}  ${r.frames} frames in ${s.toFixed(2)} s  = ${(r.frames / s).toFixed(2)} fps end to end, ${spf.toFixed(2)} s/frame`,
      secondsPerFrame: spf,
    }
  } catch (e) {
    const err = e as Error & { engineCode?: string }
    return { line: `${model.padEnd(22)} not run: ${err.engineCode ?? ''} ${err.message.slice(0, 160)}` }
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
    const spf = new Map<string, number>()
    for (const m of models) {
      const r = await run(pool, m, clip, dir)
      console.log(r.line)
      if (r.secondsPerFrame !== undefined) spf.set(m, r.secondsPerFrame)
    }
    const plain = spf.get('general_restore_2x')
    const faces = models.filter((m) => FACE_VIDEO_MODELS.has(m) && spf.has(m))
    if (plain !== undefined && faces.length > 0) {
      console.log(`face models vs the plain path (general_restore_2x, ${plain.toFixed(2)} s/frame; goal <= ~3x): ` +
        faces.map((m) => `${m} ${(spf.get(m)! / plain).toFixed(2)}x`).join(', '))
    }
    if (info.backend === 'gpu' || process.env.LUCENT_BENCH_1080P === '1') {
      const hd = path.join(dir, 'clip1080.mp4')
      execFileSync(tools.ffmpeg, ['-v', 'error', '-y', '-stream_loop', '-1', '-i', demo, '-frames:v', String(frames1080), '-vf', 'scale=1920:1080:flags=lanczos',
        '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16', '-c:a', 'copy', hd])
      console.log((await run(pool, 'general_restore_2x', hd, dir)).line, '(goal >= 30 fps)')
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
