'use strict'

// The JS half of a load: runs the loader on the JS thread and reports its
// result. The addon decides everything else (hit, stale, join or lead; with
// Redis, whether this instance loads at all) and makes, keeps and settles
// the promise every caller of the flight shares. These functions are
// module-level and hold no cache, so the addon can keep strong references
// to them without keeping any Cache alive.
//
// A flight's life here: `lead` (the addon started it) → `run` (now, or with
// Redis once the addon calls `resume(…, load = true)`) → `ctx.fill` or
// `ctx.fail`, each taking the flight id alone. With Redis, a flight another
// instance's value answered ends with `resume(…, load = false)`.

const { enter, leave } = require('./deadlines')
const { herdError, describeKey, unserializable, sizeProblem } = require('./errors')
const { codes, LIMITS } = require('./names')
const { traceRefresh, fleetDecided, redisFailed } = require('./tracing')

/** The code of the process warning for a failed background refresh when there is no `onError`. */
const REFRESH_FAILED_WARNING = 'HERDCACHE_REFRESH_FAILED'

/** The code of the process warning for a Redis that cannot track keys for the L1 (option `tracking`). */
const TRACKING_UNSUPPORTED_WARNING = 'HERDCACHE_TRACKING_UNSUPPORTED'

const { encode, isSerializerError } = require('./values')

const noop = () => {}

/**
 * Marks a loader that never reads its context's `stale` (getOrLoadMany's,
 * whose keys must reach its batch in the turn they are called): it runs
 * without waiting for the held value.
 */
const SEES_NO_HELD_VALUE = Symbol('herdcache.seesNoHeldValue')

/** @typedef {import('./native-contract').Context} Context */

/** The longest TTL a loader may set, in ms (src/core/options.rs `MAX_TTL`, through `LIMITS`). */
const MAX_TTL = LIMITS.maxTtl

/** Checks one TTL a loader sets, by the rules of the call options. */
function checkTtl(name, value) {
  if (typeof value !== 'number') {
    throw herdError(
      TypeError,
      codes.INVALID_OPTION,
      `option \`${name}\` of setTtl() must be a number of milliseconds; got ${value === null ? 'null' : typeof value}`,
    )
  }
  if (!Number.isFinite(value) || value <= 0 || value > MAX_TTL) {
    throw herdError(
      RangeError,
      codes.INVALID_OPTION,
      `option \`${name}\` of setTtl() must be a number of milliseconds > 0 and <= ${MAX_TTL}; got ${value}`,
    )
  }
}

/** The longest validator `setEtag()` takes, in UTF-8 bytes (src/core/etag.rs `MAX_ETAG_BYTES`, through `LIMITS`). */
const MAX_ETAG_BYTES = LIMITS.maxEtagBytes

/** One line of text: what an entry's validator may be (it is a line of its own in Redis). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

/** Checks the validator a loader sets, by the rules of src/core/etag.rs. */
function checkEtag(etag) {
  if (typeof etag !== 'string') {
    throw herdError(
      TypeError,
      codes.INVALID_OPTION,
      `the etag of setEtag() must be a string; got ${etag === null ? 'null' : typeof etag}`,
    )
  }
  const bytes = Buffer.byteLength(etag)
  if (bytes === 0 || bytes > MAX_ETAG_BYTES || CONTROL.test(etag)) {
    throw herdError(
      RangeError,
      codes.INVALID_OPTION,
      `the etag of setEtag() must be 1 to ${MAX_ETAG_BYTES} bytes of text on one line (no control characters); got ${bytes} bytes`,
    )
  }
}

/**
 * What a loader gets: `{ key, signal, stale, setTtl, noStore, setEtag, keep }`,
 * the signal made on first use.
 */
class LoaderContext {
  #flight

  /** @param {Flight} flight */
  constructor(flight) {
    this.key = flight.userKey
    this.#flight = flight
  }

  /** Aborts when the load passes `hardTimeout` or the cache is closed. */
  get signal() {
    return this.#flight.signal()
  }

