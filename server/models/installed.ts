/**
 * Which of the catalog's networks this process's model directory holds: the truth behind GET /api/models'
 * `available` (a model whose files were never fetched is not available, whatever the catalog can run).
 *
 * A network (a `networks` stem of models/catalog.json, the `model` column of models/manifest.tsv) is installed
 * when every manifest file it needs is present with the manifest's size (no hashing: the start-up check and
 * `lucent models verify` hash). Optional networks (DAT-light, left out of a plain `lucent models fetch`) are
 * the usual missing ones. Workers publish what they lack in their registry heartbeat (server/roles/registry.ts
 * `missing`); the gateway reads it there (server/routes/models.ts).
 */
import fs from 'node:fs'
import { loadManifest, expandDependencies, type ManifestEntry } from './manifest.js'
import { modelPath } from './verify.js'

/** The stems of `stems` whose files are not all in `modelDir` (size check). Stems the manifest does not know
 *  (nothing to check) count as installed. */
export async function missingNetworks(modelDir: string, stems: readonly string[], manifest: ManifestEntry[] = loadManifest()): Promise<string[]> {
  const missing: string[] = []
  for (const stem of new Set(stems)) {
    const own = manifest.filter((e) => e.model === stem || e.path === stem).map((e) => e.path)
    if (!own.length) continue
    const files = expandDependencies(own, manifest).map((p) => manifest.find((e) => e.path === p)!)
    for (const e of files) {
      const st = await fs.promises.stat(modelPath(modelDir, e.path)).catch(() => null)
      if (!st?.isFile() || st.size !== e.bytes) {
        missing.push(stem)
        break
      }
    }
  }
  return missing.sort()
}

/** A cached, periodically refreshed `missingNetworks` (a fetch while the server runs shows within `everyMs`). */
export class InstalledNetworks {
  private missingNow: string[] | null = null
  private timer: NodeJS.Timeout | null = null

  constructor(private readonly modelDir: string, private readonly stems: readonly string[], private readonly everyMs = 30_000) {}

  /** Network stems lacking files; null before the first check ended. */
  missing(): string[] | null {
    return this.missingNow
  }

  async refresh(): Promise<string[]> {
    this.missingNow = await missingNetworks(this.modelDir, this.stems).catch(() => this.missingNow ?? [])
    return this.missingNow
  }

  async start(): Promise<void> {
    await this.refresh()
    this.timer ??= setInterval(() => { void this.refresh() }, this.everyMs).unref()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }
}

/** How long the workers' `missing` lists are reused before they are read again (the registry is in Redis). */
export const AVAILABILITY_MS = 5000

/**
 * The live workers' `missing` lists, read at most every `everyMs` (GET /api/models and the segmentation route's
 * default model both ask, often). `check()` gives a test per list of networks: true / false as `runnableBy`, null
 * when the workers could not be read (unknown).
 */
export class WorkerNetworks {
  private cache: { at: number; workers: ReadonlyArray<{ missing?: string[] | null }> | null } | null = null

  constructor(private readonly workers: () => Promise<ReadonlyArray<{ missing?: string[] | null }>>, private readonly everyMs = AVAILABILITY_MS) {}

  async check(): Promise<(networks: readonly string[]) => boolean | null> {
    const now = Date.now()
    if (!this.cache || now - this.cache.at >= this.everyMs) this.cache = { at: now, workers: await this.workers().catch(() => null) }
    const workers = this.cache.workers
    return (networks) => (workers === null ? null : runnableBy(networks, workers))
  }
}

/**
 * Whether some worker can run a model with these networks now: one of `workers` lacks none of them. A worker
 * that publishes no `missing` list (an older version, or its first check not done) is taken to hold every file.
 */
export function runnableBy(networks: readonly string[], workers: ReadonlyArray<{ missing?: string[] | null }>): boolean {
  return workers.some((w) => !w.missing || networks.every((n) => !w.missing!.includes(n)))
}
