'use strict'
// expire(key): a soft invalidation. The entry is stale from now and kept
// until its hard TTL, so the next reader is answered at once and one refresh
// runs; a caller that refuses stale values loads. Embedded store; the fleet
// is in __test__/redis/expire.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h

// jitter 0 and beta 0: no spread, no early refresh, so only expire() makes the entry stale.
function make(t, opts = {}) {
  return h.track(t, new Cache({ ttl: 60_000, hardTtl: 600_000, jitter: 0, beta: 0, ...opts }))
}

test('after expire(key) the old value is served at once and one refresh replaces it', T, async (t) => {
  const cache = make(t)
  const loader = h.counted((_, n) => ({ v: n }))
  const first = await cache.getOrLoad('k', loader)
  assert.equal(await cache.expire('k'), true, 'a fresh entry was made stale')
  assert.equal(await cache.get('k', { stale: false }), undefined, 'stale now')
  assert.equal(await cache.get('k'), first, 'but kept')
  const statuses = Array.from({ length: 20 }, () => ({}))
  const answers = await Promise.all(statuses.map((status) => cache.getOrLoad('k', loader, { status })))
  for (const answer of answers) assert.equal(answer, first, 'the old value, at once')
  assert.deepEqual(new Set(statuses.map((s) => s.outcome)), new Set(['stale']))
  await h.waitFor(() => loader.calls === 2, 'the refresh')
  await h.sleep(30)
  assert.equal(loader.calls, 2, 'one refresh for the 20 callers')
  assert.deepEqual(await cache.getOrLoad('k', loader), { v: 2 })
  assert.equal(cache.stats().staleServed, 20)
})

test('expire(key): a caller with stale: false loads; a missing or stale key answers false', T, async (t) => {
  const cache = make(t)
  const loader = h.counted((_, n) => n)
  assert.equal(await cache.expire('absent'), false)
  await cache.getOrLoad('k', loader)
  assert.equal(await cache.expire('k'), true)
  assert.equal(await cache.expire('k'), false, 'stale already')
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { stale: false, status }), 2)
  assert.equal(status.outcome, 'miss')
  assert.equal(await cache.expire(['a', 1]), false, 'keys of every form are taken')
  await assert.rejects(
    cache.expire(() => 1),
    { code: 'ERR_HERDCACHE_INVALID_KEY' },
  )
})

test('expire(key) keeps the hard TTL: the entry is gone at its hard TTL as before', T, async (t) => {
  const cache = make(t, { ttl: 1_000, hardTtl: 5_000 })
  const loader = h.counted((_, n) => n)
  await cache.getOrLoad('k', loader)
  h.advance(cache, 500)
  assert.equal(await cache.expire('k'), true)
  h.advance(cache, 4_400)
  assert.equal(await cache.get('k'), 1, 'still kept, stale, before its hard TTL')
  h.advance(cache, 200)
  assert.equal(await cache.get('k'), undefined, 'gone at its hard TTL')
})

test(
  'a refresh that was running when expire(key) came is not stored: the next reader refreshes again',
  T,
  async (t) => {
    const cache = make(t, { ttl: 1_000, hardTtl: 10_000 })
    await cache.getOrLoad('k', () => 'v1')
    h.advance(cache, 1_500)
    const gated = h.gatedLoader()
    assert.equal(await cache.getOrLoad('k', gated), 'v1', 'stale, a refresh starts')
    await h.waitFor(() => gated.runs.length === 1, 'the refresh running')
    await cache.expire('k')
    // The refresh read the database before the change expire() stands for.
    gated.runs[0].resolve('read before the change')
    await h.sleep(20)
    const later = h.counted(() => 'v2')
    assert.equal(await cache.getOrLoad('k', later), 'v1', 'still the old value, stale')
    await h.waitFor(() => later.calls === 1, 'a refresh after the expire')
    await h.waitFor(async () => (await cache.get('k')) === 'v2', 'its value stored')
  },
)
