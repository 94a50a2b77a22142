/**
 * The one way the tests run `lucent` as a real process: `lucentServer(t, { env })` spawns `bin/lucent.js serve`
 * (or other `args`) on a free loopback port and waits until it answers (GET /healthz 200 by default). It is
 * restartable (`start()` again after `kill()`, same DATA_DIR, same port when it is still free), it fails at once
 * with the exit code and the end of stderr when the process dies before it is ready instead of waiting out the
 * timeout, it moves to another free port when its port was taken between freePort() and listen() (suites run side
 * by side), and at the test's end it SIGKILLs whatever it started and waits for the exits.
 * `lucentCli(env, ...args)` runs a CLI command (e.g. `keys create`) and returns its stdout.
 */
import path from 'node:path'
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { request } from 'undici'
import { repoRoot, freePort } from '../helper.js'

export const lucentBin = path.join(repoRoot, 'bin', 'lucent.js')

interface T { teardown(fn: () => unknown): void }

export interface ServeOptions {
  /** The process's environment (PORT is set here; HOST should be 127.0.0.1). */
  env: NodeJS.ProcessEnv
  /** Arguments after bin/lucent.js (default `serve`). */
  args?: string[]
  /** A fixed port; default a free one (a new one when it was taken before the server bound it). */
  port?: number
  /** Ready when this path answers 200 (default '/healthz'), or when the function says so. */
  ready?: string | ((base: string) => Promise<boolean>)
  /** How long start() waits for ready (default 180 s: a CPU engine load on a busy machine). */
  readyTimeoutMs?: number
  /** A name for error messages (e.g. the role). */
  label?: string
}

export interface LucentServer {
  /** The current process (a new one after each start()). */
  readonly child: ChildProcess
  readonly port: number
  /** http://127.0.0.1:PORT */
  readonly base: string
  readonly label: string
  /** Spawns the process (again) and waits until it is ready. */
  start(): Promise<void>
  /** Sends `signal` (default SIGTERM) and resolves the exit code (null when a signal ended it) once exited. */
  kill(signal?: NodeJS.Signals): Promise<number | null>
  /** Whether the current process is still running. */
  running(): boolean
}

const isRunning = (c: ChildProcess) => c.exitCode === null && c.signalCode === null
const exitOf = (c: ChildProcess) => isRunning(c)
  ? new Promise<number | null>((r) => c.once('exit', (code) => r(code)))
  : Promise.resolve(c.exitCode)

/** A `lucent` process for the test (not started yet: call start()). */
export function lucentServer(t: T, o: ServeOptions): LucentServer {
  let port = o.port ?? 0
  let child: ChildProcess | null = null
  let stderrTail = ''
  const all: ChildProcess[] = []
  const label = o.label ?? (o.args ?? ['serve']).join(' ')
  const timeoutMs = o.readyTimeoutMs ?? 180_000
  const ready = typeof o.ready === 'function' ? o.ready : async (base: string) => {
    const r = await request(`${base}${o.ready ?? '/healthz'}`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
    await r.body.dump()
    return r.statusCode === 200
  }
  t.teardown(async () => {
    for (const c of all) if (isRunning(c)) c.kill('SIGKILL')
    await Promise.all(all.map(exitOf))
  })

  const spawnOne = async () => {
    if (!port) port = await freePort()
    stderrTail = ''
    const c = spawn(process.execPath, [lucentBin, ...(o.args ?? ['serve'])], { env: { ...o.env, PORT: String(port) }, stdio: ['ignore', 'inherit', 'pipe'] })
    c.stderr!.on('data', (d: Buffer) => {
      process.stderr.write(d)
      stderrTail = (stderrTail + d.toString()).slice(-4000)
    })
    all.push(c)
    child = c
  }

  const handle: LucentServer = {
    get child() {
      if (!child) throw new Error(`${label}: not started`)
      return child
    },
    get port() { return port },
    get base() { return `http://127.0.0.1:${port}` },
    label,
    running: () => !!child && isRunning(child),
    async start() {
      if (child && isRunning(child)) throw new Error(`${label}: already running`)
      await spawnOne()
      const end = Date.now() + timeoutMs
      let moved = 0
      for (;;) {
        const c = child!
        if (!isRunning(c)) {
          // the port was taken between freePort() and listen(): another one (unless the test fixed it)
          if (!o.port && moved < 5 && /EADDRINUSE/.test(stderrTail)) {
            moved++
            port = 0
            await spawnOne()
            continue
          }
          throw new Error(`${label} exited (code ${c.exitCode}, signal ${c.signalCode}) before it was ready: ${stderrTail.trim().slice(-1500)}`)
        }
        if (await ready(handle.base).catch(() => false)) return
        if (Date.now() > end) throw new Error(`${label} not ready after ${timeoutMs} ms on ${handle.base}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    },
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (!child) return null
      if (isRunning(child)) child.kill(signal)
      return exitOf(child)
    },
  }
  return handle
}

/** `lucentServer` already started (ready). */
export async function startLucent(t: T, o: ServeOptions): Promise<LucentServer> {
  const s = lucentServer(t, o)
  await s.start()
  return s
}

/** Runs `lucent ARGS...` with `env` and returns its stdout (e.g. `keys create` prints the key on its last line). */
export function lucentCli(env: NodeJS.ProcessEnv, ...args: string[]): string {
  return execFileSync(process.execPath, [lucentBin, ...args], { env }).toString()
}

/** The last line `lucent keys create ARGS...` prints (the key); `lines` has all of them (the secret before the key). */
export function createKeyCli(env: NodeJS.ProcessEnv, ...args: string[]): { key: string; lines: string[] } {
  const lines = lucentCli(env, 'keys', 'create', ...args).trimEnd().split('\n')
  return { key: lines[lines.length - 1], lines }
}
