/**
 * Worker registry in Redis: each worker process writes {backend, concurrency, running, heartbeat} into the hash
 * `<prefix>:workers` every few seconds; gateways read it for /readyz and /metrics. An entry whose heartbeat is
 * older than `staleMs` is a dead worker (SIGKILL leaves no goodbye) and is dropped by the readers.
 */
import os from 'node:os'
import { Redis } from 'ioredis'
import { within } from '../within.js'

export interface WorkerInfo {
  id: string
  host: string
  pid: number
  backend: string      // 'gpu' | 'cpu' (engine info), 'starting' before the engine loaded
  adapter: string
  concurrency: number
  running: number
  /** Catalog network stems whose files this worker lacks (server/models/installed.ts); absent: not known. */
  missing?: string[]
  startedAt: number
  heartbeatAt: number
}

export class WorkerRegistry {
  readonly redis: Redis
  private readonly key: string
  private timer: NodeJS.Timeout | null = null
  private id: string | null = null
  private beat: (() => Promise<unknown>) | null = null

  constructor(redisUrl: string, prefix = 'lucent', private readonly staleMs = 15_000) {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: 2, lazyConnect: false })
    this.redis.on('error', () => {})
    this.key = `${prefix}:workers`
  }

  /** Starts heart-beating `info()` every `everyMs` under a new id; returns the id. */
  async register(info: () => Omit<WorkerInfo, 'id' | 'host' | 'pid' | 'heartbeatAt' | 'startedAt'>, everyMs = 3000): Promise<string> {
    const id = `${os.hostname()}:${process.pid}`
    const startedAt = Date.now()
    this.id = id
    const beat = () => this.redis.hset(this.key, id, JSON.stringify({ id, host: os.hostname(), pid: process.pid, startedAt, heartbeatAt: Date.now(), ...info() }))
    this.beat = beat
    await beat()
    this.timer = setInterval(() => { beat().catch(() => {}) }, everyMs)
    this.timer.unref()
    return id
  }

  /** Publishes the current info now (e.g. once the engine has loaded). */
  async beatNow(): Promise<void> {
    await this.beat?.()
  }

  /** Live workers (stale entries are removed). */
  async list(now = Date.now()): Promise<WorkerInfo[]> {
    const all = await this.redis.hgetall(this.key)
    const live: WorkerInfo[] = []
    const dead: string[] = []
    for (const [id, v] of Object.entries(all)) {
      try {
        const w = JSON.parse(v) as WorkerInfo
        if (now - w.heartbeatAt <= this.staleMs) live.push(w)
        else dead.push(id)
      } catch {
        dead.push(id)
      }
    }
    if (dead.length) await this.redis.hdel(this.key, ...dead).catch(() => 0)
    return live.sort((a, b) => a.id.localeCompare(b.id))
  }

  /** Stops the heartbeat and says goodbye (bounded: a Redis that does not answer is not waited for; the entry
   *  then goes stale). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    if (this.id) await within(2000, this.redis.hdel(this.key, this.id))
    this.redis.disconnect()
  }
}
