'use strict'
// R8 stale-if-error, refreshBackoff, onError; every bad input of the README's Errors table.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const make = (t, opts = {}) => h.track(t, new Cache({ jitter: 0, beta: 0, ...opts }))

// ---- stale-if-error ---------------------------------------------------------

test('stale-if-error: a failing refresh keeps the stale value, calls onError, and backs off', T, async (t) => {
  const errors = []
  const cache = make(t, {
    ttl: 1000,
    hardTtl: 60000,
    refreshBackoff: 5000,
    onError: (err, info) => errors.push({ err, info }),
  })
  assert.deepEqual(await cache.getOrLoad('feed', () => ({ v: 1 })), { v: 1 })

  const boom = new Error('db down')
  const failing = h.counted(async () => {
    await h.sleep(5)
    throw boom
  })
  h.advance(cache, 1500)
  assert.deepEqual(await cache.getOrLoad('feed', failing), { v: 1 }, 'the stale value is served')
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the refresh to fail')
  await h.waitFor(() => errors.length === 1, 'onError to be called')
  assert.equal(failing.calls, 1)
  assert.equal(errors[0].err, boom, 'onError gets the loader error itself')
  assert.equal(errors[0].info.key, 'feed')
  assert.equal(errors[0].info.background, true)

  // Still the last good value; no new refresh during the first back-off
  // (250 ms, less up to 15 % jitter: at least 212 ms).
  for (let i = 0; i < 5; i++) {
    const status = {}
    assert.deepEqual(await cache.getOrLoad('feed', failing, { status }), { v: 1 })
    assert.equal(status.outcome, 'stale')
  }
  // 100 ms after the failure (the clock advanced, and real time passing:
  // on a busy machine tens of ms of it) is still well inside the back-off.
  h.advance(cache, 100)
  assert.deepEqual(await cache.getOrLoad('feed', failing), { v: 1 })
  await h.sleep(30)
  assert.equal(failing.calls, 1, 'no refresh during the back-off')
  assert.equal(cache.stats().backgroundRefreshes, 1)

  h.advance(cache, 200) // 300 ms after the failure: past the first back-off
  const good = h.counted(() => ({ v: 2 }))
  assert.deepEqual(await cache.getOrLoad('feed', good), { v: 1 })
  await h.waitFor(() => good.calls === 1, 'a refresh after the backoff')
  await h.waitFor(async () => (await cache.get('feed', { stale: false })) !== undefined, 'the refresh to land')
  assert.deepEqual(await cache.get('feed'), { v: 2 })

  const s = cache.stats()
  assert.equal(s.backgroundErrors, 1)
  assert.equal(s.loadErrors, 1)
  assert.equal(s.backgroundRefreshes, 2)
  assert.equal(errors.length, 1)
})

test('a failing refresh keeps the stale value only until its hard TTL', T, async (t) => {
  const cache = make(t, { ttl: 1000, hardTtl: 3000, onError: () => {} })
  await cache.getOrLoad('k', () => 'good')
  const boom = new Error('down')
  const failing = h.counted(() => Promise.reject(boom))
  h.advance(cache, 1500)
  assert.equal(await cache.getOrLoad('k', failing), 'good')
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the refresh to fail')
  h.advance(cache, 2000) // past hardTtl
  await assert.rejects(cache.getOrLoad('k', failing), (e) => e === boom, 'a cold load fails to the caller')
  assert.equal(await cache.get('k'), undefined)
})

test('refreshBackoff is per key: other keys still refresh', T, async (t) => {
  const cache = make(t, { ttl: 1000, hardTtl: 60000, refreshBackoff: 10000, onError: () => {} })
  await cache.getOrLoad('a', () => 'a1')
  await cache.getOrLoad('b', () => 'b1')
  h.advance(cache, 1500)
  await cache.getOrLoad('a', () => Promise.reject(new Error('a down')))
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'a refresh to fail')
  const bLoader = h.counted(() => 'b2')
  assert.equal(await cache.getOrLoad('b', bLoader), 'b1')
  await h.waitFor(async () => (await cache.get('b', { stale: false })) === 'b2', 'b to refresh')
  assert.equal(bLoader.calls, 1)
})

