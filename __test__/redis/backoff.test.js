'use strict'
// The refresh back-off fleet-wide: the instance whose background refresh failed leaves `{prefix key}:backoff`
// (the failures in a row, PX = the delay) as it releases its lock; a background refresh anywhere that finds it
// runs no loader; foreground loads ignore it; a write removes it. And adaptive entries with Redis: ctx.setTtl
// reaches the stored envelope, ctx.noStore stores nothing there and releases the lock.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted, deferred } = require('../helpers')
const { sleep, waitFor, names, storedEnvelope, lockReleased } = require('./fixtures/fleet')

const T = { timeout: 15000 }
const backoffKey = (prefix, key) => `${names(prefix, key).value}:backoff`

async function staleRead(cache, key, loader) {
  const status = {}
  const value = await cache.getOrLoad(key, loader, { status })
  assert.equal(status.outcome, 'stale')
  await waitFor(() => cache.stats().inFlight === 0, 'the refresh to settle')
  return value
}

test('a failed refresh on A backs off B too; the next due attempt recovers and clears the marker', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'bo:'
  const options = { redis: redis.url, prefix, ttl: 300, hardTtl: 60000, jitter: 0, beta: 0 }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  assert.equal(await a.getOrLoad('k', () => 'v1'), 'v1')
  assert.equal(await b.getOrLoad('k', () => 'WRONG'), 'v1', 'B reads it from Redis')
  await sleep(350)

  const failing = counted(() => Promise.reject(new Error('db down')))
  assert.equal(await staleRead(a, 'k', failing), 'v1')
  assert.equal(failing.calls, 1)
  const marker = backoffKey(prefix, 'k')
  // The marker is written as the failed flight lets go of its lock, a round trip after the flight ended.
  await waitFor(async () => (await redis.cmd('GET', marker)) === '1', 'the marker of the first failure in a row')
  const pttl = await redis.cmd('PTTL', marker)
  assert.ok(pttl > 0 && pttl <= 250, `PX = the first delay, at most 250 ms (PTTL ${pttl})`)
  await lockReleased(redis, names(prefix, 'k').lock)

  // A again once its back-off passed: the second failure, 500 ms at most.
  await sleep(300)
  assert.equal(await staleRead(a, 'k', failing), 'v1')
  assert.equal(failing.calls, 2)
  await waitFor(async () => (await redis.cmd('GET', marker)) === '2', 'the marker of the second failure in a row')
  assert.ok((await redis.cmd('PTTL', marker)) > 250)

  // B's refresh finds the marker: no loader, and B backs off locally too.
  const onB = counted(() => 'v2')
  assert.equal(await staleRead(b, 'k', onB), 'v1')
  assert.equal(onB.calls, 0, 'B ran no loader while the fleet backs off')
  assert.equal(b.stats().backgroundRefreshes, 1)
  assert.equal(b.stats().loads, 0)
  assert.equal(b.stats().backgroundErrors, 0, 'backing off is no error')
  assert.equal(await staleRead(b, 'k', onB), 'v1')
  assert.equal(b.stats().backgroundRefreshes, 1, 'B backs off locally: no second attempt')

  // A foreground load (no usable value: here the value is gone from Redis) ignores the marker.
  const c = track(t, new Cache({ ...options, l1: false }))
  await redis.cmd('DEL', names(prefix, 'k').value)
  assert.equal(await redis.cmd('EXISTS', marker), 1, 'still backing off')
  const cold = counted(() => 'cold-load')
  assert.equal(await c.getOrLoad('k', cold), 'cold-load')
  assert.equal(cold.calls, 1, 'a cold load runs its loader despite the back-off')
  assert.equal(await redis.cmd('EXISTS', marker), 0, 'its write removed the marker')
  const env = await storedEnvelope(redis, names(prefix, 'k').value)
  assert.equal(env.value, 'cold-load')
})

test('recovery is seen within one back-off step; the marker goes with the first good write', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'bo2:'
  const options = { redis: redis.url, prefix, ttl: 200, hardTtl: 60000, jitter: 0, beta: 0 }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  await a.getOrLoad('k', () => 'v1')
  await b.getOrLoad('k', () => 'WRONG')
  await sleep(250)
  let healthyAt = Date.now() + 600
  const calls = []
  const loader = () => {
    calls.push(Date.now())
    return Date.now() >= healthyAt ? 'v2' : Promise.reject(new Error('db down'))
  }
  // Both read in a loop, as a busy fleet does, until a fresh value comes.
  let fresh
  const deadline = Date.now() + 5000
  while (fresh === undefined && Date.now() < deadline) {
    for (const cache of [a, b]) {
      const value = await cache.getOrLoad('k', loader)
      if (value === 'v2' && fresh === undefined) fresh = Date.now()
    }
    await sleep(10)
  }
  assert.ok(fresh !== undefined, 'a fresh value came')
  assert.ok(calls.length <= 4, `a handful of calls for the fleet while failing, not one per read: ${calls.length}`)
  // One attempt at a time: the calls are spaced by the back-off, never two together.
  for (let i = 1; i < calls.length; i++) assert.ok(calls[i] - calls[i - 1] >= 150, `calls ${calls}`)
  assert.equal(await redis.cmd('EXISTS', backoffKey(prefix, 'k')), 0, 'the write removed the marker')
  healthyAt = 0
})

test('ctx.setTtl reaches the envelope in Redis; ctx.noStore writes nothing and releases the lock', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'ad:'
  const options = { redis: redis.url, prefix, ttl: 60000, hardTtl: 600000, jitter: 0 }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))

  await a.getOrLoad('token', (ctx) => {
    ctx.setTtl(5000, 20000)
    return { token: 't1' }
  })
  const key = names(prefix, 'token')
  const env = await storedEnvelope(redis, key.value)
  const fresh = env.freshUntil - env.stamp
  assert.ok(fresh >= 5000 && fresh < 5100, `freshUntil follows ctx.setTtl (${fresh} ms after the load started)`)
  assert.equal(env.hardUntil - env.freshUntil, 15000, 'and hardUntil')
  const pttl = await redis.cmd('PTTL', key.value)
  assert.ok(pttl > 19000 && pttl <= 20000, `the Redis key lives for the loader's hard TTL (PTTL ${pttl})`)

  const gate = deferred()
  const live = counted(async (ctx) => {
    ctx.noStore()
    await gate.promise
    return { live: 1 }
  })
  const calls = [0, 1, 2].map(() => a.getOrLoad('live', live))
  await waitFor(async () => (await redis.cmd('EXISTS', names(prefix, 'live').lock)) === 1, 'A to take the lock')
  gate.resolve()
  assert.deepEqual(await Promise.all(calls), [{ live: 1 }, { live: 1 }, { live: 1 }], 'the leader and its joiners')
  assert.equal(live.calls, 1)
  await lockReleased(redis, names(prefix, 'live').lock)
  assert.equal(await redis.cmd('EXISTS', names(prefix, 'live').value), 0, 'nothing in Redis')
  assert.equal(await a.get('live'), undefined, 'nothing in memory')
  const onB = counted(() => ({ live: 2 }))
  assert.deepEqual(await b.getOrLoad('live', onB), { live: 2 })
  assert.equal(onB.calls, 1, 'another instance loads for itself')
})
