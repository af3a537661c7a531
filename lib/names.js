'use strict'

// The public names, taken from the addon where they are declared (see
// `names()` in src/binding/names.rs), so the wrapper has no copy of them.

const { names } = require('./native')
const { herdError, CODE_PREFIX, JS_CODES } = require('./errors')

if (typeof names !== 'function') {
  // A binary built from older sources (HERDCACHE_NATIVE_PATH, or a stale local build).
  throw herdError(
    Error,
    JS_CODES.NO_BINARY,
    'the herdcache native binary is older than its JavaScript (it has no names()): rebuild it with `npm run build`',
  )
}
const declared = names()
if (declared.limits === undefined) {
  // Built before names() exported its limits: the checks made against them would pass anything.
  throw herdError(
    Error,
    JS_CODES.NO_BINARY,
    'the herdcache native binary is older than its JavaScript (its names() has no limits): rebuild it with `npm run build`',
  )
}

/**
 * Every error code of the core package by its name after `ERR_HERDCACHE_`:
 * `codes.TIMEOUT === 'ERR_HERDCACHE_TIMEOUT'`. The native ones, then those
 * only JavaScript makes.
 *
 * @type {Readonly<Record<string, string>>}
 */
const codes = Object.freeze({
  ...Object.fromEntries(declared.codes.map((code) => [code.slice(CODE_PREFIX.length), code])),
  ...JS_CODES,
})

/**
 * `status.outcome` by the byte the addon leaves in its outcome buffer (0:
 * none). Not frozen: read on every call with `status`, and a frozen array's
 * element read cost ~5 ns more there (node 20). Nobody outside holds it.
 */
const OUTCOMES = [undefined, ...declared.outcomes]

/** Each name as itself, for the code that writes one: `byName(['hit']).hit === 'hit'`. */
const byName = (names) => Object.freeze(Object.fromEntries(names.map((name) => [name, name])))

/**
 * How the addon's `getOrLoad` gave its answer, by the byte 2 of its outcome
 * buffer (the addon's `names().given`): a promise, the value itself, or
 * the value left in its slot of the addon's value table.
 */
const GIVEN = Object.freeze({
  value: declared.given.indexOf('value'),
  slot: declared.given.indexOf('slot'),
})

/** The outcome names, by name (the addon's `names().outcomes`). */
const OUTCOME = byName(declared.outcomes)

/**
 * The values of a caller's `status.source`, `status.lock` and `status.stale`,
 * by name (the addon's `names().status`, `src/binding/status.rs`).
 */
const STATUS = Object.freeze({
  source: byName(declared.status.source),
  lock: byName(declared.status.lock),
  stale: byName(declared.status.stale),
})

/**
 * The numbers both languages use, declared in Rust only (the addon's
 * `names().limits`, `Limits` in src/binding/names.rs): the longest TTL in ms
 * (`maxTtl`), the longest encoded key in UTF-8 bytes (`maxKeyBytes`), the
 * most keys of one native getOrLoadMany call (`manyKeys`), and what
 * `nextLoadSlots` answers when the store could not be asked (`failedOpen`).
 *
 * @type {Readonly<{ maxTtl: number, maxKeyBytes: number, manyKeys: number, failedOpen: number }>}
 */
const LIMITS = Object.freeze({ ...declared.limits })

/**
 * The options of `new Cache(options)` the addon takes, by name, with the
 * `typeof` each value must have.
 *
 * @type {ReadonlyMap<string, 'number' | 'string' | 'boolean'>}
 */
const NATIVE_OPTIONS = new Map(declared.options.map(({ name, jsType }) => [name, jsType]))

/**
 * The keys of `stats()` that are numbers, in order: each with its `metrics()`
 * name and whether it is a gauge. herdcache/prometheus registers one
 * prom-client metric per entry.
 *
 * @type {ReadonlyArray<Readonly<{ name: string, metric: string, gauge: boolean }>>}
 */
const COUNTERS = Object.freeze(
  declared.counters.map(({ name, metric, gauge }) => Object.freeze({ name, metric, gauge })),
)

/**
 * The `node:diagnostics_channel` names herdcache publishes on (README,
 * "Tracing"), declared here only: lib/tracing.js makes the channels from
 * them, and `channels` is exported as they are. `getOrLoad` and `refresh` are
 * `tracingChannel` names (their events are `tracing:<name>:start`, …); the
 * others are plain channels.
 */
const channels = Object.freeze({
  getOrLoad: 'herdcache:getOrLoad',
  refresh: 'herdcache:refresh',
  lock: 'herdcache:lock',
  invalidate: 'herdcache:invalidate',
  redisError: 'herdcache:redis:error',
})

/**
 * The call options of what an entry is written with, by the JS type each
 * takes (their ranges are checked natively): what a namespace's defaults may
 * set too.
 */
const ENTRY_CALL_OPTIONS = Object.freeze({
  stale: 'boolean',
  ttl: 'number',
  hardTtl: 'number',
  negativeTtl: 'number',
  beta: 'number',
  l1Ttl: 'number',
})

/**
 * The boolean `getOrLoad` options the addon takes as the bits of one number
 * (`Tiers` in src/core/options.rs): `forceFresh` (set when true), `l1` and
 * `redis` (set when false), by name.
 *
 * @type {Readonly<Record<string, number>>}
 */
const TIERS = Object.freeze(Object.fromEntries(declared.tiers.map((name, bit) => [name, 1 << bit])))

/** Every option of a `getOrLoad` call: the entry's, then the call's own. */
const CALL_OPTIONS = Object.freeze([
  ...Object.keys(ENTRY_CALL_OPTIONS),
  'signal',
  'status',
  'tags',
  ...Object.keys(TIERS),
])

module.exports = {
  codes,
  OUTCOMES,
  OUTCOME,
  GIVEN,
  STATUS,
  NATIVE_OPTIONS,
  COUNTERS,
  channels,
  ENTRY_CALL_OPTIONS,
  CALL_OPTIONS,
  TIERS,
  LIMITS,
}
