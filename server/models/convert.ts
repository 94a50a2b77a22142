// MatConvNet (v7.3 .mat = HDF5, "simplenn") -> ncnn .param + .bin conversion for the denoisers.
//
// Only the convolution body becomes the ncnn net (see models/README.md):
// - FFDNet: Input `input` (13 ch: 12 space-to-depth channels + the sigma/255 map) -> 12 x Convolution 3x3
//   (ReLU fused, 9=1, except the last) -> `output` (12 ch, space-to-depth layout). SubP(1/2), the sigma map and
//   SubP(2) stay in the engine.
// - DnCNN: Input `input` (3 ch RGB 0..1) -> Split -> 20 x Convolution 3x3 (ReLU fused except the last) ->
//   BinaryOp sub (input - residual) -> `output` (3 ch RGB, the denoised image).
//
// MatConvNet filters are MATLAB arrays [kh, kw, in, out] (column-major); HDF5 stores them with the dimensions
// reversed, so the dataset read in C order is (out, in, kw, kh). ncnn wants (out, in, kh, kw): the last two axes
// are swapped. vl_nnconv is a cross-correlation, like ncnn's Convolution, so no kernel flip.

import fs from 'node:fs'

export type NetKind = 'ffdnet' | 'dncnn'

export interface ConvLayer {
  /** ncnn order (out, in, kh, kw), float32. */
  weight: Float32Array
  bias: Float32Array
  out: number
  in: number
  kh: number
  kw: number
  relu: boolean
}

export interface ConvertedNet {
  param: Buffer
  bin: Buffer
  layers: ConvLayer[]
}

// h5wasm is a runtime dependency on purpose, although only this converter loads it (lazily): users run the
// converter too, when `npm ci` / `lucent models fetch` installs the catalog's denoiser (denoise/ffdnet_clip_color
// comes as a .mat, models/required.json), so an install without devDependencies must still have it.
type H5 = typeof import('h5wasm')
let h5: Promise<H5> | undefined

async function loadH5(): Promise<H5> {
  h5 ??= (async () => {
    // The node build reads the host filesystem directly (NODERAWFS).
    const mod = (await import('h5wasm/node')) as unknown as H5
    await mod.ready
    return mod
  })()
  return h5
}

function matString(ds: any): string {
  const v = ds.value
  return String.fromCharCode(...Array.from(v as ArrayLike<number>))
}

function scalar(g: any, key: string, dflt: number): number {
  if (!g.keys().includes(key)) return dflt
  const v = g.get(key).value
  return Number((v as ArrayLike<number>)[0] ?? v)
}

interface MatLayer {
  type: string
  weights?: { data: Float32Array; shape: number[] }[]
  pad: number
  stride: number
  dilate: number
  leak: number
  scale: number
}

/** Read the simplenn layer list of a MatConvNet v7.3 file. */
export async function readMatConvNet(file: string): Promise<MatLayer[]> {
  const mod = await loadH5()
  // h5wasm opens through its own FS layer; an explicit existence check gives a clear error.
  if (!fs.existsSync(file)) throw new Error(`MatConvNet file not found: ${file}`)
  const f = new mod.File(file, 'r')
  try {
    const layersDs: any = f.get('net/layers')
    if (!layersDs) throw new Error(`${file}: no net/layers (not a MatConvNet v7.3 simplenn file)`)
    const refs = layersDs.value as any[]
    const out: MatLayer[] = []
    for (const ref of refs) {
      const g: any = f.dereference(ref)
      if (!g || typeof g.keys !== 'function') throw new Error(`${file}: layer reference does not point to a struct`)
      const keys: string[] = g.keys()
      const layer: MatLayer = {
        type: matString(g.get('type')),
        pad: scalar(g, 'pad', 0),
        stride: scalar(g, 'stride', 1),
        dilate: scalar(g, 'dilate', 1),
        leak: scalar(g, 'leak', 0),
        scale: scalar(g, 'scale', 1),
      }
      if (layer.type === 'conv') {
        if (!keys.includes('weights')) throw new Error(`${file}: conv layer without weights`)
        const wds: any = g.get('weights')
        const wrefs = wds.value as any[]
        layer.weights = wrefs.map((r) => {
          const d: any = f.dereference(r)
          const meta = d.metadata
          if (meta.type !== 1 || meta.size !== 4) throw new Error(`${file}: conv weights are not float32`)
          return { data: Float32Array.from(d.value as Float32Array), shape: d.shape as number[] }
        })
      }
      out.push(layer)
    }
    return out
  } finally {
    f.close()
  }
}

function convFromMat(l: MatLayer, relu: boolean, where: string): ConvLayer {
  if (l.pad !== 1 || l.stride !== 1 || l.dilate !== 1) {
    throw new Error(`${where}: expected pad 1, stride 1, dilate 1; got pad ${l.pad} stride ${l.stride} dilate ${l.dilate}`)
  }
  const [w, b] = l.weights ?? []
  if (!w || !b || w.shape.length !== 4) throw new Error(`${where}: expected [filters, biases]`)
  const [out, inp, kw, kh] = w.shape as [number, number, number, number]
  if (b.data.length !== out) throw new Error(`${where}: ${b.data.length} biases for ${out} filters`)
  const weight = new Float32Array(out * inp * kh * kw)
  for (let o = 0; o < out; o++) {
    for (let i = 0; i < inp; i++) {
      const base = (o * inp + i) * kh * kw
      for (let y = 0; y < kh; y++) {
        for (let x = 0; x < kw; x++) {
          // HDF5 (out, in, kw, kh) -> ncnn (out, in, kh, kw)
          weight[base + y * kw + x] = w.data[base + x * kh + y]!
        }
      }
    }
  }
  return { weight, bias: Float32Array.from(b.data), out, in: inp, kh, kw, relu }
}