test(
  'a background refresh past hardTimeout: stale value kept, timeouts and backgroundErrors counted, onError told',
  T,
  async (t) => {
    const errors = []
    const cache = make(t, {
      ttl: 1000,
      hardTtl: 60000,
      hardTimeout: 80,
      onError: (err, info) => errors.push({ err, info }),
    })
    await cache.getOrLoad('k', () => 'good')
    h.advance(cache, 1500)
    const hanging = h.hangingLoader()
    assert.equal(await cache.getOrLoad('k', hanging), 'good')
    await h.waitFor(() => errors.length === 1, 'onError after the refresh timed out')
    assert.equal(errors[0].err.code, 'ERR_HERDCACHE_TIMEOUT')
    assert.equal(errors[0].info.background, true)
    assert.equal(hanging.ctxs[0].signal.aborted, true, 'the refresh loader signal aborted')
    const s = cache.stats()
    assert.equal(s.timeouts, 1)
    assert.equal(s.backgroundErrors, 1)
    assert.equal(s.loadErrors, 1)
    assert.equal(s.inFlight, 0)
    assert.equal(await cache.getOrLoad('k', hanging), 'good', 'still the last good value')
    assert.equal(hanging.calls, 1, 'backed off after the failed refresh')
  },
)

test('a background failure without onError rejects nobody', T, async (t) => {
  const cache = make(t, { ttl: 1000 })
  await cache.getOrLoad('k', () => 'v')
  h.advance(cache, 1500)
  const settled = await Promise.allSettled(
    Array.from({ length: 10 }, () => cache.getOrLoad('k', () => Promise.reject(new Error('x')))),
  )
  assert.ok(settled.every((s) => s.status === 'fulfilled' && s.value === 'v'))
  await h.waitFor(() => cache.stats().backgroundErrors === 1, 'the refresh to fail')
})

test('a failing cold load reaches the caller, is not stored, and onError is not called', T, async (t) => {
  const errors = []
  const cache = make(t, { onError: (e) => errors.push(e) })
  const boom = new Error('cold failure')
  const loader = h.counted(() => Promise.reject(boom))
  await assert.rejects(cache.getOrLoad('k', loader), (e) => e === boom)
  assert.equal(await cache.get('k'), undefined)
  assert.equal(cache.stats().size, 0)
  await assert.rejects(cache.getOrLoad('k', loader), (e) => e === boom)
  assert.equal(loader.calls, 2, 'nothing stored: the next call loads again')
  assert.equal(errors.length, 0, 'onError is for background refresh failures')
  assert.equal(cache.stats().loadErrors, 2)
})

test('a loader error reaches callers unchanged, even a non-Error value', T, async (t) => {
  const cache = make(t)
  await assert.rejects(
    cache.getOrLoad('s', () => Promise.reject('plain string')),
    (e) => e === 'plain string',
  )
  const obj = { custom: true }
  await assert.rejects(
    cache.getOrLoad('o', () => {
      throw obj
    }),
    (e) => e === obj,
  )
})

test('a loader throwing synchronously rejects (never throws) with the very error object', T, async (t) => {
  const cache = make(t)
  const thrown = []
  const loader = h.counted((_, n) => {
    const e = new TypeError(`sync throw ${n}`)
    thrown.push(e)
    throw e
  })
  const first = h.callAsync(() => cache.getOrLoad('k', loader))
  const others = []
  for (let i = 0; i < 4; i++) others.push(h.callAsync(() => cache.getOrLoad('k', loader)))
  await assert.rejects(first, (e) => e === thrown[0], 'the same object the loader threw')
  for (const s of await Promise.allSettled(others)) {
    assert.equal(s.status, 'rejected')
    assert.ok(thrown.includes(s.reason), 'a waiter gets a thrown object itself, not a wrapper')
  }
  assert.equal(await cache.get('k'), undefined)
  assert.equal(cache.stats().size, 0)
})

