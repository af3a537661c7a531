'use strict'
// DESIGN §4: the envelope under the value key. Foreign or corrupt values are a
// counted miss, never a crash; a late lock holder cannot overwrite a newer value.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache, kTesting } = require('../..')
const { track, counted, gatedLoader } = require('../helpers')
const { sleep, waitFor, within, parseEnvelope, names, storedEnvelope, lockReleased } = require('./fixtures/fleet')

const T = { timeout: 10000 }

function corruptCases() {
  const now = Date.now()
  const later = now + 600000
  return {
    'plain text': 'hello world',
    'an empty string': '',
    'JSON without a header': '{"a":1}',
    'a truncated header': 'hc1 123',
    'a header without its value line': `hc1 ${later} ${later} 1 ${now} v`,
    'header fields that are not numbers': 'hc1 x y z w v\n1',
    'an unknown flag': `hc1 ${later} ${later} 1 ${now} q\n1`,
    'a future version': `hc9 ${later} ${later} 1 ${now} v\n1`,
    'a value line that is not JSON': `hc1 ${later} ${later} 1 ${now} v\n{not json`,
    'an hc2 header without refreshAt': `hc2 ${later} ${later} 1 ${now} v\n1`,
    'an hc2 refreshAt past freshUntil': `hc2 ${later} ${later} 1 ${now} ${later + 1} v\n1`,
    'an hc2 refreshAt that is not a number': `hc2 ${later} ${later} 1 ${now} soon v\n1`,
    'an hc1 header with a refreshAt': `hc1 ${later} ${later} 1 ${now} ${now} v\n1`,
    'binary bytes': Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x0a, 0x80]),
  }
}

test(
  'a corrupt or foreign value under a key is a miss, counted in corruptValues, then overwritten with an envelope',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'cor:'
    const cache = track(t, new Cache({ redis: redis.url, prefix }))
    const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
    let i = 0
    for (const [name, raw] of Object.entries(corruptCases())) {
      i++
      const key = `c${i}`
      await redis.cmd('SET', names(prefix, key).value, raw)
      const before = cache.stats().corruptValues
      const loader = counted(() => ({ fixed: i }))
      const status = {}
      const v = await within(cache.getOrLoad(key, loader, { status }), 3000, name)
      assert.deepEqual(v, { fixed: i }, `${name}: the loader's value is returned`)
      assert.equal(loader.calls, 1, `${name}: treated as a miss`)
      assert.equal(status.outcome, 'miss', name)
      assert.equal(cache.stats().corruptValues, before + 1, `${name}: counted once in corruptValues`)
      // overwritten with an hc2 envelope
      const env = await storedEnvelope(redis, names(prefix, key).value, (e) => e.value?.fixed === i)
      assert.deepEqual(env.value, { fixed: i }, name)
      // Another instance now reads it from Redis without loading.
      const rs = {}
      assert.deepEqual(
        await reader.getOrLoad(key, () => 'WRONG', { status: rs }),
        { fixed: i },
        `${name}: readable by another instance`,
      )
      assert.equal(rs.outcome, 'hit', name)
    }
    assert.equal(reader.stats().corruptValues, 0)
    assert.equal(reader.stats().redisHits, i)
    assert.equal(cache.stats().redisErrors, 0, 'a corrupt value is not a Redis error')
    assert.equal(cache.stats().circuitOpen, 0)
  },
)

test('get() of a corrupt value is undefined, never a rejection', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'corget:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  await redis.cmd('SET', names(prefix, 'k').value, 'garbage')
  assert.equal(await cache.get('k'), undefined)
})

test('a value of another Redis type (a list) under a key is a miss, counted, then overwritten', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'type:'
  const cache = track(t, new Cache({ redis: redis.url, prefix }))
  await redis.cmd('RPUSH', names(prefix, 'k').value, 'a', 'b')
  const loader = counted(() => 'ok')
  assert.equal(await within(cache.getOrLoad('k', loader), 3000, 'getOrLoad over a list'), 'ok')
  assert.equal(loader.calls, 1)
  assert.ok(
    cache.stats().corruptValues >= 1,
    `counted as a corrupt value (corruptValues ${cache.stats().corruptValues}, redisErrors ${cache.stats().redisErrors})`,
  )
  await storedEnvelope(redis, names(prefix, 'k').value, (e) => e.value === 'ok') // overwritten with an envelope
})

