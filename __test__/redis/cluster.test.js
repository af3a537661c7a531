'use strict'
// herdcache on a Redis Cluster (issue 16): the fleet's guarantees hold on a
// real local cluster of three primaries the tests start themselves, and
// keep holding through a slot migration and a primary's failover.
// Loader runs are counted outside the processes (fixtures/fleet.js's log).
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startCluster } = require('../redis-cluster')
const { sleep, waitFor, loaderLog, spawnChild, total } = require('./fixtures/fleet')

const T = { timeout: 30000 }

/** Keys under `prefix`, `perPrimary` of them on each primary now. */
async function keysOnEveryPrimary(cluster, prefix, perPrimary = 2) {
  const primaries = await cluster.primaries()
  const wanted = new Map(primaries.map((p) => [p.port, []]))
  for (let i = 0; [...wanted.values()].some((keys) => keys.length < perPrimary); i++) {
    const key = `k${i}`
    const owner = await cluster.ownerOf(await cluster.slotOf(`{${prefix}${key}}`))
    const keys = wanted.get(owner)
    if (keys.length < perPrimary) keys.push(key)
  }
  return wanted
}

/** Resolves once `cache`'s events subscription is live. */
async function subscribed(cache) {
  await cache.ready()
  await waitFor(() => cache.stats().redisSubscribed === 1, 'the sharded subscription', 5000)
}

/** How long until `reader` stops answering `key` from memory after `writer` sets it. */
async function noticeTakes(writer, reader, key, value) {
  const started = Date.now()
  await writer.set(key, value)
  await waitFor(async () => JSON.stringify(await reader.get(key)) === JSON.stringify(value), `${key} seen`, 5000, 2)
  return Date.now() - started
}

test(
  'a cluster: 4 processes × 100 callers on one missing key → one loader run; a hot key read for 6 TTL periods → at most one run per period, never two at once',
  T,
  async (t) => {
    const cluster = await startCluster(t)
    if (!cluster) return
    const log = loaderLog(t)
    const ttl = 1000
    const options = { redis: { cluster: cluster.urls }, prefix: 'hot:', ttl }
    const kids = await Promise.all([0, 1, 2, 3].map(() => spawnChild(t, { options, log: log.file })))
    const loader = { value: 'v', ms: 150, logEnd: true }

    const cold = await Promise.all(kids.map((k) => k.call('burst', { key: 'hot', n: 100, loader })))
    const values = new Set(cold.flatMap((b) => b.perInstance.flatMap((r) => Object.keys(r.values))))
    const errors = cold.flatMap((b) => b.perInstance.flatMap((r) => r.errors))
    assert.deepEqual(errors, [], 'no call rejects')
    assert.equal(log.runs('hot').length, 1, 'one cold load for 4 processes × 100 callers')
    assert.equal(values.size, 1, 'every caller gets the one loaded value')

    const periods = 6
    const started = Date.now()
    const reads = await Promise.all(
      kids.map((k) => k.call('readLoop', { key: 'hot', ms: periods * ttl, callers: 5, loader }, periods * ttl + 8000)),
    )
    await waitFor(() => log.spans('hot').length === log.runs('hot').length, 'the last loader run to end', 3000)
    assert.deepEqual(
      reads.flat().flatMap((r) => r.errors),
      [],
      'no read rejects',
    )
    const during = log.runs('hot').filter((r) => r.at >= started)
    t.diagnostic(`${during.length} loader runs in ${periods} TTL periods`)
    assert.ok(during.length <= periods + 1, `at most one run per period: ${during.length} in ${periods}`)
    assert.ok(during.length >= periods - 2, `the key was refreshed as it expired: ${during.length} runs`)
    const spans = log.spans('hot').sort((a, b) => a.at - b.at)
    const overlapping = spans.filter((s, i) => i > 0 && s.at < spans[i - 1].ended)
    assert.deepEqual(overlapping, [], 'never two loader runs at once, fleet-wide')
    const stats = await Promise.all(kids.map((k) => k.call('stats')))
    assert.equal(total(stats, 'redisErrors'), 0)
    assert.equal(total(stats, 'loads'), log.runs('hot').length, 'the loads counted are the runs logged')
    await Promise.all(kids.map((k) => k.close()))
  },
)

