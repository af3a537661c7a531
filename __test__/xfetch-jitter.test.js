'use strict'
// R5 XFetch (probabilistic early refresh) and R6 TTL jitter.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, kTesting } = require('..')
const h = require('./helpers')

const { T } = h
const TINY = 1e-300 // -ln(u) ~ 690.8: always early when beta > 0 and computeMs > 0

test('kTesting hook is exported and exposes advanceClock / setRandom', T, async (t) => {
  assert.equal(typeof kTesting, 'symbol')
  const cache = h.track(t, new Cache())
  assert.equal(typeof cache[kTesting].advanceClock, 'function')
  assert.equal(typeof cache[kTesting].setRandom, 'function')
})

// ---- XFetch -----------------------------------------------------------------

test('XFetch with u = 1 never refreshes early', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 10000, jitter: 0, beta: 1 }))
  h.setRandom(cache, { xfetch: 1 })
  const loader = h.slowLoader(30, 'v')
  await cache.getOrLoad('k', loader)
  h.advance(cache, 980)
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'v')
  assert.equal(status.outcome, 'hit')
  await h.sleep(60)
  assert.equal(loader.calls, 1)
  assert.equal(cache.stats().earlyRefreshes, 0)
  assert.equal(cache.stats().backgroundRefreshes, 0)
})

test('XFetch with a tiny u refreshes a fresh entry early, once, and hands it to waitUntil', T, async (t) => {
  const bg = []
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1, waitUntil: (p) => bg.push(p) }))
  h.setRandom(cache, { xfetch: TINY })
  let n = 0
  const loader = h.slowLoader(20, () => ++n)
  assert.equal(await cache.getOrLoad('k', loader), 1)
  h.advance(cache, 5000) // still fresh; 690 * ~20 ms of computeMs is far past freshUntil

  const statuses = Array.from({ length: 20 }, () => ({}))
  const results = await Promise.all(statuses.map((status) => cache.getOrLoad('k', loader, { status })))
  assert.ok(
    results.every((r) => r === 1),
    'early refresh serves the current value at once',
  )
  assert.ok(statuses.every((s) => s.outcome === 'hit'))
  await h.waitFor(() => loader.calls === 2, 'the early refresh to start')
  await h.sleep(5)
  assert.equal(loader.calls, 2, 'one early refresh, however many readers')

  const s = cache.stats()
  assert.equal(s.earlyRefreshes, 1)
  assert.equal(s.backgroundRefreshes, 1)
  assert.equal(s.staleServed, 0)
  assert.equal(s.hits, 20)

  await h.waitFor(() => bg.length === 1, 'waitUntil to receive the early refresh')
  await bg[0]
  assert.equal(await cache.get('k'), 2, 'the early refresh wrote the new value')
})

test('beta: 0 turns early refresh off', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 10000, jitter: 0, beta: 0 }))
  h.setRandom(cache, { xfetch: TINY })
  const loader = h.slowLoader(20, 'v')
  await cache.getOrLoad('k', loader)
  h.advance(cache, 9000)
  for (let i = 0; i < 5; i++) await cache.getOrLoad('k', loader)
  await h.sleep(60)
  assert.equal(loader.calls, 1)
  assert.equal(cache.stats().earlyRefreshes, 0)
})

test('the beta call option is kept for the entry the loading call writes', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 0 }))
  h.setRandom(cache, { xfetch: TINY })
  const eager = h.slowLoader(20, 'e')
  const lazy = h.slowLoader(20, 'l')
  await cache.getOrLoad('eager', eager, { beta: 1 }) // cache beta 0, this entry beta 1
  await cache.getOrLoad('lazy', lazy)
  h.advance(cache, 5000)
  await cache.getOrLoad('eager', eager)
  await cache.getOrLoad('lazy', lazy)
  await h.waitFor(() => eager.calls === 2, 'early refresh of the entry written with beta 1')
  await h.sleep(40)
  assert.equal(lazy.calls, 1)
  assert.equal(cache.stats().earlyRefreshes, 1)

  const cache2 = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1 }))
  h.setRandom(cache2, { xfetch: TINY })
  const off = h.slowLoader(20, 'o')
  await cache2.getOrLoad('off', off, { beta: 0 })
  h.advance(cache2, 5000)
  await cache2.getOrLoad('off', off)
  await h.sleep(60)
  assert.equal(off.calls, 1, 'an entry written with beta 0 is never refreshed early')
})