  /**
   * Sets this entry's soft TTL (and hard TTL; without it, the call's
   * hardTtl/ttl ratio is kept), in ms, from what was loaded (a token's own
   * expiry, say). The call options' rules: a TypeError or RangeError with
   * code ERR_HERDCACHE_INVALID_OPTION.
   *
   * @param {number} ttl
   * @param {number} [hardTtl]
   */
  setTtl(ttl, hardTtl) {
    checkTtl('ttl', ttl)
    if (hardTtl !== undefined) {
      checkTtl('hardTtl', hardTtl)
      if (hardTtl < ttl) {
        throw herdError(
          RangeError,
          codes.INVALID_OPTION,
          `option \`hardTtl\` (${hardTtl} ms) of setTtl() must be >= \`ttl\` (${ttl} ms)`,
        )
      }
    }
    this.#flight.ttl = ttl
    this.#flight.hardTtl = hardTtl
  }

  /** Answers the callers of this load with its result but stores nothing (in memory nor Redis). */
  noStore() {
    this.#flight.noStore = true
  }

  /**
   * The value this process held for the key when the loader started, fresh
   * or stale (a refresh, `forceFresh`, or a caller that takes no stale
   * value): `{ value, age, etag }`, `age` in ms since its load began, `etag`
   * what its loader gave `setEtag` (or undefined). Undefined on a cold load.
   */
  get stale() {
    const held = this.#flight.held
    if (held === undefined) return undefined
    return { value: held.value, age: held.age, etag: held.etag }
  }

  /**
   * Stores `etag` (an HTTP `ETag` or `Last-Modified`: 1 to 1024 bytes on
   * one line) with the value, in memory and in Redis: a later refresh, on
   * any instance, finds it in `stale.etag`. A TypeError or RangeError
   * with code ERR_HERDCACHE_INVALID_OPTION otherwise.
   *
   * @param {string} etag
   */
  setEtag(etag) {
    checkEtag(etag)
    this.#flight.etag = etag
  }

  /**
   * The origin said `stale` has not changed (an HTTP 304): the load ends
   * with that value, fresh for a new TTL (the call's, or `setTtl`'s), its
   * validator kept; the loader's return value is ignored. In Redis its
   * deadlines are rewritten in place, its bytes not sent again, and the
   * other instances are told. An Error with code
   * ERR_HERDCACHE_INVALID_OPTION when there is no `stale`.
   */
  keep() {
    const flight = this.#flight
    if (flight.held === undefined) {
      throw herdError(
        Error,
        codes.INVALID_OPTION,
        `keep() was called by the loader of key ${describeKey(flight.userKey)}, which has no value to keep (its context’s stale is undefined: nothing was held)`,
      )
    }
    flight.kept = true
  }
}

/** One load in flight, kept in `ctx.active` (and with Redis, while the fleet decides, in `ctx.waiting`). */
class Flight {
  /**
   * @param {Context} ctx
   * @param {number} id
   * @param {unknown} userKey the key as the caller passed it
   * @param {Function} loader
   * @param {boolean} background
   * @param {Promise<unknown>} promise the promise the addon settles
   * @param {number} since ms the flight was in flight before its leader was made
   */
  constructor(ctx, id, userKey, loader, background, promise, since) {
    this.ctx = ctx
    this.id = id
    this.userKey = userKey
    this.loader = loader
    this.background = background
    this.promise = promise
    this.started = performance.now() - since
    this.deadline = this.started + ctx.hardTimeout
    this.settled = false
    /** With Redis: the fleet has not said yet whether our loader runs. */
    this.waiting = false
    /** With `maxConcurrentLoads` (lib/bulkhead.js): `performance.now()` it queued at, while it waits for a slot. */
    this.queued = undefined
    /** It holds a slot of the bulkhead. */
    this.slot = false
    /** With `fleetMaxConcurrentLoads`: it holds a slot of the fleet's. */
    this.fleetSlot = false
    /** It may run without a fleet slot (Redis could not be asked for one when it queued). */
    this.uncapped = false
    /** The bulkhead skipped this background refresh (its queue was full): nobody to tell. */
    this.skipped = false
    this.loaderStarted = undefined
    this.controller = undefined
    this.abortReason = undefined
    /** What the loader set for its entry (setTtl, noStore, setEtag, keep). */
    this.ttl = undefined
    this.hardTtl = undefined
    this.noStore = false
    this.etag = undefined
    this.kept = false
    /** What this process held for the key as the loader started (its context's `stale`), with its stamp. */
    this.held = undefined
    /** The loader waits for `held` (a thenable value is resolved first, as a promise of it would be). */
    this.fetchingHeld = false
  }

