'use strict'
// Issue 29: the L1 hears of writes made outside herdcache, through Redis
// client tracking (BCAST on the prefix, on the events connection). On one
// node and on a 3+3 cluster (the matrix tier runs this file again on
// Valkey): redis-cli DEL, a plain ioredis SET, EXPIRE, FLUSHDB and a
// maxmemory eviction reach two instances' L1s within 50 ms (median of 20);
// herdcache's own writes are not applied twice (counted); a killed
// tracking connection and a failover leave no L1 serving a value Redis no
// longer holds past redisTimeout + 100 ms; a server that cannot track and
// an ACL that refuses it are reported once, and the cache runs as without.
const test = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const IORedis = require('ioredis')
const { startRedis } = require('../redis-server')
const { startCluster, CLI } = require('../redis-cluster')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { waitFor, names, sleep } = require('./fixtures/fleet')

const run = promisify(execFile)
/** Issue 29's bound on how soon an outside change reaches every L1 (the median of `SAMPLES`). */
const REACHED_WITHIN = 50
const SAMPLES = 20
const REDIS_TIMEOUT = 300

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** Whether `cache` answers `key` with `value` from its memory. */
async function heldInMemory(cache, key, value) {
  const status = {}
  const got = await cache.getOrLoad(key, () => 'loaded', { status })
  return got === value && status.source === 'memory'
}

/**
 * `value` set by `caches[0]`, then held in every cache's L1 (the fill notice
 * may take a first copy out), and that write heard as an echo by every cache
 * that tracks: an outside write of the key within the echo window of this
 * one could be taken for its echo (README, a false echo), and the tests
 * write outside right after.
 */
async function warm(caches, key, value) {
  const echoes = caches.map((cache) => cache.stats().trackedEchoes)
  await caches[0].set(key, value)
  for (const cache of caches) {
    await waitFor(() => heldInMemory(cache, key, value), `${key} held in memory`, 2000, 2)
  }
  await waitFor(
    () =>
      caches.every((cache, i) => {
        const stats = cache.stats()
        return stats.redisTracking !== 1 || stats.trackedEchoes > echoes[i]
      }),
    `${key}'s write heard as an echo`,
    2000,
    2,
  )
}

/** Ms until no cache answers `key` with `old` any more (polled every ms), from `since`. */
async function forgotten(caches, key, old, since, bound = 3000) {
  await waitFor(
    async () => {
      for (const cache of caches) {
        if ((await cache.getOrLoad(key, () => 'reloaded')) === old) return false
      }
      return true
    },
    `every L1 to let go of ${key}'s ${old}`,
    bound,
    1,
  )
  return Date.now() - since
}

/**
 * The outside writes of item 5, each a function of (key, redis name) that
 * changes it outside herdcache and resolves once the change is made.
 */
function outsideWrites(topology) {
  return {
    'redis-cli DEL': (name) => topology.cli('DEL', name),
    'SET by a plain ioredis client': (name) => topology.io.set(name, 'written outside herdcache'),
    'EXPIRE 0': (name) => topology.io.expire(name, 0),
    FLUSHDB: () => topology.flushdb(),
  }
}

/** Item 5 on a topology: each outside write reaches both L1s within REACHED_WITHIN ms (median of SAMPLES). */
async function outsideWritesReachTheL1s(t, topology, prefix) {
  const options = { ...topology.options, prefix, ttl: 600_000, redisTimeout: REDIS_TIMEOUT }
  const caches = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all(caches.map((c) => c.ready()))
  await waitFor(() => caches.every((c) => c.stats().redisTracking === 1), 'tracking on both instances', 5000)
  const report = {}
  for (const [what, write] of Object.entries(outsideWrites(topology))) {
    const took = []
    for (let i = 0; i < SAMPLES; i++) {
      const key = `${what.replace(/\W+/g, '-')}:${i}`
      const old = `v${i}`
      await warm(caches, key, old)
      await write(names(prefix, key).value)
      took.push(await forgotten(caches, key, old, Date.now()))
    }
    report[what] = { median: median(took), max: Math.max(...took) }
    assert.ok(
      median(took) <= REACHED_WITHIN,
      `${what}: reached both L1s in ${median(took)} ms (median of ${SAMPLES}; all: ${took.join(', ')})`,
    )
  }
  for (const cache of caches) {
    assert.ok(cache.stats().trackedChanges >= 4 * SAMPLES, 'counted in trackedChanges')
  }
  t.diagnostic(`${topology.name}: ms until both L1s forgot the value ${JSON.stringify(report)}`)
}

