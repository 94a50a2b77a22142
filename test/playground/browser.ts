/**
 * The playground in a real browser: Debian's Chromium driven by playwright-core against a spawned `lucent serve`
 * (CPU engine). An invalid key shows the API's message; a face photo runs through face_2x; the result's natural
 * size is 2x; the comparison slider moves by mouse and keyboard; the download is the 2x PNG; the key survives a
 * reload; a phone-sized viewport has no horizontal scroll; a short video comes back side by side at 2x; a failing job shows its task-status message; the page works under its CSP with no violation
 * (and a deliberate eval() shows violations would be caught).
 *
 * Screenshots: test-artifacts/playground/{desktop,phone}.png (git-ignored). docs/playground.md's docs/playground.png is made
 * by the same test with LUCENT_PLAYGROUND_README_SHOT=docs/playground.png, from a synthetic picture (the shared
 * evaluation faces stay out of commits).
 * Chromium: $LUCENT_CHROMIUM, else /usr/bin/chromium (.ci/run installs it); skipped when absent, except under CI.
 */
import t from 'tap'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { spawnSync, execFileSync } from 'node:child_process'
import { request } from 'undici'
import { type Page } from 'playwright-core'
import { chromiumPath, launchChromium } from '../support/chromium.js'
import { repoRoot, sharedData, tempDir, modelDir, addonBuilt } from '../helper.js'
import { sniff } from '../../server/media/sniff.js'
import { startLucent, createKeyCli, lucentCli } from '../support/serve.js'

const face = path.join(sharedData, 'faces/cropped/0143.png')
const readmeShot = process.env.LUCENT_PLAYGROUND_README_SHOT
const artifacts = path.join(repoRoot, 'test-artifacts', 'playground')
const hasFfmpeg = spawnSync('ffmpeg', ['-version']).status === 0
const missing = !fs.existsSync(chromiumPath) ? `no Chromium at ${chromiumPath}` : !addonBuilt ? 'native addon not built' : !fs.existsSync(face) ? `no ${face}` : null
if (missing && process.env.CI) throw new Error(`playground browser test cannot run in CI: ${missing}`)

/** A small PNG (w x h) drawn in the browser: the face scaled down (area-like smoothing), or a synthetic scene. */
async function makeInput(page: Page, w: number, h: number, source: Buffer | null): Promise<Buffer> {
  const dataUrl = source ? `data:image/png;base64,${source.toString('base64')}` : null
  const b64 = await page.evaluate(async ({ w, h, dataUrl }) => {
    const c = document.createElement('canvas')
    c.width = w
    c.height = h
    const g = c.getContext('2d')!
    if (dataUrl) {
      const img = new Image()
      img.src = dataUrl
      await img.decode()
      g.imageSmoothingQuality = 'high'
      g.drawImage(img, 0, 0, w, h)
    } else {
      const sky = g.createLinearGradient(0, 0, 0, h)
      sky.addColorStop(0, '#1d4e89')
      sky.addColorStop(1, '#f6ae2d')
      g.fillStyle = sky
      g.fillRect(0, 0, w, h)
      g.fillStyle = '#fff3b0'
      g.beginPath()
      g.arc(w * 0.2, h * 0.5, h * 0.14, 0, Math.PI * 2)
      g.fill()
      g.fillStyle = '#23395b'
      g.beginPath()
      g.moveTo(0, h)
      g.lineTo(w * 0.3, h * 0.45)
      g.lineTo(w * 0.55, h * 0.8)
      g.lineTo(w * 0.8, h * 0.55)
      g.lineTo(w, h * 0.9)
      g.lineTo(w, h)
      g.fill()
      g.fillStyle = '#ffffff'
      g.font = `bold ${Math.round(h * 0.22)}px sans-serif`
      g.textAlign = 'center'
      g.fillText('Lucent', w / 2, h * 0.3)
    }
    return c.toDataURL('image/png').split(',')[1]
  }, { w, h, dataUrl })
  return Buffer.from(b64, 'base64')
}

