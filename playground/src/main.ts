/**
 * The playground page (issue 13): key (kept in localStorage), file (drop or pick), model (GET /api/models), price,
 * then upload (POST /api/oss/upload) -> submit (/api/photo-enhancer or /api/video-enhancer) -> poll
 * (/api/task-status) -> before/after comparison (photos) or side by side (videos) and a download link.
 * The "Remove background" mode (issue 31) submits a photo to /api/image-segmentation (models of kind
 * `segmentation`, return_type, format) and shows the result over a checkerboard, with the mask and thumbnail.
 * Only the public API; no inline script or style (the page is served with a strict CSP, server/playground.ts).
 */
import { ApiFailure, getCatalog, submitPhoto, submitSegmentation, submitVideo, upload, waitForJob, type Catalog, type CatalogModel, type SegmentationJob, type TaskStatus } from './api.js'
import { photoQuote, segmentationQuote, videoQuote, type Quote } from './price.js'
import { compare } from './compare.js'

const KEY_STORE = 'lucent.playground.apiKey'
const MODEL_STORE = 'lucent.playground.model.'

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T
const el = {
  form: $<HTMLFormElement>('job-form'),
  key: $<HTMLInputElement>('api-key'),
  keyShow: $<HTMLButtonElement>('key-show'),
  keyForget: $<HTMLButtonElement>('key-forget'),
  drop: $<HTMLLabelElement>('drop'),
  preview: $<HTMLImageElement>('preview'),
  file: $<HTMLInputElement>('file'),
  fileInfo: $<HTMLParagraphElement>('file-info'),
  model: $<HTMLSelectElement>('model'),
  modelDesc: $<HTMLParagraphElement>('model-desc'),
  modes: [...document.querySelectorAll<HTMLInputElement>('input[name=mode]')],
  photoOpts: $<HTMLDivElement>('photo-opts'),
  segOpts: $<HTMLDivElement>('seg-opts'),
  returnType: $<HTMLSelectElement>('return-type'),
  segFormat: $<HTMLSelectElement>('seg-format'),
  format: $<HTMLSelectElement>('format'),
  videoOpts: $<HTMLFieldSetElement>('video-opts'),
  outW: $<HTMLInputElement>('out-w'),
  outH: $<HTMLInputElement>('out-h'),
  outFps: $<HTMLInputElement>('out-fps'),
  slowmo: $<HTMLSelectElement>('slowmo'),
  price: $<HTMLSpanElement>('price'),
  limit: $<HTMLParagraphElement>('limit'),
  submit: $<HTMLButtonElement>('submit'),
  error: $<HTMLParagraphElement>('error'),
  progressBox: $<HTMLElement>('progress-box'),
  progress: $<HTMLProgressElement>('progress'),
  status: $<HTMLParagraphElement>('status'),
  result: $<HTMLElement>('result'),
  compare: $<HTMLDivElement>('compare'),
  videos: $<HTMLDivElement>('videos'),
  vBefore: $<HTMLVideoElement>('v-before'),
  vAfter: $<HTMLVideoElement>('v-after'),
  cutout: $<HTMLDivElement>('cutout'),
  cutoutImg: $<HTMLImageElement>('cutout-img'),
  maskFig: $<HTMLElement>('mask-fig'),
  maskImg: $<HTMLImageElement>('mask-img'),
  maskDl: $<HTMLAnchorElement>('mask-dl'),
  thumbFig: $<HTMLElement>('thumb-fig'),
  thumbImg: $<HTMLImageElement>('thumb-img'),
  thumbDl: $<HTMLAnchorElement>('thumb-dl'),
  download: $<HTMLAnchorElement>('download'),
  resultInfo: $<HTMLSpanElement>('result-info'),
}

type Kind = 'photo' | 'video'
/** What the page does: enhance (photo and video models) or remove a photo's background (segmentation models). */
type Mode = 'enhance' | 'segment'
type ModelKind = CatalogModel['kind']
interface Picked { file: File; kind: Kind; ext: string; url: string; width: number | null; height: number | null; seconds: number | null }

