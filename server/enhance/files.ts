/**
 * `lucent enhance` inputs and outputs on disk: INPUT arguments (files, folders, globs) expanded into media
 * files with the relative path each keeps under --out, junk recognised and counted, and the atomic write
 * (a hidden temporary file beside the output, renamed into place) with the sweep of temporaries a killed
 * run left behind. The guards of issue 22: an --out at or above a folder input is bad usage (checkOut), an
 * output that is an input is bad usage (inputGuard), no symlink loop is followed, an output never lands
 * outside --out (outsideOut, makeOutDir).
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
  /** symlink_loop: a symlinked folder that leads back into the folder being read (a loop, or a second path to a
   *  folder read anyway), or a folder already read. */
  reason: 'junk' | 'hidden' | 'not_media' | 'folder_not_recursive' | 'symlink_loop'
}

/** Bad usage found on disk (exit 2): what is wrong and what to do instead. */
export class UsageError extends Error {
  constructor(message: string, readonly hint: string) {
    super(message)
  }
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
  return r === '' || (!(r === '..' || r.startsWith(`..${path.sep}`)) && !path.isAbsolute(r))
}

/** `p` for messages: relative to the working directory when under it. */
function show(p: string): string {
  const r = path.relative(process.cwd(), p)
  return r === '' ? '.' : !r.startsWith('..') && !path.isAbsolute(r) ? r : p
}

/** The real path of `p`, which need not exist: its deepest existing ancestor resolved, the rest appended. */
export async function realish(p: string): Promise<string> {
  const abs = path.resolve(p)
  const tail: string[] = []
  for (let head = abs; ;) {
    const real = await fsp.realpath(head).catch(() => null)
    if (real !== null) return path.join(real, ...tail)
    const parent = path.dirname(head)
    if (parent === head) return abs
    tail.unshift(path.basename(head))
    head = parent
  }
}

/** A file or folder's identity (device and inode: the same whatever path, symlink or letter case names it). */
const idOf = (st: fs.BigIntStats) => `${st.dev}:${st.ino}`
const statId = (p: string) => fsp.stat(p, { bigint: true }).then(idOf, () => null)

/** The folders INPUT arguments read: folder inputs and the fixed folders of globs (with the argument each came from). */
async function inputFolders(args: string[]): Promise<Array<{ arg: string; folder: string }>> {
  const folders: Array<{ arg: string; folder: string }> = []
  for (const arg of args) {
    const st = await fsp.stat(arg).catch(() => null)
    if (st?.isDirectory()) folders.push({ arg, folder: arg })
    else if (!st && isDynamicPattern(arg.split(path.sep).join('/'))) {
      const base = globBase(arg.split(path.sep).join('/'))
      if ((await fsp.stat(base).catch(() => null))?.isDirectory()) folders.push({ arg, folder: base })
    }
  }
  return folders
}

/**
 * --out against the inputs, before anything is read or written: --out must be a folder (or not exist yet), and
 * must not be a folder input or hold one (nor a glob's fixed folder), by any name: its outputs would land among
 * the inputs, be read back as inputs on a rerun, or (before issue 22) make the whole walk a silent no-op. An --out
 * inside a folder input is fine: it is left out of the walk.
 */
export async function checkOut(args: string[], outArg: string): Promise<void> {
  const out = path.resolve(outArg)
  const st = await fsp.stat(out).catch(() => null)
  if (st && !st.isDirectory()) throw new UsageError(`--out ${show(out)} is not a folder`, 'name a folder (it is made when missing)')
  const outReal = await realish(out)
  for (const { arg, folder } of await inputFolders(args)) {
    const real = await fsp.realpath(folder)
    // by its real path, and by the path given (the walk leaves out whatever lies under --out as named)
    if (!inside(real, outReal) && !inside(path.resolve(folder), out)) continue
    const what = arg === folder ? `the input folder ${folder}` : `the input folder ${folder} (of ${arg})`
    throw new UsageError(`--out ${show(out)} ${real === outReal ? 'is' : 'holds'} ${what}: its outputs would land among its inputs`,
      `pick an --out outside ${folder}, or one inside it, which is not read as input: --out ${path.join(folder, 'enhanced')}`)
  }
}

