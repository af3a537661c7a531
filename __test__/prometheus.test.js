'use strict'
// herdcache/prometheus against a real prom-client Registry: what a scrape
// shows is what `metrics()` and `stats()` say, under the same names.
const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { spawnSync } = require('node:child_process')
const { Registry, Counter, Gauge } = require('prom-client')
const { Cache } = require('..')
const { collectInto } = require('../prometheus')
const { names } = require('../lib/native')
const h = require('./helpers')

const { T, ROOT } = h
const COUNTERS = names().counters
const LAST_ERROR = 'herdcache_redis_last_error'

/** The samples of a Prometheus text, `series → value`; `series` is the name with its labels as written. */
function samples(text) {
  const lines = text.split('\n').filter((line) => line !== '' && !line.startsWith('#') && line.startsWith('herdcache_'))
  return new Map(
    lines.map((line) => [line.slice(0, line.lastIndexOf(' ')), Number(line.slice(line.lastIndexOf(' ') + 1))]),
  )
}

/** `name → text` of the `# HELP` or `# TYPE` lines of the herdcache metrics. */
function comments(text, kind) {
  const lines = [...text.matchAll(new RegExp(`^# ${kind} (herdcache_\\S+) (.+)$`, 'gm'))]
  const map = new Map(lines.map(([, name, rest]) => [name, rest]))
  assert.equal(map.size, lines.length, `one # ${kind} line per name:\n${text}`)
  return map
}

/** A cache with known counts: 2 hits, 3 misses (one failed), 1 coalesced, 1 negative hit, 2 entries. */
async function exercise(cache) {
  const gate = h.deferred()
  const joined = Promise.all([cache.getOrLoad('a', () => gate.promise), cache.getOrLoad('a', () => 'never')])
  gate.resolve({ a: 1 })
  await joined
  await cache.getOrLoad('a', () => 'never')
  await cache.getOrLoad('a', () => 'never')
  await cache.getOrLoad('missing', () => null)
  await cache.getOrLoad('missing', () => 'never')
  await assert.rejects(
    cache.getOrLoad('broken', () => {
      throw new Error('db down')
    }),
    /db down/,
  )
  return cache
}

