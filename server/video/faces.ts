/**
 * Temporal smoothing of per-frame face boxes for the face-aware video models (face_soft, portrait_restore),
 * so that restored regions neither jitter nor blink from frame to frame. Online (one frame at a time, no
 * look-ahead: it streams with the frames) and detector-agnostic: feed it each frame's detections, get the
 * boxes to restore in that frame.
 *
 * - Association: greedy by IoU (highest first, >= `iouMatch`) between detections and live tracks.
 * - Smoothing: per track, exponential smoothing of centre and size whose weight adapts to the motion
 *   (a one-euro-style filter): still faces get a low weight (jitter removed), moving faces a high weight (no lag).
 * - Dropouts: a track missed by the detector keeps its last box for up to `maxMissed` frames (no blinking),
 *   then ends. A new track is shown from its `minHits`-th consecutive detection (single-frame false
 *   positives are not restored) — except on the first frame, where every detection is shown at once.
 *
 * STATUS: the engine has no face detector / face-restoration network yet (catalog: face_soft_2x and
 * portrait_restore_* unavailable), so no job calls this yet; it is ready for the engine's per-frame detections.
 */
export interface Box { x: number; y: number; w: number; h: number; score?: number }
export interface TrackedBox extends Box { id: number }

export interface TrackerOptions {
  iouMatch?: number
  maxMissed?: number
  minHits?: number
  /** Smoothing weight for a still face (0..1, lower = smoother). */
  minAlpha?: number
  /** Motion (in box sizes per frame) at which the weight reaches 1. */
  fastMotion?: number
}

interface Track { id: number; box: Box; hits: number; missed: number; shown: boolean }

export function iou(a: Box, b: Box): number {
  const x1 = Math.max(a.x, b.x)
  const y1 = Math.max(a.y, b.y)
  const x2 = Math.min(a.x + a.w, b.x + b.w)
  const y2 = Math.min(a.y + a.h, b.y + b.h)
  const inter = Math.max(0, x2 - x1) * Math.max(0, y2 - y1)
  const union = a.w * a.h + b.w * b.h - inter
  return union > 0 ? inter / union : 0
}

export class FaceTracker {
  private tracks: Track[] = []
  private nextId = 1
  private frame = 0
  private readonly o: Required<TrackerOptions>

  constructor(opts: TrackerOptions = {}) {
    this.o = { iouMatch: 0.3, maxMissed: 5, minHits: 2, minAlpha: 0.25, fastMotion: 0.25, ...opts }
  }

  /** Detections of the next frame -> the smoothed boxes to restore in it. */
  update(dets: Box[]): TrackedBox[] {
    const first = this.frame++ === 0
    const pairs: Array<[number, number, number]> = []
    this.tracks.forEach((t, ti) => dets.forEach((d, di) => {
      const v = iou(t.box, d)
      if (v >= this.o.iouMatch) pairs.push([v, ti, di])
    }))
    pairs.sort((a, b) => b[0] - a[0])
    const usedT = new Set<number>()
    const usedD = new Set<number>()
    for (const [, ti, di] of pairs) {
      if (usedT.has(ti) || usedD.has(di)) continue
      usedT.add(ti)
      usedD.add(di)
      const t = this.tracks[ti]
      t.box = this.smooth(t.box, dets[di])
      t.hits++
      t.missed = 0
      if (t.hits >= this.o.minHits) t.shown = true
    }
    this.tracks.forEach((t, ti) => { if (!usedT.has(ti)) t.missed++ })
    this.tracks = this.tracks.filter((t) => t.missed <= this.o.maxMissed && (t.shown || t.missed === 0))
    dets.forEach((d, di) => {
      if (!usedD.has(di)) this.tracks.push({ id: this.nextId++, box: { ...d }, hits: 1, missed: 0, shown: first || this.o.minHits <= 1 })
    })
    return this.tracks.filter((t) => t.shown).map((t) => ({ id: t.id, ...t.box }))
  }

  private smooth(prev: Box, det: Box): Box {
    const pc = [prev.x + prev.w / 2, prev.y + prev.h / 2]
    const dc = [det.x + det.w / 2, det.y + det.h / 2]
    const size = Math.max(1, (prev.w + prev.h) / 2)
    const motion = Math.hypot(dc[0] - pc[0], dc[1] - pc[1]) / size
    const a = Math.min(1, this.o.minAlpha + (1 - this.o.minAlpha) * (motion / this.o.fastMotion))
    const cx = pc[0] + a * (dc[0] - pc[0])
    const cy = pc[1] + a * (dc[1] - pc[1])
    const w = prev.w + this.o.minAlpha * (det.w - prev.w) // size changes slowly: always smoothed
    const h = prev.h + this.o.minAlpha * (det.h - prev.h)
    return { x: cx - w / 2, y: cy - h / 2, w, h, score: det.score }
  }
}
