'use strict'

// The JS half of a load. The addon decides (hit, stale, join or lead) and
// keeps the flight table; when a caller must lead, it calls `lead` below,
// which runs the loader on the JS thread and reports back through the
// context's raw functions (`fill`, `fail`, `endFlight`). These functions are
// module-level and hold no cache, so the addon can keep strong references to
// them without keeping any Cache alive.

const { herdError, describeKey } = require('./errors')
const { codes } = require('./names')

const { parse, stringify } = JSON
const noop = () => {}

/**
 * Runs one load and returns the promise every caller of the flight shares.
 * It settles after the flight has left the table (`endFlight`), so the
 * callers it wakes see the key free, and it never rejects unhandled.
 *
 * @param {import('./native-contract').Context} ctx the cache's context (raw functions, timeouts, hooks)
 * @param {string} key the encoded key
 * @param {unknown} userKey the key as the caller passed it
 * @param {Function} loader
 * @param {number} id the flight id
 * @param {boolean} background a background refresh (stale or early)
 */
function lead(ctx, key, userKey, loader, id, background) {
  let controller
  let abortReason
  let settled = false
  let resolveFlight
  let rejectFlight
  const promise = new Promise((resolve, reject) => {
    resolveFlight = resolve
    rejectFlight = reject
  })
  promise.then(undefined, noop)

  // The signal is made on first use: most loaders never read it, and an
  // AbortController per load is the leader's largest fixed cost.
  const loaderContext = {
    key: userKey,
    get signal() {
      if (controller === undefined) {
        controller = new AbortController()
        if (abortReason !== undefined) controller.abort(abortReason)
      }
      return controller.signal
    },
  }
  const abort = (reason) => {
    if (abortReason !== undefined) return
    abortReason = reason
    controller?.abort(reason)
  }
  const started = performance.now()
  const flight = {
    promise,
    abort,
    deadline: started + ctx.hardTimeout,
    expire: () => failWith(timeoutError(ctx, userKey), true),
  }

  // A loader that settles past hardTimeout is given up (nothing is stored,
  // its callers get ERR_HERDCACHE_TIMEOUT) as if the timer had fired on
  // time: under event-loop lag the timer runs late, and the outcome must not
  // depend on which callback the loop happens to run first.
  const late = () => performance.now() >= flight.deadline

  // With Redis: the lock token this flight holds, if any.
  let token
  let loaderStarted
  const finish = () => {
    settled = true
    leave(ctx, flight)
    ctx.endFlight(key, id)
  }
  const failWith = (error, timedOut) => {
    if (settled) return
    ctx.fail(key, id, background, timedOut, token, loaderStarted !== undefined)
    if (timedOut) abort(error)
    finish()
    if (background) report(ctx, error, userKey)
    rejectFlight(error)
  }
  const succeed = (value) => {
    if (settled) return
    if (late()) return flight.expire()
    const computeMs = performance.now() - loaderStarted
    let result = value
    let write
    if (value === null || value === undefined) {
      write = ctx.fill(key, id, value, true, computeMs, 'null', token)
    } else {
      let json
      try {
        json = stringify(value)
      } catch (cause) {
        return failWith(unserializable(userKey, cause), false)
      }
      if (json === undefined) return failWith(unserializable(userKey), false)
      const tooLarge = sizeProblem(json, ctx.maxValueBytes)
      if (tooLarge !== undefined) return failWith(tooLarge, false)
      result = parse(json)
      write = ctx.fill(key, id, result, false, computeMs, json, token)
    }
    if (typeof write !== 'object') {
      finish()
      return resolveFlight(result)
    }
    // With Redis, the callers are answered once the value is written there
    // (bounded by redisTimeout): when getOrLoad returns, every instance can
    // read it. Memory already answers new callers meanwhile.
    settled = true
    track(ctx, write, key)
    const answer = () => {
      finish()
      resolveFlight(result)
    }
    write.then(answer, answer)
  }
  const runLoader = () => {
    // Redis steps may have used up the deadline (the timer may be late).
    if (late()) return flight.expire()
    loaderStarted = performance.now()
    let result
    try {
      result = loader(loaderContext)
    } catch (error) {
      result = Promise.reject(error)
    }
    Promise.resolve(result).then(
      (value) => {
        try {
          succeed(value)
        } catch (error) {
          failWith(error, false)
        }
      },
      (error) => (late() ? flight.expire() : failWith(error, false)),
    )
  }
  // With Redis, the fleet decides first: another instance's value, or the
  // lock (then our loader runs), or a wait for the winner's fill notice.
  const onAcquired = (acquired) => {
    if (settled) {
      // Given up meanwhile (hardTimeout, close): let go of a lock we won.
      if (acquired?.token !== undefined) ctx.releaseLock(key, id, acquired.token)
      return
    }
    if (acquired === undefined || acquired.kind === 'load') {
      token = acquired?.token
      return runLoader()
    }
    if (acquired.kind === 'stale' && !ctx.acceptsStale(key, id)) {
      // A caller refusing stale values joined while we read: ask again.
      return ctx.acquire(key, id, true).then(onAcquired, () => onAcquired(undefined))
    }
    let value
    try {
      value = acquired.negative ? null : parse(acquired.json)
    } catch {
      return runLoader()
    }
    const { freshUntil, hardUntil, computeMs, stamp, negative } = acquired
    ctx.adopt(key, id, value, freshUntil, hardUntil, computeMs, stamp, negative)
    answeredBy.set(promise, negative ? 'negative' : acquired.kind === 'stale' ? 'stale' : 'hit')
    finish()
    resolveFlight(value)
    if (acquired.kind === 'stale') ctx.startRefresh(userKey, loader)
  }

  ctx.attachFlight(key, id, promise)
  enter(ctx, flight)
  if (ctx.redis) readFirst(ctx, key, id).then(onAcquired, () => onAcquired(undefined))
  else runLoader()

  if (background && typeof ctx.waitUntil === 'function') {
    try {
      ctx.waitUntil(promise.then(noop, noop))
    } catch (error) {
      report(ctx, error, userKey)
    }
  }
  return promise
}