/** Check the layer sequence and pull out the convolutions. */
export function extractConvs(kind: NetKind, layers: MatLayer[], where: string = kind): ConvLayer[] {
  const types = layers.map((l) => l.type)
  let body = layers
  if (kind === 'ffdnet') {
    const first = layers[0]
    const last = layers[layers.length - 1]
    if (types[0] !== 'SubP' || types[1] !== 'concat' || types[types.length - 1] !== 'SubP' || first!.scale !== 0.5 || last!.scale !== 2) {
      throw new Error(`${where}: not an FFDNet layer list (SubP 1/2, concat, ..., SubP 2): ${types.join(',')}`)
    }
    body = layers.slice(2, -1)
  }
  const convs: ConvLayer[] = []
  for (let i = 0; i < body.length; i++) {
    const l = body[i]!
    if (l.type === 'conv') {
      const next = body[i + 1]
      const relu = next?.type === 'relu'
      if (relu && next!.leak !== 0) throw new Error(`${where}: leaky ReLU is not expected`)
      convs.push(convFromMat(l, relu, `${where} conv ${convs.length + 1}`))
      if (relu) i++
    } else {
      throw new Error(`${where}: unexpected layer type ${l.type} in the conv body`)
    }
  }
  const expect = kind === 'ffdnet' ? { n: 12, inCh: 13, outCh: 12 } : { n: 20, inCh: 3, outCh: 3 }
  if (convs.length !== expect.n) throw new Error(`${where}: expected ${expect.n} conv layers, found ${convs.length}`)
  if (convs[0]!.in !== expect.inCh || convs[convs.length - 1]!.out !== expect.outCh) {
    throw new Error(`${where}: expected ${expect.inCh} input / ${expect.outCh} output channels`)
  }
  for (let i = 0; i < convs.length; i++) {
    const c = convs[i]!
    if (i > 0 && c.in !== convs[i - 1]!.out) throw new Error(`${where}: conv ${i + 1} input channels do not chain`)
    if (c.relu !== (i < convs.length - 1)) throw new Error(`${where}: ReLU expected after every conv but the last`)
  }
  return convs
}

function pad(s: string, n: number): string {
  return s.length >= n ? s + ' ' : s + ' '.repeat(n - s.length)
}

/** Serialise the conv body as ncnn .param text and .bin weights (tag 0 + fp32 weights, raw fp32 bias). */
export function toNcnn(kind: NetKind, convs: ConvLayer[]): ConvertedNet {
  const lines: string[] = []
  const row = (type: string, name: string, bottoms: string[], tops: string[], params = '') =>
    lines.push(
      (pad(type, 25) + pad(name, 25) + `${bottoms.length} ${tops.length} ` + [...bottoms, ...tops].join(' ') + (params ? ' ' + params : '')).trimEnd(),
    )
  row('Input', 'input', [], ['input'])
  let prev = 'input'
  if (kind === 'dncnn') {
    row('Split', 'splitncnn_input', ['input'], ['input_0', 'input_1'])
    prev = 'input_0'
  }
  const bins: Buffer[] = []
  convs.forEach((c, i) => {
    const last = i === convs.length - 1
    const top = last ? (kind === 'dncnn' ? 'residual' : 'output') : `conv${i + 1}`
    const params = [`0=${c.out}`, `1=${c.kw}`]
    if (c.kh !== c.kw) params.push(`11=${c.kh}`)
    params.push('4=1', '5=1', `6=${c.weight.length}`)
    if (c.relu) params.push('9=1')
    row('Convolution', `conv${i + 1}`, [prev], [top], params.join(' '))
    prev = top
    const tag = Buffer.alloc(4) // 0 = raw float32 follows
    bins.push(tag, f32le(c.weight), f32le(c.bias))
  })
  if (kind === 'dncnn') row('BinaryOp', 'subtract', ['input_1', 'residual'], ['output'], '0=1')
  const blobs = new Set<string>()
  // Count blobs: every top is a distinct blob.
  for (const l of lines) {
    const parts = l.split(/\s+/)
    const nb = Number(parts[2])
    const nt = Number(parts[3])
    for (const b of parts.slice(4 + nb, 4 + nb + nt)) blobs.add(b)
  }
  const param = `7767517\n${lines.length} ${blobs.size}\n${lines.join('\n')}\n`
  return { param: Buffer.from(param, 'utf8'), bin: Buffer.concat(bins), layers: convs }
}

function f32le(a: Float32Array): Buffer {
  const b = Buffer.alloc(a.length * 4)
  for (let i = 0; i < a.length; i++) b.writeFloatLE(a[i]!, i * 4)
  return b
}

/** Convert one MatConvNet denoiser file into ncnn param/bin buffers (deterministic). */
export async function convertMatConvNet(kind: NetKind, matFile: string): Promise<ConvertedNet> {
  const layers = await readMatConvNet(matFile)
  return toNcnn(kind, extractConvs(kind, layers, matFile))
}
