'use strict'
// Keys and values are stored losslessly. A key with a lone surrogate (half
// of a UTF-16 pair, e.g. an emoji cut by .slice()) would read as U+FFFD and
// share its entry with another key: it is refused. String values come back
// exactly as JSON.parse(JSON.stringify(v)), on a miss and on every hit.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('./redis-server')
const { Cache } = require('..')
const h = require('./helpers')

const LONE = ['\uD800', 'a\uDC00', 'x\uD83D', '\uDE00y', '👍'.slice(0, 1)]

async function refusesLoneSurrogates(cache) {
  for (const bad of LONE) {
    for (const key of [bad, ['user', bad], ['user', 42, bad]]) {
      let ran = false
      await assert.rejects(
        cache.getOrLoad(key, () => {
          ran = true
          return 'never'
        }),
        (e) => e.code === 'ERR_HERDCACHE_INVALID_KEY' && /lone surrogate/.test(e.message),
        JSON.stringify(key),
      )
      assert.equal(ran, false)
      await assert.rejects(cache.set(key, 1), (e) => e.code === 'ERR_HERDCACHE_INVALID_KEY')
      await assert.rejects(cache.get(key), (e) => e.code === 'ERR_HERDCACHE_INVALID_KEY')
      await assert.rejects(cache.delete(key), (e) => e.code === 'ERR_HERDCACHE_INVALID_KEY')
    }
  }
  // The replacement character itself, and well-formed pairs, are fine keys,
  // each its own.
  assert.equal(await cache.getOrLoad('\uFFFD', () => 'replacement'), 'replacement')
  assert.equal(await cache.getOrLoad('👍', () => 'thumbs'), 'thumbs')
  assert.equal(await cache.getOrLoad(['u', '\uFFFD', '👍'], () => 'parts'), 'parts')
  assert.equal(await cache.getOrLoad('\uFFFD', () => 'reloaded'), 'replacement')
}

async function valuesRoundTrip(cache, prefix) {
  const values = ['\uD800x', 'a\uDC00', '\uFFFD', '👍', { s: '\uD800', t: ['\uDFFF'] }, ['\uD83D']]
  for (const [i, value] of values.entries()) {
    const expected = JSON.parse(JSON.stringify(value))
    const key = `${prefix}v${i}`
    assert.deepEqual(await cache.getOrLoad(key, () => value), expected, `miss ${i}`)
    for (let hit = 0; hit < 3; hit++) {
      assert.deepEqual(await cache.getOrLoad(key, () => 'reloaded'), expected, `hit ${hit} of ${i}`)
    }
    assert.deepEqual(await cache.get(key), expected, `get ${i}`)
    await cache.set(`${key}:set`, value)
    assert.deepEqual(await cache.get(`${key}:set`), expected, `set ${i}`)
  }
}

test('embedded store: keys with lone surrogates are refused, never confused with U+FFFD', h.T, async (t) => {
  const cache = h.track(t, new Cache())
  await refusesLoneSurrogates(cache)
  assert.equal(cache.stats().loads, 3)
})

test('embedded store: string values with lone surrogates come back exactly, on hits too', h.T, async (t) => {
  await valuesRoundTrip(h.track(t, new Cache()), '')
})

test(
  'Redis: keys with lone surrogates are refused; values round-trip through Redis and other instances',
  h.T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const a = h.track(t, new Cache({ redis: redis.url, prefix: 'u:' }))
    const b = h.track(t, new Cache({ redis: redis.url, prefix: 'u:', l1: false }))
    await refusesLoneSurrogates(a)
    await valuesRoundTrip(a, 'r')
    // Another instance reads what a wrote, through Redis.
    assert.deepEqual(await b.getOrLoad('rv0', () => 'reloaded'), '\uD800x')
    assert.deepEqual(await b.getOrLoad('rv4', () => 'reloaded'), { s: '\uD800', t: ['\uDFFF'] })
  },
)
