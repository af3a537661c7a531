'use strict'
// The load bulkhead (`maxConcurrentLoads`, `maxQueuedLoads`; lib/bulkhead.js): at most N loaders of
// distinct keys at once, the rest in a bounded FIFO queue; deadlines, signals and close() hold while
// queued; stale callers never wait for it. The Redis side is in __test__/redis/bulkhead.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T, track, sleep, deferred, rejectsWith, waitFor, within } = h

/** Loaders whose runs are recorded (start order, concurrency) and that settle when the test says. */
function loadGate() {
  const gate = {
    started: [],
    running: 0,
    peak: 0,
    pending: new Map(),
    /** A loader for `key` that resolves to `value` when `finish(key)` is called. */
    loader(key, value = key) {
      return () => {
        gate.started.push(key)
        gate.running++
        gate.peak = Math.max(gate.peak, gate.running)
        const d = deferred()
        gate.pending.set(key, d)
        return d.promise.finally(() => gate.running--).then(() => value)
      }
    },
    finish(key) {
      const d = gate.pending.get(key)
      assert.ok(d, `the loader of ${key} runs`)
      gate.pending.delete(key)
      d.resolve()
    },
  }
  return gate
}

/** A loader that sleeps `ms` and records how many ran at once. */
function timedLoaders(ms) {
  const seen = { running: 0, peak: 0, runs: 0 }
  const loader = (value) => async () => {
    seen.runs++
    seen.running++
    seen.peak = Math.max(seen.peak, seen.running)
    await sleep(ms)
    seen.running--
    return value
  }
  return { seen, loader }
}

test('never more than maxConcurrentLoads loaders at once, and every load completes', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 3 }))
  const { seen, loader } = timedLoaders(5)
  const keys = Array.from({ length: 40 }, (_, i) => `k${i}`)
  // Several callers per key: still one load per key, coalesced.
  const calls = keys.flatMap((key) => [0, 1, 2].map(() => cache.getOrLoad(key, loader(key))))
  const values = await Promise.all(calls)
  assert.deepEqual(
    values,
    keys.flatMap((key) => [key, key, key]),
  )
  assert.equal(seen.peak, 3, 'the cap is reached and never passed')
  assert.equal(seen.runs, 40, 'one load per key')
  const s = cache.stats()
  assert.equal(s.loadsQueued, 37, 'every load past the first 3 waited')
  assert.ok(s.loadQueueWaitMs >= 5, `queue wait is counted (${s.loadQueueWaitMs} ms)`)
  assert.deepEqual([s.loadSlotsUsed, s.loadQueueLength, s.loadsRejected], [0, 0, 0])
})

test('without maxConcurrentLoads there is no cap', T, async (t) => {
  const cache = track(t, new Cache())
  const { seen, loader } = timedLoaders(5)
  await Promise.all(Array.from({ length: 20 }, (_, i) => cache.getOrLoad(`k${i}`, loader(i))))
  assert.equal(seen.peak, 20)
  assert.equal(cache.stats().loadsQueued, 0)
})

test('loads past the cap run in the order they started (FIFO), and the gauges say what waits', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 2 }))
  const gate = loadGate()
  const keys = ['a', 'b', 'c', 'd', 'e', 'f']
  const calls = keys.map((key) => cache.getOrLoad(key, gate.loader(key)))
  assert.deepEqual(gate.started, ['a', 'b'], 'two run, the others wait')
  assert.deepEqual([cache.stats().loadSlotsUsed, cache.stats().loadQueueLength], [2, 4])
  // Free the slots out of order: the queue is still served oldest first.
  gate.finish('b')
  await waitFor(() => gate.started.length === 3, 'a third loader')
  gate.finish('a')
  await waitFor(() => gate.started.length === 4, 'a fourth loader')
  assert.deepEqual(gate.started, ['a', 'b', 'c', 'd'])
  gate.finish('d')
  await waitFor(() => gate.started.length === 5, 'a fifth loader')
  gate.finish('c')
  await waitFor(() => gate.started.length === 6, 'a sixth loader')
  assert.deepEqual(gate.started, keys)
  gate.finish('e')
  gate.finish('f')
  assert.deepEqual(await Promise.all(calls), keys)
  assert.equal(gate.peak, 2)
})

test(
  'past maxQueuedLoads a cold load rejects with ERR_HERDCACHE_LOAD_QUEUE_FULL; the queued ones complete',
  T,
  async (t) => {
    const cache = track(t, new Cache({ maxConcurrentLoads: 1, maxQueuedLoads: 2 }))
    const gate = loadGate()
    const running = cache.getOrLoad('a', gate.loader('a'))
    const queued = [cache.getOrLoad('b', gate.loader('b')), cache.getOrLoad('c', gate.loader('c'))]
    const refused = cache.getOrLoad('d', gate.loader('d'))
    const joined = cache.getOrLoad('d', gate.loader('d')) // the refused flight is over: a new one, refused too
    const error = await rejectsWith(refused, 'ERR_HERDCACHE_LOAD_QUEUE_FULL', Error)
    assert.match(error.message, /"d".*maxConcurrentLoads, maxQueuedLoads/)
    await rejectsWith(joined, 'ERR_HERDCACHE_LOAD_QUEUE_FULL')
    assert.equal(cache.stats().loadsRejected, 2)
    gate.finish('a')
    await waitFor(() => gate.pending.has('b'), 'b runs')
    gate.finish('b')
    await waitFor(() => gate.pending.has('c'), 'c runs')
    gate.finish('c')
    assert.deepEqual(await Promise.all([running, ...queued]), ['a', 'b', 'c'])
    assert.ok(!gate.started.includes('d'), 'a refused load never runs')
    // Room again: d loads.
    const later = cache.getOrLoad('d', gate.loader('d'))
    gate.finish('d')
    assert.equal(await later, 'd')
  },
)