  // The signal is made on first use: most loaders never read it, and an
  // AbortController per load was the leader's largest fixed cost.
  signal() {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason)
    }
    return this.controller.signal
  }

  abortSignal(reason) {
    if (this.abortReason !== undefined) return
    this.abortReason = reason
    this.controller?.abort(reason)
  }

  /** close(): a running loader's signal aborts; a load whose loader has not started is given up. */
  abort(reason) {
    if (this.waiting || this.queued !== undefined || this.fetchingHeld) this.failWith(reason, false)
    else this.abortSignal(reason)
  }

  /** Gives the load up with ERR_HERDCACHE_TIMEOUT (the deadline passed). */
  expire() {
    // Still waiting for the fleet: another instance held the key's lock all
    // that time (its loader hangs, or its process is paused) and this
    // loader never ran. The deadline is the call's, whoever loads.
    const what = this.waiting
      ? `another instance held the fleet lock for key ${describeKey(this.userKey)} and its value did not arrive within hardTimeout (${this.ctx.hardTimeout} ms, from the call); this call's loader never ran`
      : `the loader for key ${describeKey(this.userKey)} did not settle within hardTimeout (${this.ctx.hardTimeout} ms); its signal was aborted`
    this.failWith(herdError(Error, codes.TIMEOUT, what), true)
  }

  // A loader that settles past hardTimeout is given up (nothing is stored,
  // its callers get ERR_HERDCACHE_TIMEOUT) as if the timer had fired on
  // time: under event-loop lag the timer runs late, and the outcome must not
  // depend on which callback the loop happens to run first.
  late() {
    return performance.now() >= this.deadline
  }

  /**
   * The loader may run: now, or with `maxConcurrentLoads` once the bulkhead
   * gives it a slot (lib/bulkhead.js calls `call` then).
   *
   * @param {number} [now] `performance.now()`, when the caller just read it
   */
  run(now = performance.now()) {
    this.waiting = false
    // Redis steps may have used up the deadline (the timer may be late).
    if (now >= this.deadline) return this.expire()
    const { bulkhead } = this.ctx
    if (bulkhead === undefined || bulkhead.acquire(this, now)) this.call(now)
  }

  /**
   * Calls the loader (its slot, if there is a bulkhead, taken), once the
   * value this process holds for the key, if any, is at hand for its
   * context's `stale` (an object or a string is held as its settled
   * promise).
   *
   * @param {number} now
   */
  call(now) {
    const held = this.loader[SEES_NO_HELD_VALUE] ? undefined : this.ctx.heldValue(this.id)
    if (held === undefined) return this.invoke(now)
    const [heldValue, age, etag, stamp, negative] = held
    this.fetchingHeld = true
    Promise.resolve(heldValue).then((value) => {
      this.fetchingHeld = false
      this.held = { value, age, etag, stamp, negative }
      // Given up meanwhile (hardTimeout, close()): the loader never runs.
      if (!this.settled) return this.invoke(performance.now())
      if (this.slot) this.ctx.bulkhead.release(this)
    })
  }

  /** Runs the loader and reports how it settled. @param {number} now */
  invoke(now) {
    this.loaderStarted = now
    let result
    try {
      result = this.loader(new LoaderContext(this))
    } catch (error) {
      result = Promise.reject(error)
    }
    Promise.resolve(result).then(
      (value) => {
        try {
          this.succeed(value)
        } catch (error) {
          this.failWith(error, false)
        }
        // The slot is freed when the loader settles, not when its load is
        // given up (hardTimeout, close()): a loader that ignores its aborted
        // signal still loads the database, and the cap is what protects it.
        if (this.slot) this.ctx.bulkhead.release(this)
      },
      (error) => {
        if (this.late()) this.expire()
        else this.failWith(error, false)
        if (this.slot) this.ctx.bulkhead.release(this)
      },
    )
  }

  /** The bulkhead had no place for this load: its callers reject with `error`, a refresh is skipped. */
  refuse(error) {
    this.skipped = this.background
    this.failWith(error, false)
  }

  succeed(value) {
    if (this.settled) return
    const now = performance.now()
    if (now >= this.deadline) return this.expire()
    const computeMs = now - this.loaderStarted
    const { held } = this
    // The loader called `keep()`: the value held is the result, its validator kept.
    if (this.kept) return this.fill(held.value, held.negative, computeMs, undefined, undefined, held.etag, held.stamp)
    if (value === null || value === undefined) return this.fill(value, true, computeMs, 'null', undefined, this.etag)
    let stored
    try {
      stored = encode(this.ctx, value)
    } catch (cause) {
      return this.failWith(isSerializerError(cause) ? cause : unserializable(this.userKey, cause), false)
    }
    if (stored === undefined) return this.failWith(unserializable(this.userKey), false)
    const tooLarge = sizeProblem(stored.body, this.ctx.maxValueBytes)
    if (tooLarge !== undefined) return this.failWith(tooLarge, false)
    this.fill(stored.value, false, computeMs, stored.body, stored.format, this.etag)
  }

  /**
   * Reports the value; the addon answers the callers (with Redis, once it
   * is written there). `body` is its JSON text, or with `format` its bytes;
   * `etag` its validator; `kept` the stamp of the held value it is (the loader called `keep()`).
   */
  fill(result, negative, computeMs, body, format, etag, kept) {
    // A key whose refreshes failed loads again: a later failure warns anew.
    if (this.ctx.failing.size > 0) this.ctx.failing.delete(describeKey(this.userKey))
    // Reported first: a fill that throws (TTLs the addon refuses) leaves
    // the flight unsettled, for `failWith`.
    const write = this.ctx.fill(
      this.id,
      result,
      negative,
      computeMs,
      body,
      format,
      this.ttl,
      this.hardTtl,
      this.noStore,
      etag,
      kept,
    )
    this.settled = true
    leave(this.ctx, this)
    track(this.ctx, write)
  }

  failWith(error, timedOut) {
    if (this.settled) return
    this.settled = true
    const { ctx } = this
    if (this.waiting) {
      this.waiting = false
      ctx.waiting.delete(this.id)
    }
    if (this.queued !== undefined) ctx.bulkhead.leave(this)
    leave(ctx, this)
    if (timedOut) this.abortSignal(error)
    // A background flight's rejection may have no other listener.
    this.promise.then(undefined, noop)
    ctx.fail(this.id, error, timedOut, this.loaderStarted !== undefined)
    // A skipped refresh is counted (refreshesSkipped), not reported: under a
    // cold storm it would be one report per stale read.
    if (this.background && !this.skipped) report(ctx, error, this.userKey)
  }
}