/** maxmemory evicting herdcache's values: the evicted keys leave both L1s within REACHED_WITHIN ms (median). */
async function evictionsReachTheL1s(t, topology, prefix, node) {
  const options = { ...topology.options, prefix, ttl: 600_000, redisTimeout: REDIS_TIMEOUT }
  const caches = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all(caches.map((c) => c.ready()))
  await waitFor(() => caches.every((c) => c.stats().redisTracking === 1), 'tracking on both instances', 5000)
  // Keys of one node (one hash slot's worth on a cluster: `node` owns them).
  const keys = await topology.keysOn(node, prefix, SAMPLES)
  for (const key of keys) await warm(caches, key, `kept:${key}`)
  const used = Number(/used_memory:(\d+)/.exec(await node.cmd('INFO', 'memory'))[1])
  await node.cmd('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-random')
  await node.cmd('CONFIG', 'SET', 'maxmemory', String(used + 2 * 1024 * 1024))
  t.after(() => node.cmd('CONFIG', 'SET', 'maxmemory', '0').catch(() => {}))
  // Each key evicted is timed at once, from the filler write that evicted it.
  const filler = 'x'.repeat(16 * 1024)
  const tag = await topology.tagOn(node)
  const took = []
  let left = keys
  for (let i = 0; left.length && i < 20_000; i++) {
    await node.cmd('SET', `filler:{${tag}}:${i}`, filler)
    const since = Date.now()
    const exists = await Promise.all(left.map((k) => node.cmd('EXISTS', names(prefix, k).value)))
    const evicted = left.filter((_, j) => exists[j] === 0)
    left = left.filter((_, j) => exists[j] !== 0)
    for (const key of evicted) took.push(await forgotten(caches, key, `kept:${key}`, since))
  }
  assert.equal(left.length, 0, 'maxmemory evicted every key')
  t.diagnostic(`${topology.name}: ms from eviction until both L1s forgot the value: ${took.join(', ')}`)
  assert.ok(median(took) <= REACHED_WITHIN, `evictions reached both L1s in ${median(took)} ms (median)`)
}

/** herdcache's own writes (set, loads, delete, expire) are heard once: as their announcement, not again as an outside change. */
async function ownWritesAreNotAppliedTwice(t, topology, prefix) {
  const options = { ...topology.options, prefix, ttl: 600_000 }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all([a.ready(), b.ready()])
  await waitFor(() => [a, b].every((c) => c.stats().redisTracking === 1), 'tracking on both instances', 5000)
  const n = 30
  for (let i = 0; i < n; i++) {
    await a.set(`set:${i}`, `s${i}`)
    await a.getOrLoad(`load:${i}`, () => `l${i}`)
  }
  await a.delete('load:0')
  await a.expire('load:1')
  const writes = 2 * n + 2
  await waitFor(
    () => a.stats().trackedEchoes === writes && b.stats().trackedEchoes === writes,
    `every write heard once more, as an echo (a: ${a.stats().trackedEchoes}, b: ${b.stats().trackedEchoes} of ${writes})`,
    3000,
  )
  await sleep(100)
  for (const cache of [a, b]) {
    assert.equal(cache.stats().trackedChanges, 0, 'no write of herdcache counted as made outside')
    assert.equal(cache.stats().trackedEchoes, writes, 'each write heard exactly once more')
  }
  // The writer kept what it wrote: its own tracking message took nothing out.
  for (let i = 0; i < n; i++) assert.ok(await heldInMemory(a, `set:${i}`, `s${i}`), `set:${i} still in A's memory`)
  assert.equal(a.stats().redisHits, 0, 'A read nothing back from Redis')
}

/**
 * The tracking connection killed (CLIENT KILL) while an outside SET lands:
 * no L1 serves the old value past redisTimeout + 100 ms. A hot L1 of 200
 * keys is cleared when tracking is back: read again from Redis, no loader
 * runs (the clear is no stampede).
 */
