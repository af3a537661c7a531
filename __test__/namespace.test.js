'use strict'
// Namespaces on the embedded store: a view's keys are its parent's keys with the name as their first part, its
// defaults sit under each call's options, and its clear() removes its keys (nested namespaces' too) and no other,
// superseding its loads in flight. Bad names and defaults get coded errors.
const test = require('node:test')
const assert = require('node:assert/strict')
const dc = require('node:diagnostics_channel')
const { Cache } = require('..')
const h = require('./helpers')

const { T, track, advance, setRandom, counted, gatedLoader, rejectsWith, throwsWith, tick } = h

function cache(t, options = {}) {
  const c = track(t, new Cache({ ttl: 1000, ...options }))
  setRandom(c, { jitter: 0.5, xfetch: 1 }) // no jitter, no early refresh
  return c
}

test("a view's key is the parent's with the name as its first part, for string and array keys", T, async (t) => {
  const parent = cache(t)
  const users = parent.namespace('users')
  assert.equal(users.prefix, 'users:')
  assert.equal(users.cache, parent)
  await users.set('a:b', 1)
  assert.equal(await parent.get('users:a:b'), 1, 'a string key is used as it is after the name')
  assert.equal(await parent.get(['users', 'a', 'b']), 1)
  assert.equal(await users.get(['a', 'b']), 1, 'and is the same key as the array form')
  await users.set(['x:y', 7], 2)
  assert.equal(await parent.get(['users', 'x:y', 7]), 2, 'array parts stay parts')
  assert.equal(await parent.get('users:x:y:7'), undefined)
  // A name holding ':' or '\' is escaped as a key part is: it stays one part.
  const odd = parent.namespace('a:b\\c')
  assert.equal(odd.prefix, 'a\\:b\\\\c:')
  await odd.set('k', 3)
  assert.equal(await parent.get(['a:b\\c', 'k']), 3)
  assert.equal(await parent.get('a:b:k'), undefined)
  await parent.set('a:b:k', 'not in it')
  await odd.clear() // the addon encodes the names for the clear: the same escaping
  assert.equal(await odd.get('k'), undefined)
  assert.equal(await parent.get('a:b:k'), 'not in it')
  // Nested views chain.
  const eu = users.namespace('eu')
  assert.equal(eu.prefix, 'users:eu:')
  await eu.set('42', 4)
  assert.equal(await parent.get(['users', 'eu', '42']), 4)
  assert.equal(await users.get('eu:42'), 4)
  // delete and expire reach the parent's key.
  assert.equal(await users.expire('a:b'), true)
  assert.equal(await parent.get('users:a:b', { stale: false }), undefined, 'expired: stale now')
  assert.equal(await users.delete(['a', 'b']), true)
  assert.equal(await parent.get('users:a:b'), undefined)
  // The parent's memory and counters serve the view.
  const load = counted(() => 'v')
  assert.equal(await users.getOrLoad('hot', load), 'v')
  assert.equal(await parent.getOrLoad('users:hot', load), 'v')
  assert.equal(load.calls, 1, 'one entry, shared with the parent')
  assert.equal(parent.stats().hits, 1)
})

test(
  "the loader's ctx.key is the key as the view was given it; setTtl and noStore work through the view",
  T,
  async (t) => {
    const parent = cache(t)
    const users = parent.namespace('users')
    const seen = []
    await users.getOrLoad('42', (ctx) => {
      seen.push(ctx.key)
      ctx.setTtl(5000)
      return 'a'
    })
    const arrayKey = ['eu', 42]
    await users.getOrLoad(arrayKey, (ctx) => {
      seen.push(ctx.key)
      assert.equal(ctx.signal.aborted, false)
      ctx.noStore()
      return 'b'
    })
    assert.equal(seen[0], '42')
    assert.equal(seen[1], arrayKey, 'the very array the caller passed')
    advance(parent, 2000)
    assert.equal(await parent.get('users:42', { stale: false }), 'a', 'setTtl(5000) applied to the entry')
    assert.equal(await parent.get(['users', 'eu', 42]), undefined, 'noStore() stored nothing')
  },
)

test(
  'defaults sit under each call’s own options; a call without options passes the defaults object itself',
  T,
  async (t) => {
    const parent = cache(t)
    const short = parent.namespace('short', { ttl: 100, hardTtl: 10_000 })
    await short.getOrLoad('a', () => 'a')
    await short.getOrLoad('b', () => 'b', { ttl: 5000 })
    await short.set('c', 'c')
    await short.set('d', 'd', { ttl: 5000 })
    await parent.set('short:e', 'e') // the cache's ttl, 1000
    advance(parent, 500)
    const fresh = async (key) => (await parent.get(key, { stale: false })) !== undefined
    assert.deepEqual(await Promise.all(['short:a', 'short:b', 'short:c', 'short:d', 'short:e'].map(fresh)), [
      false,
      true,
      false,
      true,
      true,
    ])
    // `stale: false` as a default: get and getOrLoad refuse the stale value, a call's own `stale` wins.
    const strict = short.namespace('strict', { stale: false })
    assert.equal(strict.prefix, 'short:strict:')
    await strict.set('k', 'old')
    advance(parent, 200)
    assert.equal(await strict.get('k'), undefined, 'stale, refused by the default')
    assert.equal(await strict.get('k', { stale: true }), 'old')
    assert.equal(await strict.getOrLoad('k', () => 'new'), 'new', 'the nested view inherits ttl 100 and adds stale')
    // The options the parent sees.
    const seen = []
    const getOrLoad = parent.getOrLoad
    parent.getOrLoad = (key, loader, options) => {
      seen.push(options)
      return getOrLoad.call(parent, key, loader, options)
    }
    await short.getOrLoad('x', () => 1)
    await short.getOrLoad('y', () => 1)
    const status = {}
    await short.getOrLoad('z', () => 1, { beta: 0, status })
    assert.equal(status.outcome, 'miss', "the call's status is filled through the merged options")
    await parent.namespace('plain').getOrLoad('w', () => 1)
    assert.equal(seen[0], seen[1], 'the same object: no allocation per call')
    assert.ok(Object.isFrozen(seen[0]))
    assert.deepEqual(seen[0], { ttl: 100, hardTtl: 10_000 })
    assert.deepEqual(seen[2], { ttl: 100, hardTtl: 10_000, beta: 0, status })
    assert.equal(seen[3], undefined, 'a view without defaults passes no options')
  },
)

