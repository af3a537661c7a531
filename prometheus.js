'use strict'

// herdcache/prometheus: a cache's `stats()` as prom-client metrics, named as
// `metrics()` names them, read when the registry is scraped. See "With
// prom-client" in README.md. prom-client is an optional peer dependency: only
// this entry loads it, so `require('herdcache')` works without it.

const { Cache } = require('./index')
const { herdError } = require('./lib/errors')
const { codes, COUNTERS } = require('./lib/names')

try {
  require.resolve('prom-client')
} catch (cause) {
  // Node's own code, so `error.code === 'MODULE_NOT_FOUND'` checks for an
  // optional dependency keep working; the message says what to install.
  throw herdError(
    Error,
    'MODULE_NOT_FOUND',
    'herdcache/prometheus needs prom-client (14 or 15): npm install prom-client',
    cause,
  )
}
const { Counter, Gauge } = require('prom-client')

/**
 * `stats().lastRedisError` as `metrics()` writes it (`LAST_ERROR` in
 * src/engine/metrics.rs). `names()` declares every other metric, but not
 * this one, and `metrics()` only has it once Redis failed, so its name and
 * help are written here; __test__/prometheus.test.js holds them to `metrics()`.
 */
const LAST_ERROR = {
  metric: 'herdcache_redis_last_error',
  help: 'The code of the last Redis failure (stats().lastRedisError).',
}
/** The label that tells caches apart when several share a registry. */
const LABEL = 'cache'
const KNOWN_OPTIONS = ['name']

/**
 * @typedef {import('prom-client').Registry} Registry
 * @typedef {import('prom-client').Metric} Metric
 * @typedef {{ labels: Record<string, string>, stats: import('./index').CacheStats }} Row
 * @typedef {{
 *   metrics: Array<[string, Metric]>,
 *   caches: Map<string | undefined, WeakRef<Cache>>,
 *   rows: Row[] | undefined,
 * }} Collection
 */

/**
 * What each registry collects. Keyed weakly, and the caches are held through
 * WeakRefs: collecting keeps neither a registry nor a cache alive.
 *
 * @type {WeakMap<Registry, Collection>}
 */
const collections = new WeakMap()
/** The metrics this module made, so those of another collector of the same name are told apart. */
const owned = new WeakSet()

function invalidOption(message) {
  return herdError(TypeError, codes.INVALID_OPTION, message)
}

function describe(value) {
  if (value === null || typeof value !== 'object') return value === null ? 'null' : typeof value
  const kind = value.constructor?.name
  return kind && kind !== 'Object' ? `a ${kind}` : 'an object'
}

/** Forgets the caches gone to the garbage collector. */
function prune(caches) {
  for (const [name, ref] of caches) if (ref.deref() === undefined) caches.delete(name)
}

/** Duck-typed, so a registry of another prom-client copy in the application works too. */
function isRegistry(value) {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof value.registerMetric === 'function' &&
    typeof value.getSingleMetric === 'function' &&
    typeof value.removeSingleMetric === 'function'
  )
}

