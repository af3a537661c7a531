'use strict'

// Batch loads: `cache.getOrLoadMany(keys, loader, options?)` (README, "Many
// keys in one load: getOrLoadMany"). Built on getOrLoad, one call per key,
// so each key is looked up, coalesced, locked (with Redis), stored and
// refreshed exactly as getOrLoad does it; untraced, the addon makes those
// calls, up to NATIVE_KEYS in one crossing (`callNative`), so a warm call
// makes no JavaScript call per key, and no batch. The loader each getOrLoad
// is given loads nothing itself: getOrLoad calls it only when this process
// really loads the key (an L1 miss, then with Redis a Redis miss and the
// fleet lock won), and it enrols the key in this call's batch instead.
// Hits, joins, Redis hits and keys another instance loads never reach the
// batch.
//
// When a batch goes to the loader: the keys whose loaders getOrLoad called
// while the call made its getOrLoad calls (without Redis: every cold key)
// go at once, when the last call was made. A key enrolled later (with Redis,
// once the fleet lock was won; with `maxConcurrentLoads`, once a slot freed)
// goes when every key of the call is decided (answered, or enrolled), or
// BATCH_WINDOW_MS after the last key enrolled (BATCH_MAX_WAIT_MS after the
// first at most), so a key that waits for another instance's fill delays
// the others by that much at most. A background
// refresh enrolling after the call was answered goes at the next
// `setImmediate`, with the refreshes that enrolled in the same turn.

const { herdError, describeKey, unreadable, JS_CODES } = require('./errors')
const { codes, CALL_OPTIONS } = require('./names')
const { detach, isAbortSignal, SIGNAL_PROBLEM } = require('./callers')

/** Keys per loader call unless the call's `maxBatchSize` says otherwise. */
const DEFAULT_MAX_BATCH_SIZE = 100

/** getOrLoad's call options (but `status`, which belongs to one key) and `maxBatchSize`. */
const MANY_OPTIONS = new Set([...CALL_OPTIONS.filter((name) => name !== 'status'), 'maxBatchSize'])

/**
 * One text per key, for finding a key among others: a string key is
 * itself, an array key its JSON (prefixed, so a string that reads as JSON
 * stays apart).
 */
function keyId(key) {
  return typeof key === 'string' ? key : `\u0000${JSON.stringify(key)}`
}

function typeName(value) {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
}

/** What makes `key` no key (the rules of src/core/key.rs, but its length), or undefined. */
function keyProblem(key) {
  if (typeof key === 'string') {
    if (key === '') return 'an empty string'
    return key.isWellFormed() ? undefined : 'a string holding a lone surrogate (str.toWellFormed() mends it)'
  }
  if (!Array.isArray(key)) return typeName(key)
  if (key.length === 0) return 'an empty array'
  for (const part of key) {
    if (typeof part === 'string') {
      if (!part.isWellFormed()) return 'an array holding a lone surrogate'
    } else if (typeof part !== 'number' || !Number.isFinite(part)) {
      return `an array holding ${typeof part === 'number' ? part : typeName(part)}`
    }
  }
  return undefined
}

function invalidOption(message) {
  return herdError(TypeError, codes.INVALID_OPTION, message)
}

const NO_OPTIONS = Object.freeze({ keyOptions: undefined, maxBatchSize: DEFAULT_MAX_BATCH_SIZE })

/**
 * The per-key options and the batch size of a call's options, or an error.
 *
 * @returns {{ keyOptions: object | undefined, maxBatchSize: number } | Error}
 */
function readOptions(options) {
  if (options === undefined) return NO_OPTIONS
  if (typeof options !== 'object' || options === null) {
    return invalidOption(`the call options must be an object; got ${typeName(options)}`)
  }
  let keyOptions
  for (const name in options) {
    if (!MANY_OPTIONS.has(name)) {
      const why = name === 'status' ? ' (status belongs to one getOrLoad call)' : ''
      return invalidOption(`unknown getOrLoadMany() option \`${name}\`${why}; known: ${[...MANY_OPTIONS].join(', ')}`)
    }
    if (name !== 'maxBatchSize') {
      keyOptions ??= {}
      keyOptions[name] = options[name]
    }
  }
  const { maxBatchSize = DEFAULT_MAX_BATCH_SIZE } = options
  if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 1) {
    return herdError(
      typeof maxBatchSize === 'number' ? RangeError : TypeError,
      codes.INVALID_OPTION,
      `option \`maxBatchSize\` must be an integer >= 1; got ${typeof maxBatchSize === 'number' ? maxBatchSize : typeName(maxBatchSize)}`,
    )
  }
  return { keyOptions, maxBatchSize }
}

