/**
 * npm run bench:quality — measured quality of the photo models through the real service path (the
 * addon's enhance() on PNG bytes, CPU backend unless LUCENT_BACKEND says otherwise).
 *  - SR: PSNR-Y / SSIM-Y (BT.601 luma of the 8-bit output, border = scale px) vs HR on
 *    ../shared/data/sr Set5 + Set14 (LR_bicubic x2 / x4) for general_*, high_fidelity_* and high_fidelity_v2_*
 *    (DAT-light: its .pth from `lucent models fetch --all`); generative_4x on
 *    the two smallest Set5 images only (RRDB: ~36 TFLOP per input MP).
 *  - Denoise: PSNR (RGB) on ../shared/data/denoise/McMaster with Gaussian noise sigma 15 / 25 / 50, clipped and
 *    rounded to 8 bit, seeded (xorshift32 + Box-Muller, seed 1 + 1000 * sigma + image index: the generator of
 *    native/engine/examples/quality_eval.rs), blind (the service estimates sigma).
 *  - Time per image: the engine's own ms (decode + run + encode).
 * Flags: --quick (Set5 x4, 4 McMaster images at sigma 25, generative on one image), --json (JSON lines too),
 * --models a,b (only these). Env: LUCENT_MODEL_DIR (needs the converted denoise/ffdnet_clip_color.* of
 * `lucent models fetch`; default ../shared/models), LUCENT_ENGINE_THREADS.
 */
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const data = path.join(repoRoot, '../shared/data')
const modelDir = path.resolve(process.env.LUCENT_MODEL_DIR ?? path.join(repoRoot, '../shared/models'))
const args = process.argv.slice(2)
const quick = args.includes('--quick')
const json = args.includes('--json')
const only = args.includes('--models') ? new Set(args[args.indexOf('--models') + 1]!.split(',')) : undefined

const native = createRequire(import.meta.url)('@lucent/native') as typeof import('@lucent/native')

// ---- PNG (8-bit, non-interlaced) decode / encode: enough for the data sets and the engine's output.
interface Img { w: number; h: number; rgb: Uint8Array } // packed RGB

function crc32(buf: Buffer): number {
  let c = ~0
  for (const b of buf) {
    c ^= b
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1))
  }
  return ~c >>> 0
}

function decodePng(buf: Buffer): Img {
  let pos = 8
  let w = 0, h = 0, depth = 0, ctype = 0, interlace = 0
  let palette: Buffer | undefined
  const idat: Buffer[] = []
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos)
    const type = buf.toString('latin1', pos + 4, pos + 8)
    const body = buf.subarray(pos + 8, pos + 8 + len)
    if (type === 'IHDR') {
      w = body.readUInt32BE(0); h = body.readUInt32BE(4); depth = body[8]!; ctype = body[9]!; interlace = body[12]!
    } else if (type === 'PLTE') palette = body
    else if (type === 'IDAT') idat.push(body)
    else if (type === 'IEND') break
    pos += 12 + len
  }
  if (depth !== 8 || interlace !== 0) throw new Error(`PNG depth ${depth} interlace ${interlace} not supported here`)
  const ch = ({ 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 } as Record<number, number>)[ctype]
  if (!ch) throw new Error(`PNG colour type ${ctype}`)
  const raw = zlib.inflateSync(Buffer.concat(idat))
  const stride = w * ch
  const px = new Uint8Array(h * stride)
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)]!
    const src = y * (stride + 1) + 1
    for (let x = 0; x < stride; x++) {
      const a = x >= ch ? px[y * stride + x - ch]! : 0
      const b = y > 0 ? px[(y - 1) * stride + x]! : 0
      const c = x >= ch && y > 0 ? px[(y - 1) * stride + x - ch]! : 0
      let v = raw[src + x]!
      if (f === 1) v += a
      else if (f === 2) v += b
      else if (f === 3) v += (a + b) >> 1
      else if (f === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c)
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c
      }
      px[y * stride + x] = v & 255
    }
  }
  const rgb = new Uint8Array(w * h * 3)
  for (let i = 0; i < w * h; i++) {
    if (ctype === 3) {
      const k = px[i]! * 3
      rgb[3 * i] = palette![k]!; rgb[3 * i + 1] = palette![k + 1]!; rgb[3 * i + 2] = palette![k + 2]!
    } else if (ch <= 2) {
      rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = px[i * ch]!
    } else {
      rgb[3 * i] = px[i * ch]!; rgb[3 * i + 1] = px[i * ch + 1]!; rgb[3 * i + 2] = px[i * ch + 2]!
    }
  }
  return { w, h, rgb }
}

