'use strict'
// Tracing through node:diagnostics_channel (README, "Tracing"): the events of each channel, their order and
// messages, against index.d.ts's message types; the untraced path once nobody subscribes; the README's
// OpenTelemetry example with an in-memory span exporter.
const test = require('node:test')
const assert = require('node:assert/strict')
const diagnostics_channel = require('node:diagnostics_channel')
const fs = require('node:fs')
const path = require('node:path')
const { Cache, kTesting, channels } = require('..')
const { startRedis, freePort } = require('./redis-server')
const h = require('./helpers')

const { T, ROOT } = h
const INDEX_DTS = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
const TRACING_EVENTS = ['start', 'end', 'asyncStart', 'asyncEnd', 'error']
const noop = () => {}

/**
 * Subscribes to every event of tracing channel `name` until the test ends; each event is pushed to `into` as
 * `{ channel, event, message, seen }`, `seen` a copy of the message then (one object is filled in as it goes).
 */
function recordTracing(t, name, into = []) {
  const channel = diagnostics_channel.tracingChannel(name)
  const handlers = Object.fromEntries(
    TRACING_EVENTS.map((event) => [
      event,
      (message) => into.push({ channel: name, event, message, seen: { ...message } }),
    ]),
  )
  channel.subscribe(handlers)
  t.after(() => channel.unsubscribe(handlers))
  return into
}

/** Subscribes to plain channel `name` until the test ends; pushes each message to `into`. */
function record(t, name, into = []) {
  const onMessage = (message) => into.push(message)
  diagnostics_channel.subscribe(name, onMessage)
  t.after(() => diagnostics_channel.unsubscribe(name, onMessage))
  return into
}

/** A message as compared here: without `cache`, which is checked by identity. */
function fields({ cache: _cache, ...rest }) {
  return rest
}

/** The events of the call whose message is `message`, in order. */
function eventsOf(events, message) {
  return events.filter((e) => e.message === message)
}

/** The calls in `events`, by their first event: each call's events in order. */
function calls(events) {
  const messages = [...new Set(events.map((e) => e.message))]
  return messages.map((message) => eventsOf(events, message))
}

/** Asserts that `message` has the members of `export interface <name>` in index.d.ts: every required one, no other. */
function assertShape(message, name) {
  const match = new RegExp(`export interface ${name} \\{\\n([\\s\\S]*?)\\n\\}`).exec(INDEX_DTS)
  assert.ok(match, `index.d.ts declares ${name}`)
  const members = [...match[1].matchAll(/^ {2}(\w+)(\??):/gm)].map(([, member, optional]) => ({ member, optional }))
  const keys = Object.keys(message)
  for (const key of keys)
    assert.ok(
      members.some((m) => m.member === key),
      `${name} in index.d.ts has \`${key}\``,
    )
  for (const { member, optional } of members) {
    if (!optional) assert.ok(keys.includes(member), `the ${name} published has \`${member}\``)
  }
}

test('channels: frozen, the names the README gives, shared by require and import', T, async () => {
  assert.ok(Object.isFrozen(channels))
  assert.deepEqual(
    { ...channels },
    {
      getOrLoad: 'herdcache:getOrLoad',
      refresh: 'herdcache:refresh',
      lock: 'herdcache:lock',
      invalidate: 'herdcache:invalidate',
      redisError: 'herdcache:redis:error',
    },
  )
  const esm = await import('../index.mjs')
  assert.equal(esm.channels, channels)
})