test('errors on one key leave other keys unaffected', T, async (t) => {
  const cache = make(t, { hardTimeout: 100 })
  await cache.getOrLoad('good', () => 'g')
  const good2 = h.slowLoader(30, 'g2')
  const results = await Promise.allSettled([
    cache.getOrLoad('bad', () => Promise.reject(new Error('bad'))),
    cache.getOrLoad('big', () => 1n),
    cache.getOrLoad(
      'slow',
      ({ signal }) => new Promise((_, rej) => signal.addEventListener('abort', () => rej(signal.reason))),
    ),
    cache.getOrLoad('good2', good2),
    cache.getOrLoad('good', () => 'other'),
  ])
  assert.equal(results[0].status, 'rejected')
  assert.equal(results[1].status, 'rejected')
  assert.equal(results[2].status, 'rejected')
  assert.deepEqual(results[3], { status: 'fulfilled', value: 'g2' })
  assert.deepEqual(results[4], { status: 'fulfilled', value: 'g' })
  assert.equal(await cache.get('good2'), 'g2')
  assert.equal(cache.stats().size, 2)
})

// ---- unserialisable results ----------------------------------------------------

const circular = () => {
  const o = { a: 1 }
  o.self = o
  return o
}
for (const [label, make1] of [
  ['a BigInt', () => 10n],
  ['an object holding a BigInt', () => ({ n: 1n })],
  ['a circular object', circular],
  ['a function', () => () => 1],
  ['a promise of a function', () => Promise.resolve(() => 1)],
]) {
  test(`a loader returning ${label} rejects with ERR_HERDCACHE_UNSERIALIZABLE and stores nothing`, T, async (t) => {
    const cache = make(t)
    const loader = h.counted(() => make1())
    const settled = await Promise.allSettled([cache.getOrLoad('k', loader), cache.getOrLoad('k', loader)])
    for (const s of settled) {
      assert.equal(s.status, 'rejected')
      assert.equal(s.reason && s.reason.code, 'ERR_HERDCACHE_UNSERIALIZABLE')
    }
    assert.equal(loader.calls, 1)
    assert.equal(await cache.get('k'), undefined)
    assert.equal(cache.stats().size, 0)
    assert.equal(cache.stats().loadErrors, 1)
    // nothing stored: the next call loads again
    assert.equal(await cache.getOrLoad('k', () => 'fine'), 'fine')
  })
}

// ---- bad keys ---------------------------------------------------------------

const BAD_KEYS = [
  ['undefined', undefined],
  ['null', null],
  ['a number', 42],
  ['{}', {}],
  ["''", ''],
  ['[]', []],
  ['[{}]', [{}]],
  ['[NaN]', [NaN]],
  ['[Infinity]', [Infinity]],
  ["['a', -Infinity]", ['a', -Infinity]],
  ['[true]', [true]],
  ['[null]', [null]],
  ['[undefined]', [undefined]],
  ["[['nested']]", [['nested']]],
  ['a Symbol', Symbol('k')],
]

for (const [label, key] of BAD_KEYS) {
  test(`getOrLoad with key ${label} rejects with ERR_HERDCACHE_INVALID_KEY (no sync throw, no load)`, T, async (t) => {
    const cache = make(t)
    const loader = h.counted(() => 'v')
    const p = h.callAsync(() => cache.getOrLoad(key, loader))
    await h.rejectsWith(p, 'ERR_HERDCACHE_INVALID_KEY', Error)
    assert.equal(loader.calls, 0)
  })
}

test('get / set / delete with a bad key fail with ERR_HERDCACHE_INVALID_KEY', T, async (t) => {
  const cache = make(t)
  for (const [, key] of BAD_KEYS) {
    await h.failsWith(() => cache.get(key), 'ERR_HERDCACHE_INVALID_KEY')
    await h.failsWith(() => cache.set(key, 'v'), 'ERR_HERDCACHE_INVALID_KEY')
    await h.failsWith(() => cache.delete(key), 'ERR_HERDCACHE_INVALID_KEY')
  }
  assert.equal(cache.stats().size, 0)
})

// ---- keys that cannot be read -------------------------------------------------

