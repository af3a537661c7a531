'use strict'
// getOrLoadMany with Redis: a key another instance stored is read, not loaded; a key another
// instance loads is waited for (its fleet lock), so overlapping batches of a fleet load each key once.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { spawnChild, loaderLog, waitFor } = require('./fixtures/fleet')

const T = { timeout: 20000 }

test('keys present in Redis are answered without a load; only the others reach the loader', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'many:'
  const writer = track(t, new Cache({ redis: redis.url, prefix }))
  await writer.getOrLoadMany(['a', ['u', 1]], async (keys) => keys.map((k) => `w:${k}`))
  const reader = track(t, new Cache({ redis: redis.url, prefix }))
  const calls = []
  const values = await reader.getOrLoadMany(['a', 'b', ['u', 1], ['u', 2]], async (keys) => {
    calls.push(keys)
    return keys.map((k) => `r:${k}`)
  })
  assert.deepEqual(values, ['w:a', 'r:b', 'w:u,1', 'r:u,2'])
  assert.deepEqual(calls, [['b', ['u', 2]]], 'one loader call, for the keys Redis did not have')
  assert.equal(reader.stats().redisHits, 2)
  // What the reader loaded is in Redis for a third instance, which loads nothing.
  const third = track(t, new Cache({ redis: redis.url, prefix }))
  let loaded = 0
  const again = await third.getOrLoadMany(['b', ['u', 2]], async (keys) => {
    loaded += keys.length
    return keys
  })
  assert.deepEqual(again, ['r:b', 'r:u,2'])
  assert.equal(loaded, 0)
})

test('two processes with overlapping batches at once: each key is loaded once fleet-wide', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const options = { redis: redis.url, prefix: 'fleetmany:' }
  const [one, two] = await Promise.all([
    spawnChild(t, { options, log: log.file }),
    spawnChild(t, { options, log: log.file }),
  ])
  const keys = (from, to) => Array.from({ length: to - from }, (_, i) => `k${from + i}`)
  const [a, b] = await Promise.all([
    one.call('many', { keys: keys(0, 20), ms: 150 }),
    two.call('many', { keys: keys(10, 30), ms: 150 }),
  ])
  const runs = log.runs()
  const perKey = new Map()
  for (const run of runs) perKey.set(run.key, (perKey.get(run.key) || 0) + 1)
  assert.equal(perKey.size, 30, 'every key was loaded somewhere')
  for (const [key, n] of perKey) assert.equal(n, 1, `${key} loaded ${n} times`)
  // Both got every key's one value: the overlap's from whichever process loaded it.
  assert.deepEqual(
    a.map((v) => v.key),
    keys(0, 20),
  )
  assert.deepEqual(
    b.map((v) => v.key),
    keys(10, 30),
  )
  const loader = new Map(runs.map((r) => [r.key, r.pid]))
  for (const v of [...a, ...b])
    assert.equal(v.pid, loader.get(v.key), `${v.key}: the value of the process that loaded it`)
  // The keys only one process asked for went to its loader in one call.
  const batchOf = (pid) => runs.filter((r) => r.pid === pid).map((r) => r.batch)
  assert.ok(
    batchOf(one.pid).some((n) => n >= 10),
    `one's batches: ${batchOf(one.pid)}`,
  )
  assert.ok(
    batchOf(two.pid).some((n) => n >= 10),
    `two's batches: ${batchOf(two.pid)}`,
  )
  await Promise.all([one.close(), two.close()])
})

test('with Redis the cold keys of one call still go to the loader together', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = track(t, new Cache({ redis: redis.url, prefix: 'together:' }))
  const calls = []
  const keys = Array.from({ length: 40 }, (_, i) => `k${i}`)
  const values = await cache.getOrLoadMany(keys, async (missing) => {
    calls.push(missing.length)
    return missing.map((k) => k.toUpperCase())
  })
  assert.deepEqual(
    values,
    keys.map((k) => k.toUpperCase()),
  )
  assert.deepEqual(calls, [40])
})

test("a key another instance is loading is waited for; it does not hold back the call's other keys", T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const options = { redis: redis.url, prefix: 'heldback:' }
  const [one, two] = await Promise.all([
    spawnChild(t, { options, log: log.file }),
    spawnChild(t, { options, log: log.file }),
  ])
  const slow = one.call('burst', { key: 'k0', loader: { value: 'slow', ms: 600, logEnd: true } })
  await waitFor(() => log.runs('k0').length === 1, 'one loading k0')
  const values = await two.call('many', { keys: ['k0', 'k1', 'k2'] })
  assert.equal(values[0].v, 'slow', "k0 is one's value, not loaded again")
  assert.deepEqual(
    values.slice(1).map((v) => v.pid),
    [two.pid, two.pid],
  )
  const [k0] = log.spans('k0')
  const mine = log.runs().filter((r) => r.pid === two.pid)
  assert.deepEqual(
    mine.map((r) => r.key),
    ['k1', 'k2'],
    'k1 and k2 in one loader call',
  )
  assert.ok(
    mine.every((r) => r.at < k0.ended),
    'k1 and k2 were loaded before k0 was filled: k0 did not hold them back',
  )
  assert.equal(log.runs('k0').length, 1)
  await slow
  await Promise.all([one.close(), two.close()])
})