async function aKilledTrackingConnection(t, topology, prefix) {
  const options = { ...topology.options, prefix, ttl: 600_000, redisTimeout: REDIS_TIMEOUT }
  const caches = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all(caches.map((c) => c.ready()))
  await waitFor(() => caches.every((c) => c.stats().redisTracking === 1), 'tracking on both instances', 5000)
  const hot = Array.from({ length: 200 }, (_, i) => `hot:${i}`)
  for (const key of hot) await warm(caches, key, `h:${key}`)
  const loadsBefore = caches.map((c) => c.stats().loads)
  const killed = await topology.killTracking()
  assert.ok(killed >= 2, `killed the tracking connections (${killed})`)
  const since = Date.now()
  await topology.io.set(names(prefix, 'hot:0').value, 'written while tracking was down')
  const took = await forgotten(caches, 'hot:0', 'h:hot:0', since, REDIS_TIMEOUT + 1000)
  t.diagnostic(
    `${topology.name}: tracking connection killed: both L1s forgot the value ${took} ms after the outside SET`,
  )
  assert.ok(took <= REDIS_TIMEOUT + 100, `forgot within redisTimeout + 100 ms (${took} ms)`)
  await waitFor(() => caches.every((c) => c.stats().redisTracking === 1), 'tracking back', 3000)
  const before = caches.map((c) => c.stats().redisHits)
  const answers = await Promise.all(caches.flatMap((c) => hot.slice(1).map((k) => c.getOrLoad(k, () => 'LOADED'))))
  assert.ok(
    answers.every((v) => v !== 'LOADED'),
    'no loader ran: the cleared L1 read the values back from Redis',
  )
  const loads = caches.map((c, i) => c.stats().loads - loadsBefore[i])
  assert.equal(loads[0] + loads[1], 1, `one load, of the key written outside (no stampede after the clear): ${loads}`)
  const reread = caches.map((c, i) => c.stats().redisHits - before[i])
  t.diagnostic(
    `${topology.name}: after tracking came back, ${JSON.stringify(reread)} reads from Redis for 199 hot keys, 0 loader runs`,
  )
}

/** A node topology: a redis-server of the test's own. */
async function nodeTopology(t, args) {
  const redis = await startRedis(t, { args })
  if (!redis) return null
  const io = new IORedis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  t.after(() => io.disconnect())
  return {
    name: 'one node',
    redis,
    io,
    options: { redis: redis.url },
    cli: (...args) => run(CLI, ['-p', String(redis.port), ...args]),
    flushdb: () => redis.cmd('FLUSHDB'),
    keysOn: async (_node, _prefix, n) => Array.from({ length: n }, (_, i) => `evicted:${i}`),
    tagOn: async () => 'filler',
    async killTracking() {
      const list = await redis.cmd('CLIENT', 'LIST')
      const ids = list
        .split('\n')
        .filter((line) => /flags=\S*t/.test(line))
        .map((line) => /id=(\d+)/.exec(line)[1])
      for (const id of ids) await redis.cmd('CLIENT', 'KILL', 'ID', id)
      return ids.length
    },
  }
}

test('one node: redis-cli DEL, a plain SET, EXPIRE and FLUSHDB reach both L1s within 50 ms (median of 20)', {
  timeout: 60000,
}, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  await outsideWritesReachTheL1s(t, topology, 'trk:')
})

test('one node: maxmemory evictions reach both L1s within 50 ms (median of 20)', { timeout: 60000 }, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  await evictionsReachTheL1s(t, topology, 'evict:', topology.redis)
})

test("one node: herdcache's own writes are heard once more as echoes, never applied as outside changes", {
  timeout: 30000,
}, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  await ownWritesAreNotAppliedTwice(t, topology, 'own:')
})

test('one node: a tracking connection killed (CLIENT KILL) → no L1 serves an outdated value past redisTimeout + 100 ms; the hot L1 is read back from Redis, not reloaded', {
  timeout: 60000,
}, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  await aKilledTrackingConnection(t, topology, 'kill:')
})