/**
 * The addon started flight `id`: runs its loader now, or (`waiting`, with
 * Redis) once the addon calls `resume`. Called by the addon only; with
 * Redis, once the flight's first read did not answer it (`since` ms later).
 *
 * @param {Context} ctx the cache's context (raw functions, timeouts, hooks)
 * @param {number} id the flight id
 * @param {unknown} userKey the key as the caller passed it
 * @param {Function} loader
 * @param {boolean} background a background refresh (stale or early)
 * @param {Promise<unknown>} promise the promise every caller shares (the addon settles it)
 * @param {boolean} waiting the fleet decides first
 * @param {number} since ms the flight was in flight already
 */
function lead(ctx, id, userKey, loader, background, promise, waiting, since) {
  const flight = new Flight(ctx, id, userKey, loader, background, promise, since)
  if (!background || !traceRefresh(flight, begin, waiting, since)) begin(flight, waiting, since)
  if (background && typeof ctx.waitUntil === 'function') {
    try {
      ctx.waitUntil(promise.then(noop, noop))
    } catch (error) {
      report(ctx, error, userKey)
    }
  }
}

/**
 * A led flight starts: its loader runs now, or (`waiting`) once the fleet says so.
 *
 * @param {Flight} flight
 * @param {boolean} waiting
 * @param {number} since
 */
