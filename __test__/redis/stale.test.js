'use strict'
// R3 across processes: past the soft TTL, every caller everywhere gets the stale
// value at once, and one refresh runs for the whole fleet.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const {
  sleep,
  waitFor,
  loaderLog,
  spawnChild,
  total,
  parseEnvelope,
  names,
  storedEnvelope,
  lockReleased,
} = require('./fixtures/fleet')

const T = { timeout: 14000 }

test(
  'stale across 4 processes: all callers get the stale value at once, one refresh fleet-wide, then the new value',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const log = loaderLog(t)
    const prefix = 'swr:'
    const key = names(prefix, 'hot')
    const options = { redis: redis.url, prefix, ttl: 300, hardTtl: 10000, jitter: 0, beta: 0 }
    const kids = await Promise.all([0, 1, 2, 3].map(() => spawnChild(t, { options, log: log.file })))

    // Process 0 loads v1, process 1 reads it (both hold it in L1); 2 and 3 have never seen it.
    const [first] = (await kids[0].call('burst', { key: 'hot', n: 1, loader: { value: 'v1' } })).perInstance
    assert.deepEqual(first.errors, [])
    const [second] = (await kids[1].call('burst', { key: 'hot', n: 1, loader: { value: 'WRONG' } })).perInstance
    assert.deepEqual(
      Object.keys(second.values).map((j) => JSON.parse(j).v),
      ['v1'],
      'process 1 reads v1 from Redis',
    )
    assert.equal(log.runs('hot').length, 1)
    const env = await storedEnvelope(redis, key.value)
    assert.equal(env.value.v, 'v1')
    assert.ok(env.hardUntil - env.freshUntil >= 9000, 'the hard TTL is the long one')
    const pttl = await redis.cmd('PTTL', key.value)
    assert.ok(pttl > 9000, `the Redis key lives for the hard TTL (PTTL ${pttl})`)

    // Past the soft TTL: every caller in every process is answered with v1 at once.
    await sleep(Math.max(0, env.freshUntil - Date.now() + 60))
    const REFRESH_MS = 600
    const bursts = await Promise.all(
      kids.map((k) => k.call('burst', { key: 'hot', n: 50, loader: { value: 'v2', ms: REFRESH_MS } })),
    )
    bursts.forEach((b, i) => {
      const [r] = b.perInstance
      assert.deepEqual(r.errors, [], `process ${i}: no rejection`)
      assert.deepEqual(
        Object.keys(r.values).map((j) => JSON.parse(j).v),
        ['v1'],
        `process ${i} is served the stale v1`,
      )
      assert.deepEqual(r.outcomes, { stale: 50 }, `process ${i}: every outcome is 'stale'`)
      assert.ok(
        r.maxMs < REFRESH_MS / 2,
        `process ${i}: a stale caller waited ${r.maxMs} ms (the refresh takes ${REFRESH_MS})`,
      )
    })

    // One refresh for the fleet: it lands in Redis, and no second one starts.
    await waitFor(
      async () => parseEnvelope(await redis.cmd('GET', key.value))?.value.v === 'v2',
      'the refresh reaching Redis',
      4000,
      20,
    )
    await sleep(150)
    const runs = log.runs('hot')
    assert.equal(runs.length, 2, `exactly one refresh fleet-wide, saw ${runs.length - 1}: ${JSON.stringify(runs)}`)
    const stats = await Promise.all(kids.map((k) => k.call('stats')))
    assert.equal(total(stats, 'loads'), 2)
    assert.equal(total(stats, 'staleServed'), 200)
    assert.equal(total(stats, 'inFlight'), 0)
    await lockReleased(redis, key.lock)

    // Everyone now sees v2, fresh, without loading.
    for (const [i, k] of kids.entries()) {
      const [r] = (await k.call('burst', { key: 'hot', n: 5, loader: { value: 'WRONG', ms: 0 } })).perInstance
      assert.deepEqual(r.errors, [])
      assert.deepEqual(
        Object.keys(r.values).map((j) => JSON.parse(j).v),
        ['v2'],
        `process ${i} sees the new value`,
      )
      assert.deepEqual(r.outcomes, { hit: 5 }, `process ${i}: fresh hits`)
    }
    assert.equal(log.runs('hot').length, 2)
    await Promise.all(kids.map((k) => k.close()))
  },
)