function batchResultError(message) {
  return herdError(TypeError, JS_CODES.BATCH_RESULT, message)
}

/**
 * The loader's result as an array aligned with `keys`: a Map (looked up by
 * each key, and for an array key by its parts too, so `new Map([[['user', 1],
 * row]])` answers `['user', 1]`; a key it lacks is `null`, "not found"), or an array of `keys.length` values. Throws
 * `ERR_HERDCACHE_BATCH_RESULT` for anything else.
 *
 * @param {unknown[]} keys the batch's keys, as the loader was given them
 * @param {unknown} result what the loader resolved to
 */
function alignResults(keys, result) {
  if (Array.isArray(result)) {
    if (result.length === keys.length) return result
    throw batchResultError(
      `the getOrLoadMany() loader returned an array of ${result.length} values for ${keys.length} keys; return one value per missing key, in order (null for "not found"), or a Map`,
    )
  }
  if (!(result instanceof Map)) {
    throw batchResultError(
      `the getOrLoadMany() loader returned ${typeName(result)}; return a Map from key to value, or an array aligned with the missing keys`,
    )
  }
  let byId
  return keys.map((key) => {
    if (result.has(key)) return result.get(key)
    if (typeof key === 'string') return null
    if (byId === undefined) {
      byId = new Map()
      for (const [k, v] of result) if (typeof k !== 'string') byId.set(keyId(k), v)
    }
    const id = keyId(key)
    return byId.has(id) ? byId.get(id) : null
  })
}

/** What a batch loader gets: `{ signal, setTtl(key, ttl, hardTtl?), noStore(key) }`. */
class BatchContext {
  #entries
  #byId
  #controller

  /** @param {Array<{ key: unknown, context: import('./leader').LoaderContext }>} entries */
  constructor(entries) {
    this.#entries = entries
  }

  /**
   * Aborts once every key of the batch was given up: each key's load
   * passed `hardTimeout`, or the cache was closed. (One caller's `signal`
   * never aborts it: the loads go on for the others.)
   */
  get signal() {
    if (this.#controller === undefined) {
      const controller = new AbortController()
      this.#controller = controller
      let live = this.#entries.length
      let reason
      const onAbort = (event) => {
        reason = event?.target?.reason ?? reason
        if (--live === 0) controller.abort(reason)
      }
      for (const { context } of this.#entries) {
        const signal = context.signal
        if (signal.aborted) {
          reason = signal.reason
          onAbort()
        } else signal.addEventListener('abort', onAbort, { once: true })
      }
    }
    return this.#controller.signal
  }

  /** getOrLoad's `setTtl(ttl, hardTtl?)` for one key of the batch. */
  setTtl(key, ttl, hardTtl) {
    this.#entry(key, 'setTtl').context.setTtl(ttl, hardTtl)
  }

  /** getOrLoad's `noStore()` for one key of the batch: its callers get the value, nothing is stored. */
  noStore(key) {
    this.#entry(key, 'noStore').context.noStore()
  }

  #entry(key, method) {
    if (this.#byId === undefined) this.#byId = new Map(this.#entries.map((entry) => [keyId(entry.key), entry]))
    const entry = this.#byId.get(keyId(key))
    if (entry === undefined) {
      throw herdError(
        TypeError,
        codes.INVALID_KEY,
        `ctx.${method}() was given key ${describeKey(key)}, which is not one of the keys this loader call loads`,
      )
    }
    return entry
  }
}

/**
 * How long, in ms, keys enrolled after the call's getOrLoad calls were made
 * wait for the call's other keys to be decided (answered, or enrolled)
 * before they go to the loader without them, counted from the last key
 * that enrolled: with Redis the locks asked in one turn are answered in
 * one callback (the addon's `engine::together`), but a key first read in a
 * later turn, or one whose ask took past the addon's 20 ms, answers on its
 * own; a key whose lock another instance holds stays undecided until its
 * fill. BATCH_MAX_WAIT_MS bounds the wait from the
 * first. When the window ends, the batch goes at the next `setImmediate`,
 * after the answers the loop already has: a host that paused the process
 * finds them all in, not only the timer.
 */
