'use strict'
// Batch loads (`cache.getOrLoadMany(keys, loader, options?)`, lib/many.js), embedded: only the keys
// this process loads reach the loader, in one call per `maxBatchSize` keys; each key is stored,
// coalesced and refreshed as getOrLoad does it. The Redis side is in __test__/redis/many.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const diagnostics_channel = require('node:diagnostics_channel')
const { Cache, channels } = require('..')
const { codes } = require('../lib/names')
const { T, track, sleep, deferred, rejectsWith, callAsync, advance, COUNTERS } = require('./helpers')

/** A batch loader recording each call's keys; `answer(keys, ctx)` makes its result (default: a Map of `v:<key>`). */
function recorder(answer = (keys) => new Map(keys.map((k) => [k, `v:${k}`]))) {
  const calls = []
  const loader = async (keys, ctx) => {
    calls.push([...keys])
    return answer(keys, ctx)
  }
  return { calls, loader }
}

test('only the missing keys reach the loader, in one call; hits are not loaded', T, async (t) => {
  const cache = track(t, new Cache())
  await cache.set('a', 'A')
  await cache.set('c', 'C')
  const { calls, loader } = recorder()
  const values = await cache.getOrLoadMany(['a', 'b', 'c', 'd', 'e'], loader)
  assert.deepEqual(values, ['A', 'v:b', 'C', 'v:d', 'v:e'])
  assert.deepEqual(calls, [['b', 'd', 'e']])
  // Stored as getOrLoad stores: the next call loads nothing, and getOrLoad hits.
  assert.deepEqual(await cache.getOrLoadMany(['e', 'd', 'b', 'a'], loader), ['v:e', 'v:d', 'v:b', 'A'])
  assert.equal(calls.length, 1)
  assert.equal(await cache.getOrLoad('d', () => 'reloaded'), 'v:d')
  assert.equal(cache.stats().misses, 3)
})

test('maxBatchSize splits the missing keys into loader calls of at most that many', T, async (t) => {
  const cache = track(t, new Cache())
  const { calls, loader } = recorder()
  const keys = Array.from({ length: 7 }, (_, i) => `k${i}`)
  const values = await cache.getOrLoadMany(keys, loader, { maxBatchSize: 3 })
  assert.deepEqual(
    values,
    keys.map((k) => `v:${k}`),
  )
  assert.deepEqual(calls, [['k0', 'k1', 'k2'], ['k3', 'k4', 'k5'], ['k6']])
  // The default is 100.
  const many = Array.from({ length: 150 }, (_, i) => `m${i}`)
  await cache.getOrLoadMany(many, loader)
  assert.deepEqual(
    calls.slice(3).map((c) => c.length),
    [100, 50],
  )
})

test('keys the loader did not return are cached "not found", as a null from getOrLoad', T, async (t) => {
  const cache = track(t, new Cache())
  const { calls, loader } = recorder((keys) => new Map([[keys[0], 'found']]))
  assert.deepEqual(await cache.getOrLoadMany(['x', 'y', 'z'], loader), ['found', null, null])
  assert.deepEqual(await cache.getOrLoadMany(['x', 'y', 'z'], loader), ['found', null, null])
  assert.equal(calls.length, 1, 'the negatives are cached: nothing loads again')
  assert.equal(cache.stats().negativeHits, 2)
})

test('an array result is aligned with missingKeys; array keys; a Map keyed by equal arrays', T, async (t) => {
  const cache = track(t, new Cache())
  await cache.set(['user', 2], { id: 2 })
  const { calls, loader } = recorder((keys) => keys.map(([, id]) => (id === 3 ? null : { id })))
  const ids = [1, 2, 3, 4]
  assert.deepEqual(
    await cache.getOrLoadMany(
      ids.map((id) => ['user', id]),
      loader,
    ),
    [{ id: 1 }, { id: 2 }, null, { id: 4 }],
  )
  assert.deepEqual(calls, [
    [
      ['user', 1],
      ['user', 3],
      ['user', 4],
    ],
  ])
  // A Map whose keys are new arrays with the same parts answers them.
  const rows = recorder((keys) => new Map(keys.map(([, id]) => [['user', id], { id, again: true }])))
  assert.deepEqual(
    await cache.getOrLoadMany(
      [
        ['user', 5],
        ['user', 1],
      ],
      rows.loader,
    ),
    [{ id: 5, again: true }, { id: 1 }],
  )
})

