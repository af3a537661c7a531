'use strict'
// Keys are read by running JS (array element getters, a Proxy's traps): a
// getter that closes the cache gets ERR_HERDCACHE_CLOSED, never a call left
// pending for ever; a reactive array (a Proxy over an array, as Vue and MobX
// make) is a key, as Array.isArray says it is an array.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startRedis } = require('../redis-server')
const { rejectsWith, within } = require('../helpers')

const T = { timeout: 10000 }

async function withEachStore(t, body) {
  await body({})
  const redis = await startRedis(t)
  if (!redis) return
  await body({ redis: redis.url, prefix: 'keys:' })
}

test('a key whose getter closes the cache: the call rejects with ERR_HERDCACHE_CLOSED', T, async (t) => {
  await withEachStore(t, async (options) => {
    for (const call of ['getOrLoad', 'get', 'set', 'delete']) {
      const cache = new Cache(options)
      const key = ['user']
      Object.defineProperty(key, 1, {
        get: () => {
          cache.close()
          return 'x'
        },
        enumerable: true,
      })
      const args = { getOrLoad: [key, () => 'v'], get: [key], set: [key, 1], delete: [key] }[call]
      await within(rejectsWith(cache[call](...args), 'ERR_HERDCACHE_CLOSED'), 2000, `${call} after close in a getter`)
      await within(cache.close(), 2000, 'close')
    }
  })
})

test('a Proxy over an array is a key, the same key as the array it wraps', T, async (t) => {
  await withEachStore(t, async (options) => {
    const cache = new Cache(options)
    const reactive = new Proxy(['user', 42], {})
    assert.equal(Array.isArray(reactive), true)
    assert.equal(await cache.getOrLoad(reactive, () => 'proxied'), 'proxied')
    assert.equal(await cache.getOrLoad(['user', 42], () => 'plain'), 'proxied', 'the same key as the plain array')
    const traps = new Proxy(['user', 7], { get: (target, p) => (p === 'length' ? 1 : target[p]) })
    assert.equal(await cache.getOrLoad(traps, () => 'short'), 'short')
    assert.equal(await cache.getOrLoad(['user'], () => 'other'), 'short', 'read through its traps')
    await rejectsWith(
      cache.getOrLoad(new Proxy({}, {}), () => 1),
      'ERR_HERDCACHE_INVALID_KEY',
    )
    await cache.close()
  })
})