test(
  'stale with stale: false across processes: those callers wait for the one refresh, the others do not',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const log = loaderLog(t)
    const prefix = 'swr2:'
    const options = { redis: redis.url, prefix, ttl: 300, hardTtl: 10000, jitter: 0, beta: 0 }
    const kids = await Promise.all([0, 1, 2].map(() => spawnChild(t, { options, log: log.file })))
    await kids[0].call('burst', { key: 'k', n: 1, loader: { value: 'v1' } })
    const env = await storedEnvelope(redis, names(prefix, 'k').value)
    await sleep(Math.max(0, env.freshUntil - Date.now() + 60))

    const [strict, lenient, strict2] = await Promise.all([
      kids[0].call('burst', { key: 'k', n: 20, loader: { value: 'v2', ms: 300 }, call: { stale: false } }),
      kids[1].call('burst', { key: 'k', n: 20, loader: { value: 'v2', ms: 300 } }),
      kids[2].call('burst', { key: 'k', n: 20, loader: { value: 'v2', ms: 300 }, call: { stale: false } }),
    ])
    for (const [name, b] of [
      ['process 0 (stale: false)', strict],
      ['process 2 (stale: false)', strict2],
    ]) {
      const [r] = b.perInstance
      assert.deepEqual(r.errors, [])
      assert.deepEqual(
        Object.keys(r.values).map((j) => JSON.parse(j).v),
        ['v2'],
        `${name} never gets the stale value`,
      )
      assert.ok(r.maxMs < 2500, `${name} waited ${r.maxMs} ms`)
    }
    const [l] = lenient.perInstance
    assert.deepEqual(
      Object.keys(l.values).map((j) => JSON.parse(j).v),
      ['v1'],
      'process 1 gets the stale value',
    )
    assert.ok(l.maxMs < 150, `process 1 waited ${l.maxMs} ms`)
    await waitFor(
      async () => parseEnvelope(await redis.cmd('GET', names(prefix, 'k').value))?.value.v === 'v2',
      'v2 in Redis',
      3000,
      20,
    )
    await sleep(100)
    assert.equal(log.runs('k').length, 2, 'one recompute for the fleet, strict and lenient callers alike')
    await Promise.all(kids.map((k) => k.close()))
  },
)

test('a leading call with stale: false is not answered by a stale value from Redis', { timeout: 10000 }, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'strict-lead:'
  const a = track(t, new Cache({ redis: redis.url, prefix, ttl: 300, hardTtl: 60000, jitter: 0 }))
  assert.equal(await a.getOrLoad('k', () => 'old'), 'old')
  await new Promise((resolve) => setTimeout(resolve, 400))
  // B has no L1, so its call leads a flight, which reads the stale value in Redis.
  const b = track(t, new Cache({ redis: redis.url, prefix, ttl: 300, l1: false }))
  let runs = 0
  const status = {}
  const loader = () => {
    runs++
    return 'new'
  }
  const got = await b.getOrLoad('k', loader, { stale: false, status })
  assert.equal(got, 'new', 'the stale value did not answer a caller refusing stale values')
  assert.equal(runs, 1)
  assert.equal(status.outcome, 'miss')
})

test(
  'a stale value from Redis answers a cache that never held it, and that cache starts the one refresh',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'stale-adopt:'
    const options = { redis: redis.url, prefix, ttl: 300, hardTtl: 60000, jitter: 0, beta: 0 }
    const a = track(t, new Cache(options))
    assert.equal(await a.getOrLoad('k', () => 'old'), 'old')
    await sleep(400)
    // B's L1 is empty: its call leads a flight whose first read finds the stale value.
    const b = track(t, new Cache(options))
    let runs = 0
    const loader = async () => {
      runs++
      await sleep(50)
      return 'new'
    }
    const status = {}
    const served = await Promise.all([
      b.getOrLoad('k', loader, { status }),
      b.getOrLoad('k', loader),
      b.getOrLoad('k', loader),
    ])
    assert.deepEqual(served, ['old', 'old', 'old'], 'served the stale value at once')
    assert.equal(status.outcome, 'stale')
    assert.equal(status.source, 'redis')
    await waitFor(
      async () => parseEnvelope(await redis.cmd('GET', `{${prefix}k}`))?.value === 'new',
      'the refresh reaching Redis',
      4000,
      20,
    )
    assert.equal(runs, 1, 'one background refresh, started by the cache the stale value answered')
    assert.equal(await b.getOrLoad('k', loader), 'new')
    assert.equal(b.stats().backgroundRefreshes, 1)
  },
)
