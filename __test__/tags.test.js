'use strict'
// Tags on the embedded store: `deleteByTag` invalidates every entry carrying
// the tag, lazily (each entry is judged by its tags' invalidation stamps as
// it is read), and nothing else. The fleet is in __test__/redis/tags.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h

// jitter 0 and beta 0: only deleteByTag makes an entry go.
function make(t, opts = {}) {
  return h.track(t, new Cache({ ttl: 60_000, jitter: 0, beta: 0, ...opts }))
}

test('deleteByTag invalidates the entries carrying the tag, and only them; 20 callers then load once', T, async (t) => {
  const cache = make(t)
  const loader = h.counted(({ key }, n) => ({ key, n }))
  await cache.getOrLoad('user:1:profile', loader, { tags: ['user:1'] })
  await cache.getOrLoad('user:1:feed', loader, { tags: ['user:1', 'feed'] })
  await cache.getOrLoad('user:2:profile', loader, { tags: ['user:2'] })
  await cache.getOrLoad('untagged', loader)
  await cache.set('user:1:settings', { dark: true }, { tags: ['user:1'] })
  assert.equal(loader.calls, 4)

  assert.equal(await cache.deleteByTag('user:1'), undefined, 'no Redis: nothing to wait for')
  assert.equal(await cache.get('user:1:settings'), undefined, 'a set value carrying the tag is gone')
  assert.equal(await cache.get('user:1:feed'), undefined)
  assert.deepEqual(await cache.get('user:2:profile'), { key: 'user:2:profile', n: 3 }, 'another tag is kept')
  assert.deepEqual(await cache.get('untagged'), { key: 'untagged', n: 4 }, 'an untagged entry is kept')

  const statuses = Array.from({ length: 20 }, () => ({}))
  const answers = await Promise.all(
    statuses.map((status) => cache.getOrLoad('user:1:profile', loader, { tags: ['user:1'], status })),
  )
  assert.equal(loader.calls, 5, 'one load for the 20 callers')
  for (const answer of answers) assert.deepEqual(answer, { key: 'user:1:profile', n: 5 })
  assert.equal(statuses[0].outcome, 'miss', 'an invalidated entry is a miss, never served stale')
  // The reload was stamped after the invalidation: it stays.
  assert.deepEqual(await cache.getOrLoad('user:1:profile', loader, { tags: ['user:1'] }), {
    key: 'user:1:profile',
    n: 5,
  })
  assert.equal(loader.calls, 5)
})

test('deleteByTag takes several tags; a load right after it in the same millisecond is kept', T, async (t) => {
  const cache = make(t)
  const loader = h.counted((_, n) => n)
  await cache.getOrLoad('a', loader, { tags: ['x'] })
  await cache.getOrLoad('b', loader, { tags: ['y'] })
  await cache.getOrLoad('c', loader, { tags: ['z'] })
  await cache.deleteByTag(['x', 'y'])
  assert.deepEqual([await cache.get('a'), await cache.get('b'), await cache.get('c')], [undefined, undefined, 3])
  // Synchronous: all in one millisecond most of the time.
  for (let i = 0; i < 50; i++) {
    cache.deleteByTag('x')
    cache.set('a', i, { tags: ['x'] })
    assert.equal(await cache.get('a'), i, `a set after the invalidation counts (round ${i})`)
    cache.set('a', -1, { tags: ['x'] })
    cache.deleteByTag('x')
    assert.equal(await cache.get('a'), undefined, `a set before the invalidation does not (round ${i})`)
  }
})

test('a load running when its tag is invalidated answers its callers but is not stored', T, async (t) => {
  const cache = make(t)
  const gate = h.gatedLoader()
  const first = cache.getOrLoad('k', gate, { tags: ['t'] })
  await h.tick()
  cache.deleteByTag('t')
  gate.runs[0].resolve('from old data')
  assert.equal(await first, 'from old data', 'its callers still get it')
  assert.equal(await cache.get('k'), undefined, 'not kept: it may have read what changed')
  const loader = h.counted(() => 'fresh')
  assert.equal(await cache.getOrLoad('k', loader, { tags: ['t'] }), 'fresh')
  // A load of another tag is untouched.
  const other = h.gatedLoader()
  const kept = cache.getOrLoad('o', other, { tags: ['u'] })
  await h.tick()
  cache.deleteByTag('t')
  other.runs[0].resolve('kept')
  assert.equal(await kept, 'kept')
  assert.equal(await cache.get('o'), 'kept')
})