test('tracking: false: an outside DEL is not seen before the TTL, and nothing is tracked', {
  timeout: 30000,
}, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  const options = { ...topology.options, prefix: 'off:', ttl: 600_000, tracking: false }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all([a.ready(), b.ready()])
  await warm([a, b], 'k', 'v')
  await topology.cli('DEL', names('off:', 'k').value)
  await sleep(200)
  assert.ok(await heldInMemory(a, 'k', 'v'), 'A still serves its copy (the limit tracking lifts)')
  assert.equal(a.stats().redisTracking, 0)
  assert.equal(a.stats().trackedChanges, 0)
  const list = await topology.redis.cmd('CLIENT', 'LIST')
  assert.doesNotMatch(list, /flags=\S*t/, 'no connection tracks keys')
})

test('a server that cannot track (no RESP3: HELLO renamed away, as before Redis 6) is reported once as a process warning; fills and invalidations still reach every L1', {
  timeout: 30000,
}, async (t) => {
  const topology = await nodeTopology(t, ['--rename-command', 'HELLO', ''])
  if (!topology) return
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  const errors = []
  const options = { ...topology.options, prefix: 'old:', ttl: 600_000, onError: (e) => errors.push(e) }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all([a.ready(), b.ready()])
  await waitFor(() => a.stats().redisSubscribed === 1 && b.stats().redisSubscribed === 1, 'subscribed', 3000)
  await warm([a, b], 'k', 'v1')
  await a.set('k', 'v2')
  await waitFor(async () => (await b.getOrLoad('k', () => 'WRONG')) === 'v2', "B seeing A's set", 2000)
  await a.getOrLoad('other', () => 'x')
  await waitFor(() => warnings.some((w) => w.code === 'HERDCACHE_TRACKING_UNSUPPORTED'), 'the warning', 2000)
  const ours = warnings.filter((w) => w.code === 'HERDCACHE_TRACKING_UNSUPPORTED')
  assert.equal(ours.length, 2, 'once per cache (two caches)')
  assert.match(ours[0].message, /cannot track keys/)
  assert.equal(errors.length, 0, 'no error: the cache runs as without tracking')
  assert.equal(a.stats().redisTracking, 0)
})

test('an ACL user without CLIENT: reported once with ERR_HERDCACHE_REDIS_NOPERM; the cache runs as without tracking', {
  timeout: 30000,
}, async (t) => {
  const topology = await nodeTopology(t)
  if (!topology) return
  const { redis } = topology
  await redis.cmd('ACL', 'SETUSER', 'noclient', 'on', '>secret', '~*', '&*', '+@all', '-client')
  const url = `redis://noclient:secret@127.0.0.1:${redis.port}`
  const errors = []
  const options = { redis: url, prefix: 'acl:', ttl: 600_000, onError: (e) => errors.push(e) }
  const [a, b] = [0, 1].map(() => track(t, new Cache(options)))
  await Promise.all([a.ready(), b.ready()])
  await warm([a, b], 'k', 'v1')
  await a.set('k', 'v2')
  await waitFor(async () => (await b.getOrLoad('k', () => 'WRONG')) === 'v2', "B seeing A's set", 2000)
  await a.getOrLoad('x', () => 'x')
  await waitFor(() => errors.length >= 1, 'the refusal reported', 2000)
  await sleep(100)
  await a.getOrLoad('y', () => 'y')
  const refusals = errors.filter((e) => /CLIENT TRACKING/.test(e.message))
  assert.ok(refusals.length >= 1 && refusals.length <= 2, `reported once per cache (${refusals.length})`)
  for (const e of refusals) assert.equal(e.code, 'ERR_HERDCACHE_REDIS_NOPERM')
  assert.equal(a.stats().redisTracking, 0)
  assert.equal(a.stats().redisSubscribed, 1, 'the events subscription itself is live')
})