function encodePng(img: Img): Buffer {
  const chunk = (type: string, body: Buffer) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(body.length)
    const tb = Buffer.concat([Buffer.from(type, 'latin1'), body])
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(tb))
    return Buffer.concat([len, tb, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(img.w, 0); ihdr.writeUInt32BE(img.h, 4); ihdr[8] = 8; ihdr[9] = 2
  const raw = Buffer.alloc(img.h * (img.w * 3 + 1))
  for (let y = 0; y < img.h; y++) Buffer.from(img.rgb.buffer, img.rgb.byteOffset + y * img.w * 3, img.w * 3).copy(raw, y * (img.w * 3 + 1) + 1)
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw, { level: 1 })), chunk('IEND', Buffer.alloc(0))])
}

// ---- metrics
function lumaY(img: Img, w: number, h: number, border: number): Float64Array {
  const ow = w - 2 * border, oh = h - 2 * border
  const y = new Float64Array(ow * oh)
  for (let j = 0; j < oh; j++) {
    for (let i = 0; i < ow; i++) {
      const k = 3 * ((j + border) * img.w + i + border)
      y[j * ow + i] = 16 + (65.481 * img.rgb[k]! + 128.553 * img.rgb[k + 1]! + 24.966 * img.rgb[k + 2]!) / 255
    }
  }
  return y
}

function psnr(mse: number): number { return 10 * Math.log10((255 * 255) / mse) }

function psnrY(a: Float64Array, b: Float64Array): number {
  let s = 0
  for (let i = 0; i < a.length; i++) s += (a[i]! - b[i]!) ** 2
  return psnr(s / a.length)
}

