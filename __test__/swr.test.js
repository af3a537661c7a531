'use strict'
// R3, R4, R12: soft/hard TTL, stale-while-revalidate, stale: false, softTimeout, waitUntil.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h

// jitter 0 and beta 0: no spread, no early refresh, so only the clock decides.
function make(t, opts = {}) {
  return h.track(t, new Cache({ ttl: 1000, hardTtl: 10000, jitter: 0, beta: 0, ...opts }))
}

async function prime(cache, key, value) {
  const loader = h.counted(() => value)
  assert.deepEqual(await cache.getOrLoad(key, loader), value)
  assert.equal(loader.calls, 1)
}

test('fresh: served from the cache without loading (outcome hit)', T, async (t) => {
  const cache = make(t)
  const loader = h.counted((_, n) => `v${n}`)
  assert.equal(await cache.getOrLoad('k', loader), 'v1')
  h.advance(cache, 900)
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'v1')
  assert.equal(status.outcome, 'hit')
  await h.sleep(20)
  assert.equal(loader.calls, 1, 'no refresh of a fresh value (beta 0)')
  assert.equal(cache.stats().backgroundRefreshes, 0)
})

test('stale: the old value at once, exactly one background refresh for many stale readers', T, async (t) => {
  const bg = []
  const cache = make(t, { waitUntil: (p) => bg.push(p) })
  const loader = h.gatedLoader()
  const first = cache.getOrLoad('k', loader)
  await h.waitFor(() => loader.calls === 1, 'the first load')
  loader.runs[0].resolve({ v: 1 })
  assert.deepEqual(await first, { v: 1 })

  h.advance(cache, 1500) // past ttl, before hardTtl
  const statuses = Array.from({ length: 200 }, () => ({}))
  const results = await Promise.all(statuses.map((status) => cache.getOrLoad('k', loader, { status })))
  for (const r of results) assert.deepEqual(r, { v: 1 })
  assert.ok(
    statuses.every((s) => s.outcome === 'stale'),
    'every reader got the stale value',
  )

  await h.waitFor(() => loader.calls === 2, 'the background refresh to start')
  // More stale reads while the refresh is still running: no second refresh.
  for (let i = 0; i < 20; i++) {
    assert.deepEqual(await cache.getOrLoad('k', loader), { v: 1 })
    await h.tick()
  }
  assert.equal(loader.calls, 2, 'exactly one background refresh')
  assert.equal(loader.runs[1].settled, false, 'stale readers did not wait for the refresh')
  let s = cache.stats()
  assert.equal(s.staleServed, 220)
  assert.equal(s.backgroundRefreshes, 1)
  assert.equal(s.loads, 2)
  assert.equal(s.inFlight, 1)
  assert.equal(bg.length, 1, 'waitUntil received the refresh')

  loader.runs[1].resolve({ v: 2 })
  await bg[0]
  const status = {}
  assert.deepEqual(await cache.getOrLoad('k', loader, { status }), { v: 2 })
  assert.equal(status.outcome, 'hit')
  assert.equal(loader.calls, 2)
  s = cache.stats()
  assert.equal(s.inFlight, 0)
  // the refreshed value is fresh for a whole ttl again
  h.advance(cache, 900)
  assert.deepEqual(await cache.getOrLoad('k', loader), { v: 2 })
  assert.equal(cache.stats().backgroundRefreshes, 1)
})

test('the background refresh loader gets { key, signal } with the key as passed', T, async (t) => {
  const bg = []
  const cache = make(t, { waitUntil: (p) => bg.push(p) })
  const loader = h.counted((_, n) => n)
  await cache.getOrLoad(['item', 9], loader)
  h.advance(cache, 1500)
  assert.equal(await cache.getOrLoad(['item', 9], loader), 1)
  await h.waitFor(() => bg.length === 1, 'the refresh')
  await bg[0]
  assert.equal(loader.calls, 2)
  assert.deepEqual(loader.ctxs[1].key, ['item', 9])
  assert.ok(loader.ctxs[1].signal instanceof AbortSignal)
  assert.equal(await cache.get(['item', 9]), 2)
})

