'use strict'
// The embedded store: get / set / delete / clear, JSON values, in-flight invalidation, LRU, expiry.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const make = (t, opts = {}) => h.track(t, new Cache({ jitter: 0, beta: 0, ...opts }))

test('set / get / delete / clear', T, async (t) => {
  const cache = make(t)
  assert.equal(await cache.get('a'), undefined)
  await cache.set('a', { n: 1 })
  await cache.set(['b', 2], [1, 2, 3])
  await cache.set('c', 'str')
  assert.deepEqual(await cache.get('a'), { n: 1 })
  assert.deepEqual(await cache.get(['b', 2]), [1, 2, 3])
  assert.equal(await cache.get('c'), 'str')
  assert.equal(cache.stats().size, 3)

  await cache.set('a', { n: 2 }) // overwrite
  assert.deepEqual(await cache.get('a'), { n: 2 })
  assert.equal(cache.stats().size, 3)

  assert.equal(await cache.delete('a'), true)
  assert.equal(await cache.delete('a'), false, 'nothing left to remove')
  assert.equal(await cache.delete('never'), false)
  assert.equal(await cache.get('a'), undefined)
  assert.equal(cache.stats().size, 2)

  await cache.clear()
  assert.equal(await cache.get(['b', 2]), undefined)
  assert.equal(await cache.get('c'), undefined)
  assert.equal(cache.stats().size, 0)
})

test('a value written by set() is a hit for getOrLoad; after delete() the loader runs', T, async (t) => {
  const cache = make(t)
  const loader = h.counted(() => 'loaded')
  await cache.set('k', 'manual')
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'manual')
  assert.equal(status.outcome, 'hit')
  assert.equal(loader.calls, 0)
  await cache.delete('k')
  assert.equal(await cache.getOrLoad('k', loader), 'loaded')
  assert.equal(loader.calls, 1)
})

test('clear() makes every key load again', T, async (t) => {
  const cache = make(t)
  const loader = h.counted((ctx) => ctx.key)
  await cache.getOrLoad('x', loader)
  await cache.getOrLoad('y', loader)
  await cache.clear()
  await cache.getOrLoad('x', loader)
  await cache.getOrLoad('y', loader)
  assert.equal(loader.calls, 4)
})

test('set() with { ttl, hardTtl }', T, async (t) => {
  const cache = make(t, { ttl: 10000 })
  await cache.set('k', 'v', { ttl: 100, hardTtl: 300 })
  h.advance(cache, 150)
  assert.equal(await cache.get('k', { stale: false }), undefined)
  assert.equal(await cache.get('k'), 'v', 'stale after its ttl')
  h.advance(cache, 200)
  assert.equal(await cache.get('k'), undefined, 'gone after its hardTtl')
})

test('values are stored as JSON: a call returns JSON.parse(JSON.stringify(result)), loaded or cached', T, async (t) => {
  const cache = make(t)
  const original = { d: new Date(0), u: undefined, list: [1, undefined, 'x'], nested: { ok: true }, nan: NaN }
  const expected = JSON.parse(JSON.stringify(original))
  const loaded = await cache.getOrLoad('k', () => original)
  assert.deepEqual(loaded, expected)
  assert.notEqual(loaded, original, 'not the loader object itself')
  original.nested.ok = false // mutating the loader's object later changes nothing
  const cached = await cache.getOrLoad('k', () => 'unused')
  assert.deepEqual(cached, expected)
  assert.deepEqual(await cache.get('k'), expected)
})

test('set() stores a JSON copy of the value', T, async (t) => {
  const cache = make(t)
  const obj = { a: 1, when: new Date(0) }
  await cache.set('k', obj)
  obj.a = 2
  assert.deepEqual(await cache.get('k'), { a: 1, when: '1970-01-01T00:00:00.000Z' })
})

test(
  'delete() during an in-flight load: the load is not stored and the next caller starts a new load',
  T,
  async (t) => {
    const cache = make(t)
    const loader = h.gatedLoader()
    const old = cache.getOrLoad('k', loader)
    await h.waitFor(() => loader.calls === 1, 'the first load')
    await cache.delete('k')

    const next = cache.getOrLoad('k', loader)
    await h.waitFor(() => loader.calls === 2, 'a new load after delete()', 1000)

    loader.runs[1].resolve('new')
    assert.equal(await next, 'new')
    loader.runs[0].resolve('old') // the stale flight lands last
    assert.equal(await old, 'old', 'its own waiters still get its result')
    await h.waitFor(() => cache.stats().inFlight === 0, 'both loads to settle')
    assert.equal(await cache.get('k'), 'new', 'the invalidated load did not overwrite')
  },
)

test('delete() during an in-flight load: its result is not stored even when nothing else loads', T, async (t) => {
  const cache = make(t)
  const loader = h.gatedLoader()
  const p = cache.getOrLoad('k', loader)
  await h.waitFor(() => loader.calls === 1, 'the load')
  await cache.delete('k')
  loader.runs[0].resolve('v')
  assert.equal(await p, 'v')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the load to settle')
  assert.equal(await cache.get('k'), undefined)
  const again = h.counted(() => 'again')
  assert.equal(await cache.getOrLoad('k', again), 'again')
  assert.equal(again.calls, 1)
})