test(
  'a result that is not a Map or an array of the right length fails its keys with ERR_HERDCACHE_BATCH_RESULT',
  T,
  async (t) => {
    const cache = track(t, new Cache())
    const err = await rejectsWith(
      cache.getOrLoadMany(['a', 'b'], async () => ['only one']),
      codes.BATCH_RESULT,
      TypeError,
    )
    assert.match(err.message, /1 values for 2 keys/)
    await rejectsWith(
      cache.getOrLoadMany(['c'], async () => ({ c: 1 })),
      codes.BATCH_RESULT,
    )
    assert.equal(await cache.get('a'), undefined, 'nothing was stored')
    assert.equal(await cache.getOrLoad('a', () => 'later'), 'later')
  },
)

test('ctx.setTtl(key, …) and ctx.noStore(key) act on one key of the batch', T, async (t) => {
  const cache = track(t, new Cache({ ttl: 60_000 }))
  const { calls, loader } = recorder((keys, ctx) => {
    if (keys.includes('short')) ctx.setTtl('short', 1000, 1000)
    if (keys.includes('once')) ctx.noStore('once')
    return new Map(keys.map((k) => [k, `v:${k}`]))
  })
  const keys = ['short', 'once', 'long']
  assert.deepEqual(await cache.getOrLoadMany(keys, loader), ['v:short', 'v:once', 'v:long'])
  assert.equal(await cache.get('once'), undefined, 'noStore: not stored')
  assert.deepEqual(await cache.getOrLoadMany(keys, loader), ['v:short', 'v:once', 'v:long'])
  assert.deepEqual(calls[1], ['once'])
  advance(cache, 2000)
  assert.equal(await cache.get('short'), undefined, 'its own hard TTL passed')
  assert.equal(await cache.get('long'), 'v:long')
  await cache.getOrLoadMany(keys, loader)
  assert.deepEqual(calls[2], ['short', 'once'])
  // A key that is not in the batch is refused, with a code.
  const bad = await rejectsWith(
    cache.getOrLoadMany(['p'], async (_keys, ctx) => {
      ctx.setTtl('not-mine', 10)
      return []
    }),
    codes.INVALID_KEY,
  )
  assert.match(bad.message, /not-mine/)
  await rejectsWith(
    cache.getOrLoadMany(['q'], async (_keys, ctx) => {
      ctx.setTtl('q', -1)
      return ['x']
    }),
    codes.INVALID_OPTION,
    RangeError,
  )
})

test('a loader error fails only the keys it was asked for; the others are stored', T, async (t) => {
  const cache = track(t, new Cache())
  await cache.set('hit', 'H')
  const boom = new Error('db down')
  const failing = recorder((keys) => (keys.includes('k2') ? Promise.reject(boom) : keys.map((k) => `v:${k}`)))
  // Two batches: the first fails, the second is stored.
  const err = await cache.getOrLoadMany(['hit', 'k1', 'k2', 'k3', 'k4'], failing.loader, { maxBatchSize: 2 }).then(
    () => assert.fail('must reject'),
    (e) => e,
  )
  assert.equal(err, boom, "the loader's own error")
  assert.deepEqual(failing.calls, [
    ['k1', 'k2'],
    ['k3', 'k4'],
  ])
  assert.equal(await cache.get('k3'), 'v:k3')
  assert.equal(await cache.get('k4'), 'v:k4')
  assert.equal(await cache.get('k1'), undefined)
  // An Error as one key's value fails that key alone.
  const own = new Error('k6 is broken')
  const perKey = recorder((keys) => new Map(keys.map((k) => [k, k === 'k6' ? own : `v:${k}`])))
  assert.equal(await cache.getOrLoadMany(['k5', 'k6', 'k7'], perKey.loader).catch((e) => e), own)
  assert.deepEqual(await Promise.all(['k5', 'k7'].map((k) => cache.get(k))), ['v:k5', 'v:k7'])
  // A retry loads only what failed.
  const retry = recorder()
  assert.deepEqual(await cache.getOrLoadMany(['k5', 'k6', 'k7'], retry.loader), ['v:k5', 'v:k6', 'v:k7'])
  assert.deepEqual(retry.calls, [['k6']])
  // A loader that throws synchronously rejects the same way.
  await assert.rejects(
    cache.getOrLoadMany(['s'], () => {
      throw new Error('sync')
    }),
    /sync/,
  )
})