// Reading these runs JS that throws. Each makes a fresh key, with the error
// it throws (when the test makes it) to compare with the rejection's cause.
const UNREADABLE_KEYS = [
  ['a revoked Proxy', () => revoked({})],
  ['a revoked Proxy over an array', () => revoked(['user', 1])],
  [
    'an array whose element getter throws',
    () => {
      const thrown = new Error('getter threw')
      const key = ['user']
      Object.defineProperty(key, 1, {
        get: () => {
          throw thrown
        },
      })
      return { key, thrown }
    },
  ],
  [
    'a Proxy over an array whose length trap throws',
    () => {
      const thrown = new Error('trap threw')
      const key = new Proxy(['user', 1], {
        get: (target, p) => {
          if (p === 'length') throw thrown
          return target[p]
        },
      })
      return { key, thrown }
    },
  ],
]

function revoked(target) {
  const { proxy, revoke } = Proxy.revocable(target, {})
  revoke()
  return { key: proxy, thrown: undefined }
}

/** The rejection is coded, a TypeError, with what reading threw as its cause. */
async function rejectsUnreadable(promise, thrown, code = 'ERR_HERDCACHE_INVALID_KEY') {
  const err = await h.rejectsWith(promise, code, TypeError)
  assert.ok(err.cause !== undefined, `the exception is the cause (${err.message})`)
  if (thrown !== undefined) assert.equal(err.cause, thrown, 'the very error reading the key threw')
  else assert.ok(err.cause instanceof TypeError, "the engine's TypeError about the revoked Proxy")
  assert.equal(Object.keys(err).includes('cause'), false, 'cause is not enumerable, as new Error(m, { cause }) has it')
  return err
}

for (const [label, make] of UNREADABLE_KEYS) {
  test(
    `a key that is ${label}: every entry point rejects with ERR_HERDCACHE_INVALID_KEY, the exception as cause`,
    T,
    async (t) => {
      const cache = h.track(t, new Cache({}))
      const loader = h.counted(() => 'v')
      const views = { cache, namespace: cache.namespace('ns'), nested: cache.namespace('ns').namespace('inner') }
      for (const [name, view] of Object.entries(views)) {
        const calls = {
          getOrLoad: (key) => view.getOrLoad(key, loader),
          get: (key) => view.get(key),
          set: (key) => view.set(key, 'v'),
          delete: (key) => view.delete(key),
          expire: (key) => view.expire(key),
          'getOrLoadMany (one of the keys)': (key) => view.getOrLoadMany(['ok', key], (keys) => keys.map(() => 'v')),
          'getOrLoadMany (the list itself)': (key) => view.getOrLoadMany(key, (keys) => keys.map(() => 'v')),
        }
        for (const [call, run] of Object.entries(calls)) {
          const { key, thrown } = make()
          await t.test(`${name}.${call}`, () =>
            rejectsUnreadable(
              h.callAsync(() => run(key)),
              thrown,
            ),
          )
        }
      }
      assert.equal(loader.calls, 0, 'nothing was loaded')
      assert.equal(await cache.get('ok'), undefined, "getOrLoadMany loaded none of a call's keys")
      assert.equal(cache.stats().size, 0)
    },
  )
}

test('tags that cannot be read reject with ERR_HERDCACHE_INVALID_OPTION, the exception as cause', T, async (t) => {
  const cache = h.track(t, new Cache({}))
  for (const [label, make] of UNREADABLE_KEYS) {
    // A Proxy is no array to Node-API (tags, unlike keys, are not read through one): the plain "must be an array".
    if (label.includes('Proxy')) continue
    let { key: tags, thrown } = make()
    await t.test(`getOrLoad tags: ${label}`, () =>
      rejectsUnreadable(
        h.callAsync(() => cache.getOrLoad('k', () => 'v', { tags })),
        thrown,
        'ERR_HERDCACHE_INVALID_OPTION',
      ),
    )
    ;({ key: tags, thrown } = make())
    await t.test(`set tags: ${label}`, () =>
      rejectsUnreadable(
        h.callAsync(() => cache.set('k', 'v', { tags })),
        thrown,
        'ERR_HERDCACHE_INVALID_OPTION',
      ),
    )
  }
  for (const [label, make] of UNREADABLE_KEYS) {
    if (label.includes('length trap')) continue // Array.isArray says yes, then as above
    const { key: tags, thrown } = make()
    await t.test(`deleteByTag: ${label}`, () =>
      rejectsUnreadable(
        h.callAsync(() => cache.deleteByTag(tags)),
        thrown,
        'ERR_HERDCACHE_INVALID_OPTION',
      ),
    )
  }
  assert.equal(cache.stats().size, 0)
})

