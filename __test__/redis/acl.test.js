'use strict'
// A Redis ACL user that may not publish or subscribe on the events channel:
// writes still release their lock at once (a failed PUBLISH used to abort the
// write script after the SET and before the lock's DEL), and the refusal is
// reported once, with ERR_HERDCACHE_REDIS_NOPERM, not rediscovered per write.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startRedis } = require('../redis-server')
const { waitFor, sleep, track } = require('../helpers')
const { deletedInRedis } = require('./fixtures/fleet')

const T = { timeout: 15000 }
const LOCK_TTL = 2000

// -@pubsub: no PUBLISH/SUBSCRIBE at all; the second is how Redis 7 creates a
// user by default (`acl-pubsub-default resetchannels`: no channel access).
const USERS = [
  { name: 'nopubsub', rules: ['~*', '&*', '+@all', '-@pubsub'] },
  { name: 'nochannels', rules: ['~*', 'resetchannels', '+@all'] },
]

for (const user of USERS) {
  test(`ACL user ${user.name}: writes free their lock, and the refusal is reported once`, T, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    await redis.cmd('ACL', 'SETUSER', user.name, 'on', '>secret', ...user.rules)
    const url = `redis://${user.name}:secret@127.0.0.1:${redis.port}`
    const prefix = `acl-${user.name}:`
    const reports = []
    const options = {
      redis: url,
      prefix,
      lockTtl: LOCK_TTL,
      redisTimeout: 500,
      onError: (error, info) => reports.push({ code: error.code, message: error.message, info }),
    }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))

    for (let i = 0; i < 5; i++) assert.equal(await a.getOrLoad(`k${i}`, () => `v${i}`), `v${i}`)
    assert.deepEqual(await redis.cmd('KEYS', `{${prefix}*:lock`), [], 'every write released its lock')
    assert.ok((await redis.cmd('GET', `{${prefix}k0}`)).endsWith('\n"v0"'), 'and the value was written')

    // Another instance's load of a key A wrote and deleted is not held up by a lock left behind.
    await redis.cmd('DEL', `{${prefix}k1}`)
    const started = Date.now()
    assert.equal(await b.getOrLoad('k1', () => 'fromB'), 'fromB')
    assert.ok(Date.now() - started < LOCK_TTL / 4, `B loaded at once (${Date.now() - started} ms)`)

    // delete and clear still reach Redis though their announcement is refused.
    assert.equal(await a.delete('k2'), true)
    assert.ok(deletedInRedis(await redis.cmd('GET', `{${prefix}k2}`)), 'the delete reached Redis')
    await a.clear()
    assert.deepEqual(await redis.cmd('KEYS', `{${prefix}*`), [])
    assert.equal(a.stats().recoveryPending, 0, 'nothing kept for replay: they were delivered')

    await waitFor(() => reports.some((r) => /PUBLISH/.test(r.message)), 'the refused PUBLISH reported', 3000)
    await waitFor(() => reports.some((r) => /SUBSCRIBE/.test(r.message)), 'the refused SUBSCRIBE reported', 3000)
    for (const r of reports) {
      assert.equal(r.code, 'ERR_HERDCACHE_REDIS_NOPERM', r.message)
      assert.match(r.message, /herdcache:events:/, 'the message names the channel')
      assert.equal(r.info.key, undefined)
    }
    // Each cache reports each refusal once, however many writes follow.
    for (let i = 0; i < 20; i++) await a.set(`more${i}`, i)
    await sleep(100)
    const publish = reports.filter((r) => /PUBLISH/.test(r.message)).length
    const subscribe = reports.filter((r) => /SUBSCRIBE/.test(r.message)).length
    assert.ok(publish >= 1 && publish <= 2, `PUBLISH refusals reported ${publish} times (once per cache)`)
    assert.ok(subscribe >= 1 && subscribe <= 2, `SUBSCRIBE refusals reported ${subscribe} times (once per cache)`)
    assert.equal(a.stats().redisErrors, 0, 'a refused announcement is no Redis failure (no breaker)')
  })
}

test('without onError, a refused PUBLISH is one process warning', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  await redis.cmd('ACL', 'SETUSER', 'quiet', 'on', '>secret', '~*', '&*', '+@all', '-publish')
  const cache = track(t, new Cache({ redis: `redis://quiet:secret@127.0.0.1:${redis.port}`, prefix: 'acl-w:' }))
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  for (let i = 0; i < 5; i++) await cache.set(`k${i}`, i)
  await waitFor(() => warnings.some((w) => w.code === 'ERR_HERDCACHE_REDIS_NOPERM'), 'the warning', 3000)
  await sleep(50)
  assert.equal(warnings.filter((w) => w.code === 'ERR_HERDCACHE_REDIS_NOPERM').length, 1)
})

test(
  'ACL user without the fleet load slots key: loads run under the per-process cap, reported once, the rest works',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'acl-slots:'
    // Every key of the prefix's values and locks, and the channels, but not `<prefix>loads:{loads}`.
    await redis.cmd('ACL', 'SETUSER', 'noslots', 'on', '>secret', `~{${prefix}*`, '&*', '+@all')
    const reports = []
    const cache = track(
      t,
      new Cache({
        redis: `redis://noslots:secret@127.0.0.1:${redis.port}`,
        prefix,
        fleetMaxConcurrentLoads: 2,
        maxConcurrentLoads: 3,
        onError: (error) => reports.push(error),
      }),
    )
    await cache.ready()
    let running = 0
    let peak = 0
    const loader = async ({ key }) => {
      running++
      peak = Math.max(peak, running)
      await sleep(20)
      running--
      return key
    }
    const keys = Array.from({ length: 9 }, (_, i) => `k${i}`)
    assert.deepEqual(await Promise.all(keys.map((key) => cache.getOrLoad(key, loader))), keys)
    assert.equal(peak, 3, 'the per-process cap held (the fleet cap could not be asked)')
    const s = cache.stats()
    assert.equal(s.fleetCapBypassed, 9)
    assert.equal(s.circuitOpen, 0, 'the breaker stays closed: reads, locks and writes go on')
    assert.equal(s.lockAcquired, 9)
    assert.ok((await redis.cmd('GET', `{${prefix}k0}`)).endsWith('\n"k0"'), 'the values were written')
    await waitFor(() => reports.length > 0, 'the refusal reported', 3000)
    assert.deepEqual(
      reports.map((e) => e.code),
      ['ERR_HERDCACHE_REDIS_NOPERM'],
      'once, whatever the number of loads',
    )
  },
)