/** The directory entry a path names, as an identity: its folder's (symlinks resolved) and its own inode. */
async function entryId(p: string): Promise<string | null> {
  const [dir, own] = await Promise.all([statId(path.dirname(p)), fsp.lstat(p, { bigint: true }).then(idOf, () => null)])
  return dir && own ? `${dir}/${own}` : null
}

/**
 * Outputs against inputs: returns a check that names the input an output would replace (renaming onto its
 * directory entry: the input itself, or the file a symlinked input leads to), else null. Compared by identity, so
 * a symlinked --out, `..` and letter case on case-insensitive disks do not hide it. A hard link elsewhere is
 * another entry: the rename replaces that link and the input keeps its bytes.
 */
export async function inputGuard(files: string[]): Promise<(output: string) => Promise<string | null>> {
  const entries = new Map<string, string>()
  for (const f of files) {
    for (const p of [f, await fsp.realpath(f).catch(() => f)]) {
      const id = await entryId(p)
      if (id && !entries.has(id)) entries.set(id, f)
    }
  }
  return async (output) => {
    const id = await entryId(output)
    return id ? entries.get(id) ?? null : null
  }
}

/** Bad usage when an output would replace an input (the first one found): the batch does not start. */
export async function refuseOverwritingInputs(pairs: Array<{ file: string; output: string }>): Promise<void> {
  const guard = await inputGuard(pairs.map((p) => p.file))
  for (const { file, output } of pairs) {
    const victim = await guard(output)
    if (!victim) continue
    const what = victim === file ? 'its own input' : `the input ${show(victim)}`
    throw new UsageError(`the output of ${show(file)} would be ${what} (${show(output)}): an input is never written over`,
      'pick an --out that holds no input (e.g. --out enhanced), or another --format')
  }
}

/**
 * Why `output` would be written outside --out (`out`, whose real path is `outReal`), else null: a relative path
 * that climbs out (a glob with `..` after its fixed folder), or a symlinked folder under --out that leads out.
 */
export async function outsideOut(output: string, out: string, outReal: string): Promise<string | null> {
  if (!inside(output, out)) return `its output ${show(output)} would be outside --out ${show(out)} (its path climbs out with ..)`
  const real = await realish(path.dirname(output))
  if (!inside(real, outReal)) return `its output ${show(output)} would be outside --out ${show(out)} (a symlinked folder under --out leads to ${real})`
  return null
}

/** Makes the folder of `output`, checked to stay under --out before and after; the reason when it would not. */
export async function makeOutDir(output: string, out: string, outReal: string): Promise<string | null> {
  const before = await outsideOut(output, out, outReal)
  if (before) return before
  await fsp.mkdir(path.dirname(output), { recursive: true })
  return outsideOut(output, out, outReal)
}

/**
 * INPUT arguments -> media files. A file keeps its name at the top of --out; a folder's files keep their path
 * relative to the folder (sub-folders only with `recursive`); a glob's matches keep their path relative to the
 * glob's fixed prefix. Hidden folders, anything under `exclude` (the output folder) and junk are not entered.
 */