// ---- bad loaders ------------------------------------------------------------

for (const [label, loader] of [
  ['undefined', undefined],
  ['null', null],
  ['a string', 'loadFeed'],
  ['an object', { load() {} }],
  ['a number', 1],
]) {
  test(`a loader that is ${label} rejects with ERR_HERDCACHE_INVALID_LOADER`, T, async (t) => {
    const cache = make(t)
    const p = h.callAsync(() => cache.getOrLoad('k', loader))
    await h.rejectsWith(p, 'ERR_HERDCACHE_INVALID_LOADER')
    assert.equal(cache.stats().size, 0)
  })
}

// ---- set() values -----------------------------------------------------------

test('set() with null / undefined / unserialisable values fails with ERR_HERDCACHE_INVALID_VALUE', T, async (t) => {
  const cache = make(t)
  for (const v of [null, undefined, 1n, { n: 2n }, circular(), () => 1]) {
    await h.failsWith(() => cache.set('k', v), 'ERR_HERDCACHE_INVALID_VALUE')
  }
  assert.equal(await cache.get('k'), undefined)
  assert.equal(cache.stats().size, 0)
})

// ---- constructor options ------------------------------------------------------

const BAD_OPTIONS = [
  // [options, option name in the message, class or null for "TypeError or RangeError"]
  [{ ttl: -1 }, 'ttl', RangeError],
  [{ ttl: NaN }, 'ttl', null],
  [{ ttl: Infinity }, 'ttl', RangeError],
  [{ ttl: '1000' }, 'ttl', TypeError],
  [{ hardTtl: -5 }, 'hardTtl', RangeError],
  [{ ttl: 1000, hardTtl: 500 }, 'hardTtl', RangeError],
  [{ jitter: 1 }, 'jitter', RangeError],
  [{ jitter: -0.1 }, 'jitter', RangeError],
  [{ jitter: NaN }, 'jitter', null],
  [{ beta: -1 }, 'beta', RangeError],
  [{ negativeTtl: -1 }, 'negativeTtl', RangeError],
  [{ softTimeout: -1 }, 'softTimeout', RangeError],
  [{ hardTimeout: -1 }, 'hardTimeout', RangeError],
  [{ refreshBackoff: -1 }, 'refreshBackoff', RangeError],
  [{ maxEntries: -1 }, 'maxEntries', RangeError],
  [{ prefix: 42 }, 'prefix', TypeError],
  [{ waitUntil: 'yes' }, 'waitUntil', TypeError],
  [{ onError: 1 }, 'onError', TypeError],
  [{ tll: 1000 }, 'tll', null], // unknown option (typo)
  [{ redis: 6379 }, 'redis', TypeError],
  [{ redis: ['redis://127.0.0.1:7000'] }, 'redis', TypeError],
  [{ redis: null }, 'redis', TypeError],
  [{ redis: { cluster: [] } }, 'redis', TypeError],
  [{ redis: { cluster: 'redis://127.0.0.1:7000' } }, 'redis', TypeError],
  [{ redis: { cluster: ['127.0.0.1:7000'] } }, 'redis', TypeError],
  [{ redis: { cluster: ['redis://a:1', 'rediss://b:2'] } }, 'redis', TypeError],
  [{ redis: { url: 'redis://127.0.0.1:7000' } }, 'redis', TypeError],
]

for (const [opts, name, Class] of BAD_OPTIONS) {
  const label = JSON.stringify(opts, (_, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))
  test(`new Cache(${label}) throws ERR_HERDCACHE_INVALID_OPTION naming ${name}`, T, () => {
    const err = h.throwsWith(() => new Cache(opts), 'ERR_HERDCACHE_INVALID_OPTION', Class || undefined)
    assert.ok(err instanceof TypeError || err instanceof RangeError, 'a TypeError or a RangeError')
    assert.ok(String(err.message).includes(name), `the message names the option: ${err.message}`)
  })
}