test('a miss: start, the loader, end, asyncStart, asyncEnd; outcome miss, loaded true; then a hit', T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const value = await cache.getOrLoad(['user', 7], () => {
    events.push({ event: 'loader' })
    return { n: 1 }
  })
  assert.deepEqual(value, { n: 1 })
  const miss = events.splice(0)
  assert.deepEqual(
    miss.map((e) => e.event),
    ['start', 'loader', 'end', 'asyncStart', 'asyncEnd'],
  )
  const traced = miss.filter((e) => e.event !== 'loader')
  assert.ok(
    traced.every((e) => e.message === traced[0].message),
    'one message object for all the events of a call',
  )
  assert.equal(traced[0].message.cache, cache)
  assert.deepEqual(
    traced.map((e) => fields(e.seen)),
    [
      { key: ['user', 7], outcome: undefined, loaded: false },
      { key: ['user', 7], outcome: 'miss', loaded: false },
      { key: ['user', 7], outcome: 'miss', loaded: true, result: { n: 1 } },
      { key: ['user', 7], outcome: 'miss', loaded: true, result: { n: 1 } },
    ],
  )
  assert.equal(traced[3].message.result, value, 'result is the value the call got')
  assertShape(traced[3].message, 'GetOrLoadMessage')

  const hit = await cache.getOrLoad(['user', 7], () => assert.fail('a hit runs no loader'))
  assert.deepEqual(
    events.map((e) => [e.event, fields(e.seen)]),
    [
      ['start', { key: ['user', 7], outcome: undefined, loaded: false }],
      ['end', { key: ['user', 7], outcome: 'hit', loaded: false }],
      ['asyncStart', { key: ['user', 7], outcome: 'hit', loaded: false, result: hit }],
      ['asyncEnd', { key: ['user', 7], outcome: 'hit', loaded: false, result: hit }],
    ],
  )
})

test('a "not found" result: miss, then negative; a call with options: its status is set as untraced', T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const status = {}
  assert.equal(await cache.getOrLoad('none', () => null, { ttl: 5000, status }), null)
  assert.equal(status.outcome, 'miss')
  const negative = {}
  assert.equal(await cache.getOrLoad('none', () => 1, { status: negative }), null)
  assert.equal(negative.outcome, 'negative')
  const ends = events.filter((e) => e.event === 'asyncEnd').map((e) => fields(e.seen))
  assert.deepEqual(ends, [
    { key: 'none', outcome: 'miss', loaded: true, result: null },
    { key: 'none', outcome: 'negative', loaded: false, result: null },
  ])
})

test('a coalesced call: outcome coalesced, loaded false; the leader: miss, loaded true', T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const loader = h.gatedLoader()
  const first = cache.getOrLoad('k', loader)
  const second = cache.getOrLoad('k', () => assert.fail('a joiner runs no loader'))
  assert.deepEqual(
    events.map((e) => e.event),
    ['start', 'end', 'start', 'end'],
    'each call is traced from its start to its return',
  )
  loader.runs[0].resolve('v')
  assert.deepEqual(await Promise.all([first, second]), ['v', 'v'])
  const [leader, joiner] = calls(events)
  for (const call of [leader, joiner]) {
    assert.deepEqual(
      call.map((e) => e.event),
      ['start', 'end', 'asyncStart', 'asyncEnd'],
    )
  }
  assert.deepEqual(fields(leader[3].seen), { key: 'k', outcome: 'miss', loaded: true, result: 'v' })
  assert.deepEqual(fields(joiner[3].seen), { key: 'k', outcome: 'coalesced', loaded: false, result: 'v' })
})

test('a loader error: error (with the error), asyncStart, asyncEnd for the leader and its joiner', T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const boom = new Error('boom')
  const loader = h.gatedLoader()
  const first = cache.getOrLoad('e', loader)
  const second = cache.getOrLoad('e', loader)
  loader.runs[0].reject(boom)
  await assert.rejects(first, (error) => error === boom)
  await assert.rejects(second, (error) => error === boom)
  const [leader, joiner] = calls(events)
  for (const call of [leader, joiner]) {
    assert.deepEqual(
      call.map((e) => e.event),
      ['start', 'end', 'error', 'asyncStart', 'asyncEnd'],
    )
    assert.equal(call[2].message.error, boom)
    assert.ok(!('result' in call[4].message), 'a rejected call has no result')
    assertShape(call[4].message, 'GetOrLoadMessage')
  }
  assert.deepEqual(fields(leader[2].seen), { key: 'e', outcome: 'miss', loaded: true, error: boom })
  assert.deepEqual(fields(joiner[2].seen), { key: 'e', outcome: 'coalesced', loaded: false, error: boom })
  // A loader that throws synchronously is the same.
  await assert.rejects(
    cache.getOrLoad('sync', () => {
      throw boom
    }),
    (error) => error === boom,
  )
  assert.deepEqual(fields(events.at(-1).seen), { key: 'sync', outcome: 'miss', loaded: true, error: boom })
})