test('overlapping getOrLoadMany calls and a getOrLoad of one key join: each key is loaded once', T, async (t) => {
  const cache = track(t, new Cache())
  const gate = deferred()
  const loaded = []
  const loader = async (keys) => {
    loaded.push(...keys)
    await gate.promise
    return keys.map((k) => `v:${k}`)
  }
  let singles = 0
  const first = cache.getOrLoadMany(['a', 'b', 'c'], loader)
  const single = cache.getOrLoad('b', () => {
    singles++
    return 'single'
  })
  const second = cache.getOrLoadMany(['b', 'c', 'd'], loader)
  const third = cache.getOrLoadMany(['d', 'a'], loader)
  gate.resolve()
  assert.deepEqual(await first, ['v:a', 'v:b', 'v:c'])
  assert.deepEqual(await second, ['v:b', 'v:c', 'v:d'])
  assert.deepEqual(await third, ['v:d', 'v:a'])
  assert.equal(await single, 'v:b')
  assert.equal(singles, 0)
  assert.deepEqual(loaded.sort(), ['a', 'b', 'c', 'd'])
  assert.equal(cache.stats().coalesced, 5, 'b (getOrLoad), b, c, d, a joined')
})

test('duplicate keys are loaded once and their value repeated', T, async (t) => {
  const cache = track(t, new Cache())
  const { calls, loader } = recorder()
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b', 'a', ['x', 1], ['x', 1]], loader), [
    'v:a',
    'v:b',
    'v:a',
    'v:x,1',
    'v:x,1',
  ])
  assert.deepEqual(calls, [['a', 'b', ['x', 1]]])
})

test('bad input rejects with a code, never throws, and loads nothing', T, async (t) => {
  const cache = track(t, new Cache())
  let called = 0
  const loader = async (keys) => {
    called++
    return keys
  }
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany('a', loader)),
    codes.INVALID_KEY,
    TypeError,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a', ''], loader)),
    codes.INVALID_KEY,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a', ['x', Number.NaN]], loader)),
    codes.INVALID_KEY,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a', 7], loader)),
    codes.INVALID_KEY,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], 'loader')),
    codes.INVALID_LOADER,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], loader, { sttale: false })),
    codes.INVALID_OPTION,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], loader, { status: {} })),
    codes.INVALID_OPTION,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], loader, { maxBatchSize: 0 })),
    codes.INVALID_OPTION,
    RangeError,
  )
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], loader, null)),
    codes.INVALID_OPTION,
  )
  // A bad getOrLoad option is getOrLoad's error, for every key: nothing is loaded.
  await rejectsWith(
    callAsync(() => cache.getOrLoadMany(['a'], loader, { ttl: -5 })),
    codes.INVALID_OPTION,
  )
  assert.equal(called, 0)
  assert.equal(cache.stats().misses, 0)
  assert.deepEqual(await cache.getOrLoadMany([], loader), [])
  assert.equal(called, 0)
})

test('call options apply to every key: ttl and tags', T, async (t) => {
  const cache = track(t, new Cache({ ttl: 60_000 }))
  const { loader } = recorder()
  await cache.getOrLoadMany(['a', 'b'], loader, { ttl: 1000, hardTtl: 1000, tags: ['t'] })
  await cache.set('c', 'C', { tags: ['t'] })
  await cache.deleteByTag('t')
  assert.deepEqual(await Promise.all(['a', 'b', 'c'].map((k) => cache.get(k))), [undefined, undefined, undefined])
  await cache.getOrLoadMany(['a', 'b'], loader, { ttl: 1000, hardTtl: 1000 })
  advance(cache, 1500)
  assert.equal(await cache.get('a'), undefined, 'the call ttl held')
})

