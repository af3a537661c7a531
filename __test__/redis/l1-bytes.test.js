'use strict'
// Memory bounded in bytes: `l1MaxBytes` evicts the least recently used
// values past it, `l1MaxValueBytes` keeps a big value out of memory (read
// from Redis each call, coalesced), embedded and on a real redis-server.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { parseEnvelope, names } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** A string value whose JSON text is `bytes` long (its two quotes included). */
function text(bytes, fill = 'x') {
  return fill.repeat(bytes - 2)
}

test('l1MaxBytes: the least recently used values leave past it, and l1Bytes counts what stays', T, async (t) => {
  const cache = track(t, new Cache({ l1MaxBytes: 3_000 }))
  let runs = 0
  const load = (bytes) => () => {
    runs++
    return text(bytes)
  }
  for (const key of ['a', 'b']) await cache.getOrLoad(key, load(1_000))
  assert.equal(cache.stats().l1Bytes, 2 * (1_000 + 1), 'each value’s JSON text and its one-byte key')
  await cache.getOrLoad('a', load(1_000)) // a is now the most recently used
  await cache.getOrLoad('c', load(1_500))
  assert.deepEqual(
    { size: cache.stats().size, bytes: cache.stats().l1Bytes, evictions: cache.stats().evictions },
    { size: 2, bytes: 1_001 + 1_501, evictions: 1 },
  )
  assert.equal(runs, 3)
  await cache.getOrLoad('a', load(1_000))
  assert.equal(runs, 3, 'a stayed')
  await cache.getOrLoad('b', load(1_000))
  assert.equal(runs, 4, 'b was evicted: loaded again')
  await cache.delete('b')
  await cache.clear()
  assert.equal(cache.stats().l1Bytes, 0)
  assert.throws(() => new Cache({ l1MaxBytes: 0 }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
  assert.throws(() => new Cache({ l1MaxValueBytes: 1.5 }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
})

test('l1MaxValueBytes without Redis: a bigger value is not kept, each call loads (coalesced)', T, async (t) => {
  const cache = track(t, new Cache({ l1MaxValueBytes: 100 }))
  let runs = 0
  const big = async () => {
    runs++
    await new Promise((resolve) => setTimeout(resolve, 20))
    return text(500)
  }
  const first = await Promise.all(Array.from({ length: 10 }, () => cache.getOrLoad('big', big)))
  assert.equal(first[0].length, 498)
  assert.equal(runs, 1, 'ten calls, one load')
  assert.equal(cache.stats().size, 0, 'not kept')
  await cache.getOrLoad('big', big)
  assert.equal(runs, 2)
  await cache.getOrLoad('small', () => text(50))
  assert.deepEqual({ size: cache.stats().size, bytes: cache.stats().l1Bytes }, { size: 1, bytes: 50 + 5 })
})

test(
  'l1MaxValueBytes with Redis: a big value lives in Redis only and is read from there on each call',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'l1b:'
    const options = { redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0, l1MaxValueBytes: 1_000 }
    const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
    await Promise.all([a.ready(), b.ready()])
    let runs = 0
    const load = async () => {
      runs++
      return { page: text(5_000, 'p') }
    }
    assert.equal((await a.getOrLoad('page', load)).page.length, 4_998)
    assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'page').value)).value.page.length, 4_998)
    assert.equal(a.stats().size, 0, 'too big for memory: Redis only')
    const statuses = Array.from({ length: 5 }, () => ({}))
    const again = await Promise.all(statuses.map((status) => b.getOrLoad('page', load, { status })))
    assert.ok(again.every((v) => v.page.length === 4_998))
    assert.equal(runs, 1, 'one load for the fleet')
    assert.deepEqual(
      statuses.map((s) => s.source),
      ['redis', 'redis', 'redis', 'redis', 'redis'],
    )
    assert.equal(b.stats().redisHits, 1, 'five calls, one Redis read')
    assert.equal(b.stats().size, 0)
    const small = await a.getOrLoad('small', () => ({ ok: true }))
    assert.deepEqual(small, { ok: true })
    assert.equal(a.stats().size, 1, 'a small value is kept as ever')
  },
)