test('usage errors reject as untraced, with an error event and no outcome', T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const cases = [
    [() => cache.getOrLoad(42, () => 1), 'ERR_HERDCACHE_INVALID_KEY'],
    [() => cache.getOrLoad('k', 'not a function'), 'ERR_HERDCACHE_INVALID_LOADER'],
    [() => cache.getOrLoad('k', () => 1, { sttale: false }), 'ERR_HERDCACHE_INVALID_OPTION'],
    [() => cache.getOrLoad('k', () => 1, null), 'ERR_HERDCACHE_INVALID_OPTION'],
  ]
  for (const [call, code] of cases) {
    events.length = 0
    const error = await h.rejectsWith(h.callAsync(call), code)
    assert.deepEqual(
      events.map((e) => e.event),
      ['start', 'end', 'error', 'asyncStart', 'asyncEnd'],
      code,
    )
    assert.equal(events[2].message.error, error)
    assert.equal(events[4].message.outcome, undefined, code)
    assert.equal(events[4].message.loaded, false, code)
  }
})

test("a caller's aborted signal ends its own call's events with the signal's reason", T, async (t) => {
  const events = recordTracing(t, channels.getOrLoad)
  const cache = h.track(t, new Cache())
  const loader = h.gatedLoader()
  const ac = new AbortController()
  const status = {}
  const call = cache.getOrLoad('slow', loader, { signal: ac.signal, status })
  const reason = new Error('the caller gave up')
  ac.abort(reason)
  await assert.rejects(call, (error) => error === reason)
  assert.equal(status.outcome, 'miss')
  assert.deepEqual(fields(events.at(-1).seen), { key: 'slow', outcome: 'miss', loaded: true, error: reason })
  loader.runs[0].resolve('v')
  assert.equal(await cache.getOrLoad('slow', loader), 'v', 'the load went on for others')
})

test('a stale answer starts a refresh: refresh events inside the call, loaded true; a failed refresh', T, async (t) => {
  const events = []
  recordTracing(t, channels.getOrLoad, events)
  recordTracing(t, channels.refresh, events)
  const refreshes = []
  const reports = []
  const cache = h.track(
    t,
    new Cache({
      ttl: 1000,
      waitUntil: (refresh) => refreshes.push(refresh),
      onError: (error, info) => reports.push([error, info]),
    }),
  )
  cache[kTesting].setRandom({ jitter: 0.5, xfetch: 1 }) // no jitter, no early refresh
  assert.equal(await cache.getOrLoad('s', () => 1), 1)
  events.length = 0
  cache[kTesting].advanceClock(1500)
  const stale = cache.getOrLoad('s', () => 2)
  assert.deepEqual(
    events.map((e) => `${e.channel} ${e.event}`),
    ['herdcache:getOrLoad start', 'herdcache:refresh start', 'herdcache:refresh end', 'herdcache:getOrLoad end'],
    'the refresh is led inside the call that found the stale value',
  )
  assert.equal(await stale, 1)
  await Promise.all(refreshes)
  const [call] = calls(events.filter((e) => e.channel === channels.getOrLoad))
  assert.deepEqual(fields(call.at(-1).seen), { key: 's', outcome: 'stale', loaded: false, result: 1 })
  const [refresh] = calls(events.filter((e) => e.channel === channels.refresh))
  assert.deepEqual(
    refresh.map((e) => e.event),
    ['start', 'end', 'asyncStart', 'asyncEnd'],
  )
  assert.equal(refresh[0].message.cache, cache)
  assert.deepEqual(fields(refresh[0].seen), { key: 's', loaded: false })
  assert.deepEqual(fields(refresh[3].seen), { key: 's', loaded: true, result: 2 })
  assertShape(refresh[3].message, 'RefreshMessage')
  assert.equal(await cache.getOrLoad('s', () => 3), 2, 'refreshed')

  // A refresh whose loader fails: error, then asyncStart, asyncEnd; onError has the same error.
  events.length = 0
  cache[kTesting].advanceClock(1500)
  const boom = new Error('backend down')
  assert.equal(await cache.getOrLoad('s', () => Promise.reject(boom)), 2, 'the stale value is served')
  await Promise.all(refreshes)
  const [failed] = calls(events.filter((e) => e.channel === channels.refresh))
  assert.deepEqual(
    failed.map((e) => e.event),
    ['start', 'end', 'error', 'asyncStart', 'asyncEnd'],
  )
  assert.deepEqual(fields(failed[4].seen), { key: 's', loaded: true, error: boom })
  assert.equal(reports.at(-1)[0], boom)
})