let catalog: Catalog | null = null
let picked: Picked | null = null
let mode: Mode = 'enhance'
let busy = false
const slider = compare(el.compare)

// --- small helpers -------------------------------------------------------------------------------------------
const storage = {
  get: (k: string) => { try { return localStorage.getItem(k) } catch { return null } },
  set: (k: string, v: string) => { try { localStorage.setItem(k, v) } catch { /* storage disabled: keep going */ } },
  del: (k: string) => { try { localStorage.removeItem(k) } catch { /* as above */ } },
}

function showError(message: string | null) {
  el.error.textContent = message ?? ''
  el.error.hidden = !message
}

function describe(e: unknown): string {
  if (e instanceof ApiFailure) return e.errorCode ? `${e.message} (error ${e.errorCode})` : e.message
  return e instanceof Error ? e.message : String(e)
}

const extOf = (name: string) => (/\.([A-Za-z0-9]{1,10})$/.exec(name)?.[1] ?? '').toLowerCase()
const fmtBytes = (n: number) => (n < 1 << 20 ? `${(n / 1024).toFixed(0)} KB` : `${(n / (1 << 20)).toFixed(1)} MB`)

function kindOf(file: File, c: Catalog): Kind | null {
  const ext = extOf(file.name)
  if (c.formats.photo.includes(ext) || ext === 'heic' || (file.type.startsWith('image/') && ext !== 'gif')) return 'photo'
  if (c.formats.video_input.includes(ext) || file.type.startsWith('video/')) return 'video'
  return null
}

// --- key -------------------------------------------------------------------------------------------------------
el.key.value = storage.get(KEY_STORE) ?? ''
el.key.addEventListener('input', () => {
  const v = el.key.value.trim()
  if (v) storage.set(KEY_STORE, v)
  else storage.del(KEY_STORE)
})
el.keyShow.addEventListener('click', () => {
  const show = el.key.type === 'password'
  el.key.type = show ? 'text' : 'password'
  el.keyShow.textContent = show ? 'Hide' : 'Show'
  el.keyShow.setAttribute('aria-pressed', String(show))
})
el.keyForget.addEventListener('click', () => {
  storage.del(KEY_STORE)
  el.key.value = ''
  el.key.focus()
})

// --- models and price ------------------------------------------------------------------------------------------
function currentModel(): CatalogModel | null {
  return catalog?.models.find((m) => m.name === el.model.value) ?? null
}

/** The models the current mode and file offer. */
const listKind = (): ModelKind => (mode === 'segment' ? 'segmentation' : picked?.kind ?? 'photo')

function fillModels(kind: ModelKind) {
  if (!catalog) return
  const wanted = storage.get(MODEL_STORE + kind)
  el.model.replaceChildren()
  const groups = new Map<string, HTMLOptGroupElement>()
  for (const m of catalog.models.filter((x) => x.kind === kind)) {
    let g = groups.get(m.family)
    if (!g) {
      g = document.createElement('optgroup')
      g.label = m.family
      groups.set(m.family, g)
      el.model.append(g)
    }
    const o = document.createElement('option')
    o.value = m.name
    o.textContent = `${m.kind === 'segmentation' ? m.name : `${m.name} (${m.scale}x)`}${m.available ? '' : ' (not available here)'}`
    o.disabled = !m.available
    g.append(o)
  }
  const names = catalog.models.filter((x) => x.kind === kind && x.available).map((x) => x.name)
  el.model.value = wanted && names.includes(wanted) ? wanted : names[0] ?? ''
  el.photoOpts.hidden = kind !== 'photo'
  el.videoOpts.hidden = kind !== 'video'
  el.segOpts.hidden = kind !== 'segmentation'
  modelChanged(false)
}

function quote(): Quote | null {
  const m = currentModel()
  if (!m || !picked) return null
  if (m.kind === 'photo') return photoQuote(m, picked.width, picked.height)
  if (m.kind === 'segmentation') return segmentationQuote(m, picked.width, picked.height)
  return videoQuote(m, Number(el.outW.value), Number(el.outH.value), picked.seconds, interpolation())
}