test('maxQueuedLoads: 0 refuses every load past the cap at once', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 1, maxQueuedLoads: 0 }))
  const gate = loadGate()
  const running = cache.getOrLoad('a', gate.loader('a'))
  await rejectsWith(cache.getOrLoad('b', gate.loader('b')), 'ERR_HERDCACHE_LOAD_QUEUE_FULL')
  gate.finish('a')
  assert.equal(await running, 'a')
  assert.equal(cache.stats().loadsQueued, 0)
})

test('hardTimeout runs from the call: a load still queued then times out, and its loader never runs', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 1, hardTimeout: 150 }))
  const gate = loadGate()
  const started = performance.now()
  // This loader ignores its signal: given up at hardTimeout, it still runs, and holds its slot.
  const running = cache.getOrLoad('a', gate.loader('a'))
  await sleep(30)
  const queued = cache.getOrLoad('b', gate.loader('b'))
  await rejectsWith(running, 'ERR_HERDCACHE_TIMEOUT')
  await rejectsWith(queued, 'ERR_HERDCACHE_TIMEOUT')
  const waited = performance.now() - started - 30
  assert.ok(waited >= 140 && waited < 1000, `the queued load rejected at its hardTimeout (${waited.toFixed(0)} ms)`)
  assert.deepEqual(gate.started, ['a'], 'the queued loader never ran')
  const s = cache.stats()
  assert.deepEqual([s.loadQueueLength, s.loadSlotsUsed], [0, 1], 'it left the queue; the late loader holds its slot')
  assert.equal(s.timeouts, 2)
  // The late loader settles (its result is dropped): its slot frees, the next load runs at once.
  gate.finish('a')
  await waitFor(() => cache.stats().loadSlotsUsed === 0, 'the slot to free')
  const next = cache.getOrLoad('c', gate.loader('c'))
  assert.deepEqual(gate.started, ['a', 'c'])
  gate.finish('c')
  assert.equal(await next, 'c')
})

test("a caller's signal while queued rejects that caller at once; the others still get the value", T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 1 }))
  const gate = loadGate()
  const running = cache.getOrLoad('a', gate.loader('a'))
  const controller = new AbortController()
  const leaving = cache.getOrLoad('b', gate.loader('b'), { signal: controller.signal })
  const staying = cache.getOrLoad('b', gate.loader('b'))
  controller.abort()
  await assert.rejects(within(leaving, 500, 'the aborted caller'), { name: 'AbortError' })
  assert.deepEqual(gate.started, ['a'], 'b is still queued')
  gate.finish('a')
  await waitFor(() => gate.pending.has('b'), 'the shared load of b runs for the caller that stayed')
  gate.finish('b')
  assert.equal(await staying, 'b')
  assert.equal(await running, 'a')
})

test(
  'callers with a stale value are answered at once while the queue is full; the refresh runs later',
  T,
  async (t) => {
    const refreshes = []
    const cache = track(
      t,
      new Cache({ ttl: 1000, maxConcurrentLoads: 1, maxQueuedLoads: 1, waitUntil: (p) => refreshes.push(p) }),
    )
    h.setRandom(cache, { jitter: 0.5, xfetch: 1 })
    assert.equal(await cache.getOrLoad('s', () => 'v1'), 'v1')
    h.advance(cache, 1500) // stale
    const gate = loadGate()
    const running = cache.getOrLoad('a', gate.loader('a'))
    const queued = cache.getOrLoad('b', gate.loader('b'))
    // The queue is full: a stale read is still answered with the stale value at once, and its refresh,
    // which finds no room, is skipped.
    const status = {}
    assert.equal(await within(cache.getOrLoad('s', gate.loader('s', 'v2'), { status }), 100, 'a stale read'), 'v1')
    assert.equal(status.outcome, 'stale')
    assert.equal(refreshes.length, 1, 'a refresh was started')
    await refreshes[0]
    assert.equal(cache.stats().refreshesSkipped, 1, 'the refresh found no room: skipped, counted')
    assert.ok(!gate.started.includes('s'), 'the skipped refresh ran no loader')
    gate.finish('a')
    await waitFor(() => gate.pending.has('b'), 'b runs')
    gate.finish('b')
    assert.deepEqual(await Promise.all([running, queued]), ['a', 'b'])
    // Once the back-off of the skipped refresh passed, a stale read refreshes again, through a free slot.
    h.advance(cache, 1000)
    assert.equal(await cache.getOrLoad('s', gate.loader('s', 'v2')), 'v1')
    await waitFor(() => gate.pending.has('s'), 'the refresh runs')
    gate.finish('s')
    await Promise.all(refreshes)
    assert.equal(await cache.getOrLoad('s', gate.loader('s', 'v3')), 'v2')
  },
)

