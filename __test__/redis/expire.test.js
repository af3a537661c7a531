'use strict'
// expire(key) across a fleet: the instance that expires a key makes Redis's
// envelope stale (value and TTL kept) and announces it; every instance's L1
// marks its copy stale, so each answers the old value at once, and one
// refresh runs fleet-wide. An expire that cannot reach Redis is delivered
// once it answers again, or reported at close(). Our own server on 127.0.0.1.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, within } = require('../helpers')
const { sleep, waitFor, parseEnvelope, names, heldLoad } = require('./fixtures/fleet')

const T = { timeout: 20000 }
/** Short bounds: the breaker opens after one 200 ms timeout and Redis is probed again every 300 ms. */
const OUTAGE = { redisTimeout: 200, circuitBreakerDuration: 300 }

/** A loader that counts its runs (across the caches it is given to) and answers `{ v: run }`. */
function counter() {
  const load = () => ({ v: ++load.runs })
  load.runs = 0
  return load
}

test('expire(key) on one instance: all three serve the old value at once and one refresh runs', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'exp:'
  const options = { redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0 }
  const [a, b, c] = [0, 1, 2].map(() => track(t, new Cache(options)))
  await Promise.all([a, b, c].map((cache) => cache.ready()))
  const load = counter()
  for (const cache of [a, b, c]) assert.deepEqual(await cache.getOrLoad('k', load), { v: 1 })
  assert.equal(load.runs, 1)
  const before = parseEnvelope(await redis.cmd('GET', names(prefix, 'k').value))
  const ttlBefore = await redis.cmd('PTTL', names(prefix, 'k').value)

  const t0 = Date.now()
  assert.equal(await a.expire('k'), true)
  const after = parseEnvelope(await redis.cmd('GET', names(prefix, 'k').value))
  assert.ok(after.freshUntil >= t0 - 1000 && after.freshUntil <= Date.now() + 1000, 'stale from the expire')
  assert.deepEqual(
    { ...after, freshUntil: 0, refreshAt: 0 },
    { ...before, freshUntil: 0, refreshAt: 0 },
    'value, stamp and hard TTL kept',
  )
  const ttlAfter = await redis.cmd('PTTL', names(prefix, 'k').value)
  assert.ok(ttlAfter > ttlBefore - 5000, `the key's TTL is kept (${ttlBefore} ms, then ${ttlAfter} ms)`)
  await waitFor(
    async () =>
      (await b.get('k', { stale: false })) === undefined && (await c.get('k', { stale: false })) === undefined,
    "the other instances' L1s marking it stale",
  )

  const statuses = []
  const calls = [a, b, c].flatMap((cache) =>
    Array.from({ length: 20 }, () => {
      const status = {}
      statuses.push(status)
      return cache.getOrLoad('k', load, { status })
    }),
  )
  for (const value of await Promise.all(calls)) assert.deepEqual(value, { v: 1 }, 'the old value')
  assert.deepEqual(new Set(statuses.map((s) => s.outcome)), new Set(['stale']), 'from each L1, at once')
  await waitFor(() => load.runs === 2, 'the refresh')
  await sleep(300)
  assert.equal(load.runs, 2, 'one refresh across the three instances')
  for (const cache of [a, b, c]) {
    await waitFor(async () => (await cache.get('k', { stale: false }))?.v === 2, 'the refreshed value everywhere')
  }
})

test(
  'an expire made while Redis is paused lands once it resumes; close() reports one it could not deliver',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'exp-rec:'
    const errors = []
    const a = track(t, new Cache({ redis: redis.url, prefix, ttl: 60_000, onError: (e) => errors.push(e), ...OUTAGE }))
    const b = track(t, new Cache({ redis: redis.url, prefix, ttl: 60_000 }))
    await Promise.all([a.ready(), b.ready()])
    const load = counter()
    for (const key of ['k1', 'k2']) {
      await a.getOrLoad(key, load)
      await b.getOrLoad(key, load)
    }
    const fresh = parseEnvelope(await redis.cmd('GET', names(prefix, 'k1').value)).freshUntil

    redis.pause()
    try {
      assert.equal(await within(a.expire('k1'), 2000, 'expire while paused'), true, 'stale in A’s memory at once')
      assert.equal(a.stats().recoveryPending, 1, 'the expire is kept')
    } finally {
      redis.resume()
    }
    await waitFor(
      async () => parseEnvelope(await redis.cmd('GET', names(prefix, 'k1').value)).freshUntil < fresh,
      'the expire landing in Redis',
      3000,
    )
    await waitFor(async () => (await b.get('k1', { stale: false })) === undefined, "B's L1 marking it stale", 3000)
    assert.deepEqual((await b.get('k1')).v, 1, 'B keeps the old value, stale')
    // The paused call may land as Redis resumes; the replay still runs.
    await waitFor(() => a.stats().recoveryPending === 0, 'the replay', 3000)
    assert.equal(a.stats().recovered, 1)

    redis.pause()
    try {
      await within(a.expire('k2'), 2000, 'expire while paused')
      await within(a.close(), 3000, 'close() while paused')
    } finally {
      redis.resume()
    }
    const undelivered = errors.find((e) => e.code === 'ERR_HERDCACHE_UNDELIVERED')
    assert.ok(undelivered, `close() reported what it gave up (${errors.map((e) => e.code)})`)
    assert.deepEqual(undelivered.operations, [{ op: 'expire', key: 'k2' }])
    assert.match(undelivered.message, /1 expire\(\) call could not reach Redis/)
    assert.equal(load.runs, 2, 'nothing loaded again')
  },
)

test('a load another instance began before an expire is not written to Redis after it', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'exp-inflight:'
  const options = { redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0 }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  const { loading, release } = await heldLoad(a, 'k', 'read before')
  await b.expire('k')
  const marker = await redis.cmd('GET', `${names(prefix, 'k').value}:expired`)
  assert.ok(Number(marker) > 0, `the expire leaves its moment (${marker})`)
  // a fills before it takes in b's notice (a cache hears of others' changes on its next call).
  release()
  assert.equal(await loading, 'read before', "a's callers get their own load")
  await sleep(100)
  assert.equal(
    await redis.cmd('GET', names(prefix, 'k').value),
    null,
    'the value read before the expire is not in Redis',
  )
  let runs = 0
  assert.equal(await b.getOrLoad('k', () => `read after ${++runs}`), 'read after 1')
})