test('set() during an in-flight load: the load is not stored when it lands', T, async (t) => {
  const cache = make(t)
  const loader = h.gatedLoader()
  const p = cache.getOrLoad('k', loader)
  await h.waitFor(() => loader.calls === 1, 'the load')
  await cache.set('k', 'manual')
  loader.runs[0].resolve('loaded')
  assert.equal(await p, 'loaded')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the load to settle')
  assert.equal(await cache.get('k'), 'manual')
  const status = {}
  assert.equal(await cache.getOrLoad('k', loader, { status }), 'manual')
  assert.equal(status.outcome, 'hit')
  assert.equal(loader.calls, 1)
})

test('maxEntries: the least recently used entry is evicted (a getOrLoad hit is a use)', T, async (t) => {
  const cache = make(t, { maxEntries: 3 })
  const loader = h.counted((ctx) => ctx.key)
  await cache.getOrLoad('a', loader)
  await cache.getOrLoad('b', loader)
  await cache.getOrLoad('c', loader)
  await cache.getOrLoad('a', loader) // touch a: b is now the least recently used
  assert.equal(loader.calls, 3)
  await cache.getOrLoad('d', loader)
  const s = cache.stats()
  assert.equal(s.size, 3)
  assert.equal(s.evictions, 1)
  assert.equal(await cache.get('b'), undefined, 'b (least recently used) was evicted')
  assert.equal(await cache.get('a'), 'a', 'a (least recently inserted but recently used) stays')
  assert.equal(await cache.get('c'), 'c')
  assert.equal(await cache.get('d'), 'd')
})

test('maxEntries: get() is a use too, and set() inserts under the bound', T, async (t) => {
  const cache = make(t, { maxEntries: 2 })
  await cache.set('x', 1)
  await cache.set('y', 2)
  assert.equal(await cache.get('x'), 1) // y is now the least recently used
  await cache.set('z', 3)
  assert.equal(await cache.get('y'), undefined)
  assert.equal(await cache.get('x'), 1)
  assert.equal(await cache.get('z'), 3)
  assert.equal(cache.stats().evictions, 1)
  assert.equal(cache.stats().size, 2)
})

test('maxEntries holds under many writes', T, async (t) => {
  const cache = make(t, { maxEntries: 50 })
  for (let i = 0; i < 500; i++) await cache.set(['k', i], i)
  const s = cache.stats()
  assert.equal(s.size, 50)
  assert.equal(s.evictions, 450)
  assert.equal(await cache.get(['k', 499]), 499)
  assert.equal(await cache.get(['k', 0]), undefined)
})

test('entries past their hard TTL are reclaimed: expirations rises, size drops', T, async (t) => {
  const cache = make(t, { ttl: 100, hardTtl: 200 })
  await cache.getOrLoad('a', () => 1)
  await cache.getOrLoad('b', () => 2)
  await cache.set('c', 3)
  await cache.set('keep', 4, { ttl: 10000, hardTtl: 20000 })
  assert.equal(cache.stats().size, 4)
  // When reclamation happens is not specified (a lazy sweep is fine): go well past the hard TTL.
  h.advance(cache, 2000)
  for (const k of ['a', 'b', 'c']) assert.equal(await cache.get(k), undefined)
  const s = cache.stats()
  assert.equal(s.expirations, 3)
  assert.equal(s.size, 1)
  assert.equal(s.evictions, 0)
  assert.equal(await cache.get('keep'), 4)

  // an expired entry reached through getOrLoad is a miss, and reclaimed once
  await cache.getOrLoad('e', () => 5)
  h.advance(cache, 2000)
  const loader = h.counted(() => 6)
  assert.equal(await cache.getOrLoad('e', loader), 6)
  assert.equal(loader.calls, 1)
  assert.equal(cache.stats().expirations, 4)
})

test('prefix namespaces keys without changing what callers see', T, async (t) => {
  const cache = make(t, { prefix: 'app1:' })
  const loader = h.counted((ctx) => ({ key: ctx.key }))
  assert.deepEqual(await cache.getOrLoad(['u', 1], loader), { key: ['u', 1] })
  assert.deepEqual(await cache.get('u:1'), { key: ['u', 1] })
  assert.equal(await cache.delete(['u', 1]), true)
})

test('get and set reject unknown or malformed options, and store nothing', h.T, async (t) => {
  const cache = h.track(t, new Cache())
  for (const [call, what] of [
    [() => cache.get('k', { stal: false }), 'get typo'],
    [() => cache.get('k', 5), 'get number'],
    [() => cache.set('k', 1, { ttll: 5 }), 'set typo'],
    [() => cache.set('k', 1, { ttl: 'soon' }), 'set wrong type'],
    [() => cache.set('k', 1, { ttl: -1 }), 'set out of range'],
  ]) {
    await assert.rejects(call(), (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION', what)
  }
  assert.equal(await cache.get('k'), undefined)
  assert.equal(cache.stats().size, 0)
})
