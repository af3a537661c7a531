'use strict'
// Issue 28: a fresh hit the addon answered is remembered by index.js and
// answered again without crossing into the addon, while the cache's epoch
// (src/engine/epoch.rs) has not moved and the entry's deadline has not
// passed. These tests count the crossings (a wrapped `install`), and check
// that nothing a hit relies on is missed: expiry, writes, invalidations,
// the clock, tags, l1Ttl, an early refresh, close(), the counters, a
// loader that is no function, and fake timers installed after the module.
// The Redis-side cases (another instance's set, a change made outside
// herdcache) are in __test__/redis/remembered-hits.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, kTesting } = require('..')
const h = require('./helpers')

const { T } = h
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A Cache of `options` whose addon `getOrLoad` calls are counted in `crossings.n`. */
function counted(t, options) {
  const crossings = { n: 0 }
  const countCrossings = (fns) => {
    const getOrLoad = fns.getOrLoad
    fns.getOrLoad = function (...callArgs) {
      crossings.n++
      return getOrLoad.apply(this, callArgs)
    }
  }
  const cache = h.withInstall(countCrossings, () => h.track(t, new Cache(options)))
  return { cache, crossings }
}

/** `n` plain calls of `key`; the crossings they made. */
async function calls(cache, crossings, key, n, loader = () => 'WRONG') {
  const before = crossings.n
  for (let i = 0; i < n; i++) await cache.getOrLoad(key, loader)
  return crossings.n - before
}

test('a fresh hit is answered again without the addon, and counted as a hit', T, async (t) => {
  const { cache, crossings } = counted(t, { ttl: 60_000 })
  assert.equal(await cache.getOrLoad('k', () => 'v'), 'v')
  // The first hit after the load's write empties what was remembered; the second is remembered.
  assert.equal(await calls(cache, crossings, 'k', 100), 2, 'two crossings, then none')
  const s = cache.stats()
  assert.equal(s.hits, 100, 'every hit counted, remembered or not')
  assert.equal(s.misses, 1)
  assert.equal(cache.stats().hits, 100, 'counted once')
  assert.match(cache.metrics(), /herdcache_hits_total 100\n/)
  // Each remembered call gets the same settled promise.
  assert.equal(
    cache.getOrLoad('k', () => 'WRONG'),
    cache.getOrLoad('k', () => 'WRONG'),
  )
})

test('a remembered hit ends at its fresh deadline: the stale value and one refresh, by the addon', T, async (t) => {
  const { cache, crossings } = counted(t, { ttl: 40, hardTtl: 60_000, jitter: 0, beta: 0 })
  let loads = 0
  const loader = () => `v${++loads}`
  assert.equal(await cache.getOrLoad('k', loader), 'v1')
  await calls(cache, crossings, 'k', 3, loader)
  assert.equal(await calls(cache, crossings, 'k', 5, loader), 0, 'remembered')
  await sleep(60)
  const before = crossings.n
  assert.equal(await cache.getOrLoad('k', loader), 'v1', 'the stale value')
  assert.equal(crossings.n, before + 1, 'past the deadline: the addon answered')
  await h.waitFor(() => loads === 2, 'the refresh')
  assert.equal(await cache.getOrLoad('k', loader), 'v2')
  assert.equal(cache.stats().staleServed, 1)
})

test(
  'every change to memory moves the epoch: set, delete, expire, clear, a namespace clear, a load of another key',
  T,
  async (t) => {
    const { cache, crossings } = counted(t, { ttl: 60_000 })
    const remembered = async (key, value) => {
      assert.equal(await cache.getOrLoad(key, () => value), value)
      await calls(cache, crossings, key, 2)
      assert.equal(await calls(cache, crossings, key, 3), 0, `${key} remembered`)
    }
    await remembered('k', 'v1')
    await cache.set('k', 'v2')
    assert.equal(await cache.getOrLoad('k', () => 'WRONG'), 'v2', 'set')
    await remembered('k', 'v2')
    await cache.delete('k')
    assert.equal(await cache.getOrLoad('k', () => 'v3'), 'v3', 'delete')
    await remembered('k', 'v3')
    await cache.expire('k')
    const status = {}
    assert.equal(await cache.getOrLoad('k', () => 'v4', { status }), 'v3')
    assert.equal(status.outcome, 'stale', 'expire')
    await h.waitFor(async () => (await cache.getOrLoad('k', () => 'WRONG')) === 'v4', 'the refresh after expire')
    await remembered('k', 'v4')
    await cache.clear()
    assert.equal(await cache.getOrLoad('k', () => 'v5'), 'v5', 'clear')
    const ns = cache.namespace('users')
    assert.equal(await ns.getOrLoad('1', () => 'u1'), 'u1')
    assert.equal(await ns.getOrLoad('1', () => 'WRONG'), 'u1')
    assert.equal(await ns.getOrLoad('1', () => 'WRONG'), 'u1')
    await ns.clear()
    assert.equal(await ns.getOrLoad('1', () => 'u2'), 'u2', 'a namespace clear')
    await remembered('k', 'v5')
    assert.equal(await cache.getOrLoad('other', () => 'o'), 'o')
    assert.equal(await calls(cache, crossings, 'k', 1), 1, 'a load of another key moved the epoch')
  },
)