/** The frame-interpolation fields of a video job (docs/models.md "Frame interpolation"): absent when not set. */
function interpolation(): { fps?: number; slowmo?: number } {
  const fps = Number(el.outFps.value)
  const slowmo = Number(el.slowmo.value)
  return { ...(el.outFps.value && fps > 0 ? { fps } : {}), ...(slowmo ? { slowmo } : {}) }
}

function updatePrice() {
  const q = quote()
  el.price.textContent = q ? q.text : picked ? 'choose a model' : 'choose a file to see it'
  el.limit.textContent = q?.problem ?? ''
  el.limit.hidden = !q?.problem
}

function modelChanged(remember = true) {
  const m = currentModel()
  el.modelDesc.textContent = m ? m.description : ''
  if (m && remember) storage.set(MODEL_STORE + m.kind, m.name)
  if (m && m.kind === 'video' && picked?.width && picked.height) {
    el.outW.value = String(picked.width * m.scale)
    el.outH.value = String(picked.height * m.scale)
  }
  updatePrice()
}
el.model.addEventListener('change', () => modelChanged())

/** Background removal takes a photo; the message for anything else. */
const segNeedsPhoto = (p: Picked | null) => (mode === 'segment' && p && p.kind !== 'photo' ? 'Background removal takes a photo: choose a photo.' : null)

for (const r of el.modes) {
  r.addEventListener('change', () => {
    if (!r.checked) return
    mode = r.value === 'segment' ? 'segment' : 'enhance'
    el.submit.textContent = mode === 'segment' ? 'Remove background' : 'Enhance'
    showError(segNeedsPhoto(picked))
    fillModels(listKind())
  })
}
el.outW.addEventListener('input', updatePrice)
el.outH.addEventListener('input', updatePrice)
el.outFps.addEventListener('input', updatePrice)
el.slowmo.addEventListener('change', updatePrice)

// --- file: pick or drop ----------------------------------------------------------------------------------------
function measure(kind: Kind, url: string): Promise<{ width: number | null; height: number | null; seconds: number | null }> {
  return new Promise((resolve) => {
    const none = { width: null, height: null, seconds: null }
    const timer = setTimeout(() => resolve(none), 5000)
    if (kind === 'photo') {
      const img = new Image()
      img.onload = () => { clearTimeout(timer); resolve({ width: img.naturalWidth, height: img.naturalHeight, seconds: null }) }
      img.onerror = () => { clearTimeout(timer); resolve(none) }
      img.src = url
    } else {
      const v = document.createElement('video')
      v.preload = 'metadata'
      v.muted = true
      v.onloadedmetadata = () => {
        clearTimeout(timer)
        resolve({ width: v.videoWidth || null, height: v.videoHeight || null, seconds: Number.isFinite(v.duration) ? v.duration : null })
      }
      v.onerror = () => { clearTimeout(timer); resolve(none) }
      v.src = url
    }
  })
}

async function pick(file: File | undefined) {
  if (!file || !catalog || busy) return
  showError(null)
  const kind = kindOf(file, catalog)
  if (!kind) {
    showError(`${file.name}: not a photo or video format the service accepts.`)
    return
  }
  if (picked) URL.revokeObjectURL(picked.url)
  const url = URL.createObjectURL(file)
  picked = { file, kind, ext: extOf(file.name), url, width: null, height: null, seconds: null }
  el.fileInfo.textContent = `${file.name}: ${kind}, ${fmtBytes(file.size)}; reading its size…`
  const current = picked
  Object.assign(current, await measure(kind, url))
  if (picked !== current) return
  // a thumbnail where the browser can show the picture (the video's first frame is not worth a decoder here)
  el.preview.hidden = kind !== 'photo' || !current.width
  if (!el.preview.hidden) el.preview.src = url
  const dims = current.width && current.height ? `${current.width} × ${current.height}` : 'size not readable in this browser'
  const secs = current.seconds !== null ? `, ${current.seconds.toFixed(1)} s` : ''
  el.fileInfo.textContent = `${file.name}: ${kind}, ${dims}${secs}, ${fmtBytes(file.size)}`
  showError(segNeedsPhoto(current))
  fillModels(listKind())
}