test(
  "a view's clear() removes its keys and nested namespaces' only, and supersedes their loads in flight",
  T,
  async (t) => {
    const parent = cache(t)
    const users = parent.namespace('users')
    for (const key of ['users:1', 'users:eu:2', 'users\\:x', 'usersX', 'feed:1']) await parent.set(key, key)
    await parent.set(['users:y'], 'one part') // encoded users\:y: not in the namespace
    const gate = gatedLoader()
    const inFlight = users.getOrLoad('3', gate)
    const other = gatedLoader()
    const otherFlight = parent.getOrLoad('feed:3', other)
    await tick()
    assert.equal(await users.clear(), undefined)
    for (const gone of ['users:1', 'users:eu:2']) assert.equal(await parent.get(gone), undefined, gone)
    for (const kept of ['users\\:x', 'usersX', 'feed:1']) assert.equal(await parent.get(kept), kept, kept)
    assert.equal(await parent.get(['users:y']), 'one part')
    gate.runs[0].resolve('late')
    other.runs[0].resolve('kept')
    assert.equal(await inFlight, 'late', 'its callers still get their load')
    assert.equal(await otherFlight, 'kept')
    assert.equal(
      await parent.get('users:3'),
      undefined,
      'a load in flight when its namespace was cleared is not stored',
    )
    assert.equal(await parent.get('feed:3'), 'kept', "another namespace's load is")
    // A nested view's clear leaves its parent view's other keys.
    await users.set('a', 1)
    await users.set('eu:b', 2)
    await users.namespace('eu').clear()
    assert.deepEqual([await users.get('a'), await users.get('eu:b')], [1, undefined])
    assert.equal(parent.stats().size, 6, 'users\\:x, usersX, feed:1, users\\:y, feed:3 and users:a')
  },
)

test('bad names, defaults, keys and options get coded errors', T, async (t) => {
  const parent = cache(t)
  for (const bad of ['', 5, null, undefined, ['users'], '\uD800']) {
    throwsWith(() => parent.namespace(bad), 'ERR_HERDCACHE_INVALID_KEY', TypeError)
  }
  const users = parent.namespace('users')
  throwsWith(() => users.namespace(''), 'ERR_HERDCACHE_INVALID_KEY', TypeError)
  for (const bad of [
    5,
    null,
    [],
    { ttl: '5' },
    { stale: 1 },
    { signal: AbortSignal.timeout(1) },
    { status: {} },
    { tll: 5 },
  ]) {
    throwsWith(() => parent.namespace('n', bad), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  }
  const load = counted(() => 'v')
  for (const key of ['', [], 5, null, undefined, {}, ['\uD800']]) {
    await rejectsWith(users.getOrLoad(key, load), 'ERR_HERDCACHE_INVALID_KEY')
  }
  assert.equal(load.calls, 0)
  await rejectsWith(users.getOrLoad('k', 'not a function'), 'ERR_HERDCACHE_INVALID_LOADER')
  const withDefaults = parent.namespace('d', { ttl: 100 })
  await rejectsWith(withDefaults.getOrLoad('k', load, 5), 'ERR_HERDCACHE_INVALID_OPTION')
  await rejectsWith(withDefaults.getOrLoad('k', load, { sttale: false }), 'ERR_HERDCACHE_INVALID_OPTION')
  await rejectsWith(withDefaults.get('k', { ttl: 5 }), 'ERR_HERDCACHE_INVALID_OPTION')
  await rejectsWith(parent.namespace('r', { ttl: -1 }).getOrLoad('k', load), 'ERR_HERDCACHE_INVALID_OPTION')
  await rejectsWith(users.set('k', null), 'ERR_HERDCACHE_INVALID_VALUE')
  await parent.close()
  await rejectsWith(users.clear(), 'ERR_HERDCACHE_CLOSED')
  await rejectsWith(users.getOrLoad('k', load), 'ERR_HERDCACHE_CLOSED')
})

test("a view's clear() is published on herdcache:invalidate with its namespace", T, async (t) => {
  const parent = cache(t)
  const messages = []
  const listen = (message) => messages.push(message)
  dc.subscribe('herdcache:invalidate', listen)
  t.after(() => dc.unsubscribe('herdcache:invalidate', listen))
  const users = parent.namespace('users')
  await users.set('k', 1)
  await users.clear()
  await users.namespace('e:u').clear()
  await parent.clear()
  assert.deepEqual(messages, [
    { cache: parent, op: 'set', key: 'users:k' },
    { cache: parent, op: 'clear', key: undefined, namespace: 'users' },
    { cache: parent, op: 'clear', key: undefined, namespace: 'users:e\\:u' },
    { cache: parent, op: 'clear', key: undefined },
  ])
})
