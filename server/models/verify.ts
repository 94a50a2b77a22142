// Checking the model directory against the manifest.

import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { loadManifest, selectEntries, type ManifestEntry } from './manifest.js'

export type FileStatus = 'ok' | 'missing' | 'bad-size' | 'bad-hash'

export interface VerifyResult {
  path: string
  status: FileStatus
  expectedBytes: number
  expectedSha256: string
  /** Size found on disk (absent when missing). */
  bytes?: number
  /** Hash found on disk (only computed when the size matches). */
  sha256?: string
}

export interface VerifyOptions {
  /** Relative paths to check (default: every manifest entry). */
  files?: string[]
  /** Size check only, no hashing (fast start-up check). */
  quick?: boolean
  manifest?: ManifestEntry[]
}

export async function sha256File(file: string): Promise<string> {
  const h = crypto.createHash('sha256')
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer)
  return h.digest('hex')
}

export function modelPath(modelDir: string, rel: string): string {
  return path.join(modelDir, ...rel.split('/'))
}

export async function verifyFile(modelDir: string, e: ManifestEntry, quick = false): Promise<VerifyResult> {
  const base = { path: e.path, expectedBytes: e.bytes, expectedSha256: e.sha256 }
  let st: fs.Stats
  try {
    st = await fs.promises.stat(modelPath(modelDir, e.path))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') {
      return { ...base, status: 'missing' }
    }
    throw err
  }
  if (!st.isFile()) return { ...base, status: 'missing' }
  if (st.size !== e.bytes) return { ...base, status: 'bad-size', bytes: st.size }
  if (quick) return { ...base, status: 'ok', bytes: st.size }
  const sha = await sha256File(modelPath(modelDir, e.path))
  return { ...base, status: sha === e.sha256 ? 'ok' : 'bad-hash', bytes: st.size, sha256: sha }
}

/** One result per selected manifest entry, in manifest (or `files`) order. */
export async function verifyModels(modelDir: string, opts: VerifyOptions = {}): Promise<VerifyResult[]> {
  const entries = selectEntries(opts.manifest ?? loadManifest(), opts.files)
  const out: VerifyResult[] = []
  for (const e of entries) out.push(await verifyFile(modelDir, e, opts.quick))
  return out
}

export interface ListedModel extends ManifestEntry {
  /** Size-only state on disk (no hashing): ok = present with the right size. */
  state: 'ok' | 'missing' | 'bad-size'
}

/** The catalogue with a quick (size-only) on-disk state for each file. */
export async function listModels(modelDir: string, opts: { manifest?: ManifestEntry[] } = {}): Promise<ListedModel[]> {
  const entries = opts.manifest ?? loadManifest()
  const out: ListedModel[] = []
  for (const e of entries) {
    const r = await verifyFile(modelDir, e, true)
    out.push({ ...e, state: r.status as ListedModel['state'] })
  }
  return out
}

export function describeProblem(r: VerifyResult): string {
  switch (r.status) {
    case 'ok':
      return `model file ${r.path} is ok`
    case 'missing':
      return `model file ${r.path} is missing: run \`lucent models fetch\``
    case 'bad-size':
      return `model file ${r.path} has the wrong size (${r.bytes} bytes, expected ${r.expectedBytes}): run \`lucent models fetch\``
    case 'bad-hash':
      return `model file ${r.path} hash mismatch (sha256 ${r.sha256}, expected ${r.expectedSha256}): run \`lucent models fetch\``
  }
}

/**
 * Throws an Error naming every missing or corrupt file (the server refuses to start). `files` defaults to all
 * manifest entries; pass requiredFiles() for what the catalog needs.
 */
export async function assertModelsReady(
  modelDir: string,
  files?: string[],
  opts: { quick?: boolean; manifest?: ManifestEntry[] } = {},
): Promise<void> {
  const res = await verifyModels(modelDir, { files, quick: opts.quick, manifest: opts.manifest })
  const bad = res.filter((r) => r.status !== 'ok')
  if (bad.length === 0) return
  const lines = bad.map(describeProblem)
  const msg =
    bad.length === 1
      ? `${lines[0]} (model directory ${modelDir})`
      : `${bad.length} model files are not ready in ${modelDir}:\n  ${lines.join('\n  ')}`
  const err = new Error(msg) as Error & { code: string; problems: VerifyResult[] }
  err.code = 'MODELS_NOT_READY'
  err.problems = bad
  throw err
}