/**
 * The first step of a Redis flight. Flights that start in the same tick are
 * read together, in one pipelined round trip and one completion; those the
 * read does not answer go on to the lock, one by one.
 */
function readFirst(ctx, key, id) {
  let batch = ctx.readBatch
  if (batch === undefined) {
    batch = ctx.readBatch = { keys: [], ids: [], answers: [] }
    queueMicrotask(() => flushReads(ctx, batch))
  }
  batch.keys.push(key)
  batch.ids.push(id)
  return new Promise((resolve) => batch.answers.push(resolve))
}

function flushReads(ctx, batch) {
  ctx.readBatch = undefined
  const { keys, ids, answers } = batch
  const proceed = (i) => ctx.acquire(keys[i], ids[i], false).then(answers[i], () => answers[i](undefined))
  let read
  try {
    read = ctx.readMany(keys, ids)
  } catch {
    // Closed meanwhile: each flight loads without Redis.
    return answers.forEach((answer) => answer(undefined))
  }
  read.then(
    (results) => results.forEach((result, i) => (result === null ? proceed(i) : answers[i](result))),
    () => answers.forEach((answer) => answer(undefined)),
  )
}

/**
 * How a flight was answered when it was another instance's value from
 * Redis ('hit', 'stale', 'negative'): its callers' `status.outcome`.
 */
const answeredBy = new WeakMap()

/**
 * Redis writes in flight, so close() can wait for them. A write that lost
 * to a newer value (0) makes this instance forget its own copy.
 */
function track(ctx, write, key) {
  if (write === undefined || typeof write === 'boolean') return
  ctx.writes.add(write)
  write.then(
    (outcome) => {
      ctx.writes.delete(write)
      if (outcome === 0 && key !== undefined) ctx.forget(key)
    },
    () => ctx.writes.delete(write),
  )
}

