'use strict'
// A lock key no herdcache instance can have set — no TTL, a value that is
// not a lock token, another Redis type — is garbage: the first caller
// replaces it with a real lock and loads, at once. (Before: a TTL-less lock
// read as "no lock", and every caller looped SET/PTTL/GET until hardTimeout,
// 11 000 times a second, registering a fill waiter per turn.)
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, within } = require('../helpers')

const T = { timeout: 20000 }

/** Calls of each command since the last CONFIG RESETSTAT. */
async function commandCalls(redis) {
  const info = await redis.cmd('INFO', 'commandstats')
  const calls = {}
  for (const [, name, n] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) calls[name] = Number(n)
  return calls
}

const GARBAGE = {
  'a string without a TTL': ['SET', 'foreign'],
  'a token-shaped string without a TTL': ['SET', '0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5f'],
  'a string that is not a token, with a TTL': ['SET', 'foreign', 'PX', '600000'],
  'a list': ['RPUSH', 'x'],
  'a hash': ['HSET', 'f', 'v'],
}

test('a garbage lock key is replaced by the first caller, who loads at once; no spinning', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'gl:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, hardTimeout: 3000 }))
  let i = 0
  for (const [what, [command, ...args]] of Object.entries(GARBAGE)) {
    const key = `k${i++}`
    const lock = `{${prefix}${key}}:lock`
    await redis.cmd(command, lock, ...args)
    await redis.cmd('CONFIG', 'RESETSTAT')
    const started = performance.now()
    let loads = 0
    const callers = Array.from({ length: 50 }, () =>
      cache.getOrLoad(key, async () => {
        loads++
        return `value of ${key}`
      }),
    )
    const values = await within(Promise.all(callers), 2500, `the callers of ${what}`)
    const took = performance.now() - started
    assert.deepEqual(new Set(values), new Set([`value of ${key}`]), what)
    assert.equal(loads, 1, what)
    const calls = await commandCalls(redis)
    const commands = Object.entries(calls)
      .filter(([name]) => name !== 'info' && name !== 'config|resetstat')
      .reduce((sum, [, n]) => sum + n, 0)
    // A read, the lock script, a re-read, the write script (Redis counts the
    // commands inside scripts too, and a script's first call loads it):
    // about 16, not thousands.
    assert.ok(commands <= 30, `${what}: ${commands} commands in ${took.toFixed(0)} ms: ${JSON.stringify(calls)}`)
    // The lock was released by the writer; the value is in Redis.
    assert.equal(await redis.cmd('EXISTS', lock), 0, what)
    assert.match(await redis.cmd('GET', `{${prefix}${key}}`), /^hc2 /, what)
  }
  assert.equal(cache.stats().timeouts, 0)
  assert.equal(cache.stats().lockAcquired, Object.keys(GARBAGE).length)
})

test('a live lock held by another instance is still waited for, not replaced', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'gl2:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, hardTimeout: 5000 }))
  const holder = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  let release
  const holding = holder.getOrLoad('k', () => new Promise((resolve) => (release = resolve)))
  // Wait until the holder has the lock.
  const lock = `{${prefix}k}:lock`
  for (let n = 0; n < 200 && (await redis.cmd('EXISTS', lock)) === 0; n++) await new Promise((r) => setTimeout(r, 5))
  assert.equal(await redis.cmd('EXISTS', lock), 1)
  let loads = 0
  const waiting = cache.getOrLoad('k', () => {
    loads++
    return 'mine'
  })
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(loads, 0, 'the loser waits for the holder')
  release('theirs')
  assert.equal(await holding, 'theirs')
  assert.equal(await within(waiting, 3000, 'the loser'), 'theirs')
  assert.equal(loads, 0)
  assert.ok(cache.stats().fillNotices >= 1)
})