test('stale: false never serves a stale value: the call waits for a fresh load (outcome miss)', T, async (t) => {
  const cache = make(t)
  const loader = h.slowLoader(
    20,
    (() => {
      let n = 0
      return () => `v${++n}`
    })(),
  )
  assert.equal(await cache.getOrLoad('balance', loader), 'v1')
  h.advance(cache, 1500)

  assert.equal(await cache.get('balance'), 'v1', 'get() serves stale by default')
  assert.equal(await cache.get('balance', { stale: false }), undefined, 'get(stale:false) does not')

  const status = {}
  assert.equal(await cache.getOrLoad('balance', loader, { stale: false, status }), 'v2')
  assert.equal(status.outcome, 'miss')
  assert.equal(loader.calls, 2)
  await h.sleep(20)
  assert.equal(loader.calls, 2, 'no extra background refresh')
  const s = cache.stats()
  assert.equal(s.staleServed, 0)
  assert.equal(s.misses, 2)

  // stale: false on a fresh value is a plain hit
  const st2 = {}
  assert.equal(await cache.getOrLoad('balance', loader, { stale: false, status: st2 }), 'v2')
  assert.equal(st2.outcome, 'hit')
})

test('past hardTtl the entry is gone: get() is undefined and getOrLoad waits for a load (miss)', T, async (t) => {
  const cache = make(t, { ttl: 1000, hardTtl: 3000 })
  await prime(cache, 'k', 'old')
  h.advance(cache, 2500)
  assert.equal(await cache.get('k'), 'old', 'still stale-servable before hardTtl')
  h.advance(cache, 1000) // 3500 > hardTtl
  assert.equal(await cache.get('k'), undefined)
  const loader = h.slowLoader(20, 'new')
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'new')
  assert.equal(status.outcome, 'miss')
  assert.equal(loader.calls, 1)
})

test('hardTtl defaults to 10 x ttl', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 100, jitter: 0, beta: 0 }))
  await prime(cache, 'k', 'v')
  h.advance(cache, 950)
  assert.equal(await cache.get('k'), 'v', 'stale at 950 ms (hardTtl 1000)')
  assert.equal(await cache.get('k', { stale: false }), undefined)
  h.advance(cache, 100)
  assert.equal(await cache.get('k'), undefined, 'gone at 1050 ms')
})

test('hardTtl equal to ttl: no stale window', T, async (t) => {
  const cache = make(t, { ttl: 500, hardTtl: 500 })
  await prime(cache, 'k', 'v')
  h.advance(cache, 600)
  const loader = h.counted(() => 'fresh')
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'fresh')
  assert.equal(status.outcome, 'miss')
})

test('call options ttl / hardTtl override the cache ones for the entry the loading call writes', T, async (t) => {
  const cache = make(t, { ttl: 10000, hardTtl: 100000 })
  const loader = h.counted(() => 'v')
  await cache.getOrLoad('short', loader, { ttl: 100, hardTtl: 300 })
  await cache.getOrLoad('long', loader)
  h.advance(cache, 200)
  assert.equal(await cache.get('short', { stale: false }), undefined, 'short is stale after its own ttl')
  assert.equal(await cache.get('short'), 'v')
  assert.equal(await cache.get('long', { stale: false }), 'v', 'long is still fresh')
  h.advance(cache, 200)
  assert.equal(await cache.get('short'), undefined, 'short is gone after its own hardTtl')
  assert.equal(await cache.get('long', { stale: false }), 'v')
})

test('a coalesced caller does not write its ttl: only the loading call does', T, async (t) => {
  const cache = make(t, { ttl: 10000, hardTtl: 100000 })
  const loader = h.slowLoader(20, 'v')
  await Promise.all([cache.getOrLoad('k', loader), cache.getOrLoad('k', loader, { ttl: 50 })])
  assert.equal(loader.calls, 1)
  h.advance(cache, 200)
  assert.equal(await cache.get('k', { stale: false }), 'v', 'the leader (no ttl override) wrote the entry')
})

