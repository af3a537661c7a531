'use strict'
// Issue 25 item 5: a hot key's slot migrated to another primary while the
// fleet reads it. The lock, the scripts, the reads and the fill notices
// must follow the slot: 2 processes reading one hot key (ttl 1 s) load it
// once per period before the move and after it, and stale reads go on
// being served meanwhile. Loader runs are counted outside the processes
// (fixtures/fleet.js's log).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startCluster } = require('../redis-cluster')
const { sleep, waitFor, loaderLog, spawnChild, total } = require('./fixtures/fleet')

/** Runs of a key by another process than the run before it, less than `gap` ms after it: the fleet lock did not hold. */
function doubled(runs, gap) {
  const sorted = [...runs].sort((a, b) => a.at - b.at)
  return sorted.filter((r, i) => i > 0 && r.pid !== sorted[i - 1].pid && r.at - sorted[i - 1].at < gap)
}

/**
 * migrateSlot's steps with the keys left on the source for `window` ms
 * after MIGRATING, as while redis-cli's reshard moves a slot's keys in
 * batches: a script naming keys of the slot some of which are absent
 * there (a value and its lock, not the back-off marker) is answered
 * TRYAGAIN meanwhile.
 */
async function migrateSlowly(cluster, slot, from, to, window) {
  const nodes = await cluster.primaries()
  const id = (port) => nodes.find((n) => n.port === port).id
  await cluster.cmd(to, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', id(from))
  await cluster.cmd(from, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', id(to))
  await sleep(window)
  for (;;) {
    const keys = await cluster.cmd(from, 'CLUSTER', 'GETKEYSINSLOT', slot, 100)
    if (!keys.length) break
    await cluster.cmd(from, 'MIGRATE', '127.0.0.1', to, '', 0, 5000, 'KEYS', ...keys)
  }
  // The rest of the move (SETSLOT NODE everywhere, and the wait for every node to agree).
  await cluster.migrateSlot(slot, to)
}

test('a cluster: the slot of a hot key migrated to another primary → still one load per period across 2 processes, stale reads served throughout', {
  timeout: 60000,
}, async (t) => {
  const cluster = await startCluster(t, { primaries: 3, replicas: 1 })
  if (!cluster) return
  const log = loaderLog(t)
  const ttl = 1000
  const prefix = 'move:'
  const key = 'hot'
  // No early refresh and no jitter: each period's expiry is one moment,
  // the one both processes race for.
  const options = { redis: { cluster: cluster.urls }, prefix, ttl, beta: 0, jitter: 0 }
  const kids = await Promise.all([0, 1].map(() => spawnChild(t, { options, log: log.file })))
  // A load long enough that its write comes while the slot's keys are still on the source.
  const loader = { value: 'v', ms: 300 }
  await kids[0].call('burst', { key, n: 1, loader })
  const slot = await cluster.slotOf(`{${prefix}${key}}`)
  const from = await cluster.ownerOf(slot)
  const to = (await cluster.primaries()).find((p) => p.port !== from).port

  const periodsBefore = 3
  // Past the default circuitBreakerDuration (5 s): a breaker the move opened would be seen open throughout.
  const periodsAfter = 6
  const settle = 1000
  const ms = (periodsBefore + periodsAfter) * ttl + settle + 1000
  const started = Date.now()
  const reading = Promise.all(
    kids.map((k) => k.call('readLoop', { key, ms, callers: 4, every: 5, loader }, ms + 15000)),
  )
  await sleep(periodsBefore * ttl - 500)
  // The move starts as a refresh's load does: its write, and the other
  // process's lock request, come while the keys are still on `from`.
  const seen = log.runs(key).length
  await waitFor(() => log.runs(key).length > seen, 'a refresh to start', 3000, 2)
  const movedAt = Date.now()
  await migrateSlowly(cluster, slot, from, to, 400)
  const movedIn = Date.now() - movedAt
  assert.equal(await cluster.ownerOf(slot), to, 'the slot moved')
  const afterFrom = Date.now() + settle
  const reads = (await reading).flat()
  const ended = Date.now()

  const runs = log.runs(key)
  const before = runs.filter((r) => r.at >= started && r.at < movedAt)
  const after = runs.filter((r) => r.at >= afterFrom && r.at < ended)
  const periods = (ended - afterFrom) / ttl
  const at = (r) => `${r.pid}@+${r.at - movedAt}`
  t.diagnostic(
    `slot ${slot} moved ${from} → ${to} in ${movedIn} ms; runs before: ${before.map(at)}; after (${periods.toFixed(1)} periods from +${afterFrom - movedAt}): ${after.map(at)}`,
  )
  const stats = (await Promise.all(kids.map((k) => k.call('stats')))).flat()
  const shown = [
    'loads',
    'lockAcquired',
    'lockContended',
    'lockWaits',
    'fillNotices',
    'redisErrors',
    'lastRedisError',
    'backgroundRefreshes',
    'backgroundErrors',
    'refreshesSkipped',
    'timeouts',
    'inFlight',
    'circuitOpen',
    'redisSubscribed',
    'staleServed',
    'misses',
  ]
  t.diagnostic(`stats: ${JSON.stringify(stats.map((s) => Object.fromEntries(shown.map((c) => [c, s[c]]))))}`)

  assert.deepEqual(
    reads.flatMap((r) => r.errors),
    [],
    'no read rejects',
  )
  assert.deepEqual(doubled(before, 500).map(at), [], 'before the move: one process loads each period')
  assert.deepEqual(
    doubled(after, 500).map(at),
    [],
    'after the move: still one process loads each period (the lock follows the slot)',
  )
  assert.ok(
    after.length <= Math.ceil(periods) + 1,
    `after the move: at most one run per period, ${after.length} in ${periods.toFixed(1)}`,
  )
  // A refresh period is the ttl from the end of a load (and the reads' pace).
  const refreshes = (ended - afterFrom) / (ttl + loader.ms + 100)
  assert.ok(after.length >= Math.floor(refreshes) - 1, `the key was refreshed as it expired: ${after.length} runs`)
  assert.equal(total([stats], 'redisErrors'), 0, 'no command failed: the move opened no breaker')
  // The readers were answered from memory or stale while the refreshes
  // ran, the move's included: none waited on a load.
  const outcomes = {}
  for (const r of reads) for (const [k, n] of Object.entries(r.outcomes)) outcomes[k] = (outcomes[k] || 0) + n
  t.diagnostic(`outcomes: ${JSON.stringify(outcomes)}`)
  assert.ok(outcomes.stale > 0, `stale values were served: ${JSON.stringify(outcomes)}`)
  assert.equal(outcomes.miss, undefined, `no caller waited on a load: ${JSON.stringify(outcomes)}`)
  assert.equal(total([stats], 'loads'), runs.length, 'the loads counted are the runs logged')
  await Promise.all(kids.map((k) => k.close()))
})