test('setRandom({ xfetch: null }) goes back to real randomness (no forced early refresh)', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1 }))
  h.setRandom(cache, { xfetch: TINY })
  h.setRandom(cache, { xfetch: null })
  const loader = h.slowLoader(5, 'v')
  await cache.getOrLoad('k', loader)
  // With computeMs ~5 ms and real u, an early refresh 5 s before expiry needs -ln(u) >= ~1000: impossible.
  h.advance(cache, 5000)
  for (let i = 0; i < 20; i++) await cache.getOrLoad('k', loader)
  await h.sleep(40)
  assert.equal(loader.calls, 1)
})

test('setRandom(null) and setRandom() unpin both draws, as the README documents', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1 }))
  for (const unpin of [null, undefined]) {
    h.setRandom(cache, { xfetch: TINY, jitter: 0 })
    assert.doesNotThrow(() => cache[kTesting].setRandom(unpin), `setRandom(${unpin})`)
  }
  const loader = h.slowLoader(5, 'v')
  await cache.getOrLoad('k', loader)
  // Still pinned to TINY, the entry would refresh at its first read.
  h.advance(cache, 5000)
  for (let i = 0; i < 20; i++) await cache.getOrLoad('k', loader)
  await h.sleep(40)
  assert.equal(loader.calls, 1, 'no forced early refresh: the xfetch pin is gone')
})

test('setRandom({ xfetch }) pins the draw made when an entry is written; an entry keeps its moment', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1 }))
  h.setRandom(cache, { xfetch: 1 })
  const loader = h.slowLoader(20, 'v')
  await cache.getOrLoad('k', loader) // written with u = 1: never early
  h.setRandom(cache, { xfetch: 0 })
  h.advance(cache, 9000)
  for (let i = 0; i < 5; i++) await cache.getOrLoad('k', loader)
  await h.sleep(60)
  assert.equal(loader.calls, 1, 'a later pin does not move the moment of the entry already written')
  assert.equal(cache.stats().earlyRefreshes, 0)

  h.advance(cache, 1500) // stale: refreshed, and the new entry is written with u = 0
  await cache.getOrLoad('k', loader)
  await h.waitFor(() => loader.calls === 2 && cache.stats().inFlight === 0, 'the stale refresh')
  assert.equal(cache.stats().earlyRefreshes, 0)
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'v')
  assert.equal(status.outcome, 'hit')
  await h.waitFor(() => loader.calls === 3, 'the early refresh of the entry written with u = 0, at its first read')
  assert.equal(cache.stats().earlyRefreshes, 1)
})

// ---- jitter -----------------------------------------------------------------

async function freshAt(jitterU, advanceMs, opts = {}, t) {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 100000, beta: 0, ...opts }))
  h.setRandom(cache, { jitter: jitterU, xfetch: 1 })
  await cache.getOrLoad('k', () => 'v')
  h.advance(cache, advanceMs)
  return (await cache.get('k', { stale: false })) === 'v'
}

test('jitter u = 0.5 means no spread: ttl 1000 is fresh at 970, stale at 1030', T, async (t) => {
  assert.equal(await freshAt(0.5, 970, {}, t), true)
  assert.equal(await freshAt(0.5, 1030, {}, t), false)
})

test('jitter u = 1 stretches the ttl by +10 % (default jitter 0.1)', T, async (t) => {
  assert.equal(await freshAt(1, 1050, {}, t), true, 'fresh at 1050 (ttl 1100)')
  assert.equal(await freshAt(1, 1150, {}, t), false, 'stale at 1150')
})

test('jitter u near 0 shrinks the ttl by -10 %', T, async (t) => {
  assert.equal(await freshAt(1e-9, 850, {}, t), true, 'fresh at 850 (ttl 900)')
  assert.equal(await freshAt(1e-9, 950, {}, t), false, 'stale at 950')
})

