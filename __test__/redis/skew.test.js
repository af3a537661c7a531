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
const { startCluster } = require('../redis-cluster')
const { sleep, track, waitFor } = require('../helpers')

const T = { timeout: 30000 }
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

/** The stamp in the header of `key`'s envelope in Redis (`hc2 fresh hard compute stamp …`). */
function storedStamp(raw) {
  const header = String(raw).split('\n', 1)[0].split(' ')
  return Number(header[4])
}

for (const backend of ['a single Redis', 'a Redis Cluster']) {
  test(
    `clocks 50 ms apart, on ${backend}: the later set in real time wins, and both instances read it`,
    T,
    async (t) => {
      // Two writes within the clocks' error of each other: A's stamps run
      // 50 ms ahead of B's (a test offset, not measured away). A set is the
      // application's newest value, so B's set right after A's lands, stamped
      // after A's, and every instance reads it.
      let redis
      let cluster
      if (backend === 'a single Redis') {
        redis = await startRedis(t)
        if (!redis) return
      } else {
        cluster = await startCluster(t)
        if (!cluster) return
      }
      const options = { redis: redis ? redis.url : { cluster: cluster.urls }, prefix: 'skew-set:', ttl: 60000 }
      const a = track(t, new Cache(options))
      const b = track(t, new Cache(options))
      await Promise.all([a.ready(), b.ready()])
      a[kTesting].advanceClock(50)
      for (let round = 0; round < 5; round++) {
        const key = `k${round}`
        await a.set(key, `a${round}`)
        const aStamp = redis && storedStamp(await redis.cmd('GET', `{${options.prefix}${key}}`))
        await b.set(key, `b${round}`)
        if (redis) {
          const raw = await redis.cmd('GET', `{${options.prefix}${key}}`)
          assert.match(String(raw), new RegExp(`\n"b${round}"$`), "Redis holds B's later set")
          assert.ok(storedStamp(raw) > aStamp, `B's set is stamped after A's (${storedStamp(raw)} > ${aStamp})`)
        }
        assert.equal(await b.get(key), `b${round}`, 'B keeps its own set')
        assert.equal(await b.getOrLoad(key, () => 'WRONG'), `b${round}`)
        await waitFor(async () => (await a.get(key)) === `b${round}`, "A reads B's later set", 3000)
        assert.equal(await a.getOrLoad(key, () => 'WRONG'), `b${round}`)
        // And the other way round: A's set after B's wins too.
        await a.set(key, `a${round}'`)
        await waitFor(async () => (await b.get(key)) === `a${round}'`, "B reads A's later set", 3000)
      }
      const fresh = track(t, new Cache(options))
      assert.equal(await fresh.getOrLoad('k0', () => 'WRONG'), "a0'", 'a new instance reads the last set')
    },
  )
}