test('an early (XFetch) refresh of a hit is a refresh too; the hit itself is loaded false', T, async (t) => {
  const events = []
  recordTracing(t, channels.getOrLoad, events)
  recordTracing(t, channels.refresh, events)
  const refreshes = []
  const cache = h.track(t, new Cache({ ttl: 60_000, waitUntil: (refresh) => refreshes.push(refresh) }))
  cache[kTesting].setRandom({ jitter: 0.5, xfetch: 0 }) // refreshes at its first read
  // XFetch weighs the time a load took: this one takes some.
  await cache.getOrLoad('x', () => h.sleep(20).then(() => 1))
  events.length = 0
  assert.equal(await cache.getOrLoad('x', () => 2), 1)
  await Promise.all(refreshes)
  assert.equal(refreshes.length, 1, 'one early refresh')
  const [call] = calls(events.filter((e) => e.channel === channels.getOrLoad))
  assert.deepEqual(fields(call.at(-1).seen), { key: 'x', outcome: 'hit', loaded: false, result: 1 })
  const [refresh] = calls(events.filter((e) => e.channel === channels.refresh))
  assert.deepEqual(fields(refresh.at(-1).seen), { key: 'x', loaded: true, result: 2 })
})

test('invalidations: set, delete, expire and clear once accepted; a refused call publishes nothing', T, async (t) => {
  const messages = record(t, channels.invalidate)
  const cache = h.track(t, new Cache())
  await cache.set('a', 1)
  assert.equal(await cache.expire('a'), true)
  assert.equal(await cache.delete('a'), true)
  await cache.clear()
  await cache.set(['x', 1], { v: 1 }, { ttl: 1000 })
  assert.equal(await cache.delete('never-there'), false)
  await h.rejectsWith(cache.set('b', null), 'ERR_HERDCACHE_INVALID_VALUE')
  await h.failsWith(() => cache.delete(42), 'ERR_HERDCACHE_INVALID_KEY')
  await h.failsWith(() => cache.expire(42), 'ERR_HERDCACHE_INVALID_KEY')
  await h.failsWith(() => cache.set('c', 1, { ttl: -1 }), 'ERR_HERDCACHE_INVALID_OPTION')
  assert.deepEqual(messages.map(fields), [
    { op: 'set', key: 'a' },
    { op: 'expire', key: 'a' },
    { op: 'delete', key: 'a' },
    { op: 'clear', key: undefined },
    { op: 'set', key: ['x', 1] },
    { op: 'delete', key: 'never-there' },
  ])
  for (const message of messages) {
    assert.equal(message.cache, cache)
    assertShape(message, 'InvalidateMessage')
  }
})