test('stale keys are answered at once and refreshed in the background through the batch loader', T, async (t) => {
  const cache = track(t, new Cache({ ttl: 1000, hardTtl: 60_000, beta: 0 }))
  let round = 0
  const { calls, loader } = recorder((keys) => keys.map((k) => `${k}#${round}`))
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b', 'c'], loader), ['a#0', 'b#0', 'c#0'])
  advance(cache, 2000)
  await cache.set('c', 'fresh')
  round = 1
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b', 'c'], loader), ['a#0', 'b#0', 'fresh'])
  for (let i = 0; i < 50 && calls.length < 2; i++) await sleep(5)
  assert.deepEqual(calls, [
    ['a', 'b', 'c'],
    ['a', 'b'],
  ])
  for (let i = 0; i < 50 && (await cache.get('a')) !== 'a#1'; i++) await sleep(5)
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b'], loader), ['a#1', 'b#1'])
})

test('with maxConcurrentLoads each key is one load: batches are at most that many keys', T, async (t) => {
  const cache = track(t, new Cache({ maxConcurrentLoads: 2 }))
  let running = 0
  let peak = 0
  const { calls, loader } = recorder(async (keys) => {
    running += keys.length
    peak = Math.max(peak, running)
    await sleep(5)
    running -= keys.length
    return keys.map((k) => `v:${k}`)
  })
  const keys = ['a', 'b', 'c', 'd', 'e']
  assert.deepEqual(
    await cache.getOrLoadMany(keys, loader),
    keys.map((k) => `v:${k}`),
  )
  assert.equal(peak, 2)
  assert.deepEqual(calls, [['a', 'b'], ['c', 'd'], ['e']])
})

test('a namespace maps the keys; its loader sees them as given to the view', T, async (t) => {
  const cache = track(t, new Cache())
  const users = cache.namespace('users', { ttl: 30_000 })
  await users.set('1', 'one')
  const { calls, loader } = recorder((keys, ctx) => {
    ctx.noStore('3')
    return new Map(keys.map((k) => [k, `user ${k}`]))
  })
  assert.deepEqual(await users.getOrLoadMany(['1', '2', '3'], loader), ['one', 'user 2', 'user 3'])
  assert.deepEqual(calls, [['2', '3']])
  assert.equal(await cache.get('users:2'), 'user 2')
  assert.equal(await cache.get('users:3'), undefined)
  const arrays = recorder((keys) => new Map(keys.map((k) => [[...k], k.join('/')])))
  assert.deepEqual(await users.getOrLoadMany([['eu', 4]], arrays.loader), ['eu/4'])
  assert.deepEqual(arrays.calls, [[['eu', 4]]])
  assert.equal(await cache.get(['users', 'eu', 4]), 'eu/4')
  await rejectsWith(users.getOrLoadMany(['ok', ''], loader), codes.INVALID_KEY)
})

test('close() while a batch loads: its signal aborts, the keys reject, close() resolves', T, async (t) => {
  const cache = track(t, new Cache())
  let aborted = false
  const started = deferred()
  const pending = cache.getOrLoadMany(['a', 'b'], (_keys, ctx) => {
    started.resolve()
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        aborted = true
        reject(ctx.signal.reason)
      })
    })
  })
  await started.promise
  await cache.close()
  assert.equal(aborted, true)
  await rejectsWith(pending, codes.CLOSED)
  await rejectsWith(
    cache.getOrLoadMany(['c'], async () => ['x']),
    codes.CLOSED,
  )
})

test("the batch signal aborts once every key's load passed hardTimeout", T, async (t) => {
  const cache = track(t, new Cache({ hardTimeout: 50 }))
  let reason
  const pending = cache.getOrLoadMany(['a', 'b'], (keys, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        reason = ctx.signal.reason
        resolve(keys)
      })
    })
  })
  await rejectsWith(pending, codes.TIMEOUT)
  assert.equal(reason?.code, codes.TIMEOUT)
  assert.equal(await cache.get('a'), undefined, 'a value past hardTimeout is not stored')
})

