/**
 * House rules checked on the source: no import cycles in server/ (type-only imports included: a cycle of
 * types is still a tangle to read), and no file over ~500 lines without a reason at its top. Imports are read
 * with the TypeScript compiler's own parser (a dev dependency already), so no extra tool is installed for it;
 * `npx madge --circular --extensions ts server` reports the same.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { repoRoot } from './helper.js'
import { cycles } from './support/graph.js'

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? files(p) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : []
  })
}

/** Relative imports of a file (static, re-exports, dynamic import() with a literal), resolved to .ts files. */
function importsOf(file: string): string[] {
  const src = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true)
  const out: string[] = []
  const add = (spec: string) => {
    if (!spec.startsWith('.')) return
    const p = path.resolve(path.dirname(file), spec).replace(/\.js$/, '.ts')
    if (fs.existsSync(p)) out.push(p)
  }
  const visit = (n: ts.Node) => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) add(n.moduleSpecifier.text)
    else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword && n.arguments[0] && ts.isStringLiteral(n.arguments[0])) add(n.arguments[0].text)
    else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) add(n.argument.literal.text)
    ts.forEachChild(n, visit)
  }
  visit(src)
  return out
}

const server = files(path.join(repoRoot, 'server'))
const rel = (p: string) => path.relative(repoRoot, p)

t.test('no import cycles in server/', async (t) => {
  const graph = new Map(server.map((f) => [f, importsOf(f)]))
  t.ok(graph.size > 40, `${graph.size} files read`)
  t.ok(graph.get(path.join(repoRoot, 'server/app.ts'))!.length >= 8, 'imports are found')
  t.same(cycles(graph).map((c) => c.map(rel).sort()), [])
  // the checker itself finds a cycle when there is one
  t.same(cycles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]])).map((c) => c.sort()), [['a', 'b', 'c']])
})

t.test('no file over ~500 lines without a reason at its top', async (t) => {
  for (const f of [...server, ...files(path.join(repoRoot, 'test'))]) {
    const lines = fs.readFileSync(f, 'utf8').split('\n')
    if (lines.length <= 520) continue
    t.match(lines.slice(0, 15).join('\n'), /over 500 lines|one file on purpose/i, `${rel(f)} (${lines.length} lines) says why at its top`)
  }
})