// hardTimeout: one timer per cache, not one per load. Every load of a cache
// has the same timeout, so `ctx.active` (a Set: insertion order) is also
// deadline order, and the timer only ever waits for its first member. The
// timer is cleared as soon as no load is in flight: an idle cache holds no
// handle, and no timer keeps a dropped cache's memory reachable.

function enter(ctx, flight) {
  ctx.active.add(flight)
  if (ctx.timer === undefined) arm(ctx, flight.deadline)
}

function leave(ctx, flight) {
  ctx.active.delete(flight)
  if (ctx.active.size === 0 && ctx.timer !== undefined) {
    clearTimeout(ctx.timer)
    ctx.timer = undefined
  }
}

function arm(ctx, deadline) {
  ctx.timer = setTimeout(expireDue, Math.max(0, deadline - performance.now()), ctx)
}

function expireDue(ctx) {
  ctx.timer = undefined
  const now = performance.now()
  for (const flight of ctx.active) {
    if (flight.deadline > now) {
      if (ctx.timer === undefined) arm(ctx, flight.deadline)
      return
    }
    flight.expire()
  }
}

function timeoutError(ctx, userKey) {
  return herdError(
    Error,
    codes.TIMEOUT,
    `the loader for key ${describeKey(userKey)} did not settle within hardTimeout (${ctx.hardTimeout} ms); its signal was aborted`,
  )
}

function unserializable(userKey, cause) {
  return herdError(
    TypeError,
    codes.UNSERIALIZABLE,
    `the loader for key ${describeKey(userKey)} returned a value JSON cannot represent` +
      (cause ? ` (${cause.message})` : ' (a function, a symbol or undefined inside)') +
      '; return plain data: objects, arrays, strings, numbers, booleans, null',
    cause,
  )
}

/**
 * The error for a value whose JSON text is longer than `maxValueBytes`
 * UTF-8 bytes, or undefined. A UTF-16 unit is 1 to 3 UTF-8 bytes, so the
 * exact count is only taken when the length alone does not decide.
 */
function sizeProblem(json, maxValueBytes) {
  if (json.length * 3 <= maxValueBytes) return undefined
  const bytes = json.length > maxValueBytes ? json.length : Buffer.byteLength(json)
  if (bytes <= maxValueBytes) return undefined
  return herdError(
    RangeError,
    codes.VALUE_TOO_LARGE,
    `the value is ${json.length > maxValueBytes ? 'over ' : ''}${bytes} bytes of JSON, more than maxValueBytes (${maxValueBytes}); nothing was stored. Cache something smaller, or raise maxValueBytes`,
  )
}

/** Background failures go to `onError`; nobody awaits them. */
function report(ctx, error, key) {
  if (typeof ctx.onError !== 'function') return
  try {
    ctx.onError(error, { key, background: true })
  } catch {
    // A throwing error hook must not turn into an unhandled rejection.
  }
}

/**
 * One caller's view of a shared promise: it rejects with the signal's reason
 * when the signal aborts; the shared load goes on for everybody else.
 */
function detach(promise, signal) {
  if (signal.aborted) {
    // Nobody else may be listening to this caller's view of the flight.
    promise.then(undefined, noop)
    return Promise.reject(signal.reason)
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}

/**
 * A stale read with `softTimeout`: answered by the refresh if it lands in
 * time, else (or if it fails) by the stale value.
 */
function softWait(ctx, flight, stale) {
  return new Promise((resolve) => {
    let done = false
    const answer = (servedStale, value) => {
      if (done) return
      done = true
      clearTimeout(timer)
      ctx.recordSoftWait(servedStale)
      resolve(servedStale ? stale : value)
    }
    const timer = setTimeout(answer, ctx.softTimeout, true)
    flight.then(
      (value) => answer(false, value),
      () => answer(true),
    )
  })
}

module.exports = { lead, detach, softWait, track, answeredBy, sizeProblem }