export async function expandInputs(args: string[], o: { recursive: boolean; exclude?: string }): Promise<Expanded> {
  const out: Expanded = { inputs: [], ignored: [], missing: [] }
  const exclude = o.exclude ? path.resolve(o.exclude) : null
  // --out by identity (a folder named through a symlink is still --out), and its real path for glob matches
  const excludeId = exclude ? await statId(exclude) : null
  const excludeReal = exclude ? await realish(exclude) : null
  const seen = new Set<string>()
  /** Folders entered (identities): none twice, so no loop. */
  const entered = new Set<string>()
  const add = (file: string, rel: string) => {
    const abs = path.resolve(file)
    if (seen.has(abs)) return
    seen.add(abs)
    const c = classify(path.basename(file))
    if (c === 'photo' || c === 'video') out.inputs.push({ file: abs, rel, kind: c })
    else out.ignored.push({ file: abs, reason: c })
  }
  /**
   * A folder's entries. Symlinked folders are followed only when they lead outside the folder input (`rootReal`):
   * one that leads back into it is a loop or a second path to folders read anyway, and is ignored (symlink_loop),
   * as is any folder already entered.
   */
  const walk = async (dir: string, relDir: string, rootReal: string) => {
    const entries = (await fsp.readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const e of entries) {
      const p = path.join(dir, e.name)
      const rel = path.join(relDir, e.name)
      if (exclude && inside(path.resolve(p), exclude)) continue
      const link = e.isSymbolicLink()
      let isDir = e.isDirectory()
      if (link) isDir = (await fsp.stat(p).catch(() => null))?.isDirectory() ?? false
      if (isDir) {
        const id = await statId(p)
        if (id !== null && id === excludeId) continue
        if (id !== null && !link && entered.has(id)) continue // read already: a folder input named before this one
        if (e.name.startsWith('.')) out.ignored.push({ file: path.resolve(p), reason: 'hidden' })
        else if (!o.recursive) out.ignored.push({ file: path.resolve(p), reason: 'folder_not_recursive' })
        else if (id === null || entered.has(id) || (link && inside(await fsp.realpath(p), rootReal))) out.ignored.push({ file: path.resolve(p), reason: 'symlink_loop' })
        else {
          entered.add(id)
          await walk(p, rel, rootReal)
        }
      } else add(p, rel)
    }
  }
  /** The first symlinked folder between a glob's fixed folder and a match that leads back into that folder. */
  const linkBack = async (m: string, baseAbs: string, baseReal: string): Promise<string | null> => {
    const rel = path.relative(baseAbs, path.dirname(m))
    if (!rel || rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return null
    let cur = baseAbs
    for (const seg of rel.split(path.sep)) {
      cur = path.join(cur, seg)
      const st = await fsp.lstat(cur).catch(() => null)
      if (st?.isSymbolicLink() && inside(await fsp.realpath(cur).catch(() => cur), baseReal)) return cur
    }
    return null
  }
  for (const arg of args) {
    const st = await fsp.stat(arg).catch(() => null)
    if (st?.isDirectory()) {
      const id = await statId(arg)
      if (id !== null && entered.has(id)) continue // read already (the same folder twice, or one read with -r)
      if (id !== null) entered.add(id)
      await walk(arg, '', await fsp.realpath(arg))
    } else if (st) add(arg, path.basename(arg))
    else if (isDynamicPattern(arg.split(path.sep).join('/'))) {
      const pattern = arg.split(path.sep).join('/')
      const base = globBase(pattern)
      const matches = (await glob(pattern, { onlyFiles: true, dot: false, absolute: true, expandDirectories: false })).sort()
      const baseAbs = path.resolve(base)
      const baseReal = await fsp.realpath(baseAbs).catch(() => baseAbs)
      const kept: string[] = []
      const loops = new Set<string>()
      for (const m of matches) {
        if (exclude && inside(m, exclude)) continue
        if (excludeReal && inside(await realish(path.dirname(m)), excludeReal)) continue
        const back = await linkBack(m, baseAbs, baseReal)
        if (back) loops.add(back)
        else kept.push(m)
      }
      for (const l of loops) out.ignored.push({ file: l, reason: 'symlink_loop' })
      if (!kept.length && !loops.size) out.missing.push({ input: arg })
      // a match may climb out of the fixed folder (`..` after a wildcard): its rel starts with `..`, the batch fails it
      for (const m of kept) add(m, path.relative(baseAbs, m))
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
