/**
 * The commands of bring your own model under `lucent models` (server/cli.ts declares the group):
 *   lucent models add FILE [--name NAME] [--kind photo|video|both] [--price-class CLASS] [--description TEXT] [--json]
 *   lucent models remove NAME
 * and the own-model rows `lucent models list` prints after the model files. They work against the configured store and
 * media storage (LUCENT_DATABASE_URL / DATA_DIR, LUCENT_S3_*), as `lucent keys` does.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { loadConfig, type Config } from '../config.js'
import { openStore, openStorage } from '../backends.js'
import type { Store } from '../store/types.js'
import type { MediaStorage } from '../storage/types.js'
import { openEngine } from '../enhance/engine.js'
import type { Addon } from '../engine/addon.js'
import { AdminError, addModel, ownModelLine, removeModel, type AddOptions } from './admin.js'
import { OwnModels, asVideoModel, isPhoto, isVideo, type OwnForEnhance } from './registry.js'

/** Own model `name` of the configured deployment, its weights copied locally; null when there is none (or no store). */
export async function ownForEnhance(name: string): Promise<OwnForEnhance | null> {
  const config = loadConfig()
  if (!config.databaseUrl && !fs.existsSync(path.join(config.dataDir, 'lucent.db'))) return null
  return withBackends(async ({ store, storage }) => {
    const own = new OwnModels(store.ownModels, storage, { cacheDir: path.join(config.dataDir, 'own-models'), refreshMs: 0 })
    await own.refresh()
    const m = own.get(name)
    if (!m) return null
    return {
      ...(isPhoto(m) ? { photo: (await own.network(name, 'photo'))! } : {}),
      ...(isVideo(m) ? { video: { model: asVideoModel(m), network: (await own.network(name, 'video'))! } } : {}),
    }
  })
}

async function withBackends<T>(fn: (b: { config: Config; store: Store; storage: MediaStorage & { close?: () => Promise<void> } }) => Promise<T>): Promise<T> {
  const config = loadConfig()
  const store = await openStore(config)
  try {
    const storage = await openStorage(config)
    try {
      return await fn({ config, store, storage })
    } finally {
      await storage.close?.()
    }
  } finally {
    await store.close()
  }
}

function fail(e: unknown): void {
  if (e instanceof AdminError) {
    process.stderr.write(`lucent: ${e.message}\n`)
    process.exitCode = e.exitCode
    return
  }
  const code = (e as { errorCode?: number }).errorCode
  process.stderr.write(`lucent: ${(e as Error).message}${code ? ` (${code})` : ''}\n`)
  process.exitCode = 1
}

/** The own-model rows of `lucent models list` (nothing when no store exists yet: listing creates none). */
export async function printOwnModels(out: (s: string) => void = (s) => process.stdout.write(s + '\n')): Promise<void> {
  const config = loadConfig()
  if (!config.databaseUrl && !fs.existsSync(path.join(config.dataDir, 'lucent.db'))) return
  const store = await openStore(config)
  try {
    const list = await store.ownModels.list()
    out(`own models (lucent models add): ${list.length}`)
    for (const m of list) out(ownModelLine(m))
  } finally {
    await store.close()
  }
}

export function addOwnModelCommands(models: Command): void {
  models.command('add')
    .description('add a model of your own (PyTorch .pth/.pt/.ckpt, .safetensors, ONNX .onnx, or ncnn .param + .bin): detected, smoke-tested, stored; served by name within seconds')
    .argument('<file>', 'the model file (ncnn: the .param, with its .bin beside it)')
    .option('--name <name>', 'API model_name (default: the file name); never a catalog model\'s')
    .option('--kind <kind>', 'photo, video or both', 'both')
    .option('--price-class <class>', 'photo: enhance | generative_portrait | generative; video: standard | premium; both: e.g. enhance,premium (default enhance / standard)')
    .option('--description <text>', 'one line shown by GET /api/models')
    .option('--json', 'print the stored entry as JSON')
    .addHelpText('after', `
Architectures: ESRGAN / RRDBNet (incl. pixel-unshuffle and Real-ESRGAN x2plus), Real-ESRGAN Compact, SPAN,
RealPLKSR, and ncnn networks. The file is read by a restricted reader (nothing in it runs), then a 32x32
smoke run checks the scale; the weights go to media storage and the entry to the job store, so every
gateway and worker serves it within LUCENT_OWN_MODELS_REFRESH_MS. Exit status: 0 added, 1 refused (why is
printed; nothing stored), 2 bad usage.

Examples:
  lucent models add 4x-UltraSharp.pth --name ultrasharp_4x --kind photo
  lucent models add 2x_span.safetensors --kind both --price-class enhance,premium`)
    .action(async (file: string, o: AddOptions & { json?: boolean }) => {
      try {
        await withBackends(async ({ config, store, storage }) => {
          let addon: Addon | null = null
          const engine = () => addon ?? (addon = openEngine(config.modelDir, 'cpu', config.engineThreads ?? undefined).addon)
          const m = await addModel({ config, store, storage, engine, log: (s) => process.stderr.write(`${s}\n`) }, file, o)
          if (o.json) process.stdout.write(`${JSON.stringify(m)}\n`)
          else process.stdout.write(`added ${m.name}: ${m.architecture} ${m.scale}x (${m.format}), ${m.kind}, sha256 ${m.sha256}\n`)
        })
      } catch (e) {
        fail(e)
      }
    })
  models.command('remove')
    .description('remove a model of your own (running gateways and workers stop serving it within seconds)')
    .argument('<name>', 'its model_name')
    .action(async (name: string) => {
      try {
        await withBackends(async ({ store, storage }) => {
          const m = await removeModel({ store, storage }, name)
          process.stdout.write(`removed ${m.name}\n`)
        })
      } catch (e) {
        fail(e)
      }
    })
}