test(
  'unsubscribed, getOrLoad is untraced again: a hit is the remembered promise itself, no trace runs',
  T,
  async (t) => {
    const cache = h.track(t, new Cache())
    const loader = () => 1
    await cache.getOrLoad('k', loader)
    const channel = diagnostics_channel.tracingChannel(channels.getOrLoad)
    // Every traced call enters through its start channel's runStores: counted here.
    let traced = 0
    channel.start.runStores = function (...args) {
      traced++
      return Reflect.apply(Object.getPrototypeOf(this).runStores, this, args)
    }
    t.after(() => delete channel.start.runStores)
    // The first hits in a new epoch make a promise each; from the second on, a hit is remembered (index.js).
    cache.getOrLoad('k', loader)
    cache.getOrLoad('k', loader)
    assert.equal(cache.getOrLoad('k', loader), cache.getOrLoad('k', loader), 'untraced: the remembered promise, twice')
    assert.equal(traced, 0)

    // A subscriber to one event alone is enough to trace.
    const ends = []
    const handlers = { asyncEnd: (message) => ends.push(message.outcome) }
    channel.subscribe(handlers)
    const a = cache.getOrLoad('k', loader)
    const b = cache.getOrLoad('k', loader, { status: {} })
    assert.notEqual(a, b, 'traced: each call has a promise of its own')
    assert.deepEqual(await Promise.all([a, b]), [1, 1])
    assert.equal(traced, 2)
    assert.deepEqual(ends, ['hit', 'hit'])

    channel.unsubscribe(handlers)
    assert.equal(channel.hasSubscribers, false)
    assert.equal(cache.getOrLoad('k', loader), cache.getOrLoad('k', loader), 'untraced again: the remembered promise')
    const status = {}
    assert.equal(await cache.getOrLoad('k', loader, { status }), 1)
    assert.equal(status.outcome, 'hit')
    assert.equal(await cache.getOrLoad('k2', () => 2), 2)
    assert.equal(traced, 2, 'no call was traced after unsubscribing')
    assert.deepEqual(ends, ['hit', 'hit'])
  },
)

test('a store bound to the start channel holds its value for the call and the load it starts', T, async (t) => {
  const { AsyncLocalStorage } = require('node:async_hooks')
  const store = new AsyncLocalStorage()
  const { start } = diagnostics_channel.tracingChannel(channels.getOrLoad)
  start.bindStore(store, (message) => ({ tracing: message.key }))
  t.after(() => start.unbindStore(store))
  const cache = h.track(t, new Cache())
  const seen = await cache.getOrLoad('bound', async () => {
    await h.tick()
    return store.getStore()
  })
  assert.deepEqual(seen, { tracing: 'bound' })
  assert.equal(store.getStore(), undefined, 'only inside the call')
})

