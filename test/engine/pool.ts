/**
 * The engine pool (server/engine/pool.ts) with the real addon in its TypeScript threads (thread.ts): the typed
 * protocol end to end (init, enhance with progress, frames, failures with the addon's stable codes, abort),
 * and the threads' loader: a process that registered tsx in-process (as bin/lucent.js does) starts working
 * threads too. Skips until the addon is built.
 */
import t from 'tap'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { EnginePool, threadExecArgv } from '../../server/engine/pool.js'
import { addonBuilt, modelDir, png, repoRoot } from '../helper.js'

t.test('threadExecArgv: adds tsx when the process was not started with it, once', async (t) => {
  const added = threadExecArgv([])
  t.equal(added[0], '--import')
  t.match(added[1], /^file:.*\/tsx\//)
  t.same(threadExecArgv(['--import', 'tsx']), ['--import', 'tsx'])
  t.same(threadExecArgv(['--import=tsx', '--max-old-space-size=512']), ['--import=tsx', '--max-old-space-size=512'])
  t.same(threadExecArgv(added), added)
})

t.test('the typed protocol through real engine threads', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 1 })
  t.teardown(() => pool.close())
  const init = await pool.init()
  t.ok(init.ok, JSON.stringify(init))
  if (!init.ok) return
  t.equal(init.info.backend, 'cpu')
  t.ok(init.models.includes('general_2x') && init.models.includes('general_restore_2x'), 'model names from the catalog')

  const seen: number[] = []
  const out = await pool.enhance(png(24, 16), { model: 'general_2x', format: 'png' }, { onProgress: (p) => seen.push(p) })
  t.ok(out.ok, JSON.stringify(out.ok ? '' : out))
  if (out.ok) {
    t.same([out.width, out.height, out.format], [48, 32, 'png'])
    t.ok(Buffer.from(out.data).subarray(1, 4).equals(Buffer.from('PNG')), 'PNG bytes back')
  }
  t.ok(seen.length > 0 && seen.every((p, i) => p >= 0 && p <= 100 && (i === 0 || p >= seen[i - 1])), `progress on the port: ${seen.join(',')}`)

  const unknown = await pool.enhance(png(8, 8), { model: 'no_such_model', format: 'png' })
  t.match(unknown, { ok: false, error_code: 'unknown_model' }, "the addon's stable code crosses the thread boundary")
  const corrupt = await pool.enhance(png(8, 8).subarray(0, 40), { model: 'general_2x', format: 'png' })
  t.match(corrupt, { ok: false, error_code: 'decode_failed' })

  const ac = new AbortController()
  ac.abort()
  t.match(await pool.enhance(png(64, 64), { model: 'general_2x', format: 'png' }, { signal: ac.signal }), { ok: false, error_code: 'aborted' }, 'an aborted signal stops the task')

  const frames = Buffer.alloc(2 * 8 * 6 * 3, 0x80)
  const f = await pool.enhanceFrames(frames, { model: 'general_restore_2x', width: 8, height: 6, count: 2 })
  t.ok(f.ok, JSON.stringify(f.ok ? '' : f))
  if (f.ok) t.same([f.width, f.height, f.data.byteLength], [16, 12, 2 * 16 * 12 * 3])
  t.equal(frames.byteLength, 0, 'the frame buffer was transferred, not copied')
})

t.test('per-frame limits and the work meter through the threads (issue 29)', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const pool = new EnginePool({ workers: 1, modelDir, backend: 'cpu', threads: 1 })
  t.teardown(() => pool.close())
  // a catalog 4x model on frames whose output passes 36 MP (1600 x 1600 x4 = 41 MP): refused, not allocated
  const big = await pool.enhanceFrames(Buffer.alloc(1600 * 1600 * 3, 0x60), { model: 'general_restore_4x', width: 1600, height: 1600, count: 1 })
  t.match(big, { ok: false, error_code: 'image_too_large' })
  // an own model's limits reach the engine (the addon dropped them before): 1.2 MP frames over a 1 MP input limit
  const network = { path: path.join(modelDir, 'sr/realesr-animevideov3-x2'), multiple: 1, maxInMp: 1, maxOutMp: 36 }
  const own = await pool.enhanceFrames(Buffer.alloc(1200 * 1000 * 3, 0x60), { model: 'own', width: 1200, height: 1000, count: 1, network })
  t.match(own, { ok: false, error_code: 'image_too_large' })
  const small = await pool.enhanceFrames(Buffer.alloc(2 * 16 * 8 * 3, 0x60), { model: 'own', width: 16, height: 8, count: 2, network })
  t.match(small, { ok: true, width: 32, height: 16, work: 2 * 32 * 16 / 1e6 }, 'work: the output of each frame')
  // budgets: frames stop before the frame that would pass it; RIFE counts made frames only
  const frames = () => Buffer.alloc(2 * 16 * 8 * 3, 0x60)
  t.match(await pool.enhanceFrames(frames(), { model: 'general_restore_2x', width: 16, height: 8, count: 2, budget: 32 * 16 / 1e6 }), { ok: false, error_code: 'budget_exceeded' })
  const interp = await pool.interpolateFrames(frames(), { width: 16, height: 8, count: 2, positions: [0, 1], budget: 0 })
  t.match(interp, { ok: true, count: 2, work: 0 }, 'copies cost nothing')
})

t.test('a process with tsx registered in-process (bin/lucent.js) starts TypeScript engine threads', { skip: !addonBuilt && 'native addon not built' }, async (t) => {
  const script = `
    import { register } from 'tsx/esm/api'
    register()
    const { EnginePool } = await import(${JSON.stringify(path.join(repoRoot, 'server/engine/pool.ts'))})
    const pool = new EnginePool({ workers: 1, modelDir: ${JSON.stringify(modelDir)}, backend: 'cpu', threads: 1 })
    const r = await pool.init()
    await pool.close()
    process.stdout.write(JSON.stringify({ ok: r.ok, execArgv: process.execArgv }))
  `
  const file = path.join(t.testdir({ 'bin.mjs': script }), 'bin.mjs')
  const out = JSON.parse(execFileSync(process.execPath, [file], { cwd: repoRoot, env: { ...process.env, NODE_OPTIONS: '' } }).toString())
  t.notOk(out.execArgv.includes('--import'), `no loader flag in the process (${out.execArgv.filter((a: string) => a.startsWith('--')).join(' ')})`)
  t.equal(out.ok, true, 'the engine thread loaded and initialised')
})
