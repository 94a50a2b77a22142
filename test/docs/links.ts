/**
 * The README and docs/ hold together: every relative markdown link (`[text](path)`, `![alt](path)`) of README.md
 * and docs/*.md leads to a file or folder of the repository, a `#fragment` to a heading of the target page (GitHub's
 * anchors), and the README stays short (at most 300 lines; the rest lives in docs/). Links inside code (fenced
 * blocks, inline code) are not links and are skipped; http(s) and mailto links are not checked (no network).
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const README_MAX_LINES = 300

const docsDir = path.join(repoRoot, 'docs')
const pages = [
  path.join(repoRoot, 'README.md'),
  ...fs.readdirSync(docsDir).filter((f) => f.endsWith('.md')).sort().map((f) => path.join(docsDir, f)),
]

/** The markdown text without fenced code blocks and inline code spans (their lines kept, for line numbers). */
function withoutCode(md: string): string[] {
  let fence: string | null = null
  return md.split('\n').map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line)
    if (fence) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length) fence = null
      return ''
    }
    if (m) {
      fence = m[1]
      return ''
    }
    return line.replace(/(`+)[^`]*?\1/g, '')
  })
}

/** Every link target of a page, with its line number. */
function links(md: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = []
  withoutCode(md).forEach((text, i) => {
    // [text](target) or ![alt](target "title"); the text may hold brackets of its own one level deep
    for (const m of text.matchAll(/!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ target: m[1], line: i + 1 })
    }
  })
  return out
}

/** GitHub's anchor of a heading: the text as rendered (code marks and link syntax gone), lowercased, punctuation
 *  other than `-` and `_` dropped, spaces as `-`; a repeated anchor gets `-1`, `-2`, ... */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  let fence: string | null = null
  for (const line of md.split('\n')) {
    const f = /^\s{0,3}(`{3,}|~{3,})/.exec(line)
    if (fence) {
      if (f && f[1][0] === fence[0] && f[1].length >= fence.length) fence = null
      continue
    }
    if (f) {
      fence = f[1]
      continue
    }
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!h) continue
    const text = h[1].replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '')
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  // explicit anchors: <a name="x"> / <a id="x">
  for (const m of md.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1])
  return out
}

t.test(`README.md has at most ${README_MAX_LINES} lines`, async (t) => {
  const lines = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length
  t.ok(lines <= README_MAX_LINES, `README.md: ${lines} lines (the rest belongs in docs/)`)
})

t.test('every relative link of README.md and docs/*.md resolves', async (t) => {
  let checked = 0
  for (const page of pages) {
    const rel = path.relative(repoRoot, page)
    const md = fs.readFileSync(page, 'utf8')
    for (const { target, line } of links(md)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, https:, mailto: ...
      const [file, fragment] = target.split('#', 2) as [string, string | undefined]
      const dest = file === '' ? page : path.resolve(path.dirname(page), decodeURIComponent(file))
      checked++
      if (!dest.startsWith(repoRoot + path.sep) && dest !== repoRoot) {
        t.fail(`${rel}:${line}: ${target} leads outside the repository`)
        continue
      }
      if (!fs.existsSync(dest)) {
        t.fail(`${rel}:${line}: ${target}: no such file (${path.relative(repoRoot, dest)})`)
        continue
      }
      if (fragment && dest.endsWith('.md')) {
        const ok = anchors(fs.readFileSync(dest, 'utf8')).has(decodeURIComponent(fragment))
        t.ok(ok, `${rel}:${line}: ${target}: #${fragment} is a heading of ${path.relative(repoRoot, dest)}`)
      }
    }
  }
  t.ok(checked > 10, `${checked} relative links checked`)
})

t.test('every docs/ page is linked from the README', async (t) => {
  const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8')
  const linked = new Set(links(readme).map((l) => path.normalize(l.target.split('#')[0])))
  for (const page of pages.slice(1)) {
    const rel = path.relative(repoRoot, page)
    t.ok(linked.has(rel), `README.md links ${rel}`)
  }
})

t.test('the checker itself: code is not a link, anchors as GitHub makes them', async (t) => {
  t.same(links('see [a](x.md) and `[b](y.md)`\n```\n[c](z.md)\n```\n![i](p.png "t")').map((l) => l.target), ['x.md', 'p.png'])
  const a = anchors('# Title\n## Frame interpolation (`fps`, `slowmo`, `frame_interpolation`)\n## Title\n```\n# not\n```')
  t.ok(a.has('frame-interpolation-fps-slowmo-frame_interpolation'))
  t.ok(a.has('title') && a.has('title-1') && !a.has('not'))
})