test('the clock moving (advanceClock) moves the epoch', T, async (t) => {
  const { cache, crossings } = counted(t, { ttl: 1_000, hardTtl: 60_000, jitter: 0, beta: 0 })
  assert.equal(await cache.getOrLoad('k', () => 'v1'), 'v1')
  await calls(cache, crossings, 'k', 3)
  cache[kTesting].advanceClock(2_000)
  const status = {}
  assert.equal(await cache.getOrLoad('k', () => 'v2', { status }), 'v1')
  assert.equal(status.outcome, 'stale')
  const { cache: plain, crossings: plainCrossings } = counted(t, { ttl: 1_000, hardTtl: 60_000, jitter: 0, beta: 0 })
  assert.equal(await plain.getOrLoad('k', () => 'v1'), 'v1')
  await calls(plain, plainCrossings, 'k', 3)
  plain[kTesting].advanceClock(2_000)
  assert.equal(await calls(plain, plainCrossings, 'k', 1, () => 'v2'), 1, 'a plain call after the clock moved crossed')
  assert.equal(plain.stats().staleServed, 1)
})

test('tagged entries, negative entries and l1Ttl are judged by the addon', T, async (t) => {
  const { cache, crossings } = counted(t, { ttl: 60_000 })
  assert.equal(await cache.getOrLoad('t', () => 'tagged', { tags: ['a'] }), 'tagged')
  assert.equal(await calls(cache, crossings, 't', 5), 5, 'a tagged entry is never remembered')
  await cache.deleteByTag('a')
  assert.equal(await cache.getOrLoad('t', () => 'after'), 'after')
  assert.equal(await cache.getOrLoad('n', () => null), null)
  assert.equal(await calls(cache, crossings, 'n', 3, () => null), 3, 'a negative entry is never remembered')
  const { cache: short, crossings: shortCrossings } = counted(t, { ttl: 60_000, l1Ttl: 40 })
  assert.equal(await short.getOrLoad('k', () => 'v1'), 'v1')
  await calls(short, shortCrossings, 'k', 3)
  assert.equal(await calls(short, shortCrossings, 'k', 3), 0)
  await sleep(60)
  let loads = 0
  assert.equal(await short.getOrLoad('k', () => `l${++loads}`), 'l1', 'past l1Ttl, without Redis: the loader')
})

test('an early refresh (XFetch) still starts at its moment', T, async (t) => {
  // beta large: the refresh is due early; the remembered deadline is that moment.
  const { cache } = counted(t, { ttl: 200, hardTtl: 60_000, jitter: 0, beta: 1_000 })
  let loads = 0
  const loader = async () => {
    await sleep(5)
    return `v${++loads}`
  }
  assert.equal(await cache.getOrLoad('k', loader), 'v1')
  const deadline = Date.now() + 1_000
  while (loads < 2 && Date.now() < deadline) {
    await cache.getOrLoad('k', loader)
    await sleep(1)
  }
  assert.equal(loads, 2, 'the early refresh ran before the TTL')
  assert.ok(cache.stats().earlyRefreshes >= 1)
})

test(
  'a remembered key with a loader that is no function rejects as ever; after close() every call rejects',
  T,
  async (t) => {
    const { cache, crossings } = counted(t, { ttl: 60_000 })
    assert.equal(await cache.getOrLoad('k', () => 'v'), 'v')
    await calls(cache, crossings, 'k', 3)
    await h.rejectsWith(cache.getOrLoad('k', 'not a function'), 'ERR_HERDCACHE_INVALID_LOADER', TypeError)
    await cache.close()
    await h.rejectsWith(
      cache.getOrLoad('k', () => 'v'),
      'ERR_HERDCACHE_CLOSED',
    )
    assert.equal(cache.stats().hits, 3, 'hits remembered before close() still counted')
  },
)

test('fake timers installed after the module cannot keep a remembered hit past its deadline', T, async (t) => {
  const { cache, crossings } = counted(t, { ttl: 40, hardTtl: 60_000, jitter: 0, beta: 0 })
  assert.equal(await cache.getOrLoad('k', () => 'v1'), 'v1')
  await calls(cache, crossings, 'k', 3)
  const realNow = Date.now
  const frozen = realNow()
  Date.now = () => frozen
  try {
    await sleep(60)
    const status = {}
    assert.equal(await cache.getOrLoad('k', () => 'v2'), 'v1')
    assert.equal(await cache.getOrLoad('k', () => 'v2', { status }), 'v1')
    assert.ok(status.outcome === 'stale' || status.outcome === 'coalesced', `not fresh: ${status.outcome}`)
  } finally {
    Date.now = realNow
  }
})

test("the addon's published clock is this machine's wall clock, kept current by its own thread", T, async () => {
  let clock
  const cache = h.withInstall(
    (fns) => {
      clock = new Float64Array(fns.clockBuffer)
    },
    () => new Cache(),
  )
  try {
    for (let i = 0; i < 3; i++) {
      await sleep(30)
      const behind = Date.now() - clock[0]
      assert.ok(behind >= -1 && behind <= 20, `published ${behind} ms behind Date.now()`)
    }
  } finally {
    await cache.close()
  }
})
