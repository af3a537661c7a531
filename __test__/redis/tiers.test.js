'use strict'
// The call options that choose where one getOrLoad call reads and writes:
// `forceFresh` (load now, past memory and Redis), `l1: false` (Redis only)
// and `redis: false` (memory only), on a real redis-server of our own.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { waitFor, parseEnvelope, names, sleep } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** A loader that counts its runs (across the caches it is given to) and answers `{ v: run }`. */
function counter(ms = 0) {
  const load = async () => {
    const run = ++load.runs
    if (ms > 0) await sleep(ms)
    return { v: run }
  }
  load.runs = 0
  return load
}

/** Two caches on one fresh redis-server, ready. */
async function fleet(t, prefix, more = {}) {
  const redis = await startRedis(t)
  if (!redis) return {}
  const options = { redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0, ...more }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all([a.ready(), b.ready()])
  return { redis, a, b }
}

test(
  'forceFresh loads past a fresh value in memory and in Redis, coalesced, and the fleet takes the new value',
  T,
  async (t) => {
    const { redis, a, b } = await fleet(t, 'ff:')
    if (!redis) return
    const load = counter(30)
    assert.deepEqual(await a.getOrLoad('k', load), { v: 1 })
    assert.deepEqual(await b.getOrLoad('k', load), { v: 1 }, 'b reads a’s value from Redis')
    // a's fill notice may reach b after that read, and take b's copy out of
    // memory on b's next call: let it, so that b's memory holds v1 from here.
    await sleep(100)
    assert.deepEqual(await b.getOrLoad('k', load), { v: 1 })
    assert.equal(load.runs, 1)

    // Three forceFresh calls and a plain one on b while its load runs: one run.
    const statuses = [{}, {}, {}]
    const forced = statuses.map((status) => b.getOrLoad('k', load, { forceFresh: true, status }))
    const plain = b.getOrLoad('k', load)
    assert.deepEqual(await Promise.all(forced), [{ v: 2 }, { v: 2 }, { v: 2 }])
    assert.deepEqual(await plain, { v: 1 }, 'a plain call is answered from memory meanwhile')
    assert.equal(load.runs, 2, 'the forced calls share one load')
    assert.deepEqual(
      statuses.map((s) => s.outcome),
      ['miss', 'coalesced', 'coalesced'],
    )
    assert.equal(statuses[0].lock, 'won', 'the forced load took the fleet lock')
    assert.deepEqual(parseEnvelope(await redis.cmd('GET', names('ff:', 'k').value)).value, { v: 2 })
    await waitFor(async () => (await a.get('k'))?.v === 2, 'a taking in the forced value')
    assert.deepEqual(await a.getOrLoad('k', load), { v: 2 })
    assert.equal(load.runs, 2)
  },
)

test('forceFresh does not take a value another instance is loading from before the call', T, async (t) => {
  const { redis, a, b } = await fleet(t, 'ffw:')
  if (!redis) return
  const load = counter(150)
  const first = a.getOrLoad('k', load)
  await waitFor(() => load.runs === 1, 'a’s load running')
  const status = {}
  const forced = await b.getOrLoad('k', load, { forceFresh: true, status })
  assert.deepEqual(await first, { v: 1 })
  assert.deepEqual(forced, { v: 2 }, 'b waited for a’s lock, then loaded itself')
  assert.equal(load.runs, 2)
  assert.equal(status.lock, 'won')
})