function begin(flight, waiting, since) {
  const { ctx } = flight
  enter(ctx, flight)
  if (waiting) {
    flight.waiting = true
    ctx.waiting.set(flight.id, flight)
  } else {
    flight.run(flight.started + since) // the now its constructor read
  }
}

/**
 * With Redis, the fleet decided for a waiting flight: run its loader
 * (`load`), or it was answered by another instance's value (the addon
 * settled its promise, and starts the refresh a stale answer calls for).
 * Called by the addon only.
 *
 * @param {Context} ctx
 * @param {number} id
 * @param {boolean} load
 */
function resume(ctx, id, load) {
  const flight = ctx.waiting.get(id)
  if (flight === undefined) return
  ctx.waiting.delete(id)
  flight.waiting = false
  fleetDecided(flight, load)
  if (load) return flight.run()
  flight.settled = true
  leave(ctx, flight)
  // A background refresh the fleet's back-off stopped is rejected (its soft
  // waiters take the stale value); nobody else may be listening.
  if (flight.background) flight.promise.then(undefined, noop)
}

/**
 * With Redis, the addon queued first reads: they go out together in a
 * microtask, so the flights started in this tick share one round trip.
 *
 * @param {Context} ctx
 */
function scheduleReads(ctx) {
  queueMicrotask(ctx.flushReads)
}

/**
 * Redis writes in flight, so close() can wait for them.
 *
 * @param {Context} ctx
 * @param {Promise<unknown> | undefined} write
 */
function track(ctx, write) {
  if (write === undefined) return
  ctx.writes.add(write)
  const done = () => ctx.writes.delete(write)
  write.then(done, done)
}

/** The no-`onError` warning of `report`: once per key until it loads again. */
function warnRefreshFailed(ctx, error, key) {
  const name = describeKey(key)
  if (ctx.failing.has(name)) return
  if (ctx.failing.size >= MAX_FAILING_KEYS) ctx.failing.clear()
  ctx.failing.add(name)
  const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  process.emitWarning(
    `herdcache: the background refresh of key ${name} failed (${reason}); its stale value is served until a ` +
      'refresh succeeds (this warning is shown once per key until then; pass onError to see every failure)',
    { type: 'Warning', code: REFRESH_FAILED_WARNING },
  )
}

/**
 * What the addon found about Redis that no retry fixes (an ACL refusing the
 * events channel, …): an error with its stable code, to `onError`, or
 * without one a process warning, once per code. The addon reports each
 * problem once. A notice (code `''`: a Redis that cannot track keys, no
 * failure) is a process warning, never an error. Called by the addon only.
 *
 * @param {Context} ctx
 * @param {string} code
 * @param {string} message
 */
function reportProblem(ctx, code, message) {
  if (code === '') {
    process.emitWarning(`herdcache: ${message}`, { type: 'Warning', code: TRACKING_UNSUPPORTED_WARNING })
    return
  }
  const error = herdError(Error, code, `herdcache: ${message}`)
  redisFailed(ctx.cache.deref(), error)
  if (typeof ctx.onError === 'function') return report(ctx, error, undefined)
  if (ctx.warned.has(code)) return
  ctx.warned.add(code)
  process.emitWarning(error)
}

/** Past this many keys whose refreshes fail, the warned-of list starts afresh (a warning may repeat). */
const MAX_FAILING_KEYS = 10_000

/**
 * Background failures go to `onError`; nobody awaits them. Without it, a
 * failed refresh is one process warning per key per failure streak (until a
 * load of the key succeeds), so a backend down for an hour behind stale
 * values is not silent.
 */
function report(ctx, error, key) {
  if (typeof ctx.onError !== 'function') {
    // A refresh that close() gave up did not fail: the application ended it.
    if (key !== undefined && error?.code !== codes.CLOSED) warnRefreshFailed(ctx, error, key)
    return
  }
  try {
    ctx.onError(error, { key, background: true })
  } catch {
    // A throwing error hook must not turn into an unhandled rejection.
  }
}

module.exports = { lead, resume, scheduleReads, reportProblem, track, SEES_NO_HELD_VALUE }
