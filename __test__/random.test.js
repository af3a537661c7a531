'use strict'
// A seeded random workload: thousands of interleaved getOrLoad / get / set /
// delete / clear calls and clock moves, with loaders that return, find
// nothing, throw, reject, hang or resolve late, and callers that abort.
// Whatever the interleaving: every call settles, no key is ever answered with
// another key's value, only expected errors appear, and the counters add up.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, kTesting } = require('..')

const { mulberry32: prng } = require('../scripts/prng')

class LoaderError extends Error {}

const KEYS = [
  'a',
  'b:c',
  ['b', 'c'],
  ['t1', 'feed', 'en'],
  ['t2', 'feed', 'en'],
  ['t1', 'feed:en'],
  ['n', 1],
  ['n', '1'],
  'long'.repeat(40),
]
const name = (key) => (Array.isArray(key) ? key.map((p) => String(p).replace(/[\\:]/g, '\\$&')).join(':') : key)

for (const seed of [1, 2, 3]) {
  test(`random workload, seed ${seed}`, { timeout: 30000 }, async () => {
    const random = prng(seed)
    const pick = (list) => list[Math.floor(random() * list.length)]
    const cache = new Cache({
      ttl: 100,
      hardTtl: 400,
      negativeTtl: 50,
      maxEntries: 6,
      hardTimeout: 80,
      refreshBackoff: 60,
      softTimeout: seed === 2 ? 5 : 0,
    })
    let loaderRuns = 0
    let getOrLoadCalls = 0
    let version = 0
    const loaders = {
      value: ({ key }) => ({ key: name(key), version: ++version }),
      async: async ({ key }) => ({ key: name(key), version: ++version }),
      late: ({ key }) => new Promise((resolve) => setTimeout(() => resolve({ key: name(key), version: ++version }), 5)),
      none: () => null,
      throws: () => {
        throw new LoaderError('thrown')
      },
      rejects: async () => {
        throw new LoaderError('rejected')
      },
      hangs: ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
    }
    const kinds = Object.keys(loaders)
    const pending = []
    const expectValueFor = (key) => (value) => {
      if (value === null || value === undefined) return
      assert.equal(value.key, name(key), "a key was answered with another key's value")
    }
    const allowedError = (error) =>
      error instanceof LoaderError || error?.name === 'AbortError' || error?.code === 'ERR_HERDCACHE_TIMEOUT'

    for (let step = 0; step < 1500; step++) {
      const key = pick(KEYS)
      const roll = random()
      if (roll < 0.7) {
        const kind = pick(kinds)
        const loader = (ctx) => {
          loaderRuns++
          return loaders[kind](ctx)
        }
        const options = {}
        if (random() < 0.2) options.stale = false
        if (random() < 0.1) options.ttl = 50 + Math.floor(random() * 100)
        let controller
        if (random() < 0.1) {
          controller = new AbortController()
          options.signal = controller.signal
        }
        getOrLoadCalls++
        const promise = cache.getOrLoad(key, loader, options)
        if (controller && random() < 0.5) controller.abort()
        pending.push(promise.then(expectValueFor(key), (error) => assert.ok(allowedError(error), String(error))))
      } else if (roll < 0.78) {
        pending.push(cache.get(key).then(expectValueFor(key)))
      } else if (roll < 0.84) {
        pending.push(cache.set(key, { key: name(key), version: ++version }))
      } else if (roll < 0.9) {
        pending.push(cache.delete(key))
      } else if (roll < 0.905) {
        pending.push(cache.clear())
      } else if (roll < 0.95) {
        cache[kTesting].advanceClock(Math.floor(random() * 150))
      } else {
        await Promise.all(pending.splice(0))
        await new Promise((resolve) => setTimeout(resolve, random() < 0.2 ? 20 : 0))
      }
    }
    await Promise.all(pending.splice(0))
    // Loads still running (late, hanging) settle by hardTimeout at the latest.
    for (let i = 0; i < 100 && cache.stats().inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10))

    const s = cache.stats()
    assert.equal(s.inFlight, 0)
    assert.ok(s.size <= 6, `size ${s.size} over maxEntries`)
    assert.equal(s.hits + s.staleServed + s.negativeHits + s.misses + s.coalesced, getOrLoadCalls)
    assert.equal(s.loads, loaderRuns)
    for (const counter of [
      'hits',
      'staleServed',
      'negativeHits',
      'misses',
      'coalesced',
      'loadErrors',
      'backgroundRefreshes',
      'timeouts',
    ]) {
      assert.ok(s[counter] > 0, `the workload never reached ${counter}: ${JSON.stringify(s)}`)
    }
    await cache.close()
  })
}