const BATCH_WINDOW_MS = 5
const BATCH_MAX_WAIT_MS = 50

const NOWHERE = Object.freeze([])

/**
 * The keys of one getOrLoadMany call that getOrLoad asked it to load, gathered into loader calls. Made at the
 * first such key: a warm call makes none.
 */
class Batch {
  /**
   * @param {Function} loader
   * @param {number} maxBatchSize
   * @param {unknown[]} keys the call's keys, as given to getOrLoad
   * @param {Array<Promise<unknown>> | undefined} promises the call's getOrLoad promises, by index (undefined
   *   while it makes its getOrLoad calls)
   * @param {boolean} calling whether the call is still making its getOrLoad calls
   */
  constructor(loader, maxBatchSize, keys, promises, calling) {
    this.loader = loader
    this.maxBatchSize = maxBatchSize
    this.keys = keys
    /** @type {Array<{ key: unknown, context: object, resolve: Function, reject: Function }>} */
    this.pending = []
    /** The call is making its getOrLoad calls: what enrols now goes when they are made. */
    this.calling = calling
    /** Keys (by index) neither answered nor enrolled: while there are some, a flush may wait for them. */
    this.open = keys.length
    this.decided = new Uint8Array(keys.length)
    /** Index lists by keyId, made at the first enrolment. */
    this.indices = undefined
    /** The call's getOrLoad promises, by index. */
    this.promises = promises
    /** Whether each key's settling is watched (from the first enrolment after the calls were made). */
    this.watching = false
    this.timer = undefined
    this.immediate = false
    /** `performance.now()` the first key enrolled after the calls were made, for BATCH_MAX_WAIT_MS. */
    this.firstEnrolled = undefined
    this.flushLater = () => this.flush()
    this.windowEnded = () => {
      this.timer = setImmediate(this.flushLater)
      this.immediate = true
    }
  }

  /** Key `i` was answered or enrolled; true if that is news. */
  decide(i) {
    if (this.decided[i] === 1) return false
    this.decided[i] = 1
    this.open--
    return true
  }

  /**
   * From the first key enrolled after the calls were made: a key answered
   * from then on may be the last one the enrolled keys wait for. (Before,
   * no key is watched: a warm call pays nothing for it.)
   */
  watch() {
    this.watching = true
    this.promises.forEach((promise, i) => {
      if (this.decided[i] === 1) return
      const done = () => this.settled(i)
      promise.then(done, done)
    })
  }

  /** Key `i`'s getOrLoad settled: the last undecided key lets the waiting batch go. */
  settled(i) {
    if (this.decide(i) && this.open === 0 && !this.calling && this.pending.length > 0) this.flush()
  }

  /** The loader getOrLoad calls for a key this process loads: its value comes from the next loader call. */
  enrol(context) {
    return new Promise((resolve, reject) => {
      const { key } = context
      if (this.indices === undefined) {
        this.indices = new Map()
        this.keys.forEach((k, i) => {
          const id = keyId(k)
          const list = this.indices.get(id)
          if (list === undefined) this.indices.set(id, [i])
          else list.push(i)
        })
      }
      const at = this.indices.get(keyId(key)) ?? NOWHERE
      this.pending.push({ key, context, resolve, reject, order: at.length > 0 ? at[0] : Number.MAX_SAFE_INTEGER })
      let news = false
      for (const i of at) news = this.decide(i) || news
      if (this.calling) return // flushed when the calls are made
      if (!this.watching) this.watch()
      if (news && this.open === 0) this.flush()
      else if (news) this.wait()
      else if (this.timer === undefined) {
        // A background refresh after the call was answered: what enrols in this turn goes together.
        this.timer = setImmediate(this.flushLater)
        this.immediate = true
      }
    })
  }

  /** A key of the call enrolled: the batch goes BATCH_WINDOW_MS from now, or BATCH_MAX_WAIT_MS after the first. */
  wait() {
    if (this.immediate) return // it goes in this turn anyway
    const now = performance.now()
    this.firstEnrolled ??= now
    if (this.timer !== undefined) clearTimeout(this.timer)
    const at = Math.min(now + BATCH_WINDOW_MS, this.firstEnrolled + BATCH_MAX_WAIT_MS)
    this.timer = setTimeout(this.windowEnded, Math.max(0, at - now))
  }