test('a cluster: a stale value is served at once in every process, with one refresh fleet-wide', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const log = loaderLog(t)
  // No early refresh, no jitter: the value goes stale at a known time.
  const options = { redis: { cluster: cluster.urls }, prefix: 'stale:', ttl: 500, hardTtl: 60000, beta: 0, jitter: 0 }
  const kids = await Promise.all([0, 1, 2, 3].map(() => spawnChild(t, { options, log: log.file })))
  await kids[0].call('burst', { key: 'k', n: 1, loader: { value: 'old' } })
  await sleep(700)
  const loader = { value: 'new', ms: 300, logEnd: true }
  const bursts = await Promise.all(kids.map((k) => k.call('burst', { key: 'k', n: 50, loader })))
  for (const b of bursts) {
    for (const r of b.perInstance) {
      assert.deepEqual(r.errors, [])
      assert.deepEqual(Object.keys(r.values), [
        JSON.stringify({ v: 'old', pid: JSON.parse(Object.keys(r.values)[0]).pid, inst: 0 }),
      ])
      assert.ok(r.maxMs < 250, `stale answered at once, not after the 300 ms refresh: ${r.maxMs} ms`)
      assert.equal(r.outcomes.stale, 50)
    }
  }
  await waitFor(() => log.spans('k').length === 1, 'the refresh to end', 5000)
  await sleep(200)
  assert.equal(log.runs('k').length, 2, 'the cold load and one refresh, fleet-wide')
  await Promise.all(kids.map((k) => k.close()))
})

test(
  "a cluster: set, delete and clear on one instance reach every other instance's L1, for keys on every primary",
  T,
  async (t) => {
    const cluster = await startCluster(t)
    if (!cluster) return
    const prefix = 'inv:'
    const options = { redis: { cluster: cluster.urls }, prefix, ttl: 60000 }
    const a = new Cache(options)
    const b = new Cache(options)
    t.after(() => Promise.all([a.close(), b.close()]))
    await Promise.all([subscribed(a), subscribed(b)])
    const byPrimary = await keysOnEveryPrimary(cluster, prefix, 3)
    const keys = [...byPrimary.values()].flat()
    for (const key of keys) await a.getOrLoad(key, () => ({ from: 'a', key }))
    // a's fill notices reach b first: b's reads then stay in its L1.
    await sleep(100)
    for (const key of keys) {
      assert.deepEqual(await b.getOrLoad(key, () => assert.fail('b must find a’s value in Redis')), { from: 'a', key })
    }
    const l1Before = b.stats().l1Hits
    for (const key of keys) await b.getOrLoad(key, () => assert.fail('in memory'))
    assert.equal(b.stats().l1Hits - l1Before, keys.length, "b's L1 holds every key")

    const took = []
    for (const [port, [setKey, deleteKey]] of byPrimary) {
      took.push(await noticeTakes(a, b, setKey, { from: 'a', set: true }))
      await a.delete(deleteKey)
      await waitFor(
        async () => (await b.get(deleteKey)) === undefined,
        `delete of ${deleteKey} (primary ${port}) seen`,
        5000,
        2,
      )
    }
    t.diagnostic(`a set on one instance was seen by the other's L1 within ${Math.max(...took)} ms (each primary)`)

    const third = [...byPrimary.values()].map((k) => k[2])
    await a.clear()
    for (const key of third) {
      await waitFor(async () => (await b.get(key)) === undefined, `clear seen for ${key}`, 5000, 2)
    }
    for (const { port } of await cluster.primaries()) {
      const left = (await cluster.keysOn(port)).filter((k) => k.startsWith(`{${prefix}`))
      assert.deepEqual(left, [], `clear removed the prefix's keys on primary ${port}`)
    }
    assert.equal(a.stats().redisErrors + b.stats().redisErrors, 0)
  },
)

/**
 * Two processes read `keys` (10 callers each, on 2 caches) for `ms` while
 * `disturb()` runs; returns the loader runs per key, every error, and the
 * processes.
 */
async function readThrough(t, cluster, { prefix, keys, ms, disturb }) {
  const log = loaderLog(t)
  const options = {
    redis: { cluster: cluster.urls },
    prefix,
    ttl: 60000,
    redisTimeout: 500,
    circuitBreakerDuration: 500,
  }
  const kids = await Promise.all([0, 1].map(() => spawnChild(t, { options, instances: 2, log: log.file })))
  const loader = { value: 'v', ms: 20 }
  for (const key of keys) await kids[0].call('burst', { key, n: 1, inst: 0, loader })
  const reading = Promise.all(
    kids.flatMap((k) => keys.map((key) => k.call('readLoop', { key, ms, callers: 5, every: 10, loader }, ms + 10000))),
  )
  await sleep(300)
  const disturbed = await disturb()
  const reads = (await reading).flat()
  const runs = new Map(keys.map((key) => [key, log.runs(key).length]))
  return {
    runs,
    errors: reads.flatMap((r) => r.errors),
    reads: reads.reduce((n, r) => n + r.reads, 0),
    kids,
    disturbed,
  }
}