el.file.addEventListener('change', () => pick(el.file.files?.[0]))
for (const type of ['dragenter', 'dragover'] as const) {
  el.drop.addEventListener(type, (e) => {
    e.preventDefault()
    el.drop.classList.add('over')
  })
}
for (const type of ['dragleave', 'drop'] as const) el.drop.addEventListener(type, () => el.drop.classList.remove('over'))
el.drop.addEventListener('drop', (e) => {
  e.preventDefault()
  pick(e.dataTransfer?.files[0])
})
// a file dropped next to the zone must not navigate away from the page
window.addEventListener('dragover', (e) => e.preventDefault())
window.addEventListener('drop', (e) => e.preventDefault())

// --- submit, progress, result ----------------------------------------------------------------------------------
function setBusy(on: boolean) {
  busy = on
  el.submit.disabled = on
  for (const r of el.modes) r.disabled = on
  el.form.setAttribute('aria-busy', String(on))
}

function progress(text: string, value: number | null) {
  el.progressBox.hidden = false
  el.status.textContent = text
  if (value === null) el.progress.removeAttribute('value')
  else el.progress.value = value
}

/** The output extension: the chosen format, else the input's when the API accepts it as output, else PNG / MP4. */
function outputExtension(p: Picked): string {
  if (p.kind === 'photo') {
    if (el.format.value) return el.format.value
    if (p.ext === 'heic') return '.heif'
    return catalog!.formats.photo.includes(p.ext) ? `.${p.ext}` : '.png'
  }
  return catalog!.formats.video_output.includes(p.ext) ? `.${p.ext}` : '.mp4'
}

function unreachableHint(url: string): string {
  try {
    const u = new URL(url, location.href)
    if (u.origin !== location.origin && /^(127\.|localhost$|\[::1\]$)/.test(u.hostname) && !/^(127\.|localhost$|\[::1\]$)/.test(location.hostname)) {
      return ` The result link points at ${u.origin}, which this device cannot reach: set LUCENT_PUBLIC_URL on the server to an address it can.`
    }
  } catch { /* not a URL: no hint */ }
  return ''
}

const loadImage = (img: HTMLImageElement, url: string) => new Promise<void>((resolve, reject) => {
  img.onload = () => resolve()
  img.onerror = () => reject(new Error(`the image at ${url} could not be loaded`))
  img.src = url
})

/** Background removal: the matted image over a checkerboard; the mask and the thumbnail when the job returned them. */
async function showCutout(s: TaskStatus, base: string) {
  const extra = (fig: HTMLElement, img: HTMLImageElement, dl: HTMLAnchorElement, url: string | undefined, name: string) => {
    fig.hidden = !url
    if (!url) return img.removeAttribute('src')
    dl.href = url
    dl.download = `${base}_${name}.png`
    void loadImage(img, url).catch(() => { fig.hidden = true })
  }
  extra(el.maskFig, el.maskImg, el.maskDl, s.mask_url, 'mask')
  extra(el.thumbFig, el.thumbImg, el.thumbDl, s.thumbnail_url, 'thumbnail')
  try {
    await loadImage(el.cutoutImg, s.res_url!)
    el.resultInfo.textContent = `${el.cutoutImg.naturalWidth} × ${el.cutoutImg.naturalHeight} px, background transparent`
  } catch {
    el.resultInfo.textContent = `The result could not be shown here (WebP, PNG and others show in most browsers); the download link still works.${unreachableHint(s.res_url!)}`
  }
}

