'use strict'
// Many distinct keys missing from memory in the same tick: their first reads
// go to Redis together (one pipeline, one completion), and each flight still
// gets its own answer: another instance's value, a stale value, or the lock.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')

const T = { timeout: 15000 }

test('1 000 keys read in one tick: each answered by its own value, found, missing or corrupt', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'batch:'
  const writer = track(t, new Cache({ redis: redis.url, prefix }))
  const N = 1000
  // Even keys are in Redis; odd ones are not; every 100th holds garbage.
  await Promise.all(Array.from({ length: N / 2 }, (_, i) => writer.getOrLoad(['k', 2 * i], () => ({ i: 2 * i }))))
  for (let i = 1; i < N; i += 100) await redis.cmd('SET', `{${prefix}k:${i}}`, 'garbage')

  const reader = track(t, new Cache({ redis: redis.url, prefix }))
  const loader = counted(({ key }) => ({ i: key[1], loaded: true }))
  const values = await Promise.all(Array.from({ length: N }, (_, i) => reader.getOrLoad(['k', i], loader)))
  values.forEach((v, i) => {
    assert.equal(v.i, i, `key ${i} got its own value`)
    assert.equal(v.loaded === true, i % 2 === 1, `key ${i}: loaded only if Redis had no value`)
  })
  const s = reader.stats()
  assert.equal(loader.calls, N / 2)
  assert.equal(s.redisHits, N / 2)
  assert.equal(s.loads, N / 2)
  assert.equal(s.lockAcquired, N / 2)
  assert.ok(s.corruptValues >= 10, `corrupt values counted: ${s.corruptValues}`)
  assert.equal(s.redisErrors, 0)
  // And the loaded ones are in Redis for the next instance.
  const third = track(t, new Cache({ redis: redis.url, prefix }))
  const again = await Promise.all(Array.from({ length: N }, (_, i) => third.getOrLoad(['k', i], () => 'WRONG')))
  again.forEach((v, i) => assert.equal(v.i, i))
  assert.equal(third.stats().redisHits, N)
})
