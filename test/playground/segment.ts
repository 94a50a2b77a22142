/**
 * The playground's "Remove background" mode in a real browser: Debian's Chromium driven by playwright-core against a
 * spawned `lucent serve` (CPU engine, u2netp from data/test-models), as test/playground/browser.ts does for the
 * enhance mode. The mode lists the segmentation models of GET /api/models and prices the photo by their table; a real
 * photo is uploaded and submitted to POST /api/image-segmentation (return_type all); the result is shown over a
 * checkerboard: its PNG has transparent pixels, and where it does, the screenshot shows the checkerboard's two colours;
 * the mask and the thumbnail are shown and the download is the RGBA PNG. Errors: a video in this mode (refused by the
 * page), a photo whose pixels do not decode (the job's task-status message, refunded). No CSP violation.
 * About 15 s here (2-core box, most of it the server's start). Screenshot: test-artifacts/playground/segment.png.
 */
import t from 'tap'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { request } from 'undici'
import { chromiumPath, launchChromium } from '../support/chromium.js'
import { repoRoot, sharedData, tempDir, modelDir, addonBuilt, png } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { startLucent, createKeyCli } from '../support/serve.js'

const photo = path.join(sharedData, 'photos/0014.jpg') // 179 x 179, a subject u2netp finds (native/engine/tests/segment.rs)
const models = path.resolve(repoRoot, modelDir ?? 'data/test-models')
const artifacts = path.join(repoRoot, 'test-artifacts', 'playground')
const missing = !fs.existsSync(chromiumPath) ? `no Chromium at ${chromiumPath}` : !addonBuilt ? 'native addon not built'
  : !fs.existsSync(photo) ? `no ${photo}` : !fs.existsSync(path.join(models, 'seg/u2netp.onnx')) ? 'no seg/u2netp.onnx' : null
if (missing && process.env.CI) throw new Error(`playground segmentation test cannot run in CI: ${missing}`)

