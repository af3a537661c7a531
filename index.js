'use strict'

// The public entry: a small wrapper that validates options, wires the
// addon's raw entry points in, and keeps what is JavaScript by nature
// (serialising values, timers, AbortSignals) in lib/. See README.md.

const { NativeCache } = require('./lib/native')
const { lead, resume, scheduleReads, reportProblem, track } = require('./lib/leader')
const { detach, softWait, isAbortSignal, SIGNAL_PROBLEM } = require('./lib/callers')
const { stop } = require('./lib/deadlines')
const { bulkheadOf } = require('./lib/bulkhead')
const { herdError, sizeProblem, unreadable } = require('./lib/errors')
const {
  codes,
  OUTCOMES,
  OUTCOME,
  GIVEN,
  NATIVE_OPTIONS,
  channels,
  CALL_OPTIONS: CALL_OPTION_NAMES,
  TIERS,
  STATUS,
} = require('./lib/names')
const { getOrLoadChannel, LoadTrace, traceGetOrLoad, invalidated, redisFailed } = require('./lib/tracing')
const { openNamespace } = require('./lib/namespace')
const { getOrLoadMany } = require('./lib/many')

const { encode, decode, isSerializerError, serializerProblem } = require('./lib/values')

const { parse } = JSON
const noop = () => {}

/**
 * This machine's wall clock, as the addon's clock reads it before its
 * offset. Taken once here, so that fake timers a test installs later (which
 * replace `Date`) cannot keep a remembered hit alive past its deadline.
 */
const wallNow = Date.now

/** The outcome byte of a fresh hit (`OUTCOMES`' index of 'hit'). */
const HIT = OUTCOMES.indexOf('hit')
/** How the addon's `getOrLoad` gave a value from memory (outcome byte 2): itself, or in its slot. */
const GIVEN_VALUE = GIVEN.value
const GIVEN_SLOT = GIVEN.slot
/** `#valueGiven`'s answer for a promise (no value can be this symbol). */
const NOT_GIVEN = Symbol('herdcache.notGiven')

/**
 * How many remembered hits read the addon's published clock and epoch with
 * plain reads between two checks (the clock against `wallNow()`, the epoch
 * with `Atomics.load`), and how far behind the clock may be then (ms: the
 * coarse clock's tick, the 1 ms it is published at, a thread's wake-up).
 * Further behind, every remembered hit reads `wallNow()` until a check
 * finds it caught up.
 */
const CLOCK_CHECK_EVERY = 256
const CLOCK_SLACK_MS = 10

/** Test hooks: `cache[kTesting].advanceClock(ms)`, `.skewClock(ms)`, `.setRandom({ jitter, xfetch })`. */
const kTesting = Symbol.for('herdcache.testing')

// The options the addon takes come from the addon (`names().options`);
// these two are JavaScript's: they never cross to the native side.
const FUNCTION_OPTIONS = ['waitUntil', 'onError']
/** Every option of `new Cache(options)`, with the `typeof` its value must have. */
const KNOWN_OPTIONS = new Map([...NATIVE_OPTIONS, ...FUNCTION_OPTIONS.map((name) => [name, 'function'])])

function invalidOption(message) {
  return herdError(TypeError, codes.INVALID_OPTION, message)
}

function checkOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw invalidOption('the Cache options must be an object, e.g. new Cache({ ttl: 60_000 })')
  }
  for (const name of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(name)) {
      throw invalidOption(`unknown option \`${name}\`; known options: ${[...KNOWN_OPTIONS.keys()].join(', ')}`)
    }
  }
  for (const [name, type] of KNOWN_OPTIONS) {
    const value = options[name]
    if (value === undefined || name === 'serializer') continue
    if (typeof value !== type && !(OBJECT_FORMS.has(name) && isClusterOption(value))) {
      throw invalidOption(`option \`${name}\` must be a ${type}; got ${typeof value}`)
    }
  }
  const problem = options.serializer === undefined ? undefined : serializerProblem(options.serializer)
  if (problem !== undefined) throw invalidOption(problem)
}

/** The options that may be objects, which go to the addon as JSON text (`nativeForm`). */
const OBJECT_FORMS = new Set(['redis', 'compress'])

