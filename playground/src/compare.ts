/**
 * The before/after comparison: the enhanced image underneath, the original over it clipped to the left part
 * (CSS custom property --pos), and a native range input over both as the control, so mouse, touch and keyboard
 * (arrows, Page Up/Down, Home/End) all work and assistive technology announces it as a slider.
 * Styles set through the CSSOM only (the page's CSP allows no inline style).
 */

export interface Compare {
  /** Loads both; resolves with the result's natural size. An original the browser cannot show (TIFF, HEIF)
   *  leaves the result alone (no slider); a result that does not load rejects. */
  show(beforeUrl: string, afterUrl: string): Promise<{ width: number; height: number; compared: boolean }>
  set(percent: number): void
}

export function compare(root: HTMLElement): Compare {
  const after = root.querySelector<HTMLImageElement>('img.after')!
  const before = root.querySelector<HTMLImageElement>('img.before')!
  const slider = root.querySelector<HTMLInputElement>('input[type=range]')!

  const apply = () => {
    const v = Math.max(0, Math.min(100, Number(slider.value)))
    root.style.setProperty('--pos', `${v}%`)
    slider.setAttribute('aria-valuetext', `${v}% original, ${100 - v}% enhanced`)
  }
  slider.addEventListener('input', apply)
  apply()

  const loaded = (img: HTMLImageElement, url: string) => new Promise<void>((resolve, reject) => {
    img.onload = () => resolve()
    img.onerror = () => reject(new Error(`the image at ${url} could not be loaded`))
    img.src = url
  })

  return {
    async show(beforeUrl, afterUrl) {
      const [b, a] = await Promise.allSettled([loaded(before, beforeUrl), loaded(after, afterUrl)])
      if (a.status === 'rejected') throw a.reason
      const compared = b.status === 'fulfilled'
      // the box keeps the result's aspect ratio and at most 70% of the viewport's height (style.css)
      root.style.setProperty('--ar', String(after.naturalWidth / Math.max(1, after.naturalHeight)))
      root.classList.toggle('single', !compared)
      slider.hidden = !compared
      return { width: after.naturalWidth, height: after.naturalHeight, compared }
    },
    set(percent) {
      slider.value = String(percent)
      apply()
    },
  }
}