test('with Redis: one cache acquires the lock and loads, the other is answered by its value', {
  timeout: 20000,
}, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const events = []
  recordTracing(t, channels.getOrLoad, events)
  const locks = record(t, channels.lock)
  const options = { redis: redis.url, prefix: 'trace-lock:', redisTimeout: 2000 }
  const winner = h.track(t, new Cache(options))
  const loser = h.track(t, new Cache(options))
  await Promise.all([winner.ready(), loser.ready()])
  const loader = h.gatedLoader()
  const first = winner.getOrLoad('k', (ctx) => {
    locks.push('loader ran')
    return loader(ctx)
  })
  await h.waitFor(() => loader.calls === 1, 'the winner running its loader')
  assert.deepEqual(
    locks.map((m) => (typeof m === 'string' ? m : [m.cache === winner ? 'winner' : 'other', m.key, m.load])),
    [['winner', 'k', true], 'loader ran'],
    'the decision is published before the loader runs',
  )
  const secondAt = performance.now()
  const second = loser.getOrLoad('k', () => assert.fail('the loser runs no loader'))
  // The last poll that found the lock not yet contended: the loser's decision
  // comes after it (the moment the poll that saw it taken ran is up to a
  // polling interval later than the decision, and failed this once).
  let notYetContended = secondAt
  await h.waitFor(() => {
    if (loser.stats().lockContended === 1) return true
    notYetContended = performance.now()
    return false
  }, 'the loser finding the lock taken')
  const contendedFor = notYetContended - secondAt
  loader.runs[0].resolve('from the winner')
  assert.deepEqual(await Promise.all([first, second]), ['from the winner', 'from the winner'])
  const [won, answered] = locks.filter((m) => typeof m !== 'string')
  assert.equal(won.cache, winner)
  assert.deepEqual(fields(won), { key: 'k', background: false, load: true, waitedMs: won.waitedMs })
  assert.equal(answered.cache, loser)
  assert.deepEqual(fields(answered), { key: 'k', background: false, load: false, waitedMs: answered.waitedMs })
  assert.ok(won.waitedMs >= 0, `the winner's wait: ${won.waitedMs} ms`)
  assert.ok(
    answered.waitedMs >= contendedFor - 1,
    `the loser waited for the winner: ${answered.waitedMs} ms, at least ${contendedFor.toFixed(1)} ms`,
  )
  for (const message of [won, answered]) assertShape(message, 'LockMessage')
  assert.equal(locks.length, 3, 'one decision per flight')
  assert.equal(winner.stats().lockAcquired, 1)

  // The loser's call led its own flight (a miss), which the winner's value answered: it ends as a hit.
  const ends = events.filter((e) => e.event === 'asyncEnd')
  const byCache = (cache) => fields(ends.find((e) => e.message.cache === cache).seen)
  assert.deepEqual(byCache(winner), { key: 'k', outcome: 'miss', loaded: true, result: 'from the winner' })
  assert.deepEqual(byCache(loser), { key: 'k', outcome: 'hit', loaded: false, result: 'from the winner' })
  const loserEnd = events.find((e) => e.event === 'end' && e.message.cache === loser)
  assert.equal(loserEnd.seen.outcome, 'miss', 'at its return the call led a flight')
})

test('Redis errors: each reported cause, and what close() could not deliver, with its code', {
  timeout: 20000,
}, async (t) => {
  const messages = record(t, channels.redisError)
  const reports = []
  const port = await freePort()
  const cache = h.track(
    t,
    new Cache({
      redis: `redis://127.0.0.1:${port}`,
      prefix: 'trace-errors:',
      redisTimeout: 300,
      circuitBreakerDuration: 200,
      onError: (error) => reports.push(error),
    }),
  )
  await h.rejectsWith(cache.ready(), 'ERR_HERDCACHE_REDIS_UNREACHABLE')
  for (let i = 0; i < 4 && messages.length === 0; i++) {
    assert.equal(await cache.getOrLoad(`k${i}`, () => i), i, 'served by the loader (fail-open)')
    await h.sleep(100)
  }
  await h.waitFor(() => messages.length > 0, 'a redis:error message')
  const [unreachable] = messages
  assert.equal(unreachable.cache, cache)
  assert.equal(unreachable.code, 'ERR_HERDCACHE_REDIS_UNREACHABLE')
  assert.equal(unreachable.error.code, unreachable.code)
  assert.ok(reports.includes(unreachable.error), 'the very error onError got')
  assertShape(unreachable, 'RedisErrorMessage')
  assert.equal(messages.filter((m) => m.code === unreachable.code).length, 1, 'once per cause, as onError gets it')

  await cache.set('kept', 1)
  await h.waitFor(() => cache.stats().recoveryPending === 1, 'the set kept for later')
  await cache.close()
  const undelivered = messages.find((m) => m.code === 'ERR_HERDCACHE_UNDELIVERED')
  assert.ok(undelivered, `close() reported what it could not deliver: ${messages.map((m) => m.code)}`)
  assert.deepEqual(undelivered.error.keys, ['kept'])
  assert.equal(undelivered.error, reports.at(-1))
  assert.equal(undelivered.cache, cache)
})

