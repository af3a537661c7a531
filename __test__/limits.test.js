'use strict'
// maxValueBytes: a runaway loader result or set() value is refused with a
// coded error and stored nowhere (not in memory, not in Redis).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('./redis-server')
const { Cache, kTesting } = require('..')
const h = require('./helpers')

const tooLarge = (e) =>
  e.code === 'ERR_HERDCACHE_VALUE_TOO_LARGE' && e instanceof RangeError && /maxValueBytes \(100\)/.test(e.message)

test('maxValueBytes is checked as an option', h.T, () => {
  for (const bad of [0, -1, 1.5, Infinity, NaN, 2 ** 40]) {
    assert.throws(
      () => new Cache({ maxValueBytes: bad }),
      (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION' && /maxValueBytes/.test(e.message),
      String(bad),
    )
  }
  assert.throws(
    () => new Cache({ maxValueBytes: '1' }),
    (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION',
  )
})

test('a loader result over maxValueBytes rejects every waiter once and is not stored', h.T, async (t) => {
  const cache = h.track(t, new Cache({ maxValueBytes: 100 }))
  let loads = 0
  const big = () => {
    loads++
    return { text: 'x'.repeat(200) }
  }
  const calls = Array.from({ length: 20 }, () => cache.getOrLoad('big', big))
  const results = await Promise.allSettled(calls)
  assert.equal(loads, 1)
  for (const r of results) assert.ok(r.status === 'rejected' && tooLarge(r.reason), String(r.reason))
  assert.equal(await cache.get('big'), undefined)
  assert.equal(cache.stats().size, 0)
  assert.equal(cache.stats().loadErrors, 1)
  // Exactly at the bound is fine; UTF-8 bytes count, not UTF-16 units.
  const exact = 'y'.repeat(98) // 100 bytes of JSON with the quotes
  assert.equal(await cache.getOrLoad('exact', () => exact), exact)
  const wide = 'é'.repeat(49) // 49 UTF-16 units, 98 + 2 bytes: fits
  assert.equal(await cache.getOrLoad('wide', () => wide), wide)
  await assert.rejects(
    cache.getOrLoad('wider', () => 'é'.repeat(50)),
    tooLarge,
  )
  await assert.rejects(
    cache.getOrLoad('emoji', () => '😀'.repeat(25)),
    tooLarge,
  ) // 50 units, 102 bytes
})

test('set() over maxValueBytes rejects and keeps what was there', h.T, async (t) => {
  const cache = h.track(t, new Cache({ maxValueBytes: 100 }))
  await cache.set('k', 'small')
  await assert.rejects(cache.set('k', ['z'.repeat(120)]), tooLarge)
  assert.equal(await cache.get('k'), 'small')
})

test('a background refresh over maxValueBytes keeps the stale value and reports the error', h.T, async (t) => {
  const errors = []
  const cache = h.track(
    t,
    new Cache({ maxValueBytes: 100, ttl: 1000, jitter: 0, beta: 0, onError: (e) => errors.push(e) }),
  )
  assert.equal(await cache.getOrLoad('k', () => 'v1'), 'v1')
  cache[kTesting].advanceClock(1500)
  const status = {}
  assert.equal(await cache.getOrLoad('k', () => 'w'.repeat(500), { status }), 'v1')
  assert.equal(status.outcome, 'stale')
  await h.waitFor(() => errors.length === 1, 'the refresh error')
  assert.ok(tooLarge(errors[0]))
  assert.equal(await cache.get('k'), 'v1')
})

test('Redis: a value over maxValueBytes never reaches Redis', h.T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = h.track(t, new Cache({ redis: redis.url, prefix: 'lim:', maxValueBytes: 100 }))
  await assert.rejects(
    cache.getOrLoad('big', () => 'x'.repeat(1000)),
    tooLarge,
  )
  await assert.rejects(cache.set('big2', 'x'.repeat(1000)), tooLarge)
  assert.equal(await redis.cmd('EXISTS', '{lim:big}', '{lim:big2}'), 0)
  // The fleet lock the failed load took is released (in the background, as
  // the call rejects), so the next load need not wait for its lease.
  await h.waitFor(async () => (await redis.cmd('EXISTS', '{lim:big}:lock')) === 0, 'the lock release', 2000)
  assert.equal(await cache.getOrLoad('big', () => 'ok'), 'ok')
})
