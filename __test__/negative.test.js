'use strict'
// R7 negative caching: null / undefined results are "not found" markers held for negativeTtl.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const make = (t, opts = {}) => h.track(t, new Cache({ jitter: 0, beta: 0, ...opts }))

for (const [label, nothing] of [
  ['null', null],
  ['undefined', undefined],
]) {
  test(`a ${label} result is cached as a negative marker and returned as ${label}`, T, async (t) => {
    const cache = make(t)
    const loader = h.counted(() => nothing)
    const st1 = {}
    assert.equal(await cache.getOrLoad('user:404', loader, { status: st1 }), nothing)
    assert.equal(st1.outcome, 'miss')
    for (let i = 0; i < 5; i++) {
      const st = {}
      const v = await cache.getOrLoad('user:404', loader, { status: st })
      assert.equal(v, nothing, `returned as the loader returned it (${label})`)
      assert.equal(st.outcome, 'negative')
    }
    assert.equal(loader.calls, 1, 'lookups of the missing row stop reaching the loader')
    const s = cache.stats()
    assert.equal(s.negativeHits, 5)
    assert.equal(s.misses, 1)
    assert.equal(s.hits, 0)
  })
}

test('an async loader resolving null is cached the same way', T, async (t) => {
  const cache = make(t)
  const loader = h.slowLoader(10, null)
  const results = await Promise.all(Array.from({ length: 20 }, () => cache.getOrLoad('k', loader)))
  assert.ok(results.every((r) => r === null))
  assert.equal(loader.calls, 1, 'coalesced as usual')
  assert.equal(await cache.getOrLoad('k', loader), null)
  assert.equal(loader.calls, 1)
})

test('the marker lasts negativeTtl (default 5000 ms), then a new row shows up', T, async (t) => {
  const cache = make(t)
  let row = null
  const loader = h.counted(() => row)
  assert.equal(await cache.getOrLoad('user:7', loader), null)
  row = { id: 7 }
  h.advance(cache, 4900)
  assert.equal(await cache.getOrLoad('user:7', loader), null, 'still the marker at 4900 ms')
  assert.equal(loader.calls, 1)
  h.advance(cache, 200) // 5100
  const status = {}
  assert.deepEqual(await cache.getOrLoad('user:7', loader, { status }), { id: 7 })
  assert.equal(loader.calls, 2)
  assert.equal(status.outcome, 'miss')
  // the row is now a normal value
  const st2 = {}
  assert.deepEqual(await cache.getOrLoad('user:7', loader, { status: st2 }), { id: 7 })
  assert.equal(st2.outcome, 'hit')
})

test('the negativeTtl option sets the marker lifetime', T, async (t) => {
  const cache = make(t, { negativeTtl: 200 })
  const loader = h.counted(() => undefined)
  await cache.getOrLoad('k', loader)
  h.advance(cache, 150)
  await cache.getOrLoad('k', loader)
  assert.equal(loader.calls, 1)
  h.advance(cache, 100)
  await cache.getOrLoad('k', loader)
  assert.equal(loader.calls, 2)
})

test('negativeTtl 0 turns negative caching off: every call runs the loader', T, async (t) => {
  const cache = make(t, { negativeTtl: 0 })
  const loader = h.counted(() => null)
  for (let i = 0; i < 4; i++) {
    const status = {}
    assert.equal(await cache.getOrLoad('k', loader, { status }), null)
    assert.equal(status.outcome, 'miss')
  }
  assert.equal(loader.calls, 4)
  const s = cache.stats()
  assert.equal(s.negativeHits, 0)
  assert.equal(s.misses, 4)
  assert.equal(s.size, 0, 'nothing stored')
  assert.equal(await cache.get('k'), undefined)
})

test('negativeTtl 0 still coalesces concurrent callers', T, async (t) => {
  const cache = make(t, { negativeTtl: 0 })
  const loader = h.slowLoader(10, null)
  const results = await Promise.all(Array.from({ length: 10 }, () => cache.getOrLoad('k', loader)))
  assert.ok(results.every((r) => r === null))
  assert.equal(loader.calls, 1)
})

test('the negativeTtl call option overrides the cache one (and 0 on a call stores nothing)', T, async (t) => {
  const cache = make(t) // negativeTtl 5000
  const shortL = h.counted(() => null)
  await cache.getOrLoad('short', shortL, { negativeTtl: 100 })
  h.advance(cache, 150)
  await cache.getOrLoad('short', shortL)
  assert.equal(shortL.calls, 2, 'the marker written with negativeTtl 100 expired')

  const offL = h.counted(() => null)
  await cache.getOrLoad('off', offL, { negativeTtl: 0 })
  await cache.getOrLoad('off', offL)
  assert.equal(offL.calls, 2)
})

test('falsy values that are not null/undefined are normal values', T, async (t) => {
  const cache = make(t)
  for (const [key, value] of [
    ['zero', 0],
    ['false', false],
    ['empty', ''],
    ['nullish-inside', { a: null }],
    ['empty-array', []],
  ]) {
    const loader = h.counted(() => value)
    assert.deepEqual(await cache.getOrLoad(key, loader), value)
    const status = {}
    assert.deepEqual(await cache.getOrLoad(key, loader, { status }), value)
    assert.equal(status.outcome, 'hit', `${key} is a value, not a negative marker`)
    assert.equal(loader.calls, 1)
    assert.deepEqual(await cache.get(key), value)
  }
  assert.equal(cache.stats().negativeHits, 0)
})

test('delete() removes a negative marker', T, async (t) => {
  const cache = make(t)
  const loader = h.counted(() => null)
  await cache.getOrLoad('k', loader)
  assert.equal(await cache.delete('k'), true)
  await cache.getOrLoad('k', loader)
  assert.equal(loader.calls, 2)
})
