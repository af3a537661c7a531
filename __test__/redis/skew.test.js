'use strict'
// The fleet agrees on time: each instance keeps its offset to the Redis
// server's clock (TIME), so stamps, freshUntil and refreshAt are in one time
// whatever a host's wall clock says. With one host 5 s off in either
// direction, no write is lost as "older" and nothing past its TTL is served
// as fresh.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, kTesting } = require('../..')
const { startRedis } = require('../redis-server')
const { sleep, track, waitFor } = require('../helpers')

const T = { timeout: 15000 }
const SKEW = 5000

async function skewed(t, options, ms) {
  const cache = track(t, new Cache(options))
  assert.equal(await cache[kTesting].skewClock(ms), true, 'the server clock was measured')
  return cache
}

for (const skew of [SKEW, -SKEW]) {
  const side = skew > 0 ? 'ahead' : 'behind'
  test(`a host ${SKEW} ms ${side}: a later write by another host is not refused as older`, T, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const options = { redis: redis.url, prefix: `skew-w${side}:`, ttl: 60000 }
    const off = await skewed(t, options, skew)
    const right = await skewed(t, options, 0)
    // Written in this order, 200 ms apart, in real time.
    const [first, second] = skew > 0 ? [off, right] : [right, off]
    await first.set('k', 'first')
    await sleep(200)
    await second.set('k', 'second')
    assert.match(String(await redis.cmd('GET', `{${options.prefix}k}`)), /\n"second"$/, 'Redis holds the later write')
    const fresh = track(t, new Cache(options))
    assert.equal(await fresh.getOrLoad('k', () => 'loaded'), 'second', 'a new instance reads the later write')
    // The first writer drops its own copy (the second write's notice).
    await waitFor(async () => (await first.get('k')) === 'second', 'the first writer sees the later value', 3000)
  })

  test(`a host ${SKEW} ms ${side}: nothing past its TTL is served as fresh`, T, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const options = { redis: redis.url, prefix: `skew-f${side}:`, ttl: 1000, hardTtl: 60000, jitter: 0 }
    const off = await skewed(t, options, skew)
    const right = await skewed(t, options, 0)
    // One host writes, the other reads after the TTL ended.
    const [writer, reader] = skew > 0 ? [off, right] : [right, off]
    assert.equal(await writer.getOrLoad('k', () => 'old'), 'old')
    await sleep(1500)
    const status = {}
    const value = await reader.getOrLoad('k', () => 'new', { stale: false, status })
    assert.equal(
      value,
      'new',
      `a stale: false call is not answered by a value past its TTL (outcome ${status.outcome})`,
    )
    assert.equal(status.outcome, 'miss')
  })
}

test(
  "a set that loses to a value stamped later leaves the writer's L1: it reads what the fleet reads",
  T,
  async (t) => {
    // Two writes within the clocks' error of each other are ordered by their
    // stamps, not by when they reached Redis. Here A's stamps run 10 s ahead
    // (a test offset, not measured away), so B's later set loses.
    const redis = await startRedis(t)
    if (!redis) return
    const options = { redis: redis.url, prefix: 'skew-lost:', ttl: 60000 }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))
    await Promise.all([a.ready(), b.ready()])
    a[kTesting].advanceClock(10000)
    await a.set('k', 'from a')
    await b.set('k', 'from b')
    assert.match(String(await redis.cmd('GET', `{${options.prefix}k}`)), /\n"from a"$/, 'Redis kept the later stamp')
    assert.equal(await b.get('k'), 'from a', "B's own value left its L1: B reads Redis's")
    assert.equal(await b.getOrLoad('k', () => 'WRONG'), 'from a')
    assert.equal(await a.get('k'), 'from a')
  },
)
