'use strict'
// Issue 28, with Redis: a hit index.js remembered (src/engine/epoch.rs) is
// not answered again once another instance's change or a change made
// outside herdcache was queued for this L1 (the queue moves the epoch from
// the subscription's thread), and remembered hits count as L1 hits.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { waitFor, names } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** Until `cache` answers `key` with `value` from memory (loading with `loader`), then `n` plain calls in a row. */
async function remembered(cache, key, value, n = 5, loader = () => 'WRONG') {
  await waitFor(
    async () => {
      const status = {}
      return (await cache.getOrLoad(key, loader, { status })) === value && status.source === 'memory'
    },
    `${key} in memory`,
    5000,
    2,
  )
  for (let i = 0; i < n; i++) assert.equal(await cache.getOrLoad(key, () => 'WRONG'), value)
}

test(
  "another instance's set and delete, and a DEL made outside herdcache, end a remembered hit at once",
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const options = { redis: redis.url, prefix: 'rem:', ttl: 600_000 }
    const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
    await Promise.all([a.ready(), b.ready()])
    await a.set('k', 'v1')
    await remembered(b, 'k', 'v1')
    const hitsBefore = b.stats()
    await a.set('k', 'v2')
    await waitFor(async () => (await b.getOrLoad('k', () => 'WRONG')) === 'v2', "B seeing A's set", 1000, 1)
    await remembered(b, 'k', 'v2')
    await a.delete('k')
    await waitFor(async () => (await b.getOrLoad('k', () => 'v3')) === 'v3', "B seeing A's delete", 1000, 1)
    // A load begun within the delete's millisecond is not kept (it may have
    // read what the delete removed): B loads again until its value stays.
    await remembered(b, 'k', 'v3', 5, () => 'v3')
    await redis.cmd('DEL', names('rem:', 'k').value)
    await waitFor(async () => (await b.getOrLoad('k', () => 'v4')) === 'v4', 'B seeing the outside DEL', 1000, 1)
    const s = b.stats()
    // Two rounds of 5 plain calls answered from memory (most of them remembered), at least.
    assert.ok(
      s.l1Hits - hitsBefore.l1Hits >= 10,
      `remembered hits counted as L1 hits (${s.l1Hits - hitsBefore.l1Hits})`,
    )
    assert.ok(s.hits - hitsBefore.hits >= s.l1Hits - hitsBefore.l1Hits, 'and as hits')
  },
)