/** A TCP port where nothing listens (one the system just gave out and took back). */
async function closedPort() {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

test('one cache: the registry shows every metrics() series with its value, HELP and TYPE', T, async (t) => {
  const cache = await exercise(h.track(t, new Cache()))
  const registry = new Registry()
  collectInto(registry, cache)
  const text = await registry.metrics()
  const native = cache.metrics()

  assert.deepEqual(samples(text), samples(native), 'the same series and values as metrics()')
  const help = comments(text, 'HELP')
  help.delete(LAST_ERROR) // Its help is held to metrics() where metrics() has it: with a failing Redis, below.
  assert.deepEqual(help, comments(native, 'HELP'), 'the same help texts')
  const stats = cache.stats()
  for (const { name, metric } of COUNTERS) assert.equal(samples(text).get(metric), stats[name], metric)
  // Not vacuous: the counts exercise() made.
  const expected = { hits: 2, misses: 3, coalesced: 1, negativeHits: 1, loads: 3, loadErrors: 1, size: 2 }
  for (const [name, value] of Object.entries(expected)) {
    const { metric } = COUNTERS.find((c) => c.name === name)
    assert.equal(samples(text).get(metric), value, `${metric} ${value}`)
  }
})

test('the herdcache names are those of metrics(): Counters typed counter, Gauges typed gauge', T, async (t) => {
  const cache = h.track(t, new Cache())
  const registry = new Registry()
  collectInto(registry, cache)
  const text = await registry.metrics()
  const types = comments(text, 'TYPE')
  // Without Redis, metrics() has no last-error line; the registry has its (empty) metric all the same.
  const native = [...comments(cache.metrics(), 'TYPE').keys()]
  assert.deepEqual(new Set(types.keys()), new Set([...native, LAST_ERROR]))
  assert.deepEqual(new Set(native), new Set(COUNTERS.map((c) => c.metric)))
  for (const { metric, gauge } of COUNTERS) {
    assert.equal(types.get(metric), gauge ? 'gauge' : 'counter', metric)
    assert.ok(registry.getSingleMetric(metric) instanceof (gauge ? Gauge : Counter), `${metric} is a prom-client one`)
  }
  assert.equal(types.get(LAST_ERROR), 'gauge')
  assert.ok(![...samples(text).keys()].some((series) => series.startsWith(LAST_ERROR)), 'no last error yet')
})

test(
  'a failing Redis: herdcache_redis_last_error{code} as metrics() writes it, and the same name set',
  T,
  async (t) => {
    const port = await closedPort()
    const failing = h.track(t, new Cache({ redis: `redis://127.0.0.1:${port}`, redisTimeout: 500, onError: () => {} }))
    await assert.rejects(failing.ready(), { code: 'ERR_HERDCACHE_REDIS_UNREACHABLE' })
    const alone = new Registry()
    collectInto(alone, failing)
    const text = await alone.metrics()
    const native = failing.metrics()
    assert.match(native, /^herdcache_redis_last_error\{code="ERR_HERDCACHE_REDIS_UNREACHABLE"\} 1$/m)
    assert.deepEqual(samples(text), samples(native))
    assert.deepEqual(comments(text, 'HELP'), comments(native, 'HELP'), 'the help of herdcache_redis_last_error too')
    assert.deepEqual(comments(text, 'TYPE'), comments(native, 'TYPE'))

    const shared = new Registry()
    collectInto(shared, failing, { name: 'remote' })
    collectInto(shared, h.track(t, new Cache()), { name: 'local' })
    const labelled = samples(await shared.metrics())
    assert.equal(labelled.get('herdcache_redis_last_error{cache="remote",code="ERR_HERDCACHE_REDIS_UNREACHABLE"}'), 1)
    assert.deepEqual(
      [...labelled.keys()].filter((series) => series.startsWith(LAST_ERROR)),
      ['herdcache_redis_last_error{cache="remote",code="ERR_HERDCACHE_REDIS_UNREACHABLE"}'],
      'only the cache that saw the failure has the series',
    )
  },
)

test('two caches in one registry: one metric per name, one cache label value per cache', T, async (t) => {
  const users = await exercise(h.track(t, new Cache()))
  const feed = h.track(t, new Cache())
  await feed.getOrLoad('f', () => 1)
  const registry = new Registry()
  collectInto(registry, users, { name: 'users' })
  collectInto(registry, feed, { name: 'feed' })
  const text = await registry.metrics()
  const series = samples(text)

  const types = comments(text, 'TYPE')
  assert.equal(types.size, COUNTERS.length + 1, 'each name once, not once per cache')
  for (const [cache, stats] of [
    ['users', users.stats()],
    ['feed', feed.stats()],
  ]) {
    for (const { name, metric } of COUNTERS) {
      assert.equal(series.get(`${metric}{cache="${cache}"}`), stats[name], `${metric}{cache="${cache}"}`)
    }
  }
  assert.equal(series.get('herdcache_hits_total{cache="users"}'), 2)
  assert.equal(series.get('herdcache_misses_total{cache="feed"}'), 1)
  assert.equal(series.size, 2 * COUNTERS.length, 'no series without a cache label')
})

test('values are read at each scrape, with no timer left behind', T, async (t) => {
  const cache = h.track(t, new Cache())
  const registry = new Registry()
  const before = process.getActiveResourcesInfo().sort()
  collectInto(registry, cache, { name: 'c' })
  assert.equal(samples(await registry.metrics()).get('herdcache_hits_total{cache="c"}'), 0)
  await cache.getOrLoad('k', () => 1)
  await cache.getOrLoad('k', () => 1)
  for (let scrape = 0; scrape < 2; scrape++) {
    // The second time, unchanged: a counter is the cache's count, not a sum of scrapes.
    const after = samples(await registry.metrics())
    assert.equal(after.get('herdcache_hits_total{cache="c"}'), 1)
    assert.equal(after.get('herdcache_entries{cache="c"}'), 1)
  }
  assert.equal(
    Number((await registry.getSingleMetricAsString('herdcache_misses_total')).split(' ').pop()),
    1,
    'one metric scraped alone is read too',
  )
  assert.deepEqual(process.getActiveResourcesInfo().sort(), before)
})

test(
  'a closed cache scrapes its final values until uncollected; the last uncollect takes the metrics out',
  T,
  async (t) => {
    const registry = new Registry()
    const other = new Counter({ name: 'app_requests_total', help: 'Requests.', registers: [registry] })
    const a = await exercise(new Cache())
    const b = h.track(t, new Cache())
    const uncollectA = collectInto(registry, a, { name: 'a' })
    const uncollectB = collectInto(registry, b, { name: 'b' })
    await a.close()
    const closed = samples(await registry.metrics())
    assert.equal(closed.get('herdcache_hits_total{cache="a"}'), 2, 'the counts stay after close()')
    assert.equal(closed.get('herdcache_entries{cache="a"}'), 0, 'close() freed the entries')

    uncollectA()
    uncollectA()
    const left = samples(await registry.metrics())
    assert.ok(!left.has('herdcache_hits_total{cache="a"}'), 'uncollected: its series are gone')
    assert.ok(left.has('herdcache_hits_total{cache="b"}'))
    // The name is free again.
    const uncollectA2 = collectInto(registry, h.track(t, new Cache()), { name: 'a' })

    uncollectB()
    uncollectA2()
    assert.doesNotMatch(await registry.metrics(), /herdcache_/, 'no herdcache metric is left in the registry')
    assert.equal(registry.getSingleMetric('app_requests_total'), other, "the application's own metrics stay")
    // And they can be collected again.
    collectInto(registry, b)
    assert.match(await registry.metrics(), /^herdcache_hits_total 0$/m)
  },
)

test('the registry keeps no dropped cache alive, and forgets it', { timeout: 30000 }, () => {
  const code = `
'use strict'
const { Registry } = require('prom-client')
const { Cache } = require(${JSON.stringify(ROOT)})
const { collectInto } = require(${JSON.stringify(`${ROOT}/prometheus`)})
;(async () => {
  const registry = new Registry()
  let collected = 0
  const finalization = new FinalizationRegistry(() => { collected++ })
  const kept = new Cache()
  collectInto(registry, kept, { name: 'kept' })
  async function useAndDrop() {
    const cache = new Cache()
    collectInto(registry, cache, { name: 'dropped' })
    await cache.getOrLoad('k', () => 1)
    await registry.metrics()
    await cache.close()
    finalization.register(cache, 'dropped')
  }
  await useAndDrop()
  for (let i = 0; i < 10 && collected === 0; i++) { global.gc(); await new Promise((r) => setImmediate(r)) }
  const text = await registry.metrics()
  collectInto(registry, new Cache(), { name: 'dropped' })
  console.log(JSON.stringify({ collected, kept: text.includes('cache="kept"'), dropped: text.includes('cache="dropped"') }))
  await kept.close()
})().catch((e) => { console.error(e); process.exit(1) })
`
  const result = spawnSync(process.execPath, ['--expose-gc', '-e', code], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20000,
  })
  assert.equal(result.status, 0, result.stderr)
  assert.deepEqual(JSON.parse(result.stdout), { collected: 1, kept: true, dropped: false })
})

