'use strict'
// R10 observability: stats() counters, status.outcome, metrics() in the Prometheus text format.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T, COUNTERS } = h
const make = (t, opts = {}) => h.track(t, new Cache({ jitter: 0, beta: 0, ...opts }))

const METRIC_NAMES = {
  hits: 'herdcache_hits_total',
  staleServed: 'herdcache_stale_served_total',
  negativeHits: 'herdcache_negative_hits_total',
  misses: 'herdcache_misses_total',
  coalesced: 'herdcache_coalesced_total',
  loads: 'herdcache_loads_total',
  loadErrors: 'herdcache_load_errors_total',
  backgroundRefreshes: 'herdcache_background_refreshes_total',
  earlyRefreshes: 'herdcache_early_refreshes_total',
  backgroundErrors: 'herdcache_background_errors_total',
  timeouts: 'herdcache_timeouts_total',
  evictions: 'herdcache_evictions_total',
  expirations: 'herdcache_expirations_total',
  size: 'herdcache_entries',
  inFlight: 'herdcache_in_flight',
}

test('stats() is synchronous and starts with every counter at 0', T, async (t) => {
  const cache = make(t)
  const s = cache.stats()
  assert.equal(typeof s.then, 'undefined', 'not a promise')
  for (const name of COUNTERS) assert.equal(s[name], 0, name)
})

test('hits, misses, coalesced, loads, inFlight and size', T, async (t) => {
  const cache = make(t)
  const loader = h.gatedLoader()
  const ps = [cache.getOrLoad('a', loader), cache.getOrLoad('a', loader), cache.getOrLoad('a', loader)]
  await h.waitFor(() => loader.calls === 1, 'the load')
  let s = cache.stats()
  assert.equal(s.inFlight, 1)
  assert.equal(s.size, 0)
  loader.runs[0].resolve('A')
  await Promise.all(ps)
  await cache.getOrLoad('a', loader)
  await cache.getOrLoad('a', loader)
  await cache.getOrLoad('b', () => 'B')
  s = cache.stats()
  assert.equal(s.misses, 2)
  assert.equal(s.coalesced, 2)
  assert.equal(s.hits, 2)
  assert.equal(s.loads, 2)
  assert.equal(s.inFlight, 0)
  assert.equal(s.size, 2)
  // set() writes an entry without loading
  await cache.set('c', 'C')
  assert.equal(cache.stats().size, 3)
  assert.equal(cache.stats().loads, 2)
})

test('staleServed and backgroundRefreshes', T, async (t) => {
  const bg = []
  const cache = make(t, { ttl: 100, hardTtl: 10000, waitUntil: (p) => bg.push(p) })
  await cache.getOrLoad('k', () => 1)
  h.advance(cache, 200)
  await Promise.all([cache.getOrLoad('k', () => 2), cache.getOrLoad('k', () => 3)])
  await h.waitFor(() => bg.length === 1, 'the refresh')
  await bg[0]
  const s = cache.stats()
  assert.equal(s.staleServed, 2)
  assert.equal(s.backgroundRefreshes, 1)
  assert.equal(s.earlyRefreshes, 0)
  assert.equal(s.loads, 2)
})

test('earlyRefreshes counts XFetch refreshes (also in backgroundRefreshes)', T, async (t) => {
  const cache = make(t, { ttl: 10000, hardTtl: 100000, beta: 1 })
  h.setRandom(cache, { xfetch: 1e-300, jitter: 0.5 })
  await cache.getOrLoad('k', h.slowLoader(20, 'v'))
  h.advance(cache, 5000)
  const loader = h.slowLoader(5, 'v2')
  await cache.getOrLoad('k', loader)
  await h.waitFor(() => loader.calls === 1 && cache.stats().inFlight === 0, 'the early refresh')
  const s = cache.stats()
  assert.equal(s.earlyRefreshes, 1)
  assert.equal(s.backgroundRefreshes, 1)
  assert.equal(s.staleServed, 0)
  assert.equal(s.hits, 1)
})

test('negativeHits', T, async (t) => {
  const cache = make(t)
  await cache.getOrLoad('n', () => null)
  await cache.getOrLoad('n', () => null)
  await cache.getOrLoad('n', () => null)
  assert.equal(cache.stats().negativeHits, 2)
  assert.equal(cache.stats().misses, 1)
})