/** The HELP text of each `metrics()` name: declared with the counter in Rust, and only `metrics()` carries it. */
function helpTexts(cache) {
  return new Map([...cache.metrics().matchAll(/^# HELP (\S+) (.+)$/gm)].map(([, metric, help]) => [metric, help]))
}

/**
 * One `stats()` per live cache, shared by every metric of a scrape:
 * `Registry#metrics()` runs all the `collect()`s in one job before it awaits
 * any, so they report one moment (`loads` and `misses` agree) and the next
 * scrape reads anew. Caches gone to the garbage collector are forgotten here.
 *
 * @param {Collection} collection
 */
function rows(collection) {
  if (collection.rows === undefined) {
    const read = []
    for (const [name, ref] of collection.caches) {
      const cache = ref.deref()
      if (cache === undefined) collection.caches.delete(name)
      else read.push({ labels: name === undefined ? {} : { [LABEL]: name }, stats: cache.stats() })
    }
    collection.rows = read
    queueMicrotask(() => {
      collection.rows = undefined
    })
  }
  return collection.rows
}

/**
 * The metrics of one registry, made from `names()` and the HELP texts of
 * `metrics()`: a Counter or a Gauge per `stats()` number, and the labelled
 * last-error gauge. Not registered yet.
 *
 * @param {Collection} collection
 * @param {Map<string, string>} help
 * @returns {Array<[string, Metric]>}
 */
function makeMetrics(collection, help) {
  const metrics = COUNTERS.map(({ name, metric, gauge }) => {
    const Kind = gauge ? Gauge : Counter
    const made = new Kind({
      name: metric,
      help: help.get(metric) ?? metric,
      labelNames: [LABEL],
      registers: [],
      collect() {
        // A counter's value is the cache's own count: start from 0 at each scrape.
        this.reset()
        for (const { labels, stats } of rows(collection)) {
          if (gauge) this.set(labels, stats[name])
          else this.inc(labels, stats[name])
        }
      },
    })
    return [metric, made]
  })
  const lastError = new Gauge({
    name: LAST_ERROR.metric,
    help: LAST_ERROR.help,
    labelNames: [LABEL, 'code'],
    registers: [],
    collect() {
      this.reset()
      for (const { labels, stats } of rows(collection)) {
        if (stats.lastRedisError !== null) this.set({ ...labels, code: stats.lastRedisError }, 1)
      }
    },
  })
  metrics.push([LAST_ERROR.metric, lastError])
  for (const [, metric] of metrics) owned.add(metric)
  return metrics
}

/**
 * The registry's collection; a new one, registered, when it has none or its
 * metrics were taken out of it (`registry.clear()`): the caches collected
 * before went with them.
 *
 * @param {Registry} registry
 * @param {Cache} cache where the HELP texts are read
 */
function collectionOf(registry, cache) {
  const known = collections.get(registry)
  if (known?.metrics.every(([metric, made]) => registry.getSingleMetric(metric) === made)) return known
  const names = [...COUNTERS.map(({ metric }) => metric), LAST_ERROR.metric]
  const foreign = names.filter((metric) => {
    const there = registry.getSingleMetric(metric)
    return there !== undefined && !owned.has(there)
  })
  if (foreign.length > 0) {
    throw invalidOption(
      `the registry already has ${foreign.join(', ')}, registered by something other than herdcache/prometheus; ` +
        'remove those metrics, or collect the caches into another Registry',
    )
  }
  /** @type {Collection} */
  const collection = { metrics: [], caches: new Map(), rows: undefined }
  collection.metrics = makeMetrics(collection, helpTexts(cache))
  for (const [metric, made] of collection.metrics) {
    // What is left of an earlier collection, part of it removed.
    registry.removeSingleMetric(metric)
    registry.registerMetric(made)
  }
  collections.set(registry, collection)
  return collection
}

/**
 * Collects a cache's counters into a prom-client registry: one metric per
 * `metrics()` name (Counters and Gauges), read from `cache.stats()` at each
 * scrape. Several caches in one registry share the metrics, told apart by
 * their `cache` label: give each a `name`. The registry holds the cache
 * weakly; a closed cache keeps its final values until the returned function
 * is called (or the cache is garbage-collected).
 *
 * @param {Registry} registry e.g. prom-client's `register`, or a `new Registry()`
 * @param {Cache} cache
 * @param {{ name?: string }} [options] `name`: the `cache` label's value
 * @returns {() => void} stops collecting this cache; with the last one, the metrics leave the registry
 * @throws {TypeError} `ERR_HERDCACHE_INVALID_OPTION`: not a registry, not a Cache, a bad option, or a name taken
 */
function collectInto(registry, cache, options = {}) {
  if (!isRegistry(registry)) {
    throw invalidOption(
      `collectInto(registry, cache, options?) needs a prom-client Registry first (its \`register\`, or a \`new Registry()\`); got ${describe(registry)}`,
    )
  }
  if (!(cache instanceof Cache)) {
    throw invalidOption(`collectInto(registry, cache, options?) needs a herdcache Cache second; got ${describe(cache)}`)
  }
  if (options === null || typeof options !== 'object') {
    throw invalidOption(`collectInto() options must be an object, e.g. { name: 'users' }; got ${describe(options)}`)
  }
  for (const option of Object.keys(options)) {
    if (!KNOWN_OPTIONS.includes(option)) {
      throw invalidOption(`unknown collectInto() option \`${option}\`; known options: ${KNOWN_OPTIONS.join(', ')}`)
    }
  }
  const { name } = options
  if (name !== undefined && (typeof name !== 'string' || name === '')) {
    throw invalidOption(`collectInto() option \`name\` must be a non-empty string; got ${describe(name)}`)
  }

  const collection = collectionOf(registry, cache)
  const { caches } = collection
  prune(caches)
  for (const [other, ref] of caches) {
    if (ref.deref() === cache) {
      throw invalidOption(
        `this cache is already collected into this registry${other === undefined ? '' : ` as ${LABEL}="${other}"`}`,
      )
    }
  }
  if (caches.has(name)) {
    throw invalidOption(
      `a cache ${name === undefined ? 'without a name' : `named "${name}"`} is already collected into this registry; ` +
        'give each cache its own `name`, or call the function the first collectInto() returned',
    )
  }
  if (caches.size > 0 && (name === undefined || caches.has(undefined))) {
    throw invalidOption(
      `several caches in one registry each need a \`name\` (the \`${LABEL}\` label that tells their series apart): ` +
        `collectInto(registry, cache, { name: 'users' })`,
    )
  }
  const ref = new WeakRef(cache)
  caches.set(name, ref)
  collection.rows = undefined

  return function uncollect() {
    if (caches.get(name) !== ref) return
    caches.delete(name)
    collection.rows = undefined
    prune(caches)
    if (caches.size > 0 || collections.get(registry) !== collection) return
    collections.delete(registry)
    for (const [metric, made] of collection.metrics) {
      if (registry.getSingleMetric(metric) === made) registry.removeSingleMetric(metric)
    }
  }
}

module.exports = { collectInto }