/** A 3+3 cluster topology. */
async function clusterTopology(t) {
  const cluster = await startCluster(t, { primaries: 3, replicas: 1 })
  if (!cluster) return null
  const io = new IORedis.Cluster(
    cluster.urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) })),
    { redisOptions: { maxRetriesPerRequest: 1 } },
  )
  t.after(() => io.disconnect())
  const primaries = async () => (await cluster.primaries()).map((p) => p.port)
  const nodeOf = (port) => ({ port, cmd: (...args) => cluster.cmd(port, ...args) })
  const ownerOf = async (name) => cluster.ownerOf(await cluster.slotOf(name))
  return {
    name: 'a 3+3 cluster',
    cluster,
    io,
    options: { redis: { cluster: cluster.urls } },
    async cli(...args) {
      return run(CLI, ['-c', '-p', String(await ownerOf(args[1])), ...args])
    },
    async flushdb() {
      for (const port of await primaries()) await cluster.cmd(port, 'FLUSHDB')
    },
    nodeOf,
    primaries,
    /** `n` keys of `prefix` whose values live on `node`. */
    async keysOn(node, prefix, n) {
      const keys = []
      for (let i = 0; keys.length < n; i++) {
        if ((await ownerOf(names(prefix, `evicted:${i}`).value)) === node.port) keys.push(`evicted:${i}`)
      }
      return keys
    },
    /** A hash tag whose slot `node` serves. */
    async tagOn(node) {
      for (let i = 0; ; i++) if ((await ownerOf(`{filler${i}}`)) === node.port) return `filler${i}`
    },
    async killTracking() {
      let killed = 0
      for (const port of await primaries()) {
        const list = await cluster.cmd(port, 'CLIENT', 'LIST')
        for (const line of list.split('\n').filter((l) => /flags=\S*t/.test(l))) {
          await cluster.cmd(port, 'CLIENT', 'KILL', 'ID', /id=(\d+)/.exec(line)[1])
          killed++
        }
      }
      return killed
    },
  }
}

test('a 3+3 cluster: outside writes and evictions reach both L1s within 50 ms (median of 20), own writes are echoes, a killed tracking connection, a slot move and a failover leave no outdated L1 past redisTimeout + 100 ms', {
  timeout: 240000,
}, async (t) => {
  const topology = await clusterTopology(t)
  if (!topology) return
  const { cluster } = topology
  await t.test('outside writes', (t) => outsideWritesReachTheL1s(t, topology, 'ctrk:'))
  await t.test('own writes', (t) => ownWritesAreNotAppliedTwice(t, topology, 'cown:'))
  await t.test('evictions', async (t) => {
    const [port] = await topology.primaries()
    await evictionsReachTheL1s(t, topology, 'cevict:', topology.nodeOf(port))
  })
  await t.test('a killed tracking connection', (t) => aKilledTrackingConnection(t, topology, 'ckill:'))

  await t.test('a slot move, then a failover', async (t) => {
    const prefix = 'cmove:'
    const options = { ...topology.options, prefix, ttl: 600_000, redisTimeout: REDIS_TIMEOUT }
    const caches = [0, 1].map(() => track(t, new Cache(options)))
    await Promise.all(caches.map((c) => c.ready()))
    await waitFor(() => caches.every((c) => c.stats().redisTracking === 1), 'tracking on both instances', 5000)
    const name = names(prefix, 'k').value
    const slot = await cluster.slotOf(name)

    // The key's slot moves to another primary: a SET there reaches both L1s.
    await warm(caches, 'k', 'before the move')
    const from = await cluster.ownerOf(slot)
    const to = (await topology.primaries()).find((p) => p !== from)
    await cluster.migrateSlot(slot, to)
    await warm(caches, 'k', 'after the move')
    let since = Date.now()
    await cluster.cmd(to, 'SET', name, 'written outside, after the move')
    const moved = await forgotten(caches, 'k', 'after the move', since, REDIS_TIMEOUT + 1000)
    t.diagnostic(`slot moved: both L1s forgot the value ${moved} ms after the outside SET`)
    assert.ok(moved <= REDIS_TIMEOUT + 100, `after a slot move: ${moved} ms`)

    // Its primary fails over: once the replica took over, a SET there reaches both L1s.
    await warm(caches, 'k', 'before the failover')
    await cluster.killPrimary(to)
    await cluster.waitFailover()
    const promoted = await cluster.ownerOf(slot)
    since = Date.now()
    await cluster.cmd(promoted, 'SET', name, 'written outside, after the failover')
    const failedOver = await forgotten(caches, 'k', 'before the failover', since, 5000)
    t.diagnostic(`failover: both L1s forgot the value ${failedOver} ms after the outside SET on the new primary`)
    assert.ok(failedOver <= REDIS_TIMEOUT + 100, `after a failover: ${failedOver} ms`)
  })
})
