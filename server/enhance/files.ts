/**
 * `lucent enhance` inputs and outputs on disk: INPUT arguments (files, folders, globs) expanded into media
 * files with the relative path each keeps under --out, junk recognised and counted, and the atomic write
 * (a hidden temporary file beside the output, renamed into place) with the sweep of temporaries a killed
 * run left behind.
 */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import crypto from 'node:crypto'
import { glob, isDynamicPattern } from 'tinyglobby'
import { photoExtensions, videoInputExtensions } from '../media/formats.js'

export type MediaKind = 'photo' | 'video'

/** A media file to enhance: its path and the path its output keeps under --out (before the extension changes). */
export interface InputFile {
  file: string
  /** Relative to --out, with the input's own extension (POSIX or native separators, as path.join makes them). */
  rel: string
  kind: MediaKind
}

/** A path the batch leaves alone (not an error). */
export interface Ignored {
  file: string
  reason: 'junk' | 'hidden' | 'not_media' | 'folder_not_recursive'
}

/** An INPUT argument that names nothing. */
export interface Missing {
  input: string
}

/** OS droppings that sit in photo folders: never media, never reported as failures. */
const JUNK_NAMES = new Set(['thumbs.db', 'ehthumbs.db', 'desktop.ini', '.ds_store', 'icon\r', '.localized'])
/** Photo extensions read here: the API's photo extensions, plus HEIC and the short TIFF spelling. */
const PHOTO_EXT = new Set([...photoExtensions, 'heic', 'tif'])
const VIDEO_EXT = new Set(videoInputExtensions)

/** What a file name is to the batch: a media kind, or why it is ignored. */
export function classify(name: string): MediaKind | Ignored['reason'] {
  const lower = name.toLowerCase()
  if (JUNK_NAMES.has(lower) || lower.startsWith('._')) return 'junk'
  if (lower.startsWith('.')) return 'hidden'
  const ext = path.extname(lower).slice(1)
  if (PHOTO_EXT.has(ext)) return 'photo'
  if (VIDEO_EXT.has(ext)) return 'video'
  return 'not_media'
}

export interface Expanded {
  inputs: InputFile[]
  ignored: Ignored[]
  missing: Missing[]
}

/** The directory part of a glob before its first dynamic segment ('photos/2024/*.jpg' -> 'photos/2024'). */
function globBase(pattern: string): string {
  const parts = pattern.split('/')
  const fixed: string[] = []
  for (const p of parts) {
    if (isDynamicPattern(p)) break
    fixed.push(p)
  }
  if (fixed.length === parts.length) fixed.pop()
  return fixed.join('/') || '.'
}

/** Whether `p` lies inside (or is) `dir`. */
function inside(p: string, dir: string): boolean {
  const r = path.relative(dir, p)
  return r === '' || (!r.startsWith('..') && !path.isAbsolute(r))
}

/**
 * INPUT arguments -> media files. A file keeps its name at the top of --out; a folder's files keep their path
 * relative to the folder (sub-folders only with `recursive`); a glob's matches keep their path relative to the
 * glob's fixed prefix. Hidden folders, anything under `exclude` (the output folder) and junk are not entered.
 */
export async function expandInputs(args: string[], o: { recursive: boolean; exclude?: string }): Promise<Expanded> {
  const out: Expanded = { inputs: [], ignored: [], missing: [] }
  const exclude = o.exclude ? path.resolve(o.exclude) : null
  const seen = new Set<string>()
  const add = (file: string, rel: string) => {
    const abs = path.resolve(file)
    if (seen.has(abs)) return
    seen.add(abs)
    const c = classify(path.basename(file))
    if (c === 'photo' || c === 'video') out.inputs.push({ file: abs, rel, kind: c })
    else out.ignored.push({ file: abs, reason: c })
  }
  const walk = async (dir: string, relDir: string) => {
    const entries = (await fsp.readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const e of entries) {
      const p = path.join(dir, e.name)
      const rel = path.join(relDir, e.name)
      if (exclude && inside(path.resolve(p), exclude)) continue
      let isDir = e.isDirectory()
      if (e.isSymbolicLink()) isDir = (await fsp.stat(p).catch(() => null))?.isDirectory() ?? false
      if (isDir) {
        if (e.name.startsWith('.')) out.ignored.push({ file: path.resolve(p), reason: 'hidden' })
        else if (!o.recursive) out.ignored.push({ file: path.resolve(p), reason: 'folder_not_recursive' })
        else await walk(p, rel)
      } else add(p, rel)
    }
  }
  for (const arg of args) {
    const st = await fsp.stat(arg).catch(() => null)
    if (st?.isDirectory()) await walk(arg, '')
    else if (st) add(arg, path.basename(arg))
    else if (isDynamicPattern(arg.split(path.sep).join('/'))) {
      const pattern = arg.split(path.sep).join('/')
      const base = globBase(pattern)
      const matches = (await glob(pattern, { onlyFiles: true, dot: false, absolute: true, expandDirectories: false })).sort()
      const kept = matches.filter((m) => !(exclude && inside(m, exclude)))
      if (!kept.length) out.missing.push({ input: arg })
      for (const m of kept) add(m, path.relative(path.resolve(base), m))
    } else out.missing.push({ input: arg })
  }
  return out
}

// --- atomic writes --------------------------------------------------------------------------------------

/** Temporaries are `.<name>.lucent-<pid>-<hex>.part` (plus suffixes tools add) beside their output. */
const PART = /\.lucent-(\d+)-[0-9a-f]{8}\.part/

/** A fresh temporary path for `final` (hidden, in the same folder so that rename is atomic). */
export function partPath(final: string): string {
  return path.join(path.dirname(final), `.${path.basename(final)}.lucent-${process.pid}-${crypto.randomBytes(4).toString('hex')}.part`)
}

/** Writes `data` to `final` atomically: the bytes go to a temporary file that is then renamed over `final`. */
export async function writeAtomic(final: string, data: Uint8Array, track: Set<string>): Promise<void> {
  await fsp.mkdir(path.dirname(final), { recursive: true })
  const tmp = partPath(final)
  track.add(tmp)
  try {
    await fsp.writeFile(tmp, data, { flag: 'wx' })
    await fsp.rename(tmp, final)
  } finally {
    track.delete(tmp)
    await fsp.rm(tmp, { force: true })
  }
}

function alive(pid: number): boolean {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Removes the temporaries of runs that are no longer alive under `dir` (a run killed mid-write); returns how many. */
export async function sweepParts(dir: string): Promise<number> {
  let n = 0
  const visit = async (d: string) => {
    const entries = await fsp.readdir(d, { withFileTypes: true }).catch(() => [])
    for (const e of entries) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) await visit(p)
      else {
        const m = PART.exec(e.name)
        if (m && !alive(Number(m[1]))) {
          await fsp.rm(p, { force: true })
          n++
        }
      }
    }
  }
  if (fs.existsSync(dir)) await visit(dir)
  return n
}

/** Synchronous removal of the given temporaries (the second Ctrl-C and process exit). */
export function removePartsSync(parts: Iterable<string>): void {
  for (const p of parts) {
    for (const f of [p, `${p}.v.mkv`, `${p}.t.mkv`, `${p}.ts.txt`]) fs.rmSync(f, { force: true })
  }
}