test('a number out of range is named as JavaScript prints it (Infinity, not inf)', T, () => {
  for (const [value, shown] of [
    [Infinity, 'got Infinity'],
    [-Infinity, 'got -Infinity'],
    [2 ** 41, `got ${2 ** 41}`],
  ]) {
    const err = h.throwsWith(() => new Cache({ ttl: value }), 'ERR_HERDCACHE_INVALID_OPTION')
    assert.ok(err.message.endsWith(shown), err.message)
  }
})

test('new Cache(non-object) throws ERR_HERDCACHE_INVALID_OPTION', T, () => {
  for (const bad of [42, 'ttl', true]) {
    const err = h.throwsWith(() => new Cache(bad), 'ERR_HERDCACHE_INVALID_OPTION')
    assert.ok(err instanceof TypeError || err instanceof RangeError)
  }
})

test('Redis options: a bad URL, or a Redis-only option without redis, throw ERR_HERDCACHE_INVALID_OPTION', T, () => {
  for (const redis of ['http://127.0.0.1:6379', 'redis://', '127.0.0.1:6379', 'redis://[::1']) {
    h.throwsWith(() => new Cache({ redis }), 'ERR_HERDCACHE_INVALID_OPTION')
  }
  h.throwsWith(() => new Cache({ redis: 6379 }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  for (const option of [{ lockTtl: 1000 }, { l1: false }, { redisTimeout: 100 }, { circuitBreakerDuration: 0 }]) {
    h.throwsWith(() => new Cache(option), 'ERR_HERDCACHE_INVALID_OPTION')
  }
  h.throwsWith(
    () => new Cache({ redis: 'redis://127.0.0.1:6379', lockTtl: -1 }),
    'ERR_HERDCACHE_INVALID_OPTION',
    RangeError,
  )
})

test('valid edge options are accepted', T, async (t) => {
  for (const opts of [
    undefined,
    {},
    { jitter: 0 },
    { jitter: 0.99 },
    { beta: 0 },
    { negativeTtl: 0 },
    { softTimeout: 0 },
    { ttl: 1000, hardTtl: 1000 },
    { prefix: 'app:' },
    { waitUntil: () => {}, onError: () => {} },
  ]) {
    const cache = h.track(t, new Cache(opts))
    assert.equal(await cache.getOrLoad('k', () => 'v'), 'v', JSON.stringify(opts))
  }
})

// ---- call options -----------------------------------------------------------

for (const [opts, label] of [
  [{ ttl: -1 }, 'ttl -1'],
  [{ ttl: 'x' }, "ttl 'x'"],
  [{ hardTtl: NaN }, 'hardTtl NaN'],
  [{ ttl: 1000, hardTtl: 10 }, 'hardTtl < ttl'],
  [{ beta: -1 }, 'beta -1'],
  [{ negativeTtl: -1 }, 'negativeTtl -1'],
  [{ stale: 'no' }, "stale 'no'"],
  [{ signal: {} }, 'signal {}'],
  [{ status: 5 }, 'status 5'],
  [{ sttale: false }, 'unknown sttale'],
  [5, 'options 5 (not an object)'],
  ['fast', "options 'fast' (not an object)"],
]) {
  test(`getOrLoad call option ${label} rejects with ERR_HERDCACHE_INVALID_OPTION`, T, async (t) => {
    const cache = make(t)
    const loader = h.counted(() => 'v')
    const p = h.callAsync(() => cache.getOrLoad('k', loader, opts))
    const err = await h.rejectsWith(p, 'ERR_HERDCACHE_INVALID_OPTION')
    assert.ok(err instanceof TypeError || err instanceof RangeError)
    assert.equal(loader.calls, 0)
  })
}

test('set() option ttl -1 fails with ERR_HERDCACHE_INVALID_OPTION', T, async (t) => {
  const cache = make(t)
  await h.failsWith(() => cache.set('k', 'v', { ttl: -1 }), 'ERR_HERDCACHE_INVALID_OPTION')
  assert.equal(await cache.get('k'), undefined)
})

// ---- timeouts -----------------------------------------------------------------

test('a load past hardTimeout rejects every waiter with ERR_HERDCACHE_TIMEOUT and stores nothing', T, async (t) => {
  const cache = make(t, { hardTimeout: 100 })
  const loader = h.hangingLoader()
  const settled = await Promise.allSettled(Array.from({ length: 5 }, () => cache.getOrLoad('k', loader)))
  for (const s of settled) {
    assert.equal(s.status, 'rejected')
    assert.equal(s.reason.code, 'ERR_HERDCACHE_TIMEOUT')
  }
  assert.equal(loader.calls, 1)
  const st = cache.stats()
  assert.equal(st.timeouts, 1)
  assert.equal(st.loadErrors, 1)
  assert.equal(st.inFlight, 0)
  assert.equal(await cache.get('k'), undefined)
})

test('a loader that ignores its signal and lands after hardTimeout is not stored', T, async (t) => {
  const cache = make(t, { hardTimeout: 80 })
  const late = h.counted(() => new Promise((resolve) => setTimeout(() => resolve('late'), 200)))
  await Promise.all([
    h.rejectsWith(cache.getOrLoad('k', late), 'ERR_HERDCACHE_TIMEOUT'),
    h.rejectsWith(cache.getOrLoad('lonely', late), 'ERR_HERDCACHE_TIMEOUT'),
  ])
  // a call after the timeout starts its own load, even while the late one still runs
  const again = h.counted(() => 'again')
  assert.equal(await cache.getOrLoad('k', again), 'again')
  assert.equal(again.calls, 1)
  await h.sleep(220) // the late loads land
  assert.equal(late.calls, 2)
  assert.equal(await cache.get('k'), 'again', 'a given-up load does not overwrite a newer value')
  assert.equal(await cache.get('lonely'), undefined, 'a given-up load is not stored when it lands')
})

// ---- close ------------------------------------------------------------------

test('after close(), getOrLoad rejects with ERR_HERDCACHE_CLOSED without loading', T, async () => {
  const cache = new Cache()
  await cache.getOrLoad('k', () => 'v')
  await cache.close()
  const loader = h.counted(() => 'v2')
  const p = h.callAsync(() => cache.getOrLoad('k', loader))
  await h.rejectsWith(p, 'ERR_HERDCACHE_CLOSED')
  await h.rejectsWith(cache.getOrLoad('other', loader), 'ERR_HERDCACHE_CLOSED')
  assert.equal(loader.calls, 0)
})

test('after close(), get / set / delete / clear fail with ERR_HERDCACHE_CLOSED', T, async () => {
  const cache = new Cache()
  await cache.set('k', 'v')
  await cache.close()
  await h.failsWith(() => cache.get('k'), 'ERR_HERDCACHE_CLOSED')
  await h.failsWith(() => cache.set('k', 'v2'), 'ERR_HERDCACHE_CLOSED')
  await h.failsWith(() => cache.delete('k'), 'ERR_HERDCACHE_CLOSED')
  await h.failsWith(() => cache.clear(), 'ERR_HERDCACHE_CLOSED')
})

test('closing one cache leaves another unaffected', T, async (t) => {
  const a = new Cache()
  const b = make(t)
  await a.close()
  assert.equal(await b.getOrLoad('k', () => 'b'), 'b')
  await h.rejectsWith(
    a.getOrLoad('k', () => 'a'),
    'ERR_HERDCACHE_CLOSED',
  )
})

test('every error made by herdcache is an Error with a stable code', T, async (t) => {
  const cache = make(t, { hardTimeout: 50 })
  const errs = []
  for (const p of [
    cache.getOrLoad('', () => 1),
    cache.getOrLoad('k', 'nope'),
    cache.getOrLoad('k', () => 1, { ttl: -1 }),
    cache.getOrLoad('k1', () => 1n),
    cache.getOrLoad('k2', h.hangingLoader()),
  ]) {
    try {
      await p
    } catch (e) {
      errs.push(e)
    }
  }
  assert.equal(errs.length, 5)
  for (const e of errs) {
    assert.ok(e instanceof Error)
    assert.match(e.code, /^ERR_HERDCACHE_[A-Z_]+$/)
    assert.ok(e.message.length > 0)
  }
})