test('a failing forceFresh load answers the value in memory, unless stale: false', T, async (t) => {
  const { redis, a } = await fleet(t, 'ffe:')
  if (!redis) return
  assert.deepEqual(await a.getOrLoad('k', counter()), { v: 1 })
  const failing = async () => {
    throw new Error('db down')
  }
  const status = {}
  assert.deepEqual(await a.getOrLoad('k', failing, { forceFresh: true, status }), { v: 1 })
  assert.deepEqual({ outcome: status.outcome, stale: status.stale }, { outcome: 'stale', stale: 'error' })
  await assert.rejects(a.getOrLoad('k', failing, { forceFresh: true, stale: false }), /db down/)
  await assert.rejects(a.getOrLoad('none', failing, { forceFresh: true }), /db down/, 'nothing in memory: the error')
  await assert.rejects(a.getOrLoad('k', counter(), { forceFresh: 'yes' }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
})

test('l1: false reads and writes Redis only: memory stays empty, the next call is a Redis hit', T, async (t) => {
  // Without tracking: the outside SET below must leave a's copy in memory,
  // to show that an l1: false call does not read it.
  const { redis, a, b } = await fleet(t, 'nol1:', { tracking: false })
  if (!redis) return
  const load = counter()
  assert.deepEqual(await a.getOrLoad('k', load, { l1: false }), { v: 1 })
  assert.equal(a.stats().size, 0, 'nothing kept in memory')
  assert.deepEqual(parseEnvelope(await redis.cmd('GET', names('nol1:', 'k').value)).value, { v: 1 })
  const status = {}
  assert.deepEqual(await a.getOrLoad('k', load, { l1: false, status }), { v: 1 })
  assert.equal(load.runs, 1)
  assert.deepEqual({ outcome: status.outcome, source: status.source }, { outcome: 'hit', source: 'redis' })
  assert.equal(a.stats().size, 0, 'a Redis hit is not kept either')
  assert.equal(a.stats().redisHits, 1)
  // A plain call fills memory; `l1: false` then still goes past it.
  assert.deepEqual(await a.getOrLoad('k', load), { v: 1 })
  assert.equal(a.stats().size, 1)
  await redis.cmd('SET', names('nol1:', 'k').value, 'garbage')
  const past = {}
  assert.deepEqual(await a.getOrLoad('k', load, { l1: false, status: past }), { v: 2 }, 'memory not read')
  assert.equal(past.source, 'load')
  assert.deepEqual(await b.getOrLoad('k', load), { v: 2 }, 'b reads what the l1: false load wrote')
  // A stale value in Redis: served, and its refresh keeps out of memory too.
  const entry = { l1: false, ttl: 50, hardTtl: 60_000 }
  assert.deepEqual(await a.getOrLoad('s', load, entry), { v: 3 })
  await sleep(80)
  const stale = {}
  assert.deepEqual(await a.getOrLoad('s', load, { l1: false, status: stale }), { v: 3 })
  assert.equal(stale.outcome, 'stale')
  await waitFor(() => load.runs === 4, 'the refresh')
  await waitFor(
    async () => parseEnvelope(await redis.cmd('GET', names('nol1:', 's').value))?.value?.v === 4,
    'the refresh written to Redis',
  )
  assert.equal(a.stats().size, 1, 'only the plain call’s key is in memory')
})

test('redis: false keeps the call in memory: no read, no lock, no write in Redis', T, async (t) => {
  const { redis, a, b } = await fleet(t, 'nored:')
  if (!redis) return
  const load = counter()
  const status = {}
  assert.deepEqual(await a.getOrLoad('k', load, { redis: false, status }), { v: 1 })
  assert.equal(status.lock, undefined, 'no fleet lock asked')
  assert.equal(await redis.cmd('EXISTS', names('nored:', 'k').value), 0, 'nothing written to Redis')
  assert.deepEqual(await a.getOrLoad('k', load), { v: 1 }, 'kept in memory')
  assert.deepEqual(await b.getOrLoad('k', load), { v: 2 }, 'b found nothing in Redis and loaded')
  assert.equal(load.runs, 2)
  // A value in Redis is not read either.
  assert.deepEqual(await a.getOrLoad('other', load, { redis: false }), { v: 3 })
  await b.getOrLoad('shared', load)
  assert.deepEqual(await a.getOrLoad('shared', load, { redis: false }), { v: 5 }, 'loaded here, Redis not asked')
  assert.equal(load.runs, 5)
  const failing = async () => {
    throw new Error('db down')
  }
  await assert.rejects(a.getOrLoad('bad', failing, { redis: false }), /db down/)
  assert.equal(await redis.cmd('EXISTS', names('nored:', 'bad').value), 0)
})

test('l1Ttl: past it an instance reads Redis again, so a change it was never told of reaches it', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'l1ttl:'
  const a = track(t, new Cache({ redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0, l1Ttl: 300 }))
  await a.ready()
  const load = counter()
  assert.deepEqual(await a.getOrLoad('k', load), { v: 1 })
  // Changed in Redis behind the fleet's back: no notice reaches `a`.
  const key = names(prefix, 'k').value
  const raw = await redis.cmd('GET', key)
  await redis.cmd('SET', key, raw.replace('{"v":1}', '{"v":9}'), 'KEEPTTL')
  const early = {}
  assert.deepEqual(await a.getOrLoad('k', load, { status: early }), { v: 1 }, 'within l1Ttl: memory')
  assert.equal(early.source, 'memory')
  await sleep(350)
  const late = {}
  assert.deepEqual(await a.getOrLoad('k', load, { status: late }), { v: 9 }, 'past l1Ttl: read from Redis')
  assert.deepEqual({ outcome: late.outcome, source: late.source }, { outcome: 'hit', source: 'redis' })
  assert.equal(load.runs, 1, 'still fresh in Redis: no load')
  const again = {}
  assert.deepEqual(await a.getOrLoad('k', load, { status: again }), { v: 9 })
  assert.equal(again.source, 'memory', 'the new copy is used for another l1Ttl')
  // A call's own l1Ttl: its entry's copy is used for that long.
  assert.deepEqual(await a.getOrLoad('short', load, { l1Ttl: 50 }), { v: 2 })
  await sleep(80)
  const reread = {}
  assert.deepEqual(await a.getOrLoad('short', load, { status: reread }), { v: 2 })
  assert.equal(reread.source, 'redis')
  await assert.rejects(a.getOrLoad('k', load, { l1Ttl: 0 }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
  assert.throws(() => new Cache({ l1Ttl: -1 }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
})