/** `redis: { cluster: [...] }`, `compress: { threshold, level }`: the addon checks the rest (core/options.rs). */
function isClusterOption(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The addon's form of the options: a cluster's `redis` object and the
 * `compress` object go over as their JSON text, an application's serializer
 * as its name.
 */
function nativeForm(options) {
  const form = { ...options }
  for (const name of OBJECT_FORMS) if (isClusterOption(form[name])) form[name] = JSON.stringify(form[name])
  if (typeof options.serializer === 'object') form.serializer = options.serializer.name
  return form
}

/**
 * The bits of `Tiers` (src/core/options.rs) `options` asks for: `forceFresh:
 * true`, `l1: false`, `redis: false`; undefined when none.
 */
function tiersOf(options) {
  const bits =
    (options.forceFresh === true ? TIERS.forceFresh : 0) |
    (options.l1 === false ? TIERS.l1 : 0) |
    (options.redis === false ? TIERS.redis : 0)
  return bits === 0 ? undefined : bits
}

/** What a traced call without options passes as its options: none. */
const NO_OPTIONS = Object.freeze({})

const CALL_OPTIONS = new Set(CALL_OPTION_NAMES)
const GET_OPTIONS = new Set(['stale'])
const SET_OPTIONS = new Set(['ttl', 'hardTtl', 'tags'])

/**
 * What is wrong with a call's options object, or undefined. Numbers and
 * `stale` are checked natively; unknown names are rejected because a typo
 * such as `sttale: false` would silently serve stale data where the caller
 * asked for none.
 */
function callOptionsProblem(options, known = CALL_OPTIONS) {
  if (typeof options !== 'object' || options === null) {
    return `the call options must be an object; got ${options === null ? 'null' : typeof options}`
  }
  for (const name in options) {
    if (!known.has(name)) return `unknown call option \`${name}\`; known: ${[...known].join(', ')}`
  }
  const { signal, status } = options
  if (signal !== undefined && !isAbortSignal(signal)) return SIGNAL_PROBLEM
  for (const name in TIERS) {
    const value = options[name]
    if (value !== undefined && typeof value !== 'boolean') return `call option \`${name}\` must be a boolean`
  }
  if (status !== undefined && (typeof status !== 'object' || status === null)) {
    return 'call option `status` must be an object; its `outcome` is set'
  }
  return undefined
}

/** Throws when `options` (absent, or an object of `known` names) is bad. */
function checkCallOptions(options, known) {
  if (options === undefined) return
  const problem = callOptionsProblem(options, known)
  if (problem !== undefined) throw invalidOption(problem)
}

/** Runs a synchronous native call as a promise: usage errors reject, never throw. */
/**
 * Sets `status.waitedMs` when `promise` settles: the ms from the call
 * (`started`, performance.now()) to its answer. Registered before the
 * caller can await it, so it is set when the caller resumes.
 */
function waited(status, promise, started) {
  const done = () => {
    status.waitedMs = performance.now() - started
  }
  promise.then(done, done)
}

function settle(run) {
  try {
    return Promise.resolve(run())
  } catch (error) {
    return Promise.reject(error)
  }
}

/** "1 set() call", "3 delete() calls": how many calls of one kind. */
function calls(n, op) {
  return `${n} ${op}() call${n === 1 ? '' : 's'}`
}

/**
 * Reports the writes and invalidations close() gave up on: to `onError` (an
 * error with code `ERR_HERDCACHE_UNDELIVERED`, its `operations`, `keys` and
 * the last Redis error as `cause`), or, without one, as a process warning, so
 * they are never dropped silently.
 *
 * @param {import('./lib/native-contract').Context} ctx
 * @param {Array<{ op: 'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear', key?: string, tag?: string, namespace?: string }>} undelivered
 *   (a namespace's clear has its encoded names as `namespace`, no `key`)
 * @param {{ code: string, message: string } | null} last the last Redis failure's cause
 */
function reportUndelivered(ctx, undelivered, last) {
  if (undelivered.length === 0) return
  const keys = undelivered.filter((o) => o.key !== undefined).map((o) => o.key)
  const counts = new Map()
  for (const { op } of undelivered) counts.set(op, (counts.get(op) || 0) + 1)
  const what = [...counts].map(([op, n]) => calls(n, op)).join(' and ')
  const why = last === null ? 'Redis could not be reached' : `the last Redis error: ${last.code}: ${last.message}`
  const tags = undelivered.filter((o) => o.tag !== undefined).map((o) => o.tag)
  const list = (names) => (names.length > 10 ? `${names.slice(0, 10).join(', ')}, …` : names.join(', '))
  const namespaces = undelivered.filter((o) => o.namespace !== undefined).map((o) => o.namespace)
  const error = herdError(
    Error,
    codes.UNDELIVERED,
    `close(): ${what} could not reach Redis and ${undelivered.length === 1 ? 'was' : 'were'} given up (${why}); ` +
      `other instances may serve the old values until they expire.${keys.length > 0 ? ` Keys: ${list(keys)}` : ''}` +
      `${tags.length > 0 ? ` Tags: ${list(tags)}` : ''}` +
      `${namespaces.length > 0 ? ` Namespaces cleared: ${list(namespaces)}` : ''}`,
    last === null ? undefined : herdError(Error, last.code, last.message),
  )
  error.operations = undelivered
  error.keys = keys
  error.tags = tags
  redisFailed(ctx.cache.deref(), error)
  if (typeof ctx.onError !== 'function') {
    process.emitWarning(error)
    return
  }
  try {
    ctx.onError(error, { key: undefined, background: true })
  } catch {
    // A throwing error hook must not turn into an unhandled rejection.
  }
}

class Cache {
  #native
  #fns
  #ctx
  #closing
  #load
  #many
  #outcome
  /**
   * Fresh hits the addon answered, remembered by key, answered again here
   * without crossing into it: `{ promise, until }`, all decided in the epoch
   * `#rememberedIn` (src/engine/epoch.rs).
   * Valid while the cache's epoch has not moved (nothing in memory, the
   * queued invalidations or the clock changed since) and until `until`
   * (`wallNow()` ms: the entry's fresh deadline, its early refresh, its
   * l1Ttl). String keys and untagged entries only; a call with options, a
   * traced call or a loader that is no function goes to the addon.
   */
  #remembered = new Map()
  /** The epoch `#remembered` was filled in (it is emptied when it moves). */
  #rememberedIn = -1
  /** Hits answered from `#remembered` since `stats()` or `metrics()` last counted them. */
  #rememberedHits = 0
  /** The addon's epoch counter (`Uint32Array` over `epochBuffer`). */
  #epoch
  /** The addon's published wall clock (`Float64Array` over `clockBuffer`, src/engine/clock.rs). */
  #clock
  #clockChecks = 0
  #clockTrusted = false
  /** The outcome slot's epoch and deadline of the last call's fresh hit (`entry::Remember`). */
  #decidedIn
  #until
  #remembering
  /** The addon's value table (src/binding/held.rs), and the slot of the last value left there. */
  #values
  #givenSlot

  constructor(options = {}) {
    checkOptions(options)
    const { waitUntil, onError, ...nativeOptions } = options
    this.#native = new NativeCache(nativeForm(nativeOptions))
    /** @type {import('./lib/native-contract').Context} */
    const ctx = {
      cache: new WeakRef(this),
      waitUntil,
      onError,
      serializer: typeof options.serializer === 'object' ? options.serializer : undefined,
      active: new Set(),
      waiting: new Map(),
      writes: new Set(),
      warned: new Set(),
      failing: new Set(),
      timer: undefined,
      idle: false,
      self: undefined,
      hardTimeout: 0,
      softTimeout: 0,
      maxValueBytes: 0,
      redis: false,
      needsText: true,
      maxConcurrentLoads: 0,
      maxQueuedLoads: 0,
      fleetMaxConcurrentLoads: 0,
      bulkhead: undefined,
    }
    ctx.self = new WeakRef(ctx)
    // The raw entry points: lib/native-contract.d.ts says what each takes and gives.
    const fns = this.#native.install(ctx, lead, softWait, resume, scheduleReads, reportProblem, decode)
    for (const name of [
      'fill',
      'heldValue',
      'fail',
      'recordSoftWait',
      'flushReads',
      'recordLoadQueue',
      'loadSlots',
      'nextLoadSlots',
    ]) {
      ctx[name] = fns[name]
    }
    ctx.bulkhead = bulkheadOf(ctx)
    this.#fns = fns
    this.#ctx = ctx
    this.#load = fns.getOrLoad
    this.#outcome = new Uint8Array(fns.outcomeBuffer)
    this.#decidedIn = new Uint32Array(fns.outcomeBuffer, 4, 1)
    this.#until = new Float64Array(fns.outcomeBuffer, 8, 1)
    this.#values = fns.values
    this.#givenSlot = new Uint32Array(fns.outcomeBuffer, 16, 1)
    // Without external buffers (V8's sandbox) every call goes to the addon.
    this.#remembering = fns.epochBuffer !== undefined
    this.#epoch = this.#remembering ? new Uint32Array(fns.epochBuffer) : new Uint32Array(1)
    this.#clock = this.#remembering ? new Float64Array(fns.clockBuffer) : new Float64Array(1)
    this.#many = { getOrLoadMany: fns.getOrLoadMany, outcome: this.#outcome }
  }

  getOrLoad(key, loader, options) {
    // Nobody tracing costs this one check (bench/hitpath.js measures it).
    if (getOrLoadChannel.hasSubscribers) return this.#traced(key, loader, options)
    if (options === undefined) {
      // A fresh hit the addon answered before, nothing changed since: its
      // promise again, no crossing (bench/HITPATH.md).
      const hit = this.#remembered.get(key)
      if (
        hit !== undefined &&
        // A plain read: `Atomics.load` cost as much as the rest of the hit
        // (bench/HITPATH.md). `#now()` makes the atomic read at its checks.
        this.#rememberedIn === this.#epoch[0] &&
        typeof loader === 'function' &&
        this.#now() < hit.until
      ) {
        this.#rememberedHits++
        return hit.promise
      }
      // Otherwise one native call: the addon answers a join with the
      // flight's promise, an answer from memory with the value (itself, or
      // left in its slot: outcome byte 2), whose promise is made here.
      const answer = this.#load(key, loader)
      const value = this.#valueGiven(answer)
      if (value === NOT_GIVEN) return answer
      return this.#outcome[0] === HIT ? this.#remember(key, value) : Promise.resolve(value)
    }
    const problem = callOptionsProblem(options)
    if (problem !== undefined) return Promise.reject(invalidOption(problem))
    return this.#call(key, loader, options, options.status)
  }

  /**
   * The value the addon's last `getOrLoad` answered `answer` with from
   * memory (itself, or left in its slot of the value table: outcome byte 2),
   * or NOT_GIVEN when `answer` is a promise. Read at once: the slot may be
   * reused.
   */
  #valueGiven(answer) {
    const given = this.#outcome[2]
    if (given === GIVEN_SLOT) return this.#values[this.#givenSlot[0]]
    return given === GIVEN_VALUE ? answer : NOT_GIVEN
  }

  /**
   * The promise of the fresh hit the addon just answered with `value`,
   * remembered (its deadline and the epoch read before its decision are in
   * the outcome slot; deadline 0: not to be remembered). Both are read
   * before the promise is made: resolving with `value` reads its `then`,
   * which a getter could make a call of. Kept with that epoch, not the
   * current one: a change queued while the call ran has moved the epoch
   * past it. A key is remembered at its second hit in one epoch: the first
   * after the epoch moved empties what was remembered instead, so a cache
   * whose epoch moves between most calls (a busy fleet's invalidations)
   * spends nothing here.
   */
  #remember(key, value) {
    const until = this.#until[0]
    const epoch = this.#decidedIn[0]
    const promise = Promise.resolve(value)
    if (!(until > 0) || typeof key !== 'string' || !this.#remembering) return promise
    if (epoch !== this.#rememberedIn) {
      if (this.#remembered.size > 0) this.#remembered.clear()
      this.#rememberedIn = epoch
      return promise
    }
    this.#remembered.set(key, { promise, until })
    return promise
  }

  /**
   * Now, for a remembered hit: the addon's published clock, one period
   * ahead (it is written every ms), while a check every CLOCK_CHECK_EVERY
   * reads found it within CLOCK_SLACK_MS of `wallNow()`; else `wallNow()`.
   * `Date.now()` costs ~40 ns here, as much as the rest of the hit.
   *
   * The check also reads the epoch with `Atomics.load`. V8 does not hoist
   * the hits' plain read of it out of a loop (a 200 ms loop that never
   * yields saw every tick of the published clock, read the same way), but
   * an engine that did would keep a loop of calls that never yields on
   * what it remembered; so every CLOCK_CHECK_EVERY hits, a moved epoch
   * empties `#remembered` and the hit goes to the addon (`Infinity`).
   */
  #now() {
    if (this.#clockTrusted && --this.#clockChecks > 0) return this.#clock[0] + 1
    const now = wallNow()
    this.#clockChecks = CLOCK_CHECK_EVERY
    this.#clockTrusted = now - this.#clock[0] <= CLOCK_SLACK_MS
    if (Atomics.load(this.#epoch, 0) !== this.#rememberedIn) {
      this.#remembered.clear()
      return Number.POSITIVE_INFINITY
    }
    return now
  }

  /** The hits answered from `#remembered` since last asked, counted once (for stats() and metrics()). */
  #takeRememberedHits() {
    const hits = this.#rememberedHits
    this.#rememberedHits = 0
    return hits
  }

  /**
   * A call with (checked) options. They are read here, where property access
   * is cheap, and passed positionally. `status` goes along so that a flight
   * another instance's value answers can say so (the addon sets its
   * `outcome` then).
   */
  #call(key, loader, options, status) {
    const { signal } = options
    const started = status === undefined ? 0 : performance.now()
    const tiers = tiersOf(options)
    let promise = this.#load(
      key,
      loader,
      options.stale,
      options.ttl,
      options.hardTtl,
      options.negativeTtl,
      options.beta,
      status,
      options.tags,
      tiers,
      options.l1Ttl,
    )
    const outcome = OUTCOMES[this.#outcome[0]]
    // An answer from memory is the value: its promise is made here.
    const value = this.#valueGiven(promise)
    if (value !== NOT_GIVEN) promise = Promise.resolve(value)
    if (status !== undefined && outcome !== undefined) status.outcome = outcome
    if (options.forceFresh === true && options.stale !== false && options.l1 !== false)
      promise = this.#staleIfError(key, promise, status)
    if (status !== undefined) waited(status, promise, started)
    return signal === undefined ? promise : detach(promise, signal)
  }

  /**
   * A `forceFresh` load that fails answers with the value in memory, fresh
   * or stale, when there is one (stale-if-error, as a stale read's refresh);
   * `status` says so. Without one, the load's error.
   */
  #staleIfError(key, promise, status) {
    return promise.catch((error) => {
      let kept
      try {
        kept = this.#fns.get(key, true)
      } catch {}
      if (kept === undefined) throw error
      if (status !== undefined) {
        status.outcome = OUTCOME.stale
        status.stale = STATUS.stale.error
      }
      return kept
    })
  }

  /**
   * getOrLoad while `herdcache:getOrLoad` has subscribers. It always passes
   * a status object (the caller's, or one of its own), whose `outcome` the
   * addon updates when another instance's value answers the flight: the
   * outcome the message ends with.
   */
  #traced(key, loader, options) {
    const call = new LoadTrace(this, key, loader)
    return traceGetOrLoad(call, () => {
      const problem = options === undefined ? undefined : callOptionsProblem(options)
      if (problem !== undefined) return Promise.reject(invalidOption(problem))
      const status = options?.status ?? {}
      const promise = this.#call(key, call.loader, options ?? NO_OPTIONS, status)
      call.answered(OUTCOMES[this.#outcome[0]], status)
      return promise
    })
  }

  /**
   * getOrLoad for each of `keys`; the keys this process loads go to one
   * `loader(missingKeys, ctx)` call (README, "Many keys in one load").
   */
  getOrLoadMany(keys, loader, options) {
    // Traced, each key is one traced getOrLoad call, with its own message;
    // untraced, the addon makes the keys' getOrLoad calls, many to a call.
    return getOrLoadMany(this, keys, loader, options, getOrLoadChannel.hasSubscribers ? undefined : this.#many)
  }

  get(key, options) {
    return settle(() => {
      checkCallOptions(options, GET_OPTIONS)
      const value = this.#fns.get(key, options?.stale)
      if (value !== undefined || !this.#ctx.redis) return value
      return this.#fns.peek(key, options?.stale).then((stored) => this.#read(stored))
    })
  }

  set(key, value, options) {
    return settle(() => {
      checkCallOptions(options, SET_OPTIONS)
      if (value === null || value === undefined) {
        throw herdError(
          TypeError,
          codes.INVALID_VALUE,
          `set() was given ${value}; "not found" is cached by a loader returning null, and delete() removes a key`,
        )
      }
      let stored
      try {
        stored = encode(this.#ctx, value)
      } catch (cause) {
        if (isSerializerError(cause)) throw cause
        throw herdError(
          TypeError,
          codes.INVALID_VALUE,
          `set() was given a value JSON cannot represent (${cause.message}); give plain data`,
          cause,
        )
      }
      if (stored === undefined) {
        throw herdError(TypeError, codes.INVALID_VALUE, `set() was given a ${typeof value}; give plain data`)
      }
      const tooLarge = sizeProblem(stored.body, this.#ctx.maxValueBytes)
      if (tooLarge !== undefined) throw tooLarge
      const { ttl, hardTtl, tags } = options ?? NO_OPTIONS
      const write = this.#fns.set(key, stored.value, ttl, hardTtl, stored.body, tags, stored.format)
      track(this.#ctx, write)
      invalidated(this, 'set', key)
      return write?.then(noop)
    })
  }

  /** What `peek` answered: absent (null), a JSON text, or `[format, bytes]`. */
  #read(stored) {
    if (stored === null) return undefined
    return typeof stored === 'string' ? parse(stored) : decode(this.#ctx, stored[0], stored[1])
  }

  delete(key) {
    return settle(() => {
      const removed = this.#fns.delete(key)
      invalidated(this, 'delete', key)
      return removed
    })
  }

  expire(key) {
    return settle(() => {
      const expired = this.#fns.expire(key)
      invalidated(this, 'expire', key)
      return expired
    })
  }

  /**
   * Invalidates every entry carrying `tags` (a tag, or a list of them), in
   * this process and, with Redis, on every instance: nothing is scanned or
   * deleted; an entry is judged by its tags' invalidation stamps as it is
   * read. With Redis the promise settles once the fleet was told (or the
   * invalidation was kept for auto-recovery).
   */
  deleteByTag(tags) {
    return settle(() => {
      const list = typeof tags === 'string' ? [tags] : tags
      let isArray
      try {
        isArray = Array.isArray(list)
      } catch (cause) {
        throw unreadable(codes.INVALID_OPTION, 'the tags given to deleteByTag()', cause)
      }
      if (!isArray) {
        const got = list === null ? 'null' : typeof list
        throw invalidOption(`deleteByTag() takes a tag (a string) or an array of tags; got ${got}`)
      }
      const sent = this.#fns.deleteByTag(list)
      invalidated(this, 'deleteByTag', undefined, { tags: list })
      return sent
    })
  }

  clear() {
    return settle(() => {
      const cleared = this.#fns.clear()
      invalidated(this, 'clear', undefined)
      return cleared
    })
  }

  /**
   * A view whose keys all start with `name` (README, "Namespaces"), sharing
   * this cache's memory, Redis connection and counters.
   */
  namespace(name, defaults) {
    return openNamespace(this, name, defaults, (names, namespace) =>
      settle(() => {
        const cleared = this.#fns.clearPrefix(names)
        invalidated(this, 'clear', undefined, { namespace })
        return cleared
      }),
    )
  }

  stats() {
    return this.#fns.stats(this.#takeRememberedHits())
  }

  ready() {
    return this.#native.ready().then((problem) => {
      if (problem !== null) throw herdError(Error, problem.code, `herdcache: ${problem.message}`)
    })
  }

  metrics() {
    return this.#fns.metrics(this.#takeRememberedHits())
  }

  close() {
    this.#remembered.clear()
    if (this.#closing === undefined) {
      const reason = herdError(Error, codes.CLOSED, 'the cache was closed while this load ran')
      this.#native.close(reason)
      const pending = [...this.#ctx.active].map((flight) => {
        flight.abort(reason)
        return flight.promise.then(noop, noop)
      })
      // Redis writes already under way are let finish (each is bounded by
      // redisTimeout), so a value computed before close() is not lost.
      pending.push(...[...this.#ctx.writes].map((write) => write.then(noop, noop)))
      // Then what could not reach Redis gets one more attempt; what is still
      // undelivered is reported, and close() resolves all the same.
      const ctx = this.#ctx
      this.#closing = Promise.all(pending)
        .then(() => this.#native.flushRecovery())
        .then((undelivered) => reportUndelivered(ctx, undelivered, this.#native.lastRedisError()))
        .catch(noop)
        .then(() => {
          stop(ctx)
          this.#native.release()
        })
    }
    return this.#closing
  }

  get [kTesting]() {
    const native = this.#native
    return {
      advanceClock: (ms) => native.advanceClock(ms),
      skewClock: (ms) => native.skewClock(ms),
      // null (or no argument) unpins both draws: "real randomness again".
      setRandom: (pins) => native.setRandom(pins?.jitter ?? null, pins?.xfetch ?? null),
    }
  }
}

module.exports = { Cache, kTesting, channels }
