/**
 * House rules on the Rust crates (the ones test/imports.ts applies to server/): no file over 1,000 lines, a file
 * over ~500 lines says why at its top, and no cycle between a crate's top-level modules (`crate::a` used in `b`
 * and `crate::b` in `a`: one concept tangled across two files), nor between the sibling modules of one module
 * directory (`cpu/a.rs` using `super::b` and `cpu/b.rs` using `super::a`). Modules are read from the source text: a
 * reference is any `crate::NAME` path (use declarations and inline paths) or, inside a crate's top-level module
 * file, `super::NAME` (a sibling); a module's own submodules belong to it. No extra tool (cargo-modules) needed.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { repoRoot } from '../helper.js'
import { cycles } from '../support/graph.js'

const native = path.join(repoRoot, 'native')
const rel = (p: string) => path.relative(repoRoot, p)

function rsFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? (e.name === 'target' ? [] : rsFiles(p)) : e.name.endsWith('.rs') ? [p] : []
  })
}

const crates = fs.readdirSync(native, { withFileTypes: true })
  .filter((e) => e.isDirectory() && fs.existsSync(path.join(native, e.name, 'Cargo.toml')))
  .map((e) => path.join(native, e.name))

/** Strips comments and string literals so that paths in docs are not read as references. */
function code(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '').replace(/r#*"[\s\S]*?"#*/g, '""').replace(/"(?:\\.|[^"\\])*"/g, '""')
}

/** The top-level module graph of one crate's src/: module -> the top-level modules its files name. */
export function moduleGraph(src: string): Map<string, string[]> {
  const graph = new Map<string, Set<string>>()
  for (const f of rsFiles(src)) {
    const parts = path.relative(src, f).replace(/\.rs$/, '').split(path.sep)
    const top = parts[0] === 'lib' || parts[0] === 'main' ? null : parts[0]
    if (!top) continue
    const text = code(fs.readFileSync(f, 'utf8'))
    const refs = graph.get(top) ?? new Set<string>()
    for (const m of text.matchAll(/\bcrate::(\w+)/g)) refs.add(m[1])
    // `use crate::{a, b::c}`
    for (const m of text.matchAll(/\bcrate::\{([^}]*)\}/g)) for (const n of m[1].matchAll(/(?:^|,)\s*(\w+)/g)) refs.add(n[1])
    if (parts.length === 1) for (const m of text.matchAll(/\bsuper::(\w+)/g)) refs.add(m[1])
    graph.set(top, refs)
  }
  const tops = new Set(graph.keys())
  return new Map([...graph].map(([k, v]) => [k, [...v].filter((x) => x !== k && tops.has(x))]))
}

/** Graphs of the sibling modules of every module directory below src/ (`cpu/` -> cpu/a.rs, cpu/b.rs, cpu/c/):
 *  a sibling is named by `super::NAME` (also `use super::{a, b::X}`) in a child's own file, or by
 *  `crate::<dir path>::NAME` anywhere below the directory. Keyed by the directory, relative to src/. */
export function siblingGraphs(src: string): Map<string, Map<string, string[]>> {
  const out = new Map<string, Map<string, string[]>>()
  const walk = (dir: string) => {
    const rel = path.relative(src, dir)
    const kids = new Map<string, string[]>()
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) { walk(path.join(dir, e.name)); kids.set(e.name, rsFiles(path.join(dir, e.name))) }
      else if (e.name.endsWith('.rs') && e.name !== 'mod.rs' && !(rel === '' && /^(lib|main)\.rs$/.test(e.name))) {
        const n = e.name.replace(/\.rs$/, '')
        kids.set(n, [...(kids.get(n) ?? []), path.join(dir, e.name)])
      }
    }
    if (rel === '') return // the top level has its own test above
    const modPath = rel.split(path.sep).join('::')
    const graph = new Map<string, string[]>()
    for (const [k, files] of kids) {
      const refs = new Set<string>()
      for (const f of files) {
        const text = code(fs.readFileSync(f, 'utf8'))
        const own = path.dirname(f) === dir // a direct child file: its `super` is the directory
        if (own) {
          for (const m of text.matchAll(/\bsuper::(\w+)/g)) refs.add(m[1])
          for (const m of text.matchAll(/\bsuper::\{([^}]*)\}/g)) for (const n of m[1].matchAll(/(?:^|,)\s*(\w+)/g)) refs.add(n[1])
        }
        for (const m of text.matchAll(new RegExp(`\\bcrate::${modPath}::(\\w+)`, 'g'))) refs.add(m[1])
      }
      graph.set(k, [...refs].filter((x) => x !== k && kids.has(x)))
    }
    if (graph.size > 1) out.set(rel, graph)
  }
  walk(src)
  return out
}

t.test('no cycle between the sibling modules of a module directory', async (t) => {
  let dirs = 0
  for (const c of crates) {
    for (const [dir, g] of siblingGraphs(path.join(c, 'src'))) {
      dirs++
      t.same(cycles(g), [], `${rel(c)}/src/${dir}: ${g.size} modules`)
    }
  }
  t.ok(dirs > 5, `${dirs} module directories read`)
  // the reader finds one where there is one (both spellings of a sibling)
  const dir = t.testdir({ src: { 'lib.rs': 'mod cpu;', 'cpu.rs': 'mod a; mod b; mod c;', cpu: { 'a.rs': 'use super::{b, c::Y};', 'b.rs': 'use crate::cpu::a::X;', 'c.rs': '// super::a in a comment' } } })
  t.same(cycles(siblingGraphs(path.join(dir, 'src')).get('cpu')!).map((x) => x.sort()), [['a', 'b']])
})

t.test('no cycle between a crate\'s top-level modules', async (t) => {
  let read = 0
  for (const c of crates) {
    const g = moduleGraph(path.join(c, 'src'))
    read += g.size
    t.same(cycles(g), [], `${rel(c)}: ${g.size} modules`)
  }
  t.ok(read > 20, `${read} modules read`)
  // the reader finds one where there is one
  const dir = t.testdir({ src: { 'lib.rs': 'mod a; mod b;', 'a.rs': 'use crate::b::X;\n// crate::c in a comment', 'b.rs': 'pub fn f() { crate::a::g() }' } })
  t.same(cycles(moduleGraph(path.join(dir, 'src'))).map((x) => x.sort()), [['a', 'b']])
})

t.test('no Rust file over 1,000 lines; over ~500 lines says why at its top', async (t) => {
  const all = crates.flatMap((c) => rsFiles(c))
  t.ok(all.length > 50, `${all.length} Rust files read`)
  for (const f of all) {
    const lines = fs.readFileSync(f, 'utf8').split('\n')
    if (lines.length <= 520) continue
    t.ok(lines.length <= 1000, `${rel(f)}: ${lines.length} lines (at most 1,000)`)
    t.match(lines.slice(0, 15).join('\n'), /over 500 lines|on purpose|one long file/i, `${rel(f)} (${lines.length} lines) says why at its top`)
  }
})
