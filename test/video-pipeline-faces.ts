/** Face box temporal smoothing (server/video/faces.ts): jitter reduced, no lag on motion, dropouts bridged. */
import t from 'tap'
import { FaceTracker, iou, type Box } from '../server/video/faces.js'

// Deterministic pseudo-random jitter in [-1, 1).
function rng(seed: number) {
  let x = seed >>> 0
  return () => { x = (x * 1664525 + 1013904223) >>> 0; return x / 2 ** 31 - 1 }
}

/** Mean frame-to-frame movement of the box centre. */
function wobble(boxes: Box[]): number {
  let s = 0
  for (let i = 1; i < boxes.length; i++) {
    s += Math.hypot(boxes[i].x + boxes[i].w / 2 - boxes[i - 1].x - boxes[i - 1].w / 2, boxes[i].y + boxes[i].h / 2 - boxes[i - 1].y - boxes[i - 1].h / 2)
  }
  return s / (boxes.length - 1)
}

t.test('iou', async (t) => {
  t.equal(iou({ x: 0, y: 0, w: 10, h: 10 }, { x: 0, y: 0, w: 10, h: 10 }), 1)
  t.equal(iou({ x: 0, y: 0, w: 10, h: 10 }, { x: 20, y: 0, w: 10, h: 10 }), 0)
  t.equal(iou({ x: 0, y: 0, w: 10, h: 10 }, { x: 5, y: 0, w: 10, h: 10 }), 50 / 150)
})

t.test('a still face: detector jitter smoothed away, one stable track', async (t) => {
  const r = rng(7)
  const tr = new FaceTracker()
  const raw: Box[] = []
  const out: Box[] = []
  const ids = new Set<number>()
  for (let f = 0; f < 60; f++) {
    const d = { x: 100 + 3 * r(), y: 80 + 3 * r(), w: 64 + 2 * r(), h: 64 + 2 * r() }
    raw.push(d)
    const o = tr.update([d])
    t.equal(o.length, 1)
    ids.add(o[0].id)
    out.push(o[0])
  }
  t.equal(ids.size, 1, 'same track all along')
  t.ok(wobble(out.slice(10)) < wobble(raw.slice(10)) / 2, `wobble ${wobble(out.slice(10)).toFixed(2)} < raw ${wobble(raw.slice(10)).toFixed(2)} / 2`)
})

t.test('a moving face is followed without lag', async (t) => {
  const tr = new FaceTracker()
  let last: Box | undefined
  for (let f = 0; f < 40; f++) {
    const o = tr.update([{ x: 10 + 12 * f, y: 50, w: 60, h: 60 }])
    last = o[0]
  }
  t.ok(Math.abs(last!.x - (10 + 12 * 39)) < 6, `x ${last!.x.toFixed(1)} vs ${10 + 12 * 39}`)
})

t.test('dropouts bridged, a lost face ends, a one-frame false positive is not shown', async (t) => {
  const tr = new FaceTracker({ maxMissed: 3 })
  const face = { x: 50, y: 50, w: 40, h: 40 }
  t.equal(tr.update([face]).length, 1, 'first frame shown at once')
  t.equal(tr.update([]).length, 1, 'missed frame 1: kept')
  t.equal(tr.update([]).length, 1, 'missed frame 2: kept')
  t.equal(tr.update([face]).length, 1, 'found again')
  const fp = { x: 300, y: 300, w: 30, h: 30 }
  const withFp = tr.update([face, fp])
  t.equal(withFp.length, 1, 'new detection not shown on its first frame')
  t.equal(tr.update([face]).length, 1, 'and forgotten when it does not come back')
  for (let i = 0; i < 4; i++) tr.update([])
  t.equal(tr.update([]).length, 0, 'gone after maxMissed frames')
})