async function showResult(p: Picked, s: TaskStatus, model: string, ext: string, segment: boolean) {
  const res = s.res_url!
  el.result.hidden = false
  el.compare.hidden = segment || p.kind !== 'photo'
  el.videos.hidden = segment || p.kind !== 'video'
  el.cutout.hidden = !segment
  const base = p.file.name.replace(/\.[^.]+$/, '') || 'result'
  el.download.href = res
  el.download.download = `${base}_${model}${ext}`
  if (segment) await showCutout(s, base)
  else if (p.kind === 'photo') {
    slider.set(50)
    try {
      const r = await slider.show(p.url, res)
      el.resultInfo.textContent = `${r.width} × ${r.height} px${r.compared ? '' : ' (this browser cannot show the original for comparison)'}`
    } catch {
      el.resultInfo.textContent = `The result could not be shown here; the download link still works.${unreachableHint(res)}`
    }
  } else {
    el.vBefore.src = p.url
    el.vAfter.src = res
    el.vAfter.onloadedmetadata = () => { el.resultInfo.textContent = `${el.vAfter.videoWidth} × ${el.vAfter.videoHeight} px` }
    el.vAfter.onerror = () => { el.resultInfo.textContent = `This browser cannot play the result; download it.${unreachableHint(res)}` }
  }
}

el.form.addEventListener('submit', async (e) => {
  e.preventDefault()
  if (busy) return
  showError(null)
  const key = el.key.value.trim()
  const m = currentModel()
  const p = picked
  if (!key) {
    showError('Paste an API key first.')
    el.key.focus()
    return
  }
  if (!p) {
    showError('Choose a photo or video first.')
    el.file.focus()
    return
  }
  if (!m) {
    showError('Choose a model.')
    el.model.focus()
    return
  }
  const segment = mode === 'segment'
  const notPhoto = segNeedsPhoto(p)
  if (notPhoto) {
    showError(notPhoto)
    el.file.focus()
    return
  }
  const q = quote()
  if (q?.problem) {
    showError(q.problem)
    return
  }
  setBusy(true)
  el.result.hidden = true
  const ext = segment ? el.segFormat.value : outputExtension(p)
  const started = Date.now()
  try {
    progress('Uploading… 0%', 0)
    const url = await upload(key, p.file, (f) => progress(`Uploading… ${Math.round(f * 100)}%`, Math.round(f * 100)))
    progress('Submitting the job…', null)
    const job = segment
      ? await submitSegmentation(key, { file_url: url, model_name: m.name, return_type: el.returnType.value as SegmentationJob['return_type'], extension: ext })
      : p.kind === 'photo'
      ? await submitPhoto(key, { model_name: m.name, img_url: url, extension: ext })
      : await submitVideo(key, { model_name: m.name, video_url: url, resolution: [Number(el.outW.value), Number(el.outH.value)], extension: ext, ...interpolation() })
    const charged = `job ${job.job_id}, ${job.consume_coins} coins`
    progress(`Queued: ${charged}`, 0)
    const done = await waitForJob(key, job.job_id, (s) => {
      const secs = Math.round((Date.now() - started) / 1000)
      if (s.status === 'CONVERTING') progress(`Converting… ${s.progress ?? 0}% (${secs} s, ${charged})`, s.progress ?? 0)
    })
    if (done.status === 'ERROR') {
      progress(`Failed after ${Math.round((Date.now() - started) / 1000)} s: job ${job.job_id}; the coins were refunded.`, 0)
      showError(`${done.message || 'The task failed, please try again'}${done.error_code ? ` (error ${done.error_code})` : ''}`)
      return
    }
    progress(`Completed in ${Math.round((Date.now() - started) / 1000)} s: ${charged}`, 100)
    await showResult(p, done, m.name, ext, segment)
    el.result.focus()
  } catch (err) {
    el.progressBox.hidden = true
    showError(describe(err))
  } finally {
    setBusy(false)
  }
})

// --- start -----------------------------------------------------------------------------------------------------
el.result.tabIndex = -1
getCatalog().then((c) => {
  catalog = c
  fillModels('photo')
  document.documentElement.dataset.ready = 'true'
  if (el.file.files?.[0]) pick(el.file.files[0]) // picked while the catalog was loading
}, (err) => showError(`The model catalog could not be loaded: ${describe(err)}`))
