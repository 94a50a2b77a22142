/** Helpers of the `lucent enhance` suites (test/cli/): small photos and a tiny video made with ffmpeg, the CLI spawned. */
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { repoRoot, modelDir, addonBuilt } from '../helper.js'

export const bin = path.join(repoRoot, 'bin', 'lucent.js')
export const hasFfmpeg = spawnSync('ffmpeg', ['-version']).status === 0
const modelsPresent = fs.existsSync(path.join(modelDir, 'sr/realesr-general-x4v3.param'))
/** Why the engine suites cannot run here (CI must be able to run them). */
export const skipEngine = !addonBuilt ? 'native addon not built' : !modelsPresent ? `no models in ${modelDir}` : !hasFfmpeg ? 'ffmpeg missing' : false
if (skipEngine && process.env.CI) throw new Error(`CI: ${skipEngine}`)

/** A w x h photo (ffmpeg's testsrc2 pattern, frame `seed`) in the format of `file`'s extension. */
export function makePhoto(file: string, w: number, h: number, seed = 0): void {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${w}x${h}:rate=25`, '-vf', `trim=start_frame=${seed}`,
    '-frames:v', '1', '-update', '1', file])
}

/** A tiny H.264 MP4: `seconds` of w x h at 5 fps. */
export function makeVideo(file: string, w: number, h: number, seconds: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${w}x${h}:rate=5`, '-t', String(seconds),
    '-pix_fmt', 'yuv420p', '-c:v', 'libx264', '-preset', 'ultrafast', file])
}

/** Every file under dir (relative paths, sorted). */
export function listFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return []
  return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name)))
    .sort()
}

export const env = (extra: Record<string, string> = {}) => ({ ...process.env, LUCENT_MODEL_DIR: modelDir, LUCENT_BACKEND: 'cpu', ...extra })

/** Runs the CLI to the end. */
export function lucent(args: string[], cwd = repoRoot, extra: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd, env: env(extra), maxBuffer: 64 << 20 })
  return { status: r.status, signal: r.signal, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
}

/** JSON lines of a --json run. */
export function events(stdout: string): Array<Record<string, unknown> & { event: string }> {
  return stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l))
}

/** Spawns the CLI; `lines` collects stdout lines as they come. */
export function spawnLucent(args: string[], cwd = repoRoot) {
  const child: ChildProcess = spawn(process.execPath, [bin, ...args], { cwd, env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: string[] = []
  let buf = ''
  let stderr = ''
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString()
    const parts = buf.split('\n')
    buf = parts.pop()!
    lines.push(...parts.filter((l) => l.trim()))
  })
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString() })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  return { child, lines, exited, stderr: () => stderr }
}
