'use strict'
// Idle connections closed under the cache: by the server (`timeout 1`, as
// managed Redis does after minutes) or by a proxy, NAT or load balancer. The
// first command on the dead connection is retried once on a new one: no
// Redis error, no open breaker, one loader run per key for the fleet, and a
// write after idling reaches Redis at once.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startRedis } = require('../redis-server')
const { startProxy } = require('../tcp-proxy')
const { sleep, track, slowLoader } = require('../helpers')

const T = { timeout: 20000 }
const IDLE = 2500

/** Two instances of one fleet on `url`, each connected once, then left idle. */
async function idleFleet(t, url, prefix) {
  const options = { redis: url, prefix, lockTtl: 2000, redisTimeout: 500 }
  const [a, b] = [track(t, new Cache(options)), track(t, new Cache(options))]
  assert.equal(await a.getOrLoad('warm', () => 1), 1)
  assert.equal(await b.getOrLoad('warm', () => 2), 1)
  await sleep(IDLE)
  return [a, b]
}

async function checkAfterIdle(a, b, redis, prefix) {
  const loader = slowLoader(100, 'v')
  const values = await Promise.all([
    ...Array.from({ length: 5 }, () => a.getOrLoad('cold', loader)),
    ...Array.from({ length: 5 }, () => b.getOrLoad('cold', loader)),
  ])
  assert.deepEqual(values, Array(10).fill('v'))
  assert.equal(loader.calls, 1, 'one loader run for the fleet after the idle drop')
  for (const c of [a, b]) {
    const s = c.stats()
    assert.equal(s.redisErrors, 0, 'a dropped idle connection is no Redis error')
    assert.equal(s.circuitOpen, 0, 'the breaker stays closed')
  }
  // A write after idling again reaches Redis at once.
  await sleep(IDLE)
  await a.set('written', { n: 1 })
  assert.match(String(await redis.cmd('GET', `{${prefix}written}`)), /\n\{"n":1\}$/)
  assert.equal(a.stats().recoveryPending, 0, 'nothing kept for a replay')
  await sleep(IDLE)
  assert.equal(await b.delete('written'), true, 'a delete after idling too')
  assert.equal(b.stats().redisErrors, 0)
}

test('redis-server --timeout 1 closes idle connections: commands are retried on a new one', T, async (t) => {
  const redis = await startRedis(t, { args: ['--timeout', '1'] })
  if (!redis) return
  const [a, b] = await idleFleet(t, redis.url, 'idle-server:')
  await checkAfterIdle(a, b, redis, 'idle-server:')
})

test('a proxy drops idle connections: commands are retried on a new one', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const proxy = await startProxy(t, redis.port)
  proxy.dropIdle(1500)
  const [a, b] = await idleFleet(t, proxy.url, 'idle-proxy:')
  assert.ok(proxy.stats.idleDropped >= 2, `the proxy dropped idle connections (${proxy.stats.idleDropped})`)
  await checkAfterIdle(a, b, redis, 'idle-proxy:')
})

test('operations kept while Redis was down are delivered after an idle drop', T, async (t) => {
  const redis = await startRedis(t, { args: ['--timeout', '1'] })
  if (!redis) return
  const prefix = 'idle-replay:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, redisTimeout: 300, circuitBreakerDuration: 2000 }))
  await cache.set('k', 'first')
  redis.pause()
  await cache.set('k', 'kept')
  assert.equal(cache.stats().recoveryPending, 1)
  redis.resume()
  // The replay runs a cool-down later, on a connection idle past the
  // server's timeout: the first command on it must not fail the replay.
  const end = Date.now() + 5000
  while (cache.stats().recoveryPending > 0 && Date.now() < end) await sleep(50)
  assert.equal(cache.stats().recoveryPending, 0, 'the kept set was delivered')
  assert.match(String(await redis.cmd('GET', `{${prefix}k}`)), /\n"kept"$/)
})