/** SSIM (Wang et al. 2004): 11x11 Gaussian window sigma 1.5, K1 0.01, K2 0.03, L 255, 'valid' area. */
function ssim(a: Float64Array, b: Float64Array, w: number, h: number): number {
  const r = 5
  const g: number[] = []
  for (let i = -r; i <= r; i++) g.push(Math.exp(-(i * i) / (2 * 1.5 * 1.5)))
  const gs = g.reduce((x, y) => x + y, 0)
  for (let i = 0; i < g.length; i++) g[i]! /= gs
  const blur = (src: Float64Array) => {
    const ow = w - 2 * r, oh = h - 2 * r
    const t = new Float64Array(ow * h)
    for (let y = 0; y < h; y++) for (let x = 0; x < ow; x++) {
      let s = 0
      for (let k = 0; k < g.length; k++) s += g[k]! * src[y * w + x + k]!
      t[y * ow + x] = s
    }
    const o = new Float64Array(ow * oh)
    for (let y = 0; y < oh; y++) for (let x = 0; x < ow; x++) {
      let s = 0
      for (let k = 0; k < g.length; k++) s += g[k]! * t[(y + k) * ow + x]!
      o[y * ow + x] = s
    }
    return o
  }
  const mul = (x: Float64Array, y: Float64Array) => x.map((v, i) => v * y[i]!)
  const ma = blur(a), mb = blur(b), saa = blur(mul(a, a)), sbb = blur(mul(b, b)), sab = blur(mul(a, b))
  const c1 = (0.01 * 255) ** 2, c2 = (0.03 * 255) ** 2
  let s = 0
  for (let i = 0; i < ma.length; i++) {
    const mu1 = ma[i]!, mu2 = mb[i]!
    const v1 = saa[i]! - mu1 * mu1, v2 = sbb[i]! - mu2 * mu2, cv = sab[i]! - mu1 * mu2
    s += ((2 * mu1 * mu2 + c1) * (2 * cv + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (v1 + v2 + c2))
  }
  return s / ma.length
}

function addNoise(img: Img, sigma: number, seed: number): Img {
  let x = seed >>> 0
  const u = () => {
    x = (x ^ (x << 13)) >>> 0
    x = (x ^ (x >>> 17)) >>> 0
    x = (x ^ (x << 5)) >>> 0
    return (x + 0.5) / 4294967296
  }
  const out = new Uint8Array(img.rgb.length)
  for (let i = 0; i < out.length; i++) {
    const a = u(), b = u()
    const n = Math.sqrt(-2 * Math.log(a)) * Math.cos(2 * Math.PI * b)
    out[i] = Math.min(255, Math.max(0, Math.round(img.rgb[i]! + sigma * n)))
  }
  return { w: img.w, h: img.h, rgb: out }
}

function psnrRgb(a: Img, b: Img): number {
  let s = 0
  for (let i = 0; i < a.rgb.length; i++) s += (a.rgb[i]! - b.rgb[i]!) ** 2
  return psnr(s / a.rgb.length)
}

// ---- runs
interface Row { model: string; set: string; scale?: number; sigma?: number; images: number; psnr: number; ssim?: number; inputPsnr?: number; msPerImage: number }
const rows: Row[] = []
const emit = (r: Row) => {
  rows.push(r)
  if (json) console.log(JSON.stringify(r))
}

async function enhancePng(bytes: Buffer, model: string): Promise<{ img: Img; ms: number }> {
  const r = await native.enhance(bytes, { model, format: 'png' })
  return { img: decodePng(r.data), ms: r.ms }
}

async function srSet(model: string, scale: number, set: string, names?: string[]) {
  const dir = path.join(data, 'sr', set)
  // Two layouts: HR/NAME.png + LR_bicubic/X{s}/NAMEx{s}.png (Set5), image_SRF_{s}/NAME_SRF_{s}_{HR,LR}.png (Set14).
  const pairs: Array<[string, string, string]> = fs.existsSync(path.join(dir, 'HR'))
    ? fs.readdirSync(path.join(dir, 'HR')).filter((f) => f.endsWith('.png')).map((f) => f.slice(0, -4))
        .map((n) => [n, path.join(dir, 'HR', `${n}.png`), path.join(dir, `LR_bicubic/X${scale}`, `${n}x${scale}.png`)] as [string, string, string])
    : fs.readdirSync(path.join(dir, `image_SRF_${scale}`)).filter((f) => f.endsWith('_HR.png')).map((f) => {
        const n = f.slice(0, -7)
        return [n, path.join(dir, `image_SRF_${scale}`, f), path.join(dir, `image_SRF_${scale}`, `${n}_LR.png`)] as [string, string, string]
      })
  pairs.sort((a, b) => a[0].localeCompare(b[0]))
  const list = names ? pairs.filter((p) => names.includes(p[0])) : pairs
  let p = 0, s = 0, ms = 0
  for (const [, hrPath, lrPath] of list) {
    const hr = decodePng(fs.readFileSync(hrPath))
    const lrBytes = fs.readFileSync(lrPath)
    const out = await enhancePng(lrBytes, model)
    const w = Math.min(out.img.w, hr.w), h = Math.min(out.img.h, hr.h)
    const ya = lumaY(out.img, w, h, scale), yb = lumaY(hr, w, h, scale)
    p += psnrY(ya, yb)
    s += ssim(ya, yb, w - 2 * scale, h - 2 * scale)
    ms += out.ms
  }
  emit({ model, set: names ? `${set}[${names.join(',')}]` : set, scale, images: list.length, psnr: p / list.length, ssim: s / list.length, msPerImage: ms / list.length })
}

async function denoiseSet(model: string, sigma: number, count: number) {
  const dir = path.join(data, 'denoise/McMaster')
  let p = 0, p0 = 0, ms = 0
  for (let i = 0; i < count; i++) {
    const clean = decodePng(fs.readFileSync(path.join(dir, `${i + 1}.png`)))
    const noisy = addNoise(clean, sigma, 1 + 1000 * sigma + i)
    const out = await enhancePng(encodePng(noisy), model)
    p += psnrRgb(out.img, clean)
    p0 += psnrRgb(noisy, clean)
    ms += out.ms
  }
  emit({ model, set: 'McMaster', sigma, images: count, psnr: p / count, inputPsnr: p0 / count, msPerImage: ms / count })
}

const want = (m: string) => !only || only.has(m)
const info = native.init({ modelDir, backend: (process.env.LUCENT_BACKEND as 'cpu' | 'gpu' | 'auto' | undefined) ?? 'cpu', threads: process.env.LUCENT_ENGINE_THREADS ? Number(process.env.LUCENT_ENGINE_THREADS) : undefined })
console.log(`bench:quality on ${info.backend} (${info.adapter}), models from ${modelDir}${quick ? ' (--quick)' : ''}`)

const t0 = performance.now()
const sets = quick ? ['Set5'] : ['Set5', 'Set14']
for (const [model, scale] of [['general_2x', 2], ['general_4x', 4], ['high_fidelity_2x', 2], ['high_fidelity_4x', 4], ['high_fidelity_v2_2x', 2], ['high_fidelity_v2_4x', 4]] as const) {
  if (!want(model) || (quick && scale === 2)) continue
  for (const set of sets) await srSet(model, scale, set)
}
if (want('generative_4x')) await srSet('generative_4x', 4, 'Set5', quick ? ['bird'] : ['bird', 'head'])
for (const model of ['detail_denoise_1x', 'sharpen_denoise_1x']) {
  if (!want(model)) continue
  for (const sigma of quick ? [25] : [15, 25, 50]) await denoiseSet(model, sigma, quick ? 4 : 18)
}

console.log('\nmodel               set                 scale/sigma images  PSNR dB  SSIM-Y  input dB  ms/image')
for (const r of rows) {
  const ss = r.scale ? `x${r.scale}` : `s${r.sigma}`
  console.log(
    `${r.model.padEnd(20)}${r.set.padEnd(20)}${ss.padEnd(12)}${String(r.images).padEnd(8)}${r.psnr.toFixed(2).padStart(7)}  ${r.ssim !== undefined ? r.ssim.toFixed(4) : '   -  '}  ${r.inputPsnr !== undefined ? r.inputPsnr.toFixed(2).padStart(8) : '       -'}  ${r.msPerImage.toFixed(0).padStart(8)}`,
  )
}
console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`)