test('an envelope written by hand in the documented format is read as such (value, negative, stale)', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'hand:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, beta: 0 }))
  const now = Date.now()
  await redis.cmd(
    'SET',
    names(prefix, 'fresh').value,
    `hc1 ${now + 60000} ${now + 600000} 5 ${now} v\n{"hand":[1,2]}`,
    'PX',
    600000,
  )
  await redis.cmd(
    'SET',
    names(prefix, 'neg').value,
    `hc1 ${now + 60000} ${now + 600000} 5 ${now} n\nnull`,
    'PX',
    600000,
  )
  await redis.cmd(
    'SET',
    names(prefix, 'stale').value,
    `hc1 ${now - 1000} ${now + 600000} 5 ${now - 2000} v\n"old"`,
    'PX',
    600000,
  )

  await redis.cmd(
    'SET',
    names(prefix, 'fresh2').value,
    `hc2 ${now + 60000} ${now + 600000} 5 ${now} ${now + 59000} v\n{"hand":2}`,
    'PX',
    600000,
  )

  const never = counted(() => 'WRONG')
  let status = {}
  assert.deepEqual(await cache.getOrLoad('fresh2', never, { status }), { hand: 2 })
  assert.equal(status.outcome, 'hit')
  status = {}
  assert.deepEqual(await cache.getOrLoad('fresh', never, { status }), { hand: [1, 2] })
  assert.equal(status.outcome, 'hit')
  status = {}
  const neg = await cache.getOrLoad('neg', never, { status })
  assert.ok(neg === undefined || neg === null, `a negative marker reads as "not found": ${neg}`)
  assert.equal(status.outcome, 'negative')
  assert.equal(never.calls, 0)
  assert.equal(cache.stats().redisHits, 3)

  const refresh = counted(() => 'new')
  status = {}
  assert.equal(await cache.getOrLoad('stale', refresh, { status }), 'old')
  assert.equal(status.outcome, 'stale')
  await waitFor(
    async () => parseEnvelope(await redis.cmd('GET', names(prefix, 'stale').value))?.value === 'new',
    'the refresh in Redis',
    3000,
  )
  assert.equal(refresh.calls, 1)
  assert.equal(cache.stats().corruptValues, 0)
})

test(
  'a late lock holder cannot overwrite a newer value: A loads slowly, B sets meanwhile, Redis keeps B',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'late:'
    const key = names(prefix, 'k')
    const a = track(t, new Cache({ redis: redis.url, prefix }))
    const b = track(t, new Cache({ redis: redis.url, prefix }))

    const loader = gatedLoader()
    const pa = a.getOrLoad('k', loader)
    await waitFor(() => loader.calls === 1, "A's loader starting")
    assert.ok(await redis.cmd('GET', key.lock), 'A holds the lock')
    await sleep(30) // B's write is strictly later than the start of A's load (coarse clock)
    await b.set('k', 'fromB')
    assert.equal(parseEnvelope(await redis.cmd('GET', key.value))?.value, 'fromB')

    loader.runs[0].resolve('fromA-late')
    await within(
      pa.catch(() => {}),
      3000,
      "A's call",
    )
    await waitFor(() => a.stats().inFlight === 0, "A's load to finish")
    await lockReleased(redis, key.lock) // A's write (or its refusal) is done
    await sleep(50)
    const env = parseEnvelope(await redis.cmd('GET', key.value))
    assert.equal(env?.value, 'fromB', `GET shows B's newer value, not A's late one: ${JSON.stringify(env)}`)

    // Every instance agrees on B's value, A included (its L1 must not keep its late result).
    const c = track(t, new Cache({ redis: redis.url, prefix }))
    assert.equal(await c.getOrLoad('k', () => 'WRONG'), 'fromB')
    await waitFor(
      async () => (await a.getOrLoad('k', () => 'WRONG')) === 'fromB',
      "A's own callers seeing B's value",
      1000,
    )
    assert.equal(await b.getOrLoad('k', () => 'WRONG'), 'fromB')
  },
)

