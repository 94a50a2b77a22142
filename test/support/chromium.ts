/** Debian's Chromium for the page tests (playwright-core drives it): where it is and one way to start it. */
import fs from 'node:fs'
import { chromium, type BrowserContext } from 'playwright-core'
import { tempDir } from '../helper.js'

type T = Parameters<typeof tempDir>[0]

export const chromiumPath = process.env.LUCENT_CHROMIUM || '/usr/bin/chromium'
/** A skip reason when Chromium is absent, else false. */
export const noChromium: string | false = fs.existsSync(chromiumPath) ? false : `no Chromium at ${chromiumPath}`

/** A headless Chromium with a fresh profile and downloads folder (both removed on teardown), closed on teardown. */
export async function launchChromium(t: T, view: { viewport?: { width: number, height: number }, deviceScaleFactor?: number } = {}): Promise<{ ctx: BrowserContext, downloads: string }> {
  const userDataDir = await tempDir(t, 'lucent-chromium-')
  const downloads = await tempDir(t, 'lucent-downloads-')
  const ctx = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    ...view,
    acceptDownloads: true,
    downloadsPath: downloads,
  })
  t.teardown(() => ctx.close())
  return { ctx, downloads }
}