t.test('the playground removes a background: mode, price, job, checkerboard preview, mask, thumbnail, download, errors', { skip: missing ?? false }, async (t) => {
  const started = Date.now()
  execFileSync(process.execPath, [path.join(repoRoot, 'scripts/build-playground.mjs')], { stdio: 'ignore' })
  const dataDir = await tempDir(t)
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: models, LUCENT_LOG_LEVEL: 'warn' }
  delete env.LUCENT_PUBLIC_URL
  delete env.LUCENT_PLAYGROUND
  delete env.LUCENT_FILES_BASE_URL
  const { key } = createKeyCli(env, '--coins', '100', '--rate', '1000') // polling counts against the key's rate
  const { base } = await startLucent(t, { env })

  const { ctx, downloads } = await launchChromium(t, { viewport: { width: 1000, height: 900 }, deviceScaleFactor: 1 })
  const page = ctx.pages()[0] ?? await ctx.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (e) => pageErrors.push(e.message))
  await page.addInitScript(() => {
    const w = window as unknown as { cspViolations: string[] }
    w.cspViolations = []
    document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.effectiveDirective} ${e.blockedURI}`))
  })
  await page.goto(`${base}/`)
  await page.waitForSelector('html[data-ready=true]')
  await page.fill('#api-key', key)

  // --- the mode: segmentation models from GET /api/models, its options, its price --------------------------------
  t.equal(await page.isVisible('#seg-opts'), false, 'enhance mode first')
  await page.check('input[name=mode][value=segment]')
  t.equal(await page.textContent('#submit'), 'Remove background')
  const options = await page.$$eval('#model option', (os) => os.map((o) => ({ value: (o as HTMLOptionElement).value, disabled: (o as HTMLOptionElement).disabled })))
  const catalog = (await (await request(`${base}/api/models`)).body.json()) as { data: { models: Array<{ name: string; kind: string; available: boolean }> } }
  const seg = catalog.data.models.filter((m) => m.kind === 'segmentation')
  t.same(options, seg.map((m) => ({ value: m.name, disabled: !m.available })), 'the segmentation models, unavailable ones disabled')
  t.equal(await page.isVisible('#seg-opts'), true)
  t.equal(await page.isVisible('#photo-opts'), false)

  // a video in this mode: refused by the page before anything is sent
  const clip = path.join(dataDir, 'clip.mp4')
  await fsp.writeFile(clip, Buffer.alloc(64))
  await page.setInputFiles('#file', clip)
  await page.waitForSelector('#error:not([hidden])')
  t.equal(await page.textContent('#error'), 'Background removal takes a photo: choose a photo.')

  await page.setInputFiles('#file', photo)
  await page.waitForFunction(() => /coins/.test(document.getElementById('price')!.textContent ?? ''))
  t.equal(await page.isHidden('#error'), true, 'a photo clears the error')
  await page.selectOption('#model', 'u2netp')
  t.equal(await page.textContent('#price'), '5 coins: input 179 × 179 (0.032 MP)', 'priced by the segmentation table')
  await page.selectOption('#return-type', 'all')
  await page.selectOption('#seg-format', '.png')

  // --- the job ------------------------------------------------------------------------------------------------
  const t0 = Date.now()
  await page.click('#submit')
  await page.waitForFunction(() => /background transparent/.test(document.getElementById('result-info')!.textContent ?? ''), null, { timeout: 60_000 })
  t.comment(`u2netp through the page: ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  t.equal(await page.isHidden('#error'), true, 'no error')
  t.match(await page.textContent('#status'), /^Completed in \d+ s: job [0-9a-f]+, 5 coins$/)
  t.equal(await page.evaluate(() => (document.getElementById('progress') as HTMLProgressElement).value), 100)
  t.equal(await page.isVisible('#compare'), false, 'no before/after slider in this mode')
  t.equal(await page.textContent('#result-info'), '179 × 179 px, background transparent')

  // the preview: a checkerboard behind a PNG that has transparent pixels
  const bg = await page.evaluate(() => getComputedStyle(document.getElementById('cutout-box')!).backgroundImage)
  t.match(bg, /conic-gradient/, 'a checkerboard behind the result')
  const alpha = await page.evaluate(() => {
    const img = document.getElementById('cutout-img') as HTMLImageElement
    const c = document.createElement('canvas')
    c.width = img.naturalWidth
    c.height = img.naturalHeight
    const g = c.getContext('2d')!
    g.drawImage(img, 0, 0)
    const d = g.getImageData(0, 0, c.width, c.height).data
    const clear: Array<[number, number]> = []
    let opaque = 0
    for (let i = 0; i < c.width * c.height; i++) {
      if (d[i * 4 + 3] === 0) clear.push([i % c.width, Math.floor(i / c.width)])
      else if (d[i * 4 + 3] === 255) opaque++
    }
    return { clear, opaque, w: c.width, h: c.height }
  })
  t.ok(alpha.clear.length > 500 && alpha.opaque > 500, `the result is a cutout: ${alpha.clear.length} transparent, ${alpha.opaque} opaque pixels`)
  // what the browser draws there: the screenshot of the box shows the checkerboard through the transparent pixels
  const shot = await page.locator('#cutout-box').screenshot()
  const seen = await page.evaluate(async ({ b64, clear, w }) => {
    const bmp = await createImageBitmap(new Blob([Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0))], { type: 'image/png' }))
    const c = document.createElement('canvas')
    c.width = bmp.width
    c.height = bmp.height
    const g = c.getContext('2d')!
    g.drawImage(bmp, 0, 0)
    const d = g.getImageData(0, 0, c.width, c.height).data
    const f = bmp.width / w
    const count = { light: 0, dark: 0, other: 0 }
    for (const [x, y] of clear) {
      const i = (Math.min(c.height - 1, Math.floor((y + 0.5) * f)) * c.width + Math.min(c.width - 1, Math.floor((x + 0.5) * f))) * 4
      const [r, gr, b] = [d[i], d[i + 1], d[i + 2]]
      if (r > 245 && gr > 245 && b > 245) count.light++
      else if (Math.abs(r - 200) < 8 && Math.abs(gr - 200) < 8 && Math.abs(b - 200) < 8) count.dark++
      else count.other++
    }
    return { ...count, width: bmp.width }
  }, { b64: shot.toString('base64'), clear: alpha.clear, w: alpha.w })
  t.ok(seen.light > 100 && seen.dark > 100 && seen.other < (seen.light + seen.dark) * 0.05,
    `the checkerboard's two colours show where the result is transparent (${JSON.stringify(seen)})`)

  // mask and thumbnail (return_type all)
  const extras = await page.evaluate(() => ({
    mask: !document.getElementById('mask-fig')!.hidden && (document.getElementById('mask-img') as HTMLImageElement).naturalWidth,
    thumb: !document.getElementById('thumb-fig')!.hidden && (document.getElementById('thumb-img') as HTMLImageElement).naturalWidth,
    maskLink: (document.getElementById('mask-dl') as HTMLAnchorElement).download,
  }))
  t.same(extras, { mask: 179, thumb: 179, maskLink: '0014_mask.png' }, 'the mask and the thumbnail (never enlarged) shown')
  await fsp.mkdir(artifacts, { recursive: true })
  await page.screenshot({ path: path.join(artifacts, 'segment.png'), fullPage: true })

  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')])
  t.equal(download.suggestedFilename(), '0014_u2netp.png')
  const saved = path.join(downloads, 'saved.png')
  await download.saveAs(saved)
  const file = await fsp.readFile(saved)
  t.match(sniff(file), { kind: 'image', format: 'png', width: 179, height: 179 })
  t.equal(file[25], 6, 'RGBA')

  // --- a photo whose pixels do not decode: the job's message from task-status, refunded -------------------------
  const broken = path.join(dataDir, 'broken.png')
  const whole = png(64, 64)
  await fsp.writeFile(broken, whole.subarray(0, whole.length - 40)) // the header sniffs (accepted at submission), the pixels do not decode
  await page.setInputFiles('#file', broken)
  await page.waitForFunction(() => /^broken\.png: photo/.test(document.getElementById('file-info')!.textContent ?? ''))
  await page.click('#submit')
  await page.waitForSelector('#error:not([hidden])', { timeout: 60_000 })
  const failedJob = /job ([0-9a-f]+)/.exec((await page.textContent('#status')) ?? '')![1]
  const st = await request(`${base}/api/task-status`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify({ job_id: failedJob }) })
  const failed = ((await st.body.json()) as { data: { status: string; message: string; error_code: number } }).data
  t.match(failed, { status: 'ERROR', error_code: 100400002 })
  t.equal(await page.textContent('#error'), `${failed.message} (error ${failed.error_code})`, "the failed job's message")
  t.match(await page.textContent('#status'), /refunded/)
  t.equal(await page.isHidden('#result'), true, 'no result shown for a failed job')

  t.same(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations), [], 'no CSP violation')
  t.same(pageErrors, [], 'no uncaught script error')
  t.comment(`whole test: ${((Date.now() - started) / 1000).toFixed(1)} s`)
})
