'use strict'
// Adaptive entries: the loader sets its entry's TTLs from what it loaded (ctx.setTtl), or stores nothing
// (ctx.noStore) while its callers still get the value.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const make = (t, opts = {}) => h.track(t, new Cache({ ttl: 60000, hardTtl: 600000, jitter: 0, beta: 0, ...opts }))

async function outcome(cache, key, loader = () => 'reloaded') {
  const status = {}
  await cache.getOrLoad(key, loader, { status })
  return status.outcome
}

test('ctx.setTtl(ttl, hardTtl) sets this entry’s soft and hard TTL', T, async (t) => {
  const cache = make(t)
  const value = await cache.getOrLoad('token', (ctx) => {
    ctx.setTtl(2000, 5000)
    return { token: 'abc', expiresIn: 200 }
  })
  assert.deepEqual(value, { token: 'abc', expiresIn: 200 })
  h.advance(cache, 1900)
  assert.equal(await outcome(cache, 'token'), 'hit')
  h.advance(cache, 100)
  const failing = () => Promise.reject(new Error('auth server down'))
  assert.equal(await outcome(cache, 'token', failing), 'stale', 'fresh for 2 s only')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to fail')
  h.advance(cache, 2900)
  assert.equal(await outcome(cache, 'token', failing), 'stale')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to fail')
  h.advance(cache, 100)
  assert.equal(await outcome(cache, 'token'), 'miss', 'served stale up to its hard TTL, 5 s')
})

test('ctx.setTtl(ttl) alone keeps the hardTtl/ttl ratio; other keys keep the cache’s TTLs', T, async (t) => {
  const cache = make(t, { ttl: 10000, hardTtl: 100000 })
  await cache.getOrLoad('short', (ctx) => {
    ctx.setTtl(1000)
    return 1
  })
  await cache.getOrLoad('plain', () => 2)
  const failing = () => Promise.reject(new Error('down'))
  h.advance(cache, 1000)
  assert.equal(await outcome(cache, 'short', failing), 'stale', 'fresh for 1 s')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to fail')
  h.advance(cache, 8900)
  assert.equal(await outcome(cache, 'short', failing), 'stale', 'still there at 9.9 s')
  assert.equal(await outcome(cache, 'plain'), 'hit', 'the cache’s ttl, 10 s')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to fail')
  h.advance(cache, 100)
  assert.equal(await outcome(cache, 'short', () => 1), 'miss', 'hard TTL 1 s × 10 = 10 s: gone')
})

test('ctx.setTtl validates its arguments like the call options', T, async (t) => {
  const cache = make(t)
  const cases = [
    [['60'], TypeError],
    [[undefined], TypeError],
    [[null], TypeError],
    [[0], RangeError],
    [[-5], RangeError],
    [[Number.NaN], RangeError],
    [[Number.POSITIVE_INFINITY], RangeError],
    [[2 ** 41], RangeError],
    [[100, '200'], TypeError],
    [[100, 0], RangeError],
    [[100, 50], RangeError],
  ]
  for (const [i, [args, Kind]] of cases.entries()) {
    let thrown
    const value = await cache.getOrLoad(`k${i}`, (ctx) => {
      try {
        ctx.setTtl(...args)
      } catch (error) {
        thrown = error
      }
      return 'v'
    })
    assert.equal(value, 'v')
    assert.ok(thrown instanceof Kind, `setTtl(${args.map(String)}) throws a ${Kind.name}: ${thrown}`)
    assert.equal(thrown.code, 'ERR_HERDCACHE_INVALID_OPTION')
    assert.match(thrown.message, /ttl/i)
  }
  // A loader that lets it throw fails its load: the callers get the error, nothing is stored.
  await h.rejectsWith(
    cache.getOrLoad('bad', (ctx) => ctx.setTtl(-1)),
    'ERR_HERDCACHE_INVALID_OPTION',
    RangeError,
  )
  assert.equal(await cache.get('bad'), undefined)
})

test('ctx.noStore(): the leader and its joiners get the value, nothing is stored', T, async (t) => {
  const cache = make(t)
  const gate = h.deferred()
  const loader = h.counted(async (ctx) => {
    ctx.noStore()
    await gate.promise
    return { live: true }
  })
  const calls = [0, 1, 2].map(() => cache.getOrLoad('live', loader))
  gate.resolve()
  assert.deepEqual(await Promise.all(calls), [{ live: true }, { live: true }, { live: true }])
  assert.equal(loader.calls, 1, 'one load for the three callers')
  assert.equal(cache.stats().coalesced, 2)
  assert.equal(cache.stats().size, 0, 'nothing in memory')
  assert.equal(await cache.get('live'), undefined)
  assert.equal(await outcome(cache, 'live', () => 'again'), 'miss', 'the next call loads again')
})

test('ctx.noStore() on a refresh keeps the stale value as it was', T, async (t) => {
  const cache = make(t, { ttl: 1000, hardTtl: 10000 })
  await cache.getOrLoad('k', () => 'v1')
  h.advance(cache, 1000)
  const refresh = h.counted((ctx) => {
    ctx.noStore()
    return 'v2'
  })
  assert.equal(await cache.getOrLoad('k', refresh), 'v1')
  await h.waitFor(() => refresh.calls === 1 && cache.stats().inFlight === 0, 'the refresh')
  assert.equal(await cache.get('k'), 'v1', 'the refresh stored nothing')
  assert.equal(await cache.get('k', { stale: false }), undefined)
})