test('a queued refresh gives its place to a cold load, which has no value to serve', T, async (t) => {
  const errors = []
  const cache = track(
    t,
    new Cache({ ttl: 1000, maxConcurrentLoads: 1, maxQueuedLoads: 1, onError: (e) => errors.push(e) }),
  )
  h.setRandom(cache, { jitter: 0.5, xfetch: 1 })
  assert.equal(await cache.getOrLoad('s', () => 'v1'), 'v1')
  h.advance(cache, 1500)
  const gate = loadGate()
  const running = cache.getOrLoad('a', gate.loader('a'))
  assert.equal(await cache.getOrLoad('s', gate.loader('s', 'v2')), 'v1', 'stale, at once')
  assert.equal(cache.stats().loadQueueLength, 1, 'its refresh is queued')
  const cold = cache.getOrLoad('b', gate.loader('b'))
  await waitFor(() => cache.stats().refreshesSkipped === 1, 'the refresh is skipped')
  assert.equal(cache.stats().loadsRejected, 0, 'the cold load was not refused')
  gate.finish('a')
  await waitFor(() => gate.pending.has('b'), 'b runs')
  gate.finish('b')
  assert.deepEqual(await Promise.all([running, cold]), ['a', 'b'])
  assert.ok(!gate.started.includes('s'))
  assert.deepEqual(errors, [], 'a skipped refresh is not an error to anybody')
})

test('close() while loads are queued rejects them with ERR_HERDCACHE_CLOSED and resolves', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 1 }))
  const gate = loadGate()
  const running = cache.getOrLoad('a', ({ signal }) => {
    const load = gate.loader('a')()
    signal.addEventListener('abort', () => gate.finish('a'))
    return load
  })
  const queued = [cache.getOrLoad('b', gate.loader('b')), cache.getOrLoad('c', gate.loader('c'))]
  const closing = cache.close()
  for (const call of queued) await rejectsWith(call, 'ERR_HERDCACHE_CLOSED')
  await within(closing, 2000, 'close()')
  assert.equal(await running, 'a', 'the running loader settled when its signal aborted')
  assert.deepEqual(gate.started, ['a'], 'no queued loader ran')
  assert.deepEqual([cache.stats().loadSlotsUsed, cache.stats().loadQueueLength], [0, 0])
})

test('a loader that throws frees its slot for the next', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 1 }))
  const failure = deferred()
  const failing = cache.getOrLoad('a', () => failure.promise)
  let nextStarted = false
  const next = cache.getOrLoad('b', () => {
    nextStarted = true
    return 'b'
  })
  await sleep(5)
  assert.equal(nextStarted, false, 'b waits for the slot')
  failure.reject(new Error('boom'))
  await assert.rejects(failing, /boom/)
  assert.equal(await next, 'b')
  assert.equal(cache.stats().loadSlotsUsed, 0)
})

test('maxConcurrentLoads and maxQueuedLoads are checked: integers, and the queue bound needs the cap', T, async (t) => {
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    h.throwsWith(() => new Cache({ maxConcurrentLoads: bad }), 'ERR_HERDCACHE_INVALID_OPTION', RangeError)
  }
  h.throwsWith(() => new Cache({ maxConcurrentLoads: '4' }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  for (const bad of [-1, 2.5, Number.NaN]) {
    h.throwsWith(
      () => new Cache({ maxConcurrentLoads: 4, maxQueuedLoads: bad }),
      'ERR_HERDCACHE_INVALID_OPTION',
      RangeError,
    )
  }
  h.throwsWith(() => new Cache({ maxQueuedLoads: 10 }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  track(t, new Cache({ maxConcurrentLoads: 1, maxQueuedLoads: 0 }))
})

test('fleetMaxConcurrentLoads is checked: an integer >= 1, with Redis; it bounds the queue too', T, async (t) => {
  const redis = 'redis://127.0.0.1:1' // never connected: the options are checked first
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    h.throwsWith(() => new Cache({ redis, fleetMaxConcurrentLoads: bad }), 'ERR_HERDCACHE_INVALID_OPTION', RangeError)
  }
  h.throwsWith(() => new Cache({ redis, fleetMaxConcurrentLoads: '4' }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  const error = h.throwsWith(() => new Cache({ fleetMaxConcurrentLoads: 4 }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  assert.match(error.message, /fleetMaxConcurrentLoads.*redis/)
  // With it, maxQueuedLoads needs no maxConcurrentLoads: the per-process cap is the fleet's.
  const cache = track(t, new Cache({ redis, fleetMaxConcurrentLoads: 4, maxQueuedLoads: 10, redisTimeout: 50 }))
  assert.equal(cache.stats().fleetSlotsHeld, 0)
})
