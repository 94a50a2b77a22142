/** Graph helpers for the house-rule tests (test/imports.ts, test/gates/rust-rules.ts). */

/** Strongly connected components with more than one file (or a file importing itself): the cycles. */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const on = new Set<string>()
  const out: string[][] = []
  const strong = (v: string) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!))
    }
    if (low.get(v) === idx.get(v)) {
      const comp: string[] = []
      let w: string
      do {
        w = stack.pop()!
        on.delete(w)
        comp.push(w)
      } while (w !== v)
      if (comp.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(comp)
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) strong(v)
  return out
}