// ---- OpenTelemetry: the README's example, with an in-memory exporter ---------------------------------------

const EXAMPLE_FILE = path.join(ROOT, 'examples', 'opentelemetry.js')

test("the README's OpenTelemetry example is examples/opentelemetry.js, verbatim and runnable", T, () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const example = fs.readFileSync(EXAMPLE_FILE, 'utf8')
  const block = `<!-- runnable -->\n\`\`\`js\n${example}\`\`\`\n`
  assert.ok(readme.includes(block), 'README.md shows examples/opentelemetry.js as a runnable block, as it is')
})

test('examples/opentelemetry.js: a span per call and refresh, with key, outcome, loaded and errors', T, async (t) => {
  const { trace, context, SpanStatusCode } = require('@opentelemetry/api')
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
  const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
  const { traceHerdcache } = require(EXAMPLE_FILE)

  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  assert.ok(context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()))
  assert.ok(trace.setGlobalTracerProvider(provider))
  t.after(async () => {
    trace.disable()
    context.disable()
    await provider.shutdown()
  })
  const stop = traceHerdcache()
  t.after(stop)

  const refreshes = []
  const cache = h.track(t, new Cache({ ttl: 1000, waitUntil: (refresh) => refreshes.push(refresh), onError: noop }))
  cache[kTesting].setRandom({ jitter: 0.5, xfetch: 1 })
  const tracer = trace.getTracer('app')
  const parent = await tracer.startActiveSpan('request', async (span) => {
    await cache.getOrLoad(['user', 7], () => ({ name: 'Ada' }))
    await cache.getOrLoad(['user', 7], () => ({ name: 'Ada' }))
    span.end()
    return span
  })
  const boom = new Error('boom')
  await assert.rejects(cache.getOrLoad('broken', () => Promise.reject(boom)))
  cache[kTesting].advanceClock(1500)
  assert.deepEqual(await cache.getOrLoad(['user', 7], () => ({ name: 'Ada Lovelace' })), { name: 'Ada' })
  await Promise.all(refreshes)

  const spans = exporter.getFinishedSpans().filter((span) => span.name !== 'request')
  const summary = spans.map((span) => [span.name, span.attributes, span.status.code])
  const { OK, UNSET, ERROR } = SpanStatusCode
  void OK
  const user = '["user",7]'
  assert.deepEqual(summary, [
    ['herdcache.getOrLoad', { 'herdcache.key': user, 'herdcache.outcome': 'miss', 'herdcache.loaded': true }, UNSET],
    ['herdcache.getOrLoad', { 'herdcache.key': user, 'herdcache.outcome': 'hit', 'herdcache.loaded': false }, UNSET],
    [
      'herdcache.getOrLoad',
      { 'herdcache.key': 'broken', 'herdcache.outcome': 'miss', 'herdcache.loaded': true },
      ERROR,
    ],
    ['herdcache.getOrLoad', { 'herdcache.key': user, 'herdcache.outcome': 'stale', 'herdcache.loaded': false }, UNSET],
    ['herdcache.refresh', { 'herdcache.key': user, 'herdcache.loaded': true }, UNSET],
  ])
  const failed = spans[2]
  assert.equal(failed.status.message, 'boom')
  assert.deepEqual(
    failed.events.map((event) => [event.name, event.attributes['exception.message']]),
    [['exception', 'boom']],
  )
  for (const span of spans.slice(0, 2)) {
    assert.equal(span.parentSpanContext?.spanId, parent.spanContext().spanId, 'a child of the active span')
  }
  assert.equal(spans[0].instrumentationScope.name, 'herdcache')

  stop()
  exporter.reset()
  await cache.getOrLoad(['user', 7], () => 1)
  assert.deepEqual(exporter.getFinishedSpans(), [], 'stopped: no span')
  assert.equal(diagnostics_channel.tracingChannel(channels.getOrLoad).hasSubscribers, false)
})