test('the jitter option sets the spread; jitter 0 turns it off', T, async (t) => {
  assert.equal(await freshAt(1, 1400, { jitter: 0.5 }, t), true, 'ttl 1500 with jitter 0.5, u = 1')
  assert.equal(await freshAt(1, 1030, { jitter: 0 }, t), false, 'jitter 0: no stretch')
})

test('jitter also spreads the TTL written by set()', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 100000, beta: 0 }))
  h.setRandom(cache, { jitter: 1 })
  await cache.set('k', 'v')
  h.advance(cache, 1050)
  assert.equal(await cache.get('k', { stale: false }), 'v')
})

test('jitter also spreads the hard TTL', T, async (t) => {
  const up = h.track(t, new Cache({ ttl: 1000, hardTtl: 2000, beta: 0 }))
  h.setRandom(up, { jitter: 1 })
  await up.getOrLoad('k', () => 'v')
  h.advance(up, 2100)
  assert.equal(await up.get('k'), 'v', 'hardTtl 2200 with u = 1')

  const down = h.track(t, new Cache({ ttl: 1000, hardTtl: 2000, beta: 0 }))
  h.setRandom(down, { jitter: 1e-9 })
  await down.getOrLoad('k', () => 'v')
  h.advance(down, 1900)
  assert.equal(await down.get('k'), undefined, 'hardTtl 1800 with u ~ 0')
})

test('jitter also spreads the negative TTL', T, async (t) => {
  const cache = h.track(t, new Cache({ negativeTtl: 1000, beta: 0 }))
  h.setRandom(cache, { jitter: 1 })
  const loader = h.counted(() => null)
  await cache.getOrLoad('missing', loader)
  h.advance(cache, 1050)
  const status = {}
  assert.equal(await cache.getOrLoad('missing', loader, { status }), null)
  assert.equal(loader.calls, 1, 'negative marker still held at 1050 (negativeTtl 1100)')
  assert.equal(status.outcome, 'negative')
})

test('with real randomness, keys written together expire spread over ttl +/- 10 %', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 100000, beta: 0 }))
  h.setRandom(cache, { jitter: 1 })
  h.setRandom(cache, { jitter: null }) // back to real randomness
  const N = 200
  const keys = Array.from({ length: N }, (_, i) => ['warm', i])
  await Promise.all(keys.map((k) => cache.getOrLoad(k, () => 'v')))
  const freshCount = async () => {
    let n = 0
    for (const k of keys) if ((await cache.get(k, { stale: false })) !== undefined) n++
    return n
  }

  h.advance(cache, 870)
  assert.equal(await freshCount(), N, 'all fresh before 0.9 x ttl')
  h.advance(cache, 130) // 1000
  const mid = await freshCount()
  assert.ok(mid > 0 && mid < N, `at ttl some keys are fresh and some stale, got ${mid}/${N}`)
  h.advance(cache, 130) // 1130
  assert.equal(await freshCount(), 0, 'all stale after 1.1 x ttl')
})

test(
  'the hit that starts an early refresh answers the value it found, whatever the refresh does to the entry at once',
  T,
  async (t) => {
    // The refresh's leader hands its promise to waitUntil while the hit is
    // answered: there the application deletes the key, and a set of another
    // key takes the slot of the value table the deleted value had
    // (src/binding/held.rs). The hit must answer the value it decided on.
    let emptied = false
    const waitUntil = (refresh) => {
      refresh.catch(() => {})
      cache.delete('k')
      cache.set('other', { v: 'other' })
      emptied = true
    }
    const cache = h.track(t, new Cache({ ttl: 10000, hardTtl: 100000, jitter: 0, beta: 1, waitUntil }))
    h.setRandom(cache, { xfetch: TINY })
    assert.deepEqual(
      await cache.getOrLoad(
        'k',
        h.slowLoader(20, () => ({ v: 1 })),
      ),
      { v: 1 },
    )
    h.advance(cache, 5000)
    const answer = cache.getOrLoad('k', () => ({ v: 2 }))
    assert.equal(emptied, true, 'waitUntil ran inside the call')
    assert.deepEqual(await answer, { v: 1 })
    assert.deepEqual(await cache.get('other'), { v: 'other' })
  },
)
