'use strict'
// The load bulkhead with Redis: a load takes a slot only once the fleet decided this instance loads,
// the cap holds, and the fleet lock a queued load holds is kept (its lease extended) while it waits,
// so no other instance loads that key meanwhile.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, deferred } = require('../helpers')
const { sleep, waitFor, names } = require('./fixtures/fleet')

const T = { timeout: 15000 }

test('with Redis: never more than maxConcurrentLoads loaders at once, and every load is written', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'bulk-cap:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, maxConcurrentLoads: 2 }))
  await cache.ready()
  let running = 0
  let peak = 0
  const loader = (value) => async () => {
    running++
    peak = Math.max(peak, running)
    await sleep(20)
    running--
    return { value }
  }
  const keys = Array.from({ length: 12 }, (_, i) => `k${i}`)
  const values = await Promise.all(keys.flatMap((key) => [0, 1].map(() => cache.getOrLoad(key, loader(key)))))
  assert.deepEqual(
    values.map((v) => v.value),
    keys.flatMap((key) => [key, key]),
  )
  assert.equal(peak, 2, 'the cap is reached and never passed')
  const s = cache.stats()
  assert.equal(s.loadsQueued, 10)
  assert.equal(s.lockAcquired, 12, 'each key was locked once, before it queued')
  for (const key of keys) {
    assert.match(String(await redis.cmd('GET', names(prefix, key).value)), /^hc2 /, `${key} is in Redis`)
  }
})

test(
  'with Redis: the lock a queued load won is kept while it waits; another instance does not load the key',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'bulk-lock:'
    const lockTtl = 600
    const a = track(t, new Cache({ redis: redis.url, prefix, lockTtl, maxConcurrentLoads: 1 }))
    const b = track(t, new Cache({ redis: redis.url, prefix, lockTtl }))
    await Promise.all([a.ready(), b.ready()])
    const blocker = deferred()
    const blocking = a.getOrLoad('x', () => blocker.promise)
    // x's loader holds the only slot before y asks for one (their Redis steps race otherwise: y's lock
    // answered first ran y at once).
    await waitFor(() => a.stats().loadSlotsUsed === 1, "x's loader in a's slot", 3000)
    let aLoadedY = false
    const queued = a.getOrLoad('y', () => {
      aLoadedY = true
      return { from: 'a' }
    })
    const lock = names(prefix, 'y').lock
    await waitFor(async () => (await redis.cmd('EXISTS', lock)) === 1, 'a to take the lock of y', 3000)
    // The lock is in Redis a moment before the addon hands y to the leader (and its queue).
    await waitFor(() => a.stats().loadQueueLength === 1, 'y queued behind x, its lock held', 3000)
    // Several leases pass while y waits: the lease is extended all along.
    await sleep(lockTtl * 4)
    assert.equal(await redis.cmd('EXISTS', lock), 1, 'the lock of the queued load is still held')
    assert.equal(aLoadedY, false)
    let bLoaded = false
    const fromB = b.getOrLoad('y', () => {
      bLoaded = true
      return { from: 'b' }
    })
    await sleep(lockTtl * 2)
    assert.equal(bLoaded, false, 'b waits for the holder instead of loading')
    blocker.resolve({ x: 1 })
    assert.deepEqual(await blocking, { x: 1 })
    assert.deepEqual(await queued, { from: 'a' })
    assert.deepEqual(await fromB, { from: 'a' }, "b got a's value")
    assert.equal(bLoaded, false, 'the key was loaded once for the fleet')
    assert.equal(b.stats().lockContended, 1)
    assert.ok(a.stats().loadQueueWaitMs >= lockTtl * 4, `the wait is counted (${a.stats().loadQueueWaitMs} ms)`)
  },
)

test('with Redis: a key another instance is loading takes no slot here', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'bulk-join:'
  const a = track(t, new Cache({ redis: redis.url, prefix }))
  const b = track(t, new Cache({ redis: redis.url, prefix, maxConcurrentLoads: 1, maxQueuedLoads: 0 }))
  await Promise.all([a.ready(), b.ready()])
  const slow = deferred()
  const fromA = a.getOrLoad('z', () => slow.promise)
  await waitFor(async () => (await redis.cmd('EXISTS', names(prefix, 'z').lock)) === 1, 'a to lock z', 3000)
  // b's only slot is busy and it has no queue: a load of its own would be refused. Its call of z waits
  // for a's load instead, which needs no slot.
  const hold = deferred()
  const busy = b.getOrLoad('w', () => hold.promise)
  // w's lock is won and its loader holds the slot before v asks for one (their Redis steps race otherwise).
  await waitFor(() => b.stats().loadSlotsUsed === 1, "w's loader in b's slot", 3000)
  const fromB = b.getOrLoad('z', () => ({ from: 'b' }))
  const refused = b.getOrLoad('v', () => ({ from: 'b' }))
  await assert.rejects(refused, { code: 'ERR_HERDCACHE_LOAD_QUEUE_FULL' }, "a load of b's own is refused")
  await sleep(50)
  slow.resolve({ from: 'a' })
  assert.deepEqual(await fromA, { from: 'a' })
  assert.deepEqual(await fromB, { from: 'a' })
  assert.equal(b.stats().loadsRejected, 1, 'only v was refused: z never asked for a slot')
  hold.resolve(1)
  assert.equal(await busy, 1)
})