test('bad input is a TypeError with code ERR_HERDCACHE_INVALID_OPTION, and registers nothing', T, async (t) => {
  const cache = h.track(t, new Cache())
  const registry = new Registry()
  const cases = [
    [() => collectInto(), /needs a prom-client Registry first.*got undefined/],
    [() => collectInto(require('prom-client'), cache), /needs a prom-client Registry first.*got an object/],
    [() => collectInto(cache, registry), /needs a prom-client Registry first.*got a Cache/],
    [() => collectInto(registry), /needs a herdcache Cache second; got undefined/],
    [() => collectInto(registry, registry), /needs a herdcache Cache second; got a Registry/],
    [() => collectInto(registry, { stats: () => cache.stats() }), /needs a herdcache Cache second; got an object/],
    [() => collectInto(registry, cache, 'users'), /options must be an object.*got string/],
    [
      () => collectInto(registry, cache, { nmae: 'users' }),
      /unknown collectInto\(\) option `nmae`; known options: name/,
    ],
    [() => collectInto(registry, cache, { name: '' }), /`name` must be a non-empty string; got string/],
    [() => collectInto(registry, cache, { name: 7 }), /`name` must be a non-empty string; got number/],
  ]
  for (const [call, message] of cases) {
    const error = h.throwsWith(call, 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
    assert.match(error.message, message)
  }
  assert.equal(await registry.metrics(), '\n', 'nothing registered')
})

test('a name clash in one registry is refused, and the registry is left as it was', T, async (t) => {
  const [a, b] = [h.track(t, new Cache()), h.track(t, new Cache())]
  await a.getOrLoad('k', () => 1)
  const registry = new Registry()
  collectInto(registry, a, { name: 'users' })
  const before = await registry.metrics()
  const clashes = [
    [() => collectInto(registry, b, { name: 'users' }), /a cache named "users" is already collected/],
    [() => collectInto(registry, b), /several caches in one registry each need a `name`/],
    [
      () => collectInto(registry, a, { name: 'again' }),
      /this cache is already collected into this registry as cache="users"/,
    ],
  ]
  for (const [call, message] of clashes) {
    assert.match(h.throwsWith(call, 'ERR_HERDCACHE_INVALID_OPTION', TypeError).message, message)
  }
  assert.equal(await registry.metrics(), before)

  const unnamed = new Registry()
  collectInto(unnamed, a)
  assert.match(
    h.throwsWith(() => collectInto(unnamed, b, { name: 'feed' }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError).message,
    /several caches in one registry each need a `name`/,
  )

  // A metric of a herdcache name that something else registered.
  const taken = new Registry()
  const own = new Gauge({ name: 'herdcache_entries', help: 'Mine.', registers: [taken] })
  assert.match(
    h.throwsWith(() => collectInto(taken, a), 'ERR_HERDCACHE_INVALID_OPTION', TypeError).message,
    /the registry already has herdcache_entries, registered by something other than herdcache\/prometheus/,
  )
  assert.deepEqual(
    taken.getMetricsAsArray().map((metric) => metric.name),
    ['herdcache_entries'],
  )
  assert.equal(taken.getSingleMetric('herdcache_entries'), own)
})

test('registry.clear() forgets what was collected; collecting again starts anew', T, async (t) => {
  const cache = h.track(t, new Cache())
  const registry = new Registry()
  collectInto(registry, cache, { name: 'c' })
  registry.clear()
  assert.equal(await registry.metrics(), '\n')
  collectInto(registry, cache, { name: 'c' })
  assert.equal(samples(await registry.metrics()).get('herdcache_hits_total{cache="c"}'), 0)
})

test('an OpenMetrics registry gets the counters as OpenMetrics writes them', T, async (t) => {
  const cache = await exercise(h.track(t, new Cache()))
  const registry = new Registry(Registry.OPENMETRICS_CONTENT_TYPE)
  const uncollect = collectInto(registry, cache)
  const text = await registry.metrics()
  assert.match(text, /^# TYPE herdcache_hits counter\nherdcache_hits_total 2$/m)
  assert.match(text, /^# TYPE herdcache_entries gauge\nherdcache_entries 2$/m)
  assert.match(text, /# EOF\n$/)
  uncollect()
  assert.equal(registry.getMetricsAsArray().length, 0)
})

test("the ESM entry: import('herdcache/prometheus') shares the CommonJS module", T, async (t) => {
  const esm = await import('herdcache/prometheus')
  const cjs = require('../prometheus')
  assert.equal(esm.collectInto, cjs.collectInto)
  assert.equal(esm.default, cjs)
  assert.equal(require('herdcache/prometheus'), cjs, 'the package self-reference resolves to prometheus.js')
  const registry = new Registry()
  esm.collectInto(registry, h.track(t, new Cache()), { name: 'esm' })
  assert.match(await registry.metrics(), /^herdcache_hits_total\{cache="esm"\} 0$/m)
})

test('require("herdcache") does not load prom-client; herdcache/prometheus does', T, () => {
  const loads = (entry) => {
    const code = `require(${JSON.stringify(entry)}); console.log(Object.keys(require.cache).some((f) => f.includes('prom-client')))`
    const result = spawnSync(process.execPath, ['-e', code], { cwd: ROOT, encoding: 'utf8', timeout: 10000 })
    assert.equal(result.status, 0, result.stderr)
    return result.stdout.trim()
  }
  assert.equal(loads(ROOT), 'false')
  assert.equal(loads(`${ROOT}/prometheus`), 'true')
})