test('computeMs is measured: a slow key refreshes early, a fast one does not', T, async (t) => {
  // XFetch with u = e^-3: refresh early when now + 3 * computeMs >= freshUntil.
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1 }))
  h.setRandom(cache, { jitter: 0.5, xfetch: Math.exp(-3) })
  const slow = h.slowLoader(300, 'slow')
  const fast = h.counted(() => 'fast')
  await cache.getOrLoad('slow', slow)
  await cache.getOrLoad('fast', fast)
  h.advance(cache, 10000 - 600) // 600 ms before expiry: 3 * ~300 >= 600, 3 * ~0 < 600

  const sf = {}
  const ss = {}
  assert.equal(await cache.getOrLoad('fast', fast, { status: sf }), 'fast')
  assert.equal(await cache.getOrLoad('slow', slow, { status: ss }), 'slow')
  assert.equal(sf.outcome, 'hit')
  assert.equal(ss.outcome, 'hit', 'an early refresh still serves the fresh value')
  await h.waitFor(() => slow.calls === 2, 'the early refresh of the slow key')
  await h.sleep(20)
  assert.equal(fast.calls, 1, 'the cheap key is not refreshed early')
  assert.equal(cache.stats().earlyRefreshes, 1)
})

test('softTimeout: a stale caller waits for a quick refresh and gets the new value', T, async (t) => {
  const cache = make(t, { softTimeout: 200 })
  await prime(cache, 'k', 'old')
  h.advance(cache, 1500)
  const loader = h.slowLoader(20, 'new')
  assert.equal(await cache.getOrLoad('k', loader), 'new')
  assert.equal(loader.calls, 1)
})

test('softTimeout: a slow refresh answers the stale value after softTimeout', T, async (t) => {
  const bg = []
  const cache = make(t, { softTimeout: 100, waitUntil: (p) => bg.push(p) })
  await prime(cache, 'k', 'old')
  h.advance(cache, 1500)
  const loader = h.gatedLoader()
  const started = Date.now()
  assert.equal(await cache.getOrLoad('k', loader), 'old')
  const waited = Date.now() - started
  assert.ok(waited >= 80, `waited about softTimeout (100 ms), got ${waited}`)
  assert.ok(waited < 2000, `answered at softTimeout, not at the refresh, got ${waited}`)
  assert.equal(loader.calls, 1)
  assert.equal(loader.runs[0].settled, false)
  loader.runs[0].resolve('new')
  await h.waitFor(() => bg.length === 1, 'the refresh promise')
  await bg[0]
  assert.equal(await cache.get('k'), 'new')
})

test('softTimeout 0 (default) answers a stale caller at once', T, async (t) => {
  const cache = make(t)
  await prime(cache, 'k', 'old')
  h.advance(cache, 1500)
  const loader = h.gatedLoader()
  const started = Date.now()
  assert.equal(await cache.getOrLoad('k', loader), 'old')
  assert.ok(Date.now() - started < 80)
  await h.waitFor(() => loader.calls === 1, 'the refresh to start')
  loader.runs[0].resolve('new')
  await h.waitFor(async () => (await cache.get('k')) === 'new', 'the refresh to land')
})

test('waitUntil receives each background refresh promise; the value is written when it settles', T, async (t) => {
  const bg = []
  const cache = make(t, { waitUntil: (p) => bg.push(p) })
  const loader = h.slowLoader(
    10,
    (() => {
      let n = 0
      return () => ++n
    })(),
  )
  assert.equal(await cache.getOrLoad('k', loader), 1)

  for (let round = 2; round <= 4; round++) {
    h.advance(cache, 1500)
    assert.equal(await cache.getOrLoad('k', loader), round - 1, 'stale value')
    await h.waitFor(() => bg.length === round - 1, `refresh #${round - 1} handed to waitUntil`)
    const p = bg[round - 2]
    assert.equal(typeof p.then, 'function', 'waitUntil receives a promise')
    await p
    assert.equal(await cache.get('k', { stale: false }), round, 'the refresh wrote when its promise settled')
  }
  assert.equal(loader.calls, 4)
  assert.equal(new Set(bg).size, 3, 'one promise per refresh')
  assert.equal(bg.length, cache.stats().backgroundRefreshes)
})

test('waitUntil is not handed foreground loads', T, async (t) => {
  const bg = []
  const cache = make(t, { waitUntil: (p) => bg.push(p) })
  await cache.getOrLoad('a', () => 'A')
  await Promise.all([cache.getOrLoad('b', h.slowLoader(10, 'B')), cache.getOrLoad('b', () => 'x')])
  assert.equal(bg.length, 0)
  assert.equal(cache.stats().backgroundRefreshes, 0)
})