test(
  'loadErrors counts thrown, rejected, timed-out and unserialisable loads; timeouts only the timed-out',
  T,
  async (t) => {
    const cache = make(t, { hardTimeout: 60 })
    const settle = (p) =>
      p.then(
        () => 'ok',
        () => 'err',
      )
    assert.equal(
      await settle(
        cache.getOrLoad('a', () => {
          throw new Error('a')
        }),
      ),
      'err',
    )
    assert.equal(await settle(cache.getOrLoad('b', () => Promise.reject(new Error('b')))), 'err')
    assert.equal(await settle(cache.getOrLoad('c', h.hangingLoader())), 'err')
    assert.equal(await settle(cache.getOrLoad('d', () => 1n)), 'err')
    assert.equal(await settle(cache.getOrLoad('e', () => 'fine')), 'ok')
    const s = cache.stats()
    assert.equal(s.loadErrors, 4)
    assert.equal(s.timeouts, 1)
    assert.equal(s.loads, 5)
    assert.equal(s.misses, 5)
    assert.equal(s.backgroundErrors, 0)
    assert.equal(s.size, 1)
  },
)

test('backgroundErrors', T, async (t) => {
  const cache = make(t, { ttl: 100, hardTtl: 10000, onError: () => {} })
  await cache.getOrLoad('k', () => 'v')
  h.advance(cache, 200)
  await cache.getOrLoad('k', () => Promise.reject(new Error('refresh failed')))
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the failed refresh')
  const s = cache.stats()
  assert.equal(s.loadErrors, 1)
  assert.equal(s.backgroundRefreshes, 1)
  assert.equal(s.staleServed, 1)
})

test('evictions and expirations', T, async (t) => {
  const cache = make(t, { maxEntries: 2, ttl: 100, hardTtl: 200 })
  await cache.set('a', 1)
  await cache.set('b', 2)
  await cache.set('c', 3)
  let s = cache.stats()
  assert.equal(s.evictions, 1)
  assert.equal(s.size, 2)
  // When reclamation happens is not specified (a lazy sweep is fine): go well past the hard TTL.
  h.advance(cache, 2000)
  assert.equal(await cache.get('b'), undefined)
  assert.equal(await cache.get('c'), undefined)
  s = cache.stats()
  assert.equal(s.expirations, 2)
  assert.equal(s.size, 0)
  assert.equal(s.evictions, 1)
})

test('status.outcome for hit, stale, negative, miss and coalesced', T, async (t) => {
  const cache = make(t, { ttl: 100, hardTtl: 10000 })
  const loader = h.slowLoader(10, 'v')
  const leader = {}
  const joiner = {}
  await Promise.all([
    cache.getOrLoad('k', loader, { status: leader }),
    cache.getOrLoad('k', loader, { status: joiner }),
  ])
  assert.equal(leader.outcome, 'miss')
  assert.equal(joiner.outcome, 'coalesced')

  const hit = {}
  await cache.getOrLoad('k', loader, { status: hit })
  assert.equal(hit.outcome, 'hit')

  const neg1 = {}
  const neg2 = {}
  await cache.getOrLoad('n', () => null, { status: neg1 })
  await cache.getOrLoad('n', () => null, { status: neg2 })
  assert.equal(neg1.outcome, 'miss')
  assert.equal(neg2.outcome, 'negative')

  h.advance(cache, 200)
  const stale = {}
  assert.equal(await cache.getOrLoad('k', loader, { status: stale }), 'v')
  assert.equal(stale.outcome, 'stale')

  // a failing load: the caller that ran it is a miss, a joiner is coalesced
  const fLeader = {}
  const fJoiner = {}
  const failing = () => new Promise((_, rej) => setTimeout(() => rej(new Error('x')), 10))
  await Promise.allSettled([
    cache.getOrLoad('f', failing, { status: fLeader }),
    cache.getOrLoad('f', failing, { status: fJoiner }),
  ])
  assert.equal(fLeader.outcome, 'miss')
  assert.equal(fJoiner.outcome, 'coalesced')
})