/**
 * After a disturbance, the running instances hear each other again by
 * themselves: a set in one process reaches the L1 of another (which holds
 * `key`), in ms.
 */
async function noticesFlowAgain(kids, key) {
  const value = { after: Date.now() }
  const started = Date.now()
  await waitFor(
    async () => {
      await kids[0].call('set', { key, value, inst: 0 })
      return JSON.stringify(await kids[1].call('get', { key, inst: 1 })) === JSON.stringify(value)
    },
    `a set on ${key} to reach another process's L1`,
    10000,
    50,
  )
  return Date.now() - started
}

test(
  'a cluster: a slot migrated mid-run → no call rejects, at most one extra load per key, and notices still flow',
  T,
  async (t) => {
    const cluster = await startCluster(t)
    if (!cluster) return
    const prefix = 'mig:'
    const byPrimary = await keysOnEveryPrimary(cluster, prefix, 2)
    const keys = [...byPrimary.values()].flat()
    const moving = keys[0]
    const slot = await cluster.slotOf(`{${prefix}${moving}}`)
    const from = await cluster.ownerOf(slot)
    const to = (await cluster.primaries()).find((p) => p.port !== from).port
    const { runs, errors, reads, kids } = await readThrough(t, cluster, {
      prefix,
      keys,
      ms: 3000,
      // The slot of a key, then the slot of one of the events channels (its
      // subscribers are unsubscribed by the server, and subscribe again).
      disturb: async () => {
        await cluster.migrateSlot(slot, to)
        const channel = (await cluster.cmd(from, 'PUBSUB', 'SHARDCHANNELS', `herdcache:events:${prefix}*`))[0]
        assert.ok(channel, `a sharded events channel lives on primary ${from}`)
        await cluster.migrateSlot(await cluster.slotOf(channel), to)
      },
    })
    assert.equal(await cluster.ownerOf(slot), to, 'the slot moved')
    assert.deepEqual(errors, [], `no call rejects (of ${reads})`)
    for (const [key, n] of runs) assert.ok(n <= 2, `${key}: at most one extra load, saw ${n} runs`)
    // The moved key is served from its new primary: a new instance reads it without loading.
    const fresh = new Cache({ redis: { cluster: cluster.urls }, prefix, ttl: 60000 })
    t.after(() => fresh.close())
    assert.notEqual(await fresh.getOrLoad(moving, () => 'loaded again'), 'loaded again')
    const ms = await noticesFlowAgain(kids, moving)
    t.diagnostic(
      `after the migration, a set reached another instance's L1 in ${ms} ms; loads per key ${JSON.stringify([...runs])}`,
    )
    await Promise.all(kids.map((k) => k.close()))
  },
)

test('a cluster: a primary killed and its replica promoted → no call rejects, at most one extra load per key, and the cache recovers by itself', {
  timeout: 45000,
}, async (t) => {
  const cluster = await startCluster(t, { replicas: 1 })
  if (!cluster) return
  const prefix = 'fo:'
  const byPrimary = await keysOnEveryPrimary(cluster, prefix, 2)
  const keys = [...byPrimary.values()].flat()
  const victim = [...byPrimary.keys()][0]
  const victimKey = byPrimary.get(victim)[0]
  // Let the replicas hold every key before the primary dies.
  await sleep(200)
  const { runs, errors, reads, kids, disturbed } = await readThrough(t, cluster, {
    prefix,
    keys,
    ms: 6000,
    disturb: async () => {
      await cluster.killPrimary(victim)
      return cluster.waitFailover()
    },
  })
  t.diagnostic(`the replica took over in ${disturbed.ms} ms`)
  assert.deepEqual(errors, [], `no call rejects (of ${reads})`)
  for (const [key, n] of runs) assert.ok(n <= 2, `${key}: at most one extra load, saw ${n} runs`)
  await waitFor(
    async () => total(await Promise.all(kids.map((k) => k.call('stats'))), 'redisSubscribed') === 4,
    'every instance subscribed again, by itself',
    10000,
    100,
  )
  const stats = await Promise.all(kids.map((k) => k.call('stats')))
  t.diagnostic(`redisErrors during the failover: ${total(stats, 'redisErrors')}`)
  const ms = await noticesFlowAgain(kids, victimKey)
  t.diagnostic(`after the failover, a set on the promoted primary's key reached another instance's L1 in ${ms} ms`)
  await Promise.all(kids.map((k) => k.close()))
})