t.test('the playground in Chromium: key, upload, face_2x, compare, download, phone, CSP', { skip: missing ?? false }, async (t) => {
  // the page from the current sources
  execFileSync(process.execPath, [path.join(repoRoot, 'scripts/build-playground.mjs')], { stdio: 'ignore' })
  const dataDir = await tempDir(t)
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, HOST: '127.0.0.1', LUCENT_MODEL_DIR: modelDir, LUCENT_LOG_LEVEL: 'warn' }
  delete env.LUCENT_PUBLIC_URL
  delete env.LUCENT_PLAYGROUND
  // polling counts against the key's rate: a high one
  const { key } = createKeyCli(env, '--coins', '1000', '--rate', '1000')
  // an own model (bring your own model): offered by the page like the catalog's
  lucentCli(env, 'models', 'add', path.join(repoRoot, 'native/models/tests/goldens/compact_x4_nf16_nc2.0.pth'), '--name', 'mine_4x', '--kind', 'photo')
  const { base } = await startLucent(t, { env })

  const { ctx, downloads } = await launchChromium(t, { viewport: { width: 1000, height: 900 } })
  const page = ctx.pages()[0] ?? await ctx.newPage()
  const consoleErrors: string[] = []
  const pageErrors: string[] = []
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()) })
  page.on('pageerror', (e) => pageErrors.push(e.message))
  await page.addInitScript(() => {
    const w = window as unknown as { cspViolations: string[] }
    w.cspViolations = []
    document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.effectiveDirective} ${e.blockedURI}`))
  })

  // the input: a small face (96 px: face_2x on the CPU backend takes seconds), or docs/playground.md's synthetic scene
  const blank = await ctx.newPage()
  const input = readmeShot ? await makeInput(blank, 160, 100, null) : await makeInput(blank, 96, 96, await fsp.readFile(face))
  await blank.close()
  const inputFile = path.join(dataDir, readmeShot ? 'scene.png' : 'face.png')
  await fsp.writeFile(inputFile, input)
  const inSize = sniff(input)!
  const want = { width: inSize.width! * 2, height: inSize.height! * 2 }

  const res = await page.goto(`${base}/`)
  t.equal(res!.status(), 200)
  t.match(res!.headers()['content-security-policy'], /script-src 'self'/, 'served with its CSP')
  await page.waitForSelector('html[data-ready=true]')
  t.ok(await page.locator('#model option[value=face_2x]').count(), 'models from GET /api/models')

  // --- keyboard: Tab goes key -> Show -> Forget -> file picker, each with a visible focus ring ---------------------
  await page.focus('#api-key')
  const ring = () => page.evaluate(() => {
    const a = document.activeElement as HTMLElement
    return { id: a.id, outline: getComputedStyle(a.id === 'file' ? document.getElementById('drop')! : a).outlineStyle }
  })
  const order = []
  for (let i = 0; i < 3; i++) {
    await page.keyboard.press('Tab')
    order.push(await ring())
  }
  t.same(order, [{ id: 'key-show', outline: 'solid' }, { id: 'key-forget', outline: 'solid' }, { id: 'file', outline: 'solid' }], 'focus order and rings')

  // --- an invalid key: the API's own message is shown ------------------------------------------------------------
  const bad = 'lk_not-a-real-key'
  const apiSays = await request(`${base}/api/oss/upload`, { method: 'POST', headers: { apikey: bad } })
  const apiMessage = ((await apiSays.body.json()) as { message: string }).message
  await page.fill('#api-key', bad)
  await page.setInputFiles('#file', inputFile)
  await page.waitForFunction(() => /coins/.test(document.getElementById('price')!.textContent ?? ''))
  await page.selectOption('#model', 'face_2x')
  t.match(await page.textContent('#price'), /^10 coins: output \d+ × \d+/, 'the price before submission')
  await page.selectOption('#model', 'mine_4x')
  t.match(await page.textContent('#price'), /^\d+ coins: output \d+ × \d+/, "an own model, priced by the page from its price table")
  await page.selectOption('#model', 'face_2x')
  await page.click('#submit')
  await page.waitForSelector('#error:not([hidden])', { timeout: 30_000 })
  t.equal(await page.textContent('#error'), `${apiMessage} (error 110400000)`, "the API's message for a rejected key")
  t.equal(apiMessage, 'api_key is not valid')

  // --- the real key: upload, face_2x, progress, result -----------------------------------------------------------
  await page.fill('#api-key', key)
  t.equal(await page.evaluate(() => localStorage.getItem('lucent.playground.apiKey')), key, 'key kept in localStorage')
  const t0 = Date.now()
  await page.click('#submit')
  await page.waitForSelector('#error', { state: 'hidden' })
  await page.waitForSelector('#result:not([hidden])', { timeout: 240_000 })
  t.comment(`face_2x through the page: ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  t.equal(await page.isHidden('#error'), true, 'no error shown')
  t.match(await page.textContent('#status'), /^Completed in \d+ s: job [0-9a-f]+, 10 coins$/)
  const natural = await page.evaluate(() => {
    const img = document.getElementById('after') as HTMLImageElement
    return { width: img.naturalWidth, height: img.naturalHeight, src: img.src }
  })
  t.same({ width: natural.width, height: natural.height }, want, "the result's natural size is 2x the input")
  t.match(natural.src, new RegExp(`^${base}/files/r/`), 'the result link of the API')
  t.match(await page.textContent('#result-info'), `${want.width} × ${want.height} px`)
  await fsp.mkdir(artifacts, { recursive: true })
  await page.screenshot({ path: path.join(artifacts, 'desktop.png'), fullPage: true })

  // --- the comparison slider: keyboard ----------------------------------------------------------------------------
  const state = () => page.evaluate(() => ({
    value: Number((document.getElementById('slider') as HTMLInputElement).value),
    pos: getComputedStyle(document.getElementById('compare')!).getPropertyValue('--pos').trim(),
    clip: getComputedStyle(document.getElementById('before')!).clipPath,
    text: document.getElementById('slider')!.getAttribute('aria-valuetext'),
  }))
  t.match(await state(), { value: 50, pos: '50%' })
  await page.focus('#slider')
  await page.keyboard.press('ArrowRight')
  await page.keyboard.press('ArrowRight')
  t.match(await state(), { value: 52, pos: '52%', text: '52% original, 48% enhanced' }, 'arrow keys move it')
  const outline = await page.evaluate(() => getComputedStyle(document.querySelector('#compare .knob')!).outlineStyle)
  t.equal(outline, 'solid', 'the handle shows keyboard focus')
  await page.keyboard.press('Home')
  const home = await state()
  t.match(home, { value: 0, pos: '0%' }, 'Home: all enhanced')
  t.match(home.clip, /inset\(0(px)? 100%/, 'the original is clipped away')
  await page.keyboard.press('End')
  t.match(await state(), { value: 100, pos: '100%' }, 'End: all original')

  // --- ... and mouse: a click and a drag ---------------------------------------------------------------------------
  const box = (await page.locator('#compare').boundingBox())!
  await page.mouse.click(box.x + box.width * 0.25, box.y + box.height / 2)
  const clicked = await state()
  t.ok(Math.abs(clicked.value - 25) <= 3, `a click at 25% of the width sets ${clicked.value}`)
  await page.mouse.move(box.x + box.width * 0.25, box.y + box.height / 2)
  await page.mouse.down()
  await page.mouse.move(box.x + box.width * 0.8, box.y + box.height / 2, { steps: 8 })
  await page.mouse.up()
  const dragged = await state()
  t.ok(Math.abs(dragged.value - 80) <= 3, `a drag to 80% sets ${dragged.value}`)
  t.equal(dragged.pos, `${dragged.value}%`)

  // --- download --------------------------------------------------------------------------------------------------
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')])
  t.equal(download.suggestedFilename(), `${path.basename(inputFile, '.png')}_face_2x.png`)
  const saved = path.join(downloads, 'saved.png')
  await download.saveAs(saved)
  const file = await fsp.readFile(saved)
  t.match(sniff(file), { kind: 'image', format: 'png', ...want }, 'the downloaded file is the 2x PNG')

  // --- phone-sized viewport --------------------------------------------------------------------------------------
  await page.setViewportSize({ width: 375, height: 740 })
  await page.waitForTimeout(100)
  const widths = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
    widest: Math.max(...[...document.querySelectorAll('body *')].map((e) => e.getBoundingClientRect().right)),
  }))
  t.ok(widths.scroll <= widths.client, `no horizontal scroll at 375 px (scrollWidth ${widths.scroll}, clientWidth ${widths.client})`)
  t.ok(widths.widest <= widths.client + 0.5, `nothing sticks out on the right (${widths.widest})`)
  await page.screenshot({ path: path.join(artifacts, 'phone.png'), fullPage: true })

  // --- the key survives a reload ----------------------------------------------------------------------------------
  await page.setViewportSize({ width: 1000, height: 900 })
  await page.reload()
  await page.waitForSelector('html[data-ready=true]')
  t.equal(await page.inputValue('#api-key'), key)

  // --- a job that fails: its status message is shown (and the coins are back) ------------------------------------
  const cut = path.join(dataDir, 'cut.png')
  await fsp.writeFile(cut, input.subarray(0, input.length - 40)) // header intact (accepted), data cut (engine fails)
  // dropped on the zone this time (a DataTransfer holding the file, as a drag from the desktop delivers it)
  const dataTransfer = await page.evaluateHandle((b64) => {
    const dt = new DataTransfer()
    dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], 'cut.png', { type: 'image/png' }))
    return dt
  }, (await fsp.readFile(cut)).toString('base64'))
  await page.dispatchEvent('#drop', 'dragover', { dataTransfer })
  t.equal(await page.evaluate(() => document.getElementById('drop')!.classList.contains('over')), true, 'the zone shows a drag over it')
  await page.dispatchEvent('#drop', 'drop', { dataTransfer })
  await page.waitForFunction(() => /^cut\.png: photo/.test(document.getElementById('file-info')!.textContent ?? ''))
  await page.waitForFunction(() => /coins/.test(document.getElementById('price')!.textContent ?? ''))
  await page.selectOption('#model', 'face_2x')
  await page.click('#submit')
  await page.waitForSelector('#error:not([hidden])', { timeout: 120_000 })
  const failedJob = /job ([0-9a-f]+)/.exec((await page.textContent('#status')) ?? '')![1]
  const st = await request(`${base}/api/task-status`, { method: 'POST', headers: { apikey: key, 'content-type': 'application/json' }, body: JSON.stringify({ job_id: failedJob }) })
  const failed = ((await st.body.json()) as { data: { status: string; message: string; error_code: number } }).data
  t.equal(failed.status, 'ERROR')
  t.equal(await page.textContent('#error'), `${failed.message} (error ${failed.error_code})`, "the failed job's message from task-status")
  t.match(await page.textContent('#status'), /refunded/)
  t.equal(await page.isHidden('#result'), true, 'no result shown for a failed job')

  // --- a video: side by side, at the resolution asked for ----------------------------------------------------------
  if (hasFfmpeg) {
    const clip = path.join(dataDir, 'clip.mp4')
    execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=96x64:rate=8', '-t', '1', '-pix_fmt', 'yuv420p', '-c:v', 'libx264', clip])
    await page.setInputFiles('#file', clip)
    await page.waitForFunction(() => /coins/.test(document.getElementById('price')!.textContent ?? ''))
    await page.selectOption('#model', 'general_restore_2x')
    t.same([await page.inputValue('#out-w'), await page.inputValue('#out-h')], ['192', '128'], 'output resolution: input x scale')
    t.match(await page.textContent('#price'), /^about 10 coins for 1\.0 s: 10 coins per second at 720p/)
    t.equal(await page.isVisible('#format'), false, 'no photo format choice for a video')
    await page.click('#submit')
    await page.waitForSelector('#result:not([hidden])', { timeout: 240_000 })
    t.equal(await page.isVisible('#compare'), false, 'no slider for a video')
    await page.waitForFunction(() => (document.getElementById('v-after') as HTMLVideoElement).videoWidth > 0 && (document.getElementById('v-before') as HTMLVideoElement).videoWidth > 0)
    const v = await page.evaluate(() => {
      const [b, a] = ['v-before', 'v-after'].map((id) => document.getElementById(id) as HTMLVideoElement)
      const [rb, ra] = [b, a].map((x) => x.getBoundingClientRect())
      return { before: [b.videoWidth, b.videoHeight], after: [a.videoWidth, a.videoHeight], sameRow: Math.abs(rb.top - ra.top) < 1 && rb.right <= ra.left }
    })
    t.same(v.before, [96, 64])
    t.same(v.after, [192, 128], 'the enhanced video plays at the resolution asked for')
    t.ok(v.sameRow, 'original and result side by side')
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')])
    t.equal(dl.suggestedFilename(), 'clip_general_restore_2x.mp4')
    await page.screenshot({ path: path.join(artifacts, 'video.png'), fullPage: true })
  } else {
    t.comment('no ffmpeg: the video part is skipped')
  }

  // --- CSP: nothing was blocked, no script error; a deliberate eval() is caught (the check can fail) ---------------
  const violations = await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations)
  t.same(violations, [], 'no CSP violation')
  t.same(pageErrors, [], 'no uncaught script error')
  t.same(consoleErrors.filter((m) => !/Failed to load resource: the server responded with a status of 400/.test(m)), [], 'no console error but the rejected key\'s 400')
  // positive control: an inline script and an inline style attribute, added the way an injection would
  const ran = await page.evaluate(async () => {
    const w = window as unknown as { inlineRan?: boolean; cspViolations: string[] }
    const s = document.createElement('script')
    s.textContent = 'window.inlineRan = true'
    document.head.append(s)
    document.body.setAttribute('style', 'background: red')
    await new Promise((r) => setTimeout(r, 200))
    return { inline: w.inlineRan === true, background: getComputedStyle(document.body).backgroundColor }
  })
  t.equal(ran.inline, false, 'an inline script does not run under the CSP')
  t.not(ran.background, 'rgb(255, 0, 0)', 'an inline style is not applied')
  const caught = await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations)
  t.match(caught.map((v) => v.split(' ')[0]).sort(), ['script-src-elem', 'style-src-attr'], 'both reported as violations: the check above can fail')

  if (readmeShot) {
    // docs/playground.md's screenshot: the finished comparison, desktop width
    await page.setViewportSize({ width: 900, height: 1200 })
    await page.goto(`${base}/`)
    await page.waitForSelector('html[data-ready=true]')
    await page.setInputFiles('#file', inputFile)
    await page.waitForFunction(() => /coins/.test(document.getElementById('price')!.textContent ?? ''))
    await page.selectOption('#model', 'face_2x')
    await page.click('#submit')
    await page.waitForSelector('#result:not([hidden])', { timeout: 240_000 })
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
    await page.screenshot({ path: path.resolve(repoRoot, readmeShot), fullPage: true })
    t.ok(fs.statSync(path.resolve(repoRoot, readmeShot)).size < 300 * 1024, `${readmeShot} under 300 KB`)
  }
})