test(
  'a stale entry carrying an invalidated tag is not served stale; a refresh keeps the entry’s tags',
  T,
  async (t) => {
    const cache = make(t, { ttl: 1_000, hardTtl: 60_000 })
    const loader = h.counted((_, n) => n)
    await cache.getOrLoad('k', loader, { tags: ['t'] })
    h.advance(cache, 1_500)
    // Stale: answered at once, and refreshed by a caller who gives no tags.
    assert.equal(await cache.getOrLoad('k', loader), 1)
    await h.waitFor(() => loader.calls === 2, 'the refresh')
    await h.waitFor(async () => (await cache.get('k', { stale: false })) === 2, 'the refreshed value')
    cache.deleteByTag('t')
    assert.equal(await cache.get('k'), undefined, 'the refreshed entry kept tag t')
    await cache.getOrLoad('s', loader, { tags: ['t'] })
    h.advance(cache, 1_500)
    cache.deleteByTag('t')
    const status = {}
    assert.equal(await cache.getOrLoad('s', loader, { tags: ['t'], status }), 4, 'loaded, not the stale 3')
    assert.equal(status.outcome, 'miss')
  },
)

test('tags that are not a list of non-empty strings are refused with a code, and nothing is lost', T, async (t) => {
  const cache = make(t)
  const loader = h.counted(() => 'v')
  await cache.getOrLoad('kept', loader, { tags: ['t'] })
  const bad = [
    'user:1',
    [''],
    [1],
    ['ok', null],
    { 0: 'a', length: 1 },
    Array.from({ length: 65 }, (_, i) => `t${i}`),
    ['x'.repeat(1025)],
  ]
  for (const tags of bad) {
    await assert.rejects(cache.getOrLoad('k', loader, { tags }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
    await assert.rejects(cache.set('k', 1, { tags }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
  }
  for (const tags of [5, null, undefined, [''], [{}], {}]) {
    await assert.rejects(cache.deleteByTag(tags), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
  }
  assert.equal(loader.calls, 1, 'no loader ran for a refused call')
  assert.equal(await cache.get('kept'), 'v', 'the cache is untouched')
  // Order and repeats do not matter; 64 tags and 1024-byte tags are fine.
  const many = Array.from({ length: 64 }, (_, i) => `t${i % 60}`).reverse()
  assert.equal(await cache.getOrLoad('many', loader, { tags: many }), 'v')
  assert.equal(await cache.getOrLoad('long', loader, { tags: ['x'.repeat(1024)] }), 'v')
  cache.deleteByTag('t59')
  assert.equal(await cache.get('many'), undefined)
  assert.equal(await cache.get('long'), 'v')
})

test(
  'tags belong to the cache: a namespace view tags its entries and its deleteByTag reaches every view',
  T,
  async (t) => {
    const cache = make(t)
    const users = cache.namespace('users')
    const feeds = cache.namespace('feeds')
    const loader = h.counted((_, n) => n)
    await users.getOrLoad('42', loader, { tags: ['user:42'] })
    await feeds.getOrLoad('42', loader, { tags: ['user:42'] })
    await feeds.getOrLoad('7', loader, { tags: ['user:7'] })
    await users.deleteByTag('user:42')
    assert.deepEqual([await users.get('42'), await feeds.get('42'), await feeds.get('7')], [undefined, undefined, 3])
  },
)

test('after close(), deleteByTag rejects with ERR_HERDCACHE_CLOSED', T, async (t) => {
  const cache = make(t)
  await cache.close()
  await assert.rejects(cache.deleteByTag('t'), { code: 'ERR_HERDCACHE_CLOSED' })
})
