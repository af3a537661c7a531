'use strict'
// A caller's `status` beyond `outcome` (README, getOrLoad's callOptions):
// where the value came from, why a stale one was served, how fresh it was,
// how long the call waited. Embedded store; the fleet's source and lock are
// in __test__/redis/status.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h

// jitter 0 and beta 0: only the clock decides.
function make(t, opts = {}) {
  return h.track(t, new Cache({ ttl: 1000, hardTtl: 10_000, jitter: 0, beta: 0, ...opts }))
}

test('a miss, a join and a hit: source, ttl and waitedMs', T, async (t) => {
  const cache = make(t)
  const gate = h.gatedLoader()
  const miss = {}
  const join = {}
  const calls = [cache.getOrLoad('k', gate, { status: miss }), cache.getOrLoad('k', gate, { status: join })]
  await h.waitFor(() => gate.runs.length === 1, 'the load')
  await h.sleep(30)
  gate.runs[0].resolve('v')
  await Promise.all(calls)
  assert.deepEqual({ ...miss, waitedMs: undefined }, { outcome: 'miss', source: 'load', waitedMs: undefined })
  assert.deepEqual({ ...join, waitedMs: undefined }, { outcome: 'coalesced', source: 'load', waitedMs: undefined })
  for (const s of [miss, join]) assert.ok(s.waitedMs >= 25, `waited for the load: ${s.waitedMs} ms`)
  h.advance(cache, 400)
  const hit = {}
  assert.equal(await cache.getOrLoad('k', gate, { status: hit }), 'v')
  // The clock is the wall clock (plus the test's 400 ms): some ms pass between the fill and the hit.
  assert.ok(hit.ttl <= 600 && hit.ttl > 550, `freshness left: ${hit.ttl} ms`)
  assert.deepEqual(
    { ...hit, waitedMs: undefined, ttl: undefined },
    { outcome: 'hit', source: 'memory', ttl: undefined, waitedMs: undefined },
  )
  assert.ok(hit.waitedMs >= 0 && hit.waitedMs < miss.waitedMs, `answered at once: ${hit.waitedMs} ms`)
  const rejected = {}
  await assert.rejects(cache.getOrLoad('other', () => Promise.reject(new Error('db down')), { status: rejected }))
  assert.equal(rejected.source, undefined, 'not set when the call rejects')
})

test('stale answers say why: a refresh, a back-off after a failed one', T, async (t) => {
  const cache = make(t)
  await cache.getOrLoad('k', () => 'v1')
  h.advance(cache, 1_500)
  const gate = h.gatedLoader()
  const first = {}
  assert.equal(await cache.getOrLoad('k', gate, { status: first }), 'v1')
  assert.deepEqual(first.outcome, 'stale')
  assert.deepEqual([first.source, first.stale], ['memory', 'refresh'])
  assert.ok(first.ttl <= -500 && first.ttl > -550, `stale for 500 ms (and the ms since the load): ${first.ttl}`)
  const during = {}
  await cache.getOrLoad('k', gate, { status: during })
  assert.equal(during.stale, 'refresh', 'a refresh is running')
  gate.runs[0].reject(new Error('db down'))
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the refresh failing')
  const after = {}
  assert.equal(await cache.getOrLoad('k', gate, { status: after }), 'v1')
  assert.deepEqual([after.outcome, after.stale], ['stale', 'backoff'], 'no refresh while the key backs off')
  assert.equal(gate.runs.length, 1)
})

test(
  'with softTimeout: a refresh in time makes a hit; one too slow, or failing, says timeout or error',
  T,
  async (t) => {
    const cache = make(t, { softTimeout: 50 })
    await cache.getOrLoad('fast', () => 'old')
    await cache.getOrLoad('slow', () => 'old')
    await cache.getOrLoad('failing', () => 'old')
    h.advance(cache, 1_500)
    const fast = {}
    assert.equal(await cache.getOrLoad('fast', () => 'new', { status: fast }), 'new')
    assert.deepEqual([fast.outcome, fast.stale], ['hit', undefined])
    const slow = {}
    const gate = h.gatedLoader()
    assert.equal(await cache.getOrLoad('slow', gate, { status: slow }), 'old')
    assert.deepEqual([slow.outcome, slow.stale], ['stale', 'timeout'])
    assert.ok(slow.waitedMs >= 45, `waited softTimeout: ${slow.waitedMs} ms`)
    gate.runs[0].resolve('late')
    const failing = {}
    const refused = () => Promise.reject(new Error('db down'))
    assert.equal(await cache.getOrLoad('failing', refused, { status: failing }), 'old')
    assert.deepEqual([failing.outcome, failing.stale], ['stale', 'error'])
  },
)

test('a status object whose setter changes the cache gets the value the call decided on', T, async (t) => {
  // The addon fills `status` after its decision: a setter there runs the
  // application's code, which here deletes the key and lets another value
  // take its slot of the value table (src/binding/held.rs).
  const cache = h.track(t, new Cache())
  await cache.getOrLoad('k', () => ({ v: 1 }))
  let changed = false
  const status = {}
  Object.defineProperty(status, 'source', {
    configurable: true,
    get: () => 'memory',
    set() {
      if (changed) return
      changed = true
      cache.delete('k')
      cache.set('other', { v: 'other' })
    },
  })
  assert.deepEqual(await cache.getOrLoad('k', () => ({ v: 2 }), { status }), { v: 1 })
  assert.equal(changed, true, 'the setter ran')
  assert.deepEqual(await cache.get('other'), { v: 'other' })
})
