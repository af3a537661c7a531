'use strict'
// hardTimeout with many loads in flight: one timer per cache serves them all,
// each load is given up at its own deadline, and loads that settle in time
// are untouched.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

test('loads started at different times each time out at their own deadline', h.T, async (t) => {
  const cache = h.track(t, new Cache({ hardTimeout: 150, jitter: 0, beta: 0 }))
  const never = () => new Promise(() => {})
  const settledAt = {}
  const started = performance.now()
  const watch = (name, promise) =>
    promise.then(
      () => assert.fail(`${name} should have timed out`),
      (error) => {
        assert.equal(error.code, 'ERR_HERDCACHE_TIMEOUT')
        settledAt[name] = performance.now() - started
      },
    )
  const first = watch('first', cache.getOrLoad('first', never))
  await h.sleep(60)
  const second = watch('second', cache.getOrLoad('second', never))
  // A load that settles before its deadline is not touched by the timer.
  const quick = cache.getOrLoad('quick', async () => {
    await h.sleep(100)
    return 'in time'
  })
  await h.sleep(60)
  const third = watch('third', cache.getOrLoad('third', never))
  assert.equal(await quick, 'in time')
  await Promise.all([first, second, third])

  assert.ok(settledAt.first >= 150 - 5, `first gave up at ${settledAt.first} ms`)
  assert.ok(settledAt.second >= 210 - 5, `second gave up at ${settledAt.second} ms`)
  assert.ok(settledAt.third >= 270 - 5, `third gave up at ${settledAt.third} ms`)
  assert.ok(settledAt.first < settledAt.second && settledAt.second < settledAt.third)
  const s = cache.stats()
  assert.equal(s.timeouts, 3)
  assert.equal(s.inFlight, 0)
  assert.equal(await cache.get('quick'), 'in time')
})

test('after a timeout the next call starts a fresh load that can succeed', h.T, async (t) => {
  const cache = h.track(t, new Cache({ hardTimeout: 50 }))
  await assert.rejects(
    cache.getOrLoad('k', () => new Promise(() => {})),
    (e) => e.code === 'ERR_HERDCACHE_TIMEOUT',
  )
  assert.equal(await cache.getOrLoad('k', () => 'second try'), 'second try')
})

// The event loop is held past hardTimeout inside the loader (a pinned lag:
// the timer cannot fire before the loader's promise settles), so without
// the deadline check the late value would be stored and served.
const lag = (ms) => {
  const end = performance.now() + ms
  while (performance.now() < end) {}
}

test('a loader that settles after hardTimeout is given up even when the timer runs late', h.T, async (t) => {
  const cache = h.track(t, new Cache({ hardTimeout: 50 }))
  let signal
  const late = cache.getOrLoad('k', async (ctx) => {
    signal = ctx.signal
    lag(80)
    return 'late'
  })
  await assert.rejects(late, (e) => e.code === 'ERR_HERDCACHE_TIMEOUT')
  assert.equal(signal.aborted, true)
  assert.equal(await cache.get('k'), undefined, 'a value past the deadline is not stored')
  const s = cache.stats()
  assert.equal(s.timeouts, 1)
  assert.equal(s.inFlight, 0)
  assert.equal(await cache.getOrLoad('k', () => 'fresh'), 'fresh')
})

test('a loader that rejects after hardTimeout reports the timeout, as the timer would have', h.T, async (t) => {
  const cache = h.track(t, new Cache({ hardTimeout: 50 }))
  await assert.rejects(
    cache.getOrLoad('k', async () => {
      lag(80)
      throw new Error('late failure')
    }),
    (e) => e.code === 'ERR_HERDCACHE_TIMEOUT',
  )
  assert.equal(cache.stats().timeouts, 1)
})

test('a late background refresh leaves the stale value in place', h.T, async (t) => {
  const { kTesting } = require('..')
  const cache = h.track(t, new Cache({ hardTimeout: 50, ttl: 1000, jitter: 0, beta: 0 }))
  assert.equal(await cache.getOrLoad('k', () => 'v1'), 'v1')
  cache[kTesting].advanceClock(1500)
  assert.equal(
    await cache.getOrLoad('k', async () => {
      lag(80)
      return 'late'
    }),
    'v1',
  )
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to end')
  assert.equal(cache.stats().timeouts, 1)
  assert.equal(await cache.get('k'), 'v1')
})
