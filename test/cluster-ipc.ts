/**
 * The embedded cluster's IPC protocol (server/cluster.ts) over an in-process channel: a child's IpcQueue
 * enqueues into and removes from (cancel) the primary's queue through ClusterHub. The same classes over the
 * real node:cluster channel run in test/scaleout/cluster.ts (processes, HTTP).
 */
import t from 'tap'
import cluster, { type Worker } from 'node:cluster'
import { EventEmitter } from 'node:events'
import { ClusterHub, ClusterLink, IpcQueue } from '../server/cluster.js'
import { MemoryQueue } from '../server/queue/memory.js'
import { RateLimiter } from '../server/auth.js'

t.test('IpcQueue: enqueue and remove reach the primary queue', async (t) => {
  const primaryQueue = new MemoryQueue(10, 1)
  // one child: its process end (what ClusterLink reads/writes) and the primary's Worker handle for it
  const child = new EventEmitter() as unknown as NodeJS.Process
  const worker = {
    id: 1,
    isConnected: () => true,
    send: (m: unknown, _h: unknown, cb?: () => void) => { setImmediate(() => (child as unknown as EventEmitter).emit('message', m)); cb?.(); return true },
  } as unknown as Worker
  child.send = ((m: unknown) => { setImmediate(() => cluster.emit('message', worker, m)); return true }) as NodeJS.Process['send']
  const hub = new ClusterHub({
    state: () => ({ engine: { state: 'ready' }, queue: { ...primaryQueue.stats() }, worker: null }),
    enqueue: (id, keyId) => primaryQueue.enqueue(id, { keyId, force: true }),
    remove: (id) => primaryQueue.remove(id),
    rate: new RateLimiter(10, 10),
    metrics: async () => '',
  })
  hub.start()
  t.teardown(() => hub.stop())
  const q = new IpcQueue(new ClusterLink(child, 2000), 10)
  await q.enqueue('a', { keyId: 'k' })
  await q.enqueue('b', { keyId: 'k' })
  t.equal(primaryQueue.stats().waiting, 2, 'queued in the primary')
  t.equal(await q.remove('a'), true)
  t.equal(await q.remove('a'), false, 'gone already')
  t.equal(primaryQueue.stats().waiting, 1)
})