/** What `cache.stats()` counts (helpers' COUNTERS). */
function counters(cache) {
  const stats = cache.stats()
  return Object.fromEntries(COUNTERS.map((name) => [name, stats[name]]))
}

/** Waits until `check()` is true (50 tries, 5 ms apart). */
async function until(check, what) {
  for (let i = 0; i < 50 && !(await check()); i++) await sleep(5)
  assert.ok(await check(), what)
}

test(
  'each key is counted as its getOrLoad call counts it: hits, negatives, stale reads, misses, joins',
  T,
  async (t) => {
    const made = async () => {
      const cache = track(t, new Cache({ ttl: 1000, hardTtl: 60_000, beta: 0 }))
      await cache.set('a', 'A')
      await cache.set('b', 'B')
      assert.equal(await cache.getOrLoad('n', async () => null), null)
      await cache.set('s', 'S', { ttl: 100, hardTtl: 60_000 })
      advance(cache, 500)
      return cache
    }
    const [many, single] = [await made(), await made()]
    const keys = ['a', 'n', 's', 'c', 'a', 'b', 'c', ['x', 1]]
    const expected = ['A', null, 'S', 'v:c', 'A', 'B', 'v:c', 'v:x,1']
    const { calls, loader } = recorder((missing) => missing.map((k) => `v:${k}`))
    assert.deepEqual(await many.getOrLoadMany(keys, loader), expected)
    assert.deepEqual(await Promise.all(keys.map((k) => single.getOrLoad(k, async ({ key }) => `v:${key}`))), expected)
    assert.deepEqual(calls, [['s', 'c', ['x', 1]]], "the stale key's refresh goes with the cold keys")
    for (const cache of [many, single]) await until(async () => (await cache.get('s')) === 'v:s', 's refreshed')
    assert.deepEqual(counters(many), counters(single))
    assert.equal(many.stats().hits, 3)
    // A warm call: every key from memory, counted as its getOrLoad call.
    const warm = ['a', 'n', 's', 'c', 'b']
    assert.deepEqual(await many.getOrLoadMany(warm, loader), ['A', null, 'v:s', 'v:c', 'B'])
    assert.deepEqual(await Promise.all(warm.map((k) => single.getOrLoad(k, loader))), ['A', null, 'v:s', 'v:c', 'B'])
    assert.deepEqual(counters(many), counters(single))
    assert.equal(calls.length, 1)
  },
)

test('traced, each key is a getOrLoad call of its own: one message per key, with its outcome', T, async (t) => {
  const messages = []
  const handlers = { start: (message) => messages.push(message) }
  const channel = diagnostics_channel.tracingChannel(channels.getOrLoad)
  channel.subscribe(handlers)
  t.after(() => channel.unsubscribe(handlers))
  const cache = track(t, new Cache())
  await cache.set('a', 'A')
  const { calls, loader } = recorder()
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b', 'a'], loader), ['A', 'v:b', 'A'])
  assert.deepEqual(calls, [['b']])
  assert.deepEqual(
    messages.filter((m) => m.cache === cache).map((m) => [m.key, m.outcome, m.loaded]),
    [
      ['a', 'hit', false],
      ['b', 'miss', true],
      ['a', 'hit', false],
    ],
  )
  const { hits, misses, loads } = cache.stats()
  assert.deepEqual([hits, misses, loads], [2, 1, 1])
})