test(
  'a late writer cannot overwrite a newer value written by another load either (a newer stamp wins)',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'late2:'
    const key = names(prefix, 'k')
    const cache = track(t, new Cache({ redis: redis.url, prefix }))
    const loader = gatedLoader()
    const p = cache.getOrLoad('k', loader)
    await waitFor(() => loader.calls === 1, 'the load starting')
    // Another writer (another instance whose load started later) put a newer envelope there.
    const now = Date.now() + 1000
    const newer = `hc1 ${now + 60000} ${now + 600000} 3 ${now} v\n"newer"`
    await redis.cmd('SET', key.value, newer, 'PX', 600000)
    loader.runs[0].resolve('older')
    await within(
      p.catch(() => {}),
      3000,
      'the call',
    )
    await waitFor(() => cache.stats().inFlight === 0, 'the load to finish')
    await lockReleased(redis, key.lock)
    await sleep(50)
    assert.equal(
      parseEnvelope(await redis.cmd('GET', key.value))?.value,
      'newer',
      'the envelope with the newer stamp is kept',
    )

    // The same with a newer hc2 envelope.
    const key2 = names(prefix, 'k2')
    const loader2 = gatedLoader()
    const p2 = cache.getOrLoad('k2', loader2)
    await waitFor(() => loader2.calls === 1, 'the second load starting')
    const newer2 = `hc2 ${now + 60000} ${now + 600000} 3 ${now} ${now + 59000} v\n"newer2"`
    await redis.cmd('SET', key2.value, newer2, 'PX', 600000)
    loader2.runs[0].resolve('older')
    await within(
      p2.catch(() => {}),
      3000,
      'the second call',
    )
    await waitFor(() => cache.stats().inFlight === 0, 'the second load to finish')
    await lockReleased(redis, key2.lock)
    await sleep(50)
    assert.equal(await redis.cmd('GET', key2.value), newer2, 'the hc2 envelope with the newer stamp is kept')
  },
)

test(
  'a corrupt entry with a stamp the reader rejects, or a newer stamp over a bad value, is overwritten once',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'stamp:'
    const now = Date.now()
    const later = now + 600000
    const cases = {
      'a stamp past u64': `hc1 ${later} ${later} 1 ${'9'.repeat(25)} v\n1`,
      'a stamp past the digit limit': `hc1 ${later} ${later} 1 ${'9'.repeat(16)} v\n1`,
      'a newer stamp over a value that is not JSON': `hc1 ${later} ${later} 1 ${now + 10 ** 9} v\n{not json`,
      'an hc2 stamp past the digit limit': `hc2 ${later} ${later} 1 ${'9'.repeat(16)} ${later} v\n1`,
      'an hc2 newer stamp with refreshAt past freshUntil': `hc2 ${later} ${later} 1 ${now + 10 ** 9} ${later + 1} v\n1`,
      'an hc2 newer stamp over a value that is not JSON': `hc2 ${later} ${later} 1 ${now + 10 ** 9} ${later} v\n{nope`,
      'a newer stamp over bytes that are not UTF-8': Buffer.concat([
        Buffer.from(`hc1 ${later} ${later} 1 ${now + 10 ** 9} v\n"`),
        Buffer.from([0xff, 0xfe, 0x22]),
      ]),
    }
    for (const [name, raw] of Object.entries(cases)) {
      const key = `k:${name.length}`
      await redis.cmd('SET', names(prefix, key).value, raw)
      const writer = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
      const loader = counted(() => `fresh for ${name}`)
      assert.equal(await writer.getOrLoad(key, loader), `fresh for ${name}`, name)
      assert.equal(writer.stats().corruptValues, 1, name)
      assert.match(
        await redis.cmd('GET', names(prefix, key).value),
        new RegExp(`fresh for ${name}`),
        `${name}: replaced in Redis`,
      )
      // Every other instance now reads the value instead of reloading it.
      const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
      const again = counted(() => 'reloaded')
      assert.equal(await reader.getOrLoad(key, again), `fresh for ${name}`, name)
      assert.equal(again.calls, 0, name)
      assert.equal(loader.calls, 1, name)
    }
  },
)