test('invariant: hits + staleServed + negativeHits + misses + coalesced == number of getOrLoad calls', T, async (t) => {
  const cache = make(t, { ttl: 1000, hardTtl: 5000, negativeTtl: 1000, hardTimeout: 100, onError: () => {} })
  let calls = 0
  const call = (key, loader, opts) => {
    calls++
    return cache.getOrLoad(key, loader, opts)
  }
  const check = (where) => assert.equal(h.served(cache.stats()), calls, `after ${where}`)

  // misses + coalesced
  await Promise.all(Array.from({ length: 30 }, () => call('a', h.slowLoader(10, 'A'))))
  check('a cold stampede')
  // hits
  for (let i = 0; i < 10; i++) await call('a', () => 'x')
  check('hits')
  // negatives
  for (let i = 0; i < 6; i++) await call('n', () => null)
  check('negatives')
  // stale (+ a background refresh, which is not a call)
  h.advance(cache, 1500)
  await Promise.all(Array.from({ length: 10 }, () => call('a', h.slowLoader(5, 'A2'))))
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh')
  check('stale reads')
  // stale: false miss
  h.advance(cache, 1500)
  await call('a', () => 'A3', { stale: false })
  check('a stale: false call')
  // failing cold loads with joiners
  await Promise.allSettled(Array.from({ length: 5 }, () => call('e', () => Promise.reject(new Error('e')))))
  check('failing loads')
  // timeouts with joiners
  await Promise.allSettled(Array.from({ length: 3 }, () => call('t', h.hangingLoader())))
  check('timeouts')
  // aborted callers still count once
  const ac = new AbortController()
  const gated = h.gatedLoader()
  const pAbort = call('g', gated, { signal: ac.signal }).catch(() => 'aborted')
  const pOther = call('g', gated)
  await h.waitFor(() => gated.calls === 1, 'the gated load')
  ac.abort()
  assert.equal(await pAbort, 'aborted')
  gated.runs[0].resolve('G')
  assert.equal(await pOther, 'G')
  check('an aborted caller')
  // a background refresh that fails
  h.advance(cache, 1500)
  await call('g', () => Promise.reject(new Error('bg')))
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the failed refresh')
  check('a failed refresh')

  const s = cache.stats()
  for (const k of ['hits', 'staleServed', 'negativeHits', 'misses', 'coalesced']) assert.ok(s[k] > 0, `${k} exercised`)
  assert.equal(s.hits + s.staleServed + s.negativeHits + s.misses + s.coalesced, calls)
})

function parseMetrics(text) {
  const types = new Map()
  const values = new Map()
  for (const line of text.split('\n')) {
    let m
    if ((m = /^# TYPE (\S+) (\S+)\s*$/.exec(line))) types.set(m[1], m[2])
    else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\d+)?\s*$/.exec(line))) {
      values.set(m[1], Number(m[3]))
    }
  }
  return { types, values }
}

test('metrics(): Prometheus text with a TYPE line and a value for every counter, matching stats()', T, async (t) => {
  const cache = make(t, { ttl: 100, hardTtl: 10000, maxEntries: 3, hardTimeout: 60, onError: () => {} })
  await Promise.all([cache.getOrLoad('a', h.slowLoader(5, 'A')), cache.getOrLoad('a', () => 'x')])
  await cache.getOrLoad('a', () => 'x')
  await cache.getOrLoad('a', () => 'x')
  await cache.getOrLoad('n', () => null)
  await cache.getOrLoad('n', () => null)
  await cache.getOrLoad('e', () => Promise.reject(new Error('e'))).catch(() => {})
  await cache.getOrLoad('t', h.hangingLoader()).catch(() => {})
  await cache.set('b', 1)
  await cache.set('c', 2)
  await cache.set('d', 3) // evicts at least one
  const gated = h.gatedLoader()
  const pending = cache.getOrLoad('p', gated)
  await h.waitFor(() => gated.calls === 1, 'a pending load')

  const s = cache.stats()
  const text = cache.metrics()
  assert.equal(typeof text, 'string')
  assert.ok(text.endsWith('\n'), 'the text format ends with a newline')
  const { types, values } = parseMetrics(text)
  for (const [stat, metric] of Object.entries(METRIC_NAMES)) {
    const expectedType = metric.endsWith('_total') ? 'counter' : 'gauge'
    assert.equal(types.get(metric), expectedType, `# TYPE ${metric} ${expectedType}`)
    assert.ok(values.has(metric), `a sample line for ${metric}`)
    assert.equal(values.get(metric), s[stat], `${metric} == stats().${stat}`)
  }
  assert.match(text, /^# TYPE herdcache_hits_total counter$/m)
  assert.ok(s.hits >= 2 && s.misses >= 3 && s.inFlight === 1 && s.evictions >= 1, 'non-trivial values compared')

  gated.runs[0].resolve('P')
  await pending
  const after = parseMetrics(cache.metrics()).values
  assert.equal(after.get('herdcache_in_flight'), 0)
  assert.equal(after.get('herdcache_misses_total'), cache.stats().misses)
})