  flush() {
    if (this.timer !== undefined) {
      if (this.immediate) clearImmediate(this.timer)
      else clearTimeout(this.timer)
      this.timer = undefined
    }
    this.immediate = false
    this.firstEnrolled = undefined
    const { pending, maxBatchSize } = this
    if (pending.length === 0) return
    this.pending = []
    // In the order of the call's keys, whatever order the fleet answered them in.
    pending.sort((a, b) => a.order - b.order)
    for (let i = 0; i < pending.length; i += maxBatchSize) this.run(pending.slice(i, i + maxBatchSize))
  }

  run(entries) {
    // A key given up before its batch went (close(), hardTimeout) is not loaded.
    const live = entries.filter(({ context, reject }) => {
      const { signal } = context
      if (signal.aborted) reject(signal.reason)
      return !signal.aborted
    })
    if (live.length === 0) return
    const keys = live.map((entry) => entry.key)
    let result
    try {
      result = this.loader(keys, new BatchContext(live))
    } catch (error) {
      result = Promise.reject(error)
    }
    Promise.resolve(result).then(
      (value) => {
        let values
        try {
          values = alignResults(keys, value)
        } catch (error) {
          for (const entry of live) entry.reject(error)
          return
        }
        for (let i = 0; i < live.length; i++) {
          const v = values[i]
          if (v instanceof Error) live[i].reject(v)
          else live[i].resolve(v)
        }
      },
      (error) => {
        for (const entry of live) entry.reject(error)
      },
    )
  }
}

/**
 * What makes an untraced call's getOrLoad calls (index.js): the addon's `getOrLoadMany` and the outcome bytes it
 * writes (lib/native-contract.d.ts).
 *
 * @typedef {{ getOrLoadMany: Function, outcome: Uint8Array }} Native
 */

/** The most keys of one native call (src/binding/entry.rs `MANY_KEYS`): they go as arguments. */
const NATIVE_KEYS = 256

/** What the addon's getOrLoadMany answers with: its promises, as an array (made from arguments: cheaply). */
const collect = (...promises) => promises

/** A call's options when it has none. */
const NO_KEY_OPTIONS = Object.freeze({})

/**
 * The addon's getOrLoadMany of `keys` (at most NATIVE_KEYS): `getOrLoad(key, loader, o)` for each, in order, as
 * getOrLoad makes it (`o` checked here, but for what the addon checks). The promises, each detached from
 * `o.signal` as getOrLoad does; or, when the addon refused a key (which it does before it looks any up), its
 * ERR_HERDCACHE_INVALID_KEY error.
 *
 * @param {Native} native
 * @returns {Array<Promise<unknown>> | Error}
 */
function callNative(native, loader, o, keys) {
  const { stale, ttl, hardTtl, negativeTtl, beta, tags } = o ?? NO_KEY_OPTIONS
  let promises
  try {
    promises = native.getOrLoadMany(collect, loader, stale, ttl, hardTtl, negativeTtl, beta, tags, ...keys)
  } catch (error) {
    if (error?.code === codes.INVALID_KEY) return error
    // The addon throws only coded errors: this came from reading `keys` (an
    // element's getter, a Proxy's trap).
    if (typeof error?.code !== 'string') return unreadable(codes.INVALID_KEY, 'a key of getOrLoadMany()', error)
    throw error
  }
  const signal = o?.signal
  // As getOrLoad's `signal`: this call stops waiting, the loads go on.
  if (signal !== undefined) for (let i = 0; i < promises.length; i++) promises[i] = detach(promises[i], signal)
  return promises
}

/** `cache.getOrLoad` for keys `from` to `to` (excluded), into `promises`. */
function eachKey(cache, keys, from, to, loader, options, promises) {
  for (let i = from; i < to; i++) promises[i] = cache.getOrLoad(keys[i], loader, options)
}

/** The error of the first of `keys` that is no key, by keyProblem's rules, or undefined. */
function keysProblem(keys, n) {
  for (let i = 0; i < n; i++) {
    let problem
    try {
      problem = keyProblem(keys[i])
    } catch (cause) {
      return unreadable(codes.INVALID_KEY, `key ${i} of getOrLoadMany()`, cause)
    }
    if (problem !== undefined) {
      return herdError(
        TypeError,
        codes.INVALID_KEY,
        `key ${i} of getOrLoadMany() is ${problem}; a key is a non-empty string or a non-empty array of strings and finite numbers (nothing was loaded)`,
      )
    }
  }
  return undefined
}