test('every writer writes hc2, with the refresh moment it drew: u = 1 never early, u = 0 its stamp', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'hc2w:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, ttl: 60000, jitter: 0, beta: 1 }))
  cache[kTesting].setRandom({ xfetch: 1 })
  await cache.getOrLoad('late', async () => {
    await sleep(30)
    return 'v'
  })
  const late = await storedEnvelope(redis, names(prefix, 'late').value)
  assert.equal(late.version, 'hc2')
  assert.ok(late.computeMs >= 20, `computeMs ${late.computeMs}`)
  assert.equal(late.refreshAt, late.freshUntil, 'u = 1: never early')

  cache[kTesting].setRandom({ xfetch: 0 })
  await cache.getOrLoad('eager', async () => {
    await sleep(30)
    return 'v'
  })
  const eager = await storedEnvelope(redis, names(prefix, 'eager').value)
  assert.equal(eager.refreshAt, eager.stamp, 'u = 0: from the stamp on (the first read refreshes)')

  cache[kTesting].setRandom({ xfetch: 0.5 })
  await cache.getOrLoad('half', async () => {
    await sleep(200)
    return 'v'
  })
  const half = await storedEnvelope(redis, names(prefix, 'half').value)
  const expected = half.freshUntil - half.computeMs * Math.LN2
  assert.ok(Math.abs(half.refreshAt - expected) <= 1, `refreshAt ${half.refreshAt}, expected ~${expected}`)

  await cache.set('direct', 'v')
  const direct = await storedEnvelope(redis, names(prefix, 'direct').value)
  assert.equal(direct.version, 'hc2')
  assert.equal(direct.refreshAt, direct.freshUntil, 'set() has no compute time: never early')
})

test(
  "another instance's refreshAt decides when this one refreshes early; an hc1 entry gets a local draw",
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'hc2r:'
    const now = Date.now()
    const write = (key, text) => redis.cmd('SET', names(prefix, key).value, text, 'PX', 600000)
    // Past its moment (but fresh): refreshed early, whatever this instance would draw.
    await write('due', `hc2 ${now + 60000} ${now + 600000} 50 ${now} ${now} v\n"old"`)
    // Its moment is freshUntil: never early, though this instance's draw would be.
    await write('never', `hc2 ${now + 60000} ${now + 600000} 50 ${now} ${now + 60000} v\n"old"`)
    // hc1: no moment written, this instance draws one (u = 0: at once).
    await write('v1', `hc1 ${now + 60000} ${now + 600000} 50 ${now} v\n"old"`)

    const never = track(t, new Cache({ redis: redis.url, prefix, beta: 1 }))
    await never.ready() // the subscription's going live clears the L1
    never[kTesting].setRandom({ xfetch: 0 })
    const noLoad = counted(() => 'WRONG')
    for (let i = 0; i < 5; i++) assert.equal(await never.getOrLoad('never', noLoad), 'old')
    await sleep(50)
    assert.equal(noLoad.calls, 0, 'refreshAt = freshUntil: no early refresh')
    assert.equal(never.stats().earlyRefreshes, 0)

    const due = track(t, new Cache({ redis: redis.url, prefix, beta: 1 }))
    await due.ready()
    due[kTesting].setRandom({ xfetch: 1 })
    const refresh = counted(() => 'new')
    const status = {}
    assert.equal(await due.getOrLoad('due', refresh, { status }), 'old')
    assert.equal(status.outcome, 'hit')
    assert.equal(await due.getOrLoad('due', refresh), 'old', 'served while the early refresh runs')
    await waitFor(() => due.stats().earlyRefreshes === 1 && due.stats().inFlight === 0, 'the early refresh')
    assert.equal(refresh.calls, 1)
    await storedEnvelope(redis, names(prefix, 'due').value, (e) => e.value === 'new' && e.version === 'hc2')

    const v1 = counted(() => 'new')
    assert.equal(await never.getOrLoad('v1', v1), 'old')
    assert.equal(await never.getOrLoad('v1', v1), 'old', 'the read after the adopting one refreshes early')
    await waitFor(() => never.stats().earlyRefreshes === 1 && never.stats().inFlight === 0, 'the early refresh of hc1')
    assert.equal(v1.calls, 1)
    await storedEnvelope(redis, names(prefix, 'v1').value, (e) => e.value === 'new' && e.version === 'hc2')
  },
)
