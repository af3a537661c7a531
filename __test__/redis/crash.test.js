'use strict'
// R2: the lock always has a lease. A lock holder SIGKILLed mid-load frees the key
// within lockTtl; waiting losers take over, long before hardTimeout.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { sleep, waitFor, loaderLog, spawnChild, names, storedEnvelope } = require('./fixtures/fleet')

const T = { timeout: 14000 }
const LOCK_TTL = 300
const HARD_TIMEOUT = 10000

test('the lock holder is SIGKILLed mid-load: a waiting process takes over after the lease', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const prefix = 'crash:'
  const key = names(prefix, 'k')
  const options = { redis: redis.url, prefix, lockTtl: LOCK_TTL, hardTimeout: HARD_TIMEOUT }
  const [a, b, c] = await Promise.all([0, 1, 2].map(() => spawnChild(t, { options, log: log.file })))

  // A wins the lock and hangs in its loader.
  const aBurst = a.call('burst', { key: 'k', n: 10, loader: { hang: true } }, 12000).catch((e) => e)
  await waitFor(() => log.runs('k').length === 1, "A's loader starting", 3000)
  assert.equal(log.runs('k')[0].pid, a.pid)
  const token = await redis.cmd('GET', key.lock)
  assert.ok(token, 'A holds the lock key')
  const pttl = await redis.cmd('PTTL', key.lock)
  assert.ok(pttl > 0 && pttl <= LOCK_TTL, `the lock has a lease of at most lockTtl (PTTL ${pttl})`)
  // The lease is extended while A's loader runs: still held after more than one lease.
  await sleep(LOCK_TTL + 150)
  assert.equal(await redis.cmd('GET', key.lock), token, "A's lease is extended while its loader runs")

  // B's callers arrive and wait for A.
  const bBurst = b.call('burst', { key: 'k', n: 20, loader: { value: 'fromB', ms: 50 } })
  await waitFor(async () => (await b.call('stats'))[0].lockContended >= 1, 'B contending for the lock', 3000)
  assert.equal(log.runs('k').length, 1, 'B does not load while A holds a live lease')

  const killedAt = Date.now()
  await a.kill('SIGKILL')
  const aResult = await aBurst
  assert.ok(aResult instanceof Error, 'A died with its calls pending')

  const bResult = await bBurst
  const tookOver = Date.now() - killedAt
  const [r] = bResult.perInstance
  assert.deepEqual(r.errors, [], 'no caller of B rejects (no ERR_HERDCACHE_TIMEOUT)')
  assert.deepEqual(
    Object.keys(r.values).map((j) => JSON.parse(j)),
    [{ v: 'fromB', pid: b.pid, inst: 0 }],
    "B's callers get B's load",
  )
  assert.ok(
    tookOver < 2500,
    `B answered ${tookOver} ms after A died (lockTtl ${LOCK_TTL}, hardTimeout ${HARD_TIMEOUT})`,
  )
  const runs = log.runs('k')
  assert.equal(runs.length, 2, `A's hung load, then B's: ${JSON.stringify(runs)}`)
  assert.equal(runs[1].pid, b.pid)

  // Nothing is stuck: the value is stored, the lock is gone (or held by a newer winner: nobody else loads now).
  const env = await storedEnvelope(redis, key.value, (e) => e.value.v === 'fromB')
  assert.equal(env.negative, false)
  await waitFor(async () => (await redis.cmd('GET', key.lock)) === null, 'the lock key to be released', 1000)
  const [cr] = (await c.call('burst', { key: 'k', n: 5, loader: { value: 'fromC' } })).perInstance
  assert.deepEqual(cr.errors, [])
  assert.deepEqual(
    Object.keys(cr.values).map((j) => JSON.parse(j).v),
    ['fromB'],
    'a third process reads the value B wrote',
  )
  assert.equal(log.runs('k').length, 2)
  await Promise.all([b.close(), c.close()])
})

test(
  'a holder killed with nobody waiting: its lock expires by itself within lockTtl, the next caller loads at once',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const log = loaderLog(t)
    const prefix = 'crash2:'
    const key = names(prefix, 'k')
    const options = { redis: redis.url, prefix, lockTtl: LOCK_TTL, hardTimeout: HARD_TIMEOUT }
    const [a, c] = await Promise.all([0, 1].map(() => spawnChild(t, { options, log: log.file })))

    const aBurst = a.call('burst', { key: 'k', n: 1, loader: { hang: true } }, 12000).catch((e) => e)
    await waitFor(() => log.runs('k').length === 1, "A's loader starting", 3000)
    assert.ok(await redis.cmd('GET', key.lock), 'A holds the lock')
    await a.kill('SIGKILL')
    await aBurst
    const killedAt = Date.now()
    // Within lockTtl the lock expires by itself in Redis.
    await waitFor(
      async () => (await redis.cmd('GET', key.lock)) === null,
      "the dead holder's lock to expire",
      LOCK_TTL + 500,
    )
    assert.ok(Date.now() - killedAt <= LOCK_TTL + 500)

    const [r] = (await c.call('burst', { key: 'k', n: 10, loader: { value: 'fromC', ms: 20 } })).perInstance
    assert.deepEqual(r.errors, [])
    assert.deepEqual(
      Object.keys(r.values).map((j) => JSON.parse(j).v),
      ['fromC'],
    )
    assert.ok(r.maxMs < 1500, `the next caller waited ${r.maxMs} ms`)
    assert.equal(log.runs('k').length, 2)
    await storedEnvelope(redis, key.value, (e) => e.value.v === 'fromC')
    await c.close()
  },
)