/**
 * `cache.getOrLoadMany(keys, loader, options?)`: the values of `keys`, in
 * order. Rejects, once every key has settled, with the error of the first
 * key (in `keys` order) that failed; the others were stored all the same.
 * Bad input rejects before anything is looked up or loaded.
 *
 * @param {{ getOrLoad: Function }} cache
 * @param {unknown[]} keys
 * @param {(missingKeys: unknown[], context: BatchContext) => unknown} loader
 * @param {object} [options]
 * @param {Native} [native] untraced, the keys' getOrLoad calls are made by the addon, many in one call; without
 *   it (traced), each is a `cache.getOrLoad` call
 */
function getOrLoadMany(cache, keys, loader, options, native) {
  let isArray
  let n
  try {
    isArray = Array.isArray(keys)
    n = isArray ? keys.length : 0
  } catch (cause) {
    return Promise.reject(unreadable(codes.INVALID_KEY, 'the keys of getOrLoadMany()', cause))
  }
  if (!isArray) {
    return Promise.reject(
      herdError(
        TypeError,
        codes.INVALID_KEY,
        `getOrLoadMany() takes an array of keys, e.g. cache.getOrLoadMany(['a', 'b'], loader); got ${typeName(keys)}`,
      ),
    )
  }
  if (typeof loader !== 'function') {
    return Promise.reject(
      herdError(
        TypeError,
        codes.INVALID_LOADER,
        `the getOrLoadMany() loader must be a function (missingKeys, ctx) => Map | array; got ${typeName(loader)}`,
      ),
    )
  }
  const read = readOptions(options)
  if (read instanceof Error) return Promise.reject(read)
  // One native call checks the keys itself, before it looks any up; else they are checked here.
  const once = native !== undefined && n <= NATIVE_KEYS
  if (!once) {
    const problem = keysProblem(keys, n)
    if (problem !== undefined) return Promise.reject(problem)
  }
  if (n === 0) return Promise.resolve([])
  const { keyOptions } = read
  // What getOrLoad checks before the addon does (after the key), for every key: the same error.
  if (native !== undefined && keyOptions?.signal !== undefined && !isAbortSignal(keyOptions.signal)) {
    return Promise.reject((once && keysProblem(keys, n)) || invalidOption(SIGNAL_PROBLEM))
  }
  let promises
  let batch
  let calling = true
  const load = (context) => {
    batch ??= new Batch(loader, read.maxBatchSize, keys, promises, calling)
    return batch.enrol(context)
  }
  let fulfilled = false
  try {
    if (once) {
      const answered = callNative(native, load, keyOptions, keys)
      // The addon refused a key, before it looked any up: the call rejects
      // with keyProblem's words for it, or (a key too long) the addon's.
      if (answered instanceof Error) return Promise.reject(keysProblem(keys, n) ?? answered)
      promises = answered
      fulfilled = native.outcome[1] === 1 && keyOptions?.signal === undefined
    } else {
      promises = new Array(n)
      if (native === undefined) eachKey(cache, keys, 0, n, load, keyOptions, promises)
      else {
        for (let start = 0; start < n; start += NATIVE_KEYS) {
          const end = Math.min(n, start + NATIVE_KEYS)
          // keyProblem checked these keys; one the addon alone refuses (too
          // long) is answered by its own getOrLoad call, with its error.
          const part = callNative(native, load, keyOptions, keys.slice(start, end))
          if (part instanceof Error) eachKey(cache, keys, start, end, load, keyOptions, promises)
          else for (let i = start; i < end; i++) promises[i] = part[i - start]
        }
      }
    }
  } finally {
    calling = false
    if (batch !== undefined) {
      batch.calling = false
      batch.promises = promises
    }
  }
  batch?.flush()
  // A warm call's promises are all fulfilled. Else Promise.all answers the
  // common case at its speed; after a failure, every key is waited for, so
  // the error is the first failed key's, in order.
  if (fulfilled) return Promise.all(promises)
  return Promise.all(promises).catch(() => Promise.allSettled(promises).then(answer))
}

/** The values in order, or the first failed key's error (every key has settled). */
function answer(results) {
  const values = new Array(results.length)
  for (let i = 0; i < results.length; i++) {
    const result = results[i]
    if (result.status === 'rejected') throw result.reason
    values[i] = result.value
  }
  return values
}

module.exports = { getOrLoadMany, alignResults, keyId, DEFAULT_MAX_BATCH_SIZE }