test(
  'more keys than one native call takes (256): each answered in order, the missing ones loaded once',
  T,
  async (t) => {
    const cache = track(t, new Cache())
    const keys = Array.from({ length: 600 }, (_, i) => (i % 5 === 4 ? ['k', i] : `k${i}`))
    for (let i = 0; i < keys.length; i += 3) await cache.set(keys[i], `set:${keys[i]}`)
    const { calls, loader } = recorder((missing) => missing.map((k) => `v:${k}`))
    const values = await cache.getOrLoadMany(keys, loader)
    assert.deepEqual(
      values,
      keys.map((k, i) => (i % 3 === 0 ? `set:${k}` : `v:${k}`)),
    )
    assert.deepEqual(
      calls.map((c) => c.length),
      [100, 100, 100, 100],
    )
    assert.deepEqual(
      calls.flat(),
      keys.filter((_, i) => i % 3 !== 0),
    )
    assert.deepEqual([cache.stats().hits, cache.stats().misses], [200, 400])
    // A bad key among them: refused before any is looked up.
    await rejectsWith(cache.getOrLoadMany([...keys, ['k', Number.NaN]], loader), codes.INVALID_KEY)
    assert.equal(cache.stats().hits, 200)
    assert.deepEqual(await cache.getOrLoadMany(keys, loader), values)
    assert.deepEqual([cache.stats().hits, cache.stats().misses], [800, 400])
  },
)

test('a key too long rejects the call with ERR_HERDCACHE_INVALID_KEY', T, async (t) => {
  const cache = track(t, new Cache())
  const { loader, calls } = recorder()
  const long = 'x'.repeat(64 * 1024 + 1)
  await rejectsWith(cache.getOrLoadMany(['a', long], loader), codes.INVALID_KEY)
  assert.equal(calls.length, 0, 'nothing was loaded: the call was refused before any key was looked up')
  assert.equal(cache.stats().misses, 0)
  const many = Array.from({ length: 300 }, (_, i) => `k${i}`)
  // More keys than one native call takes: lib/keys.js checks the length too, so this is refused up front as well.
  await rejectsWith(cache.getOrLoadMany([...many, long], loader), codes.INVALID_KEY)
  await rejectsWith(cache.getOrLoadMany([...many, ['k', long]], loader), codes.INVALID_KEY)
  assert.equal(calls.length, 0, 'nothing was loaded')
  assert.equal(cache.stats().misses, 0, 'no key was looked up')
})

test('a signal stops this call waiting, not the loads; one that is no AbortSignal is refused', T, async (t) => {
  const cache = track(t, new Cache())
  await cache.set('a', 'A')
  const gate = deferred()
  const loader = async (keys) => {
    await gate.promise
    return keys.map((k) => `v:${k}`)
  }
  const controller = new AbortController()
  const pending = cache.getOrLoadMany(['a', 'b'], loader, { signal: controller.signal })
  controller.abort(new Error('gone'))
  await assert.rejects(pending, /gone/)
  gate.resolve()
  assert.equal(await cache.getOrLoad('b', () => 'not loaded'), 'v:b', 'the load went on')
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b'], loader, { signal: new AbortController().signal }), [
    'A',
    'v:b',
  ])
  await assert.rejects(cache.getOrLoadMany(['a'], loader, { signal: AbortSignal.abort(new Error('before')) }), /before/)
  await rejectsWith(cache.getOrLoadMany(['a'], loader, { signal: {} }), codes.INVALID_OPTION)
  await rejectsWith(cache.getOrLoadMany(['a', ''], loader, { signal: {} }), codes.INVALID_KEY)
})

test('a call made while another makes its getOrLoad calls (from waitUntil) is answered as any', T, async (t) => {
  const { calls, loader } = recorder((missing) => missing.map((k) => `v:${k}`))
  let nested
  const cache = track(
    t,
    new Cache({
      ttl: 1000,
      hardTtl: 60_000,
      beta: 0,
      waitUntil: () => {
        nested ??= cache.getOrLoadMany(['x', 'b', 'y', ['z', 1]], loader)
      },
    }),
  )
  for (const key of ['a', 'b', 'x']) await cache.set(key, key.toUpperCase())
  advance(cache, 2000)
  assert.deepEqual(await cache.getOrLoadMany(['a', 'b', 'c'], loader), ['A', 'B', 'v:c'])
  assert.ok(nested, "the stale key's refresh called waitUntil")
  assert.deepEqual(await nested, ['X', 'B', 'v:y', 'v:z,1'])
  await until(async () => (await cache.get('a')) === 'v:a' && (await cache.get('b')) === 'v:b', 'refreshed')
  assert.deepEqual(calls.flat().sort(), ['a', 'b', 'c', 'x', 'y', ['z', 1]].sort())
})
